//! Writing Parquet files: encoded in memory with the checksum of their data
//! pages in their metadata, then written atomically
//! ([`super::files::write_bytes_atomic`]).

use super::OutputError;
use super::files::{AtomicFile, write_bytes_atomic};
use super::metadata::{CHECKSUM_KEY, FOOTER_KEY, FOOTER_PLACEHOLDER, data_checksum, seal_footer};
use super::schema::schema;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use std::path::Path;

/// Writes `batches` (of one job's schema, [`super::job_schema`]; the
/// results [`schema`] when there are none) to `path` atomically
/// (temporary file, fsync, rename).
pub fn write_parquet_atomic(path: &Path, batches: &[RecordBatch], kv: Vec<KeyValue>) -> Result<(), OutputError> {
    let schema = batches.first().map_or_else(schema, RecordBatch::schema);
    write_parquet_atomic_with(path, schema, batches, kv)
}

/// Writes `batches` of schema `schema` to `path` atomically (temporary
/// file, fsync, rename), with the checksum of its data pages
/// ([`CHECKSUM_KEY`]) in its metadata. The file is encoded twice, without
/// and with the checksum: the data pages come before the footer and are the
/// same bytes both times (checked).
pub fn write_parquet_atomic_with(
    path: &Path,
    schema: SchemaRef,
    batches: &[RecordBatch],
    kv: Vec<KeyValue>,
) -> Result<(), OutputError> {
    let encode = |kv: Vec<KeyValue>| -> Result<Vec<u8>, OutputError> {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(kv))
            .build();
        let pq = |source| OutputError::Parquet {
            path: path.to_path_buf(),
            source,
        };
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).map_err(pq)?;
        for b in batches {
            w.write(b).map_err(pq)?;
        }
        w.into_inner().map_err(pq)
    };
    write_checksummed_atomic(path, kv, encode)
}

/// Writes the Parquet bytes `encode` makes from key-value metadata to
/// `path` atomically, with the checksum of their data pages
/// ([`CHECKSUM_KEY`]) in that metadata: encoded twice, without and with the
/// checksum (the data pages come before the footer and are the same bytes
/// both times: checked).
pub fn write_checksummed_atomic(
    path: &Path,
    kv: Vec<KeyValue>,
    encode: impl Fn(Vec<KeyValue>) -> Result<Vec<u8>, OutputError>,
) -> Result<(), OutputError> {
    let bad = |message: &str| OutputError::Checksum {
        path: path.to_path_buf(),
        message: message.into(),
    };
    let first = encode(kv.clone())?;
    let sum = data_checksum(&first).ok_or_else(|| bad("the encoder wrote no Parquet footer"))?;
    let mut kv = kv;
    kv.push(KeyValue::new(CHECKSUM_KEY.into(), format!("{sum:016x}")));
    kv.push(KeyValue::new(FOOTER_KEY.to_string(), FOOTER_PLACEHOLDER.to_string()));
    let mut bytes = encode(kv)?;
    if data_checksum(&bytes) != Some(sum) {
        return Err(bad(
            "the Parquet encoder is not deterministic (data pages differ between two encodings)",
        ));
    }
    let data_end = first_footer_start(&bytes).ok_or_else(|| bad("the encoder wrote no Parquet footer"))?;
    if !seal_footer(&mut bytes[data_end..]) {
        return Err(bad("the footer checksum's entry is not where its encoding puts it"));
    }
    write_bytes_atomic(path, &bytes)
}

/// Where the footer of Parquet `bytes` starts (after the data pages).
fn first_footer_start(bytes: &[u8]) -> Option<usize> {
    let n = bytes.len();
    let footer = u32::from_le_bytes(bytes.get(n.checked_sub(8)?..n - 4)?.try_into().ok()?) as usize;
    n.checked_sub(8 + footer)
}

/// Bytes of encoded data a part writer buffers before it closes a row
/// group: the bound on its memory beyond the batch being written.
const ROW_GROUP_BYTES: usize = 32 << 20;

/// A part file written as a stream, in bounded memory: batches are encoded
/// into row groups of at most [`ROW_GROUP_BYTES`] and written to the
/// temporary file as they fill; [`PartWriter::finish`] appends the
/// checksum of the data pages (hashed as written) and the footer, then
/// renames the file into place. Chunk-level statistics are kept (readers
/// prune row groups by them); no page indexes, so that every byte before
/// the footer is data.
pub struct PartWriter {
    path: std::path::PathBuf,
    w: ArrowWriter<AtomicFile>,
}

impl PartWriter {
    /// Starts the part file `path` of schema `schema` with metadata `kv`.
    pub fn create(path: &Path, schema: SchemaRef, kv: Vec<KeyValue>) -> Result<Self, OutputError> {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_key_value_metadata(Some(kv))
            .build();
        let file = AtomicFile::create(path)?;
        let w = ArrowWriter::try_new(file, schema, Some(props)).map_err(|source| OutputError::Parquet {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(PartWriter {
            path: path.to_path_buf(),
            w,
        })
    }

    fn pq(&self) -> impl FnOnce(parquet::errors::ParquetError) -> OutputError + '_ {
        |source| OutputError::Parquet {
            path: self.path.clone(),
            source,
        }
    }

    /// Appends `batch`, closing the row group when it is full.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), OutputError> {
        self.w.write(batch).map_err(|source| OutputError::Parquet {
            path: self.path.clone(),
            source,
        })?;
        if self.w.in_progress_size() > ROW_GROUP_BYTES {
            self.w.flush().map_err(self.pq())?;
        }
        Ok(())
    }

    /// Closes the last row group, writes the checksum and the footer, and
    /// renames the file into place.
    pub fn finish(mut self) -> Result<(), OutputError> {
        self.w.flush().map_err(self.pq())?;
        // Every data byte through the encoder's own buffer before hashing.
        self.w.sync().map_err(|e| OutputError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        let (sum, hashed) = self.w.inner_mut().data_hash();
        self.w
            .append_key_value_metadata(KeyValue::new(CHECKSUM_KEY.into(), format!("{sum:016x}")));
        self.w
            .append_key_value_metadata(KeyValue::new(FOOTER_KEY.to_string(), FOOTER_PLACEHOLDER.to_string()));
        let path = self.path.clone();
        let file = self.w.into_inner().map_err(|source| OutputError::Parquet {
            path: path.clone(),
            source,
        })?;
        let (written, tail) = file.written();
        let footer = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if &tail[4..] != b"PAR1" || written.checked_sub(8 + footer) != Some(hashed) {
            return Err(OutputError::Checksum {
                path,
                message: "the encoder wrote bytes between the data and the footer; the checksum would not \
                          cover them"
                    .into(),
            });
        }
        let mut file = file;
        if !file.patch_tail(seal_footer)? {
            return Err(OutputError::Checksum {
                path,
                message: "the footer checksum's entry is not where its encoding puts it".into(),
            });
        }
        file.commit()
    }
}
