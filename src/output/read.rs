//! Reading Parquet files back: every batch after checking the data
//! checksum, one metadata key, and the rows as canonical text for
//! bit-for-bit comparisons of two result sets.

use super::OutputError;
use super::files::io;
use super::metadata::{CHECKSUM_KEY, data_checksum};
use arrow_array::RecordBatch;
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::fs::File;
use std::path::Path;

/// Reads all record batches of a Parquet file written by
/// [`write_parquet_atomic_with`], after checking its data checksum.
pub fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, OutputError> {
    Ok(read_parquet_checked(path)?.0)
}

/// A file's key-value metadata as (key, value) pairs.
pub type Metadata = Vec<(String, String)>;

thread_local! {
    /// Set while this thread decodes a file under [`guarded`]: the panic
    /// hook ([`install_quiet_decoder_hook`]) then prints nothing, the panic
    /// becoming the file's typed error.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Wraps the process's panic hook so that a panic inside [`guarded`] (the
/// Parquet decoder on a damaged file) prints nothing: it is reported as a
/// typed error naming the file. Every other panic prints as before. Called
/// once by the binary's entry point.
pub fn install_quiet_decoder_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !DECODING.with(std::cell::Cell::get) {
            previous(info);
        }
    }));
}

/// Runs `f`, a Parquet decoding of `path`, turning a panic of the decoder
/// (a damaged footer can make it index out of bounds: "column start and
/// length should not be negative") into an error naming
/// the file.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, OutputError>) -> Result<T, OutputError> {
    DECODING.with(|d| d.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.with(|d| d.set(false));
    r.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default();
        Err(OutputError::Checksum {
            path: path.to_path_buf(),
            message: format!("the Parquet decoder failed on this file ({why})"),
        })
    })
}

/// Like [`read_parquet`], also returning the file's key-value metadata.
pub fn read_parquet_checked(path: &Path) -> Result<(Vec<RecordBatch>, Metadata), OutputError> {
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(io(path))?);
    let damaged = damaged(path);
    super::metadata::check_footer(&bytes).map_err(|e| damaged(e.to_string()))?;
    let actual = data_checksum(&bytes).ok_or_else(|| damaged("not a Parquet file".into()))?;
    let mut out = Vec::new();
    let kv = guarded(path, || {
        decode_checked(path, bytes, actual, |b| {
            out.push(b);
            Ok(())
        })
    })?;
    Ok((out, kv))
}

/// Reads a Parquet file written by this engine one record batch at a time
/// (memory: a batch and the pages it decodes, not the file), after checking
/// its footer and data checksums on the raw bytes, read as a stream from
/// the same open file; `each` sees every batch in order. Returns the file's
/// key-value metadata.
pub fn read_parquet_stream(
    path: &Path,
    each: impl FnMut(RecordBatch) -> Result<(), OutputError>,
) -> Result<Metadata, OutputError> {
    use std::hash::Hasher;
    use std::io::Read;
    let damaged = damaged(path);
    let mut file = File::open(path).map_err(io(path))?;
    let (start, tail) = read_tail(&mut file, path)?;
    super::metadata::check_tail(&tail).map_err(|e| damaged(e.to_string()))?;
    let mut hasher = twox_hash::XxHash64::with_seed(0);
    let mut data = (&mut file).take(start);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = data.read(&mut chunk).map_err(io(path))?;
        if n == 0 {
            break;
        }
        hasher.write(&chunk[..n]);
    }
    guarded(path, || decode_checked(path, file, hasher.finish(), each))
}

/// The message of a file that fails a check, naming what failed.
fn damaged(path: &Path) -> impl Fn(String) -> OutputError + '_ {
    move |message| OutputError::Checksum {
        path: path.to_path_buf(),
        message,
    }
}

/// Decodes a file whose footer checksum ([`super::metadata::FOOTER_KEY`])
/// was checked on the raw bytes and whose data pages hash to `actual`:
/// compares `actual` with the stated checksum, then hands every batch to
/// `each`. Returns the key-value metadata.
fn decode_checked<R: parquet::file::reader::ChunkReader + 'static>(
    path: &Path,
    reader: R,
    actual: u64,
    mut each: impl FnMut(RecordBatch) -> Result<(), OutputError>,
) -> Result<Metadata, OutputError> {
    let pq = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(reader).map_err(pq)?;
    let kv: Metadata = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    let bad = |message: String| OutputError::Checksum {
        path: path.to_path_buf(),
        message,
    };
    let stated = kv
        .iter()
        .find(|(k, _)| k == CHECKSUM_KEY)
        .ok_or_else(|| bad(format!("no {CHECKSUM_KEY} checksum in its metadata")))?;
    if stated.1 != format!("{actual:016x}") {
        return Err(bad(format!(
            "checksum mismatch: the data pages hash to {actual:016x}, the file says {}",
            stated.1
        )));
    }
    let reader = builder.build().map_err(pq)?;
    for b in reader {
        each(b.map_err(|e| bad(format!("its rows cannot be decoded ({e})")))?)?;
    }
    Ok(kv)
}

