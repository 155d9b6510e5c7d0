//! Writing Parquet files: encoded in memory with the checksum of their data
//! pages in their metadata, then written atomically
//! ([`super::files::write_bytes_atomic`]).

use super::OutputError;
use super::files::write_bytes_atomic;
use super::metadata::{CHECKSUM_KEY, data_checksum};
use super::schema::schema;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::path::Path;

/// Writes `batches` (of the results [`schema`]) to `path` atomically
/// (temporary file, fsync, rename).
pub fn write_parquet_atomic(path: &Path, batches: &[RecordBatch], kv: Vec<KeyValue>) -> Result<(), OutputError> {
    write_parquet_atomic_with(path, schema(), batches, kv)
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
    let bad = |message: &str| OutputError::Checksum {
        path: path.to_path_buf(),
        message: message.into(),
    };
    let first = encode(kv.clone())?;
    let sum = data_checksum(&first).ok_or_else(|| bad("the encoder wrote no Parquet footer"))?;
    let mut kv = kv;
    kv.push(KeyValue::new(CHECKSUM_KEY.into(), format!("{sum:016x}")));
    let bytes = encode(kv)?;
    if data_checksum(&bytes) != Some(sum) {
        return Err(bad(
            "the Parquet encoder is not deterministic (data pages differ between two encodings)",
        ));
    }
    write_bytes_atomic(path, &bytes)
}