/// Where a Parquet file's footer starts and the bytes from there to the
/// end (the footer, its length and the magic).
fn read_tail(file: &mut File, path: &Path) -> Result<(u64, Vec<u8>), OutputError> {
    use std::io::{Read, Seek, SeekFrom};
    let damaged = damaged(path);
    let len = file.metadata().map_err(io(path))?.len();
    let mut end = [0u8; 8];
    if len < 12 {
        return Err(damaged("not a Parquet file".into()));
    }
    file.seek(SeekFrom::Start(len - 8)).map_err(io(path))?;
    file.read_exact(&mut end).map_err(io(path))?;
    if &end[4..] != b"PAR1" {
        return Err(damaged("not a Parquet file".into()));
    }
    let footer = u64::from(u32::from_le_bytes([end[0], end[1], end[2], end[3]]));
    let start = len
        .checked_sub(8 + footer)
        .filter(|&s| s >= 4)
        .ok_or_else(|| damaged(format!("its footer length ({footer}) exceeds the file")))?;
    let mut tail = vec![0u8; (len - start) as usize];
    file.seek(SeekFrom::Start(start)).map_err(io(path))?;
    file.read_exact(&mut tail).map_err(io(path))?;
    file.seek(SeekFrom::Start(0)).map_err(io(path))?;
    Ok((start, tail))
}

/// One key's value in a file's metadata (None: the file has no such key).
pub type MetadataValue = Option<String>;

/// Reads one key of a Parquet file's key-value metadata.
pub fn read_metadata_key(path: &Path, key: &str) -> Result<MetadataValue, OutputError> {
    Ok(read_metadata(path)?.into_iter().find(|(k, _)| k == key).map(|(_, v)| v))
}

/// Reads a Parquet file's key-value metadata (its footer alone, checked by
/// the footer checksum on the raw bytes before it is decoded).
pub fn read_metadata(path: &Path) -> Result<Metadata, OutputError> {
    let mut file = File::open(path).map_err(io(path))?;
    let (_, tail) = read_tail(&mut file, path)?;
    super::metadata::check_tail(&tail).map_err(|e| damaged(path)(e.to_string()))?;
    let pq = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    guarded(path, || {
        let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
        let md = b.metadata().file_metadata().key_value_metadata();
        Ok(md
            .map(|kvs| {
                kvs.iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default())
    })
}

/// Renders every row of `batches` as one line of text (floats by their bit
/// patterns), skipping `exclude` columns; rows are sorted. Two result sets are
/// bit-identical in their data exactly when these lines are equal.
pub fn canonical_rows(batches: &[RecordBatch], exclude: &[&str]) -> Vec<String> {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt32Type, UInt64Type};
    let mut rows = Vec::new();
    for b in batches {
        let schema = b.schema();
        let mut lines = vec![String::new(); b.num_rows()];
        for (f, col) in schema.fields().iter().zip(b.columns()) {
            if exclude.contains(&f.name().as_str()) {
                continue;
            }
            for (r, line) in lines.iter_mut().enumerate() {
                line.push_str(f.name());
                line.push('=');
                if col.is_null(r) {
                    line.push_str("null");
                } else {
                    match f.data_type() {
                        DataType::Utf8 => line.push_str(col.as_string::<i32>().value(r)),
                        DataType::UInt32 => line.push_str(&col.as_primitive::<UInt32Type>().value(r).to_string()),
                        DataType::UInt64 => line.push_str(&col.as_primitive::<UInt64Type>().value(r).to_string()),
                        DataType::Int64 => line.push_str(&col.as_primitive::<Int64Type>().value(r).to_string()),
                        DataType::Float64 => line.push_str(&format!(
                            "{:016x}",
                            col.as_primitive::<Float64Type>().value(r).to_bits()
                        )),
                        DataType::Boolean => line.push_str(&col.as_boolean().value(r).to_string()),
                        other => line.push_str(&format!("<{other}>")),
                    }
                }
                line.push(';');
            }
        }
        rows.extend(lines);
    }
    rows.sort();
    rows
}
