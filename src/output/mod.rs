//! Parquet output: the long-format schema (one row per cell, repetition and
//! checkpoint), atomic writes and read-back.
//!
//! Every parameter of the registry ([`crate::algo::params::PARAMS`]) is its own
//! typed, nullable column (null where the cell's algorithm or environment does
//! not use it). Files carry key-value metadata: the job YAML, crate version,
//! git commit, semantics version. Files are written atomically
//! ([`files::write_bytes_atomic`]), so a reader never sees a partial file
//! under a final name; [`lock`] keeps one job version writing a directory.

use crate::algo::curve::{METRICS, Metric, MetricKind};
use crate::algo::params::{Kind, PARAMS, Value};
use crate::job::{Cell, Job, SEMANTICS_VERSION};
use crate::privacy::accountant::Accounting;
use arrow_array::builder::{Float64Builder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

pub mod files;
pub mod lock;

pub use files::write_bytes_atomic;

pub use crate::algo::curve::{CurvePoint, RepResult};

/// Output errors.
#[derive(Debug, Error)]
pub enum OutputError {
    /// Filesystem problem.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Parquet encoding or decoding problem.
    #[error("{path}: parquet: {source}")]
    Parquet {
        /// File.
        path: PathBuf,
        /// Cause.
        source: parquet::errors::ParquetError,
    },
    /// Arrow problem.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A file's content does not match the checksum written into it, or it
    /// has none.
    #[error(
        "{path}: {message}; the file is damaged or was not written by this fedbandits: move it away and rerun to recompute it"
    )]
    Checksum {
        /// File.
        path: PathBuf,
        /// What does not match.
        message: String,
    },
}

/// The key-value metadata entry holding the XXH64 checksum (hex) of a
/// Parquet file's bytes before its footer, i.e. of every data page.
pub const CHECKSUM_KEY: &str = "fedbandits.data_xxh64";

/// The XXH64 of a Parquet file's bytes before its footer (the footer's
/// length is in the 4 bytes before the trailing magic), or None when the
/// bytes are not a Parquet file. Accidental damage anywhere in the data
/// pages changes it (probability 1 - 2^-64); the footer is covered by its
/// own decoding and the identity checks of the reader.
pub fn data_checksum(bytes: &[u8]) -> Option<u64> {
    let n = bytes.len();
    if n < 12 || &bytes[n - 4..] != b"PAR1" {
        return None;
    }
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().ok()?) as usize;
    let data_end = n.checked_sub(8 + footer)?;
    Some(twox_hash::XxHash64::oneshot(0, &bytes[..data_end]))
}

/// Git commit the binary was built from (or "unknown").
pub const GIT_COMMIT: &str = match option_env!("FEDBANDITS_GIT_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

fn metric_type(kind: MetricKind) -> DataType {
    match kind {
        MetricKind::F64 => DataType::Float64,
        MetricKind::U64 => DataType::UInt64,
    }
}

fn param_type(kind: Kind) -> DataType {
    match kind {
        Kind::Int { .. } => DataType::Int64,
        Kind::Float { .. } => DataType::Float64,
        Kind::Choice(_) | Kind::Text => DataType::Utf8,
        Kind::Bool => DataType::Boolean,
    }
}

/// The output schema.
pub fn schema() -> SchemaRef {
    let mut f = vec![
        Field::new("job", DataType::Utf8, false),
        Field::new("cell_id", DataType::Utf8, false),
        Field::new("cell_index", DataType::UInt32, false),
        Field::new("algorithm", DataType::Utf8, false),
        Field::new("environment", DataType::Utf8, false),
        Field::new("horizon", DataType::UInt64, false),
    ];
    for p in PARAMS {
        f.push(Field::new(p.name, param_type(p.kind), true));
    }
    f.extend([
        Field::new("repetition", DataType::UInt32, false),
        Field::new("seed", DataType::UInt64, false),
        Field::new("t", DataType::UInt64, false),
        Field::new("group_regret", DataType::Float64, false),
        Field::new("agent_regret", DataType::Float64, false),
        Field::new("agent_regret_max", DataType::Float64, false),
        Field::new("sync_rounds", DataType::UInt64, false),
        Field::new("messages", DataType::UInt64, false),
        Field::new("cholesky_failures", DataType::UInt64, false),
        Field::new("beta_clamps", DataType::UInt64, false),
        Field::new("target_epsilon", DataType::Float64, true),
        Field::new("target_delta", DataType::Float64, true),
        Field::new("acct_epsilon", DataType::Float64, true),
        Field::new("acct_releases_per_observation", DataType::UInt64, true),
        Field::new("acct_noise_multiplier", DataType::Float64, true),
        Field::new("paper_claimed_epsilon", DataType::Float64, true),
        Field::new("acct_rho_zcdp", DataType::Float64, true),
        Field::new("acct_epsilon_zcdp", DataType::Float64, true),
        Field::new("acct_epsilon_pure", DataType::Float64, true),
        Field::new("schedule_private", DataType::Boolean, false),
    ]);
    for (name, kind, _) in METRICS {
        f.push(Field::new(*name, metric_type(*kind), true));
    }
    f.extend([
        Field::new("backend", DataType::Utf8, false),
        Field::new("wall_seconds", DataType::Float64, false),
    ]);
    Arc::new(Schema::new(f))
}

/// Columns that vary between runs of the same job (excluded from
/// reproducibility comparisons).
pub const NONDETERMINISTIC_COLUMNS: &[&str] = &["wall_seconds"];

/// Builds the record batch of one cell (repetitions in order): the cell's
/// identity and parameters, the per-point regret and counters, the
/// accountant's figures, the metric columns, the backend and wall time.
pub fn cell_batch(job: &Job, cell: &Cell, reps: &[RepResult], backend: &str) -> Result<RecordBatch, OutputError> {
    let n: usize = reps.iter().map(|r| r.points.len()).sum();
    let mut cols: Vec<ArrayRef> = vec![
        repeat_str(&job.name, n),
        repeat_str(&cell.id, n),
        Arc::new(UInt32Array::from(vec![cell.index as u32; n])),
        repeat_str(&cell.algorithm, n),
        repeat_str(&cell.environment, n),
        Arc::new(UInt64Array::from(vec![job.horizon; n])),
    ];
    cols.extend(PARAMS.iter().map(|p| param_column(p.kind, cell.params.get(p.name), n)));
    let mut b = UInt32Builder::new();
    for r in reps {
        b.append_value_n(r.rep, r.points.len());
    }
    cols.push(Arc::new(b.finish()));
    cols.push(Arc::new(UInt64Array::from(vec![job.seed; n])));
    cols.push(per_point_u64(reps, |p| p.t));
    cols.push(per_point_f64(reps, |_, p| p.group_regret));
    cols.push(per_point_f64(reps, |_, p| p.agent_regret_mean));
    cols.push(per_point_f64(reps, |_, p| p.agent_regret_max));
    cols.push(per_point_u64(reps, |p| p.counters.sync_rounds));
    cols.push(per_point_u64(reps, |p| p.counters.messages));
    cols.push(per_point_u64(reps, |p| p.counters.cholesky_failures));
    cols.push(per_point_u64(reps, |p| p.counters.beta_clamps));
    let acct = cell.config.accounting();
    privacy_columns(cell, acct.as_ref(), n, &mut cols);
    cols.extend(metric_columns(reps, acct.as_ref()));
    cols.push(repeat_str(backend, n));
    cols.push(per_point_f64(reps, |r, _| r.wall_seconds));
    Ok(RecordBatch::try_new(schema(), cols)?)
}

/// `s` repeated `n` times.
fn repeat_str(s: &str, n: usize) -> ArrayRef {
    let mut b = StringBuilder::new();
    for _ in 0..n {
        b.append_value(s);
    }
    Arc::new(b.finish())
}

/// A parameter's column: its value (null where it does not apply) `n` times.
fn param_column(kind: Kind, v: Option<&Value>, n: usize) -> ArrayRef {
    match kind {
        Kind::Int { .. } => Arc::new(Int64Array::from(vec![v.and_then(Value::as_i64); n])),
        Kind::Float { .. } => Arc::new(Float64Array::from(vec![v.and_then(Value::as_f64); n])),
        Kind::Choice(_) | Kind::Text => Arc::new(StringArray::from(vec![v.and_then(Value::as_str); n])),
        Kind::Bool => Arc::new(BooleanArray::from(vec![v.and_then(Value::as_bool); n])),
    }
}

/// A Float64 column of `f(repetition, point)` over every point.
fn per_point_f64(reps: &[RepResult], f: impl Fn(&RepResult, &CurvePoint) -> f64) -> ArrayRef {
    let mut b = Float64Builder::new();
    for r in reps {
        for p in &r.points {
            b.append_value(f(r, p));
        }
    }
    Arc::new(b.finish())
}

/// A UInt64 column of `f(point)` over every point.
fn per_point_u64(reps: &[RepResult], f: impl Fn(&CurvePoint) -> u64) -> ArrayRef {
    let mut b = UInt64Builder::new();
    for p in reps.iter().flat_map(|r| &r.points) {
        b.append_value(f(p));
    }
    Arc::new(b.finish())
}

/// The cell-level privacy columns: the target, the accountant's figures
/// (null where not private) and whether the sync schedule is private.
fn privacy_columns(cell: &Cell, acct: Option<&Accounting>, n: usize, cols: &mut Vec<ArrayRef>) {
    let (te, td) = cell.config.target();
    cols.push(Arc::new(Float64Array::from(vec![te; n])));
    cols.push(Arc::new(Float64Array::from(vec![td; n])));
    let figure = |f: &dyn Fn(&Accounting) -> Option<f64>| -> ArrayRef {
        Arc::new(Float64Array::from(vec![acct.and_then(f); n]))
    };
    cols.push(figure(&|a| a.epsilon));
    cols.push(Arc::new(UInt64Array::from(vec![
        acct.map(|a| a.releases_per_observation);
        n
    ])));
    cols.push(figure(&|a| a.noise_multiplier));
    cols.push(figure(&|a| a.paper_claimed));
    cols.push(figure(&|a| a.rho));
    cols.push(figure(&|a| a.epsilon_zcdp));
    cols.push(figure(&|a| a.epsilon_pure));
    cols.push(Arc::new(BooleanArray::from(vec![cell.config.schedule_private(); n])));
}

/// The metric columns ([`METRICS`]): each point's value where its family
/// set it; else, for a column the accountant also states over the horizon
/// (basic composition), the cell's figure; else null.
fn metric_columns(reps: &[RepResult], acct: Option<&Accounting>) -> Vec<ArrayRef> {
    METRICS
        .iter()
        .enumerate()
        .map(|(i, (name, kind, _))| {
            let fallback = acct.and_then(|a| a.figure(name));
            let value = |p: &CurvePoint| p.metrics[i].or(fallback.map(Metric::F64));
            match kind {
                MetricKind::F64 => {
                    let mut b = Float64Builder::new();
                    for p in reps.iter().flat_map(|r| &r.points) {
                        b.append_option(value(p).map(Metric::as_f64));
                    }
                    Arc::new(b.finish()) as ArrayRef
                }
                MetricKind::U64 => {
                    let mut b = UInt64Builder::new();
                    for p in reps.iter().flat_map(|r| &r.points) {
                        b.append_option(value(p).and_then(Metric::as_u64));
                    }
                    Arc::new(b.finish()) as ArrayRef
                }
            }
        })
        .collect()
}

/// What the accountant says of each private cell, as JSON written into
/// every file (`fedbandits.privacy`): `{"adaptive": false, "cells": [{"cell_id",
/// "label", "relation" (what a neighbour is and that the figures assume the
/// non-adaptive relation), "acct_epsilon", "acct_epsilon_zcdp",
/// "paper_claimed_epsilon", "notes" (why a figure is null, failed
/// preconditions)}, ...]}`.
pub fn privacy_json(job: &Job) -> String {
    let cells: Vec<serde_json::Value> = job
        .cells
        .iter()
        .filter_map(|c| {
            let a = c.config.accounting()?;
            Some(serde_json::json!({
                "cell_id": c.id,
                "label": c.label(),
                "relation": a.relation,
                "acct_epsilon": a.epsilon,
                "acct_epsilon_zcdp": a.epsilon_zcdp,
                "paper_claimed_epsilon": a.paper_claimed,
                "notes": a.warnings,
            }))
        })
        .collect();
    serde_json::json!({ "adaptive": false, "cells": cells }).to_string()
}

/// The family registry ([`crate::algo::family::FAMILIES`]) as JSON, written
/// into every file so that the analysis package reads the families (their
/// algorithms, environments and own columns) from the engine that wrote the
/// data: `{"linear": {"algorithms": [...], "environments": [...],
/// "columns": [...]}, ...}`.
pub fn families_json() -> String {
    let list = |names: &mut dyn Iterator<Item = &str>| {
        let items: Vec<String> = names.map(|n| format!("\"{}\"", n.escape_default())).collect();
        format!("[{}]", items.join(", "))
    };
    let fams: Vec<String> = crate::algo::family::FAMILIES
        .iter()
        .map(|f| {
            format!(
                "\"{}\": {{\"algorithms\": {}, \"environments\": {}, \"columns\": {}}}",
                f.name,
                list(&mut f.algorithms.iter().map(|a| a.0)),
                list(&mut f.environments.iter().map(|e| e.0)),
                list(&mut f.columns.iter().copied())
            )
        })
        .collect();
    format!("{{{}}}", fams.join(", "))
}

/// Key-value metadata written into every file.
pub fn metadata(job: &Job, extra: &[(&str, String)]) -> Vec<KeyValue> {
    let mut kv = vec![
        KeyValue::new("fedbandits.job_yaml".into(), job.yaml.clone()),
        KeyValue::new("fedbandits.job_name".into(), job.name.clone()),
        KeyValue::new("fedbandits.job_path".into(), job.path.display().to_string()),
        KeyValue::new("fedbandits.version".into(), env!("CARGO_PKG_VERSION").to_string()),
        KeyValue::new("fedbandits.git_commit".into(), GIT_COMMIT.to_string()),
        KeyValue::new("fedbandits.semantics_version".into(), SEMANTICS_VERSION.to_string()),
        KeyValue::new("fedbandits.job_identity".into(), job.identity()),
        KeyValue::new("fedbandits.families".into(), families_json()),
        KeyValue::new("fedbandits.privacy".into(), privacy_json(job)),
    ];
    for (k, v) in extra {
        kv.push(KeyValue::new(format!("fedbandits.{k}"), v.clone()));
    }
    kv
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

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

/// The magic bytes of a sealed (checksummed) binary file.
const SEAL_MAGIC: &[u8; 8] = b"FBSEAL01";

/// `payload` behind a header of magic bytes and its XXH64, for binary files
/// (snapshots) that [`unseal`] verifies.
pub fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 16);
    out.extend_from_slice(SEAL_MAGIC);
    out.extend_from_slice(&twox_hash::XxHash64::oneshot(0, payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of a [`seal`]ed file, or what is wrong with it.
pub fn unseal(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() < 16 || &bytes[..8] != SEAL_MAGIC {
        return Err("no fedbandits checksum header (written by an older fedbandits, or not a snapshot)".into());
    }
    let stated = u64::from_le_bytes(bytes[8..16].try_into().map_err(|_| "short header".to_string())?);
    let payload = &bytes[16..];
    let actual = twox_hash::XxHash64::oneshot(0, payload);
    if actual != stated {
        return Err(format!(
            "checksum mismatch (content {actual:016x}, header {stated:016x}): the file is damaged"
        ));
    }
    Ok(payload)
}

/// Reads all record batches of a Parquet file written by
/// [`write_parquet_atomic_with`], after checking its data checksum.
pub fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, OutputError> {
    Ok(read_parquet_checked(path)?.0)
}

/// A file's key-value metadata as (key, value) pairs.
pub type Metadata = Vec<(String, String)>;

/// Like [`read_parquet`], also returning the file's key-value metadata.
pub fn read_parquet_checked(path: &Path) -> Result<(Vec<RecordBatch>, Metadata), OutputError> {
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(io(path))?);
    let pq = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).map_err(pq)?;
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
    let actual = data_checksum(&bytes).ok_or_else(|| bad("not a Parquet file".into()))?;
    if u64::from_str_radix(&stated.1, 16).ok() != Some(actual) {
        return Err(bad(format!(
            "checksum mismatch: the data pages hash to {actual:016x}, the file says {}",
            stated.1
        )));
    }
    let reader = builder.build().map_err(pq)?;
    let mut out = Vec::new();
    for b in reader {
        out.push(b?);
    }
    Ok((out, kv))
}

/// Reads one key of a Parquet file's key-value metadata.
pub fn read_metadata_key(path: &Path, key: &str) -> Result<Option<String>, OutputError> {
    let file = File::open(path).map_err(io(path))?;
    let pq = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
    let md = b.metadata().file_metadata().key_value_metadata();
    Ok(md.and_then(|kvs| kvs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.clone())))
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

/// One row of `fedbandits audit`'s table (`audit.parquet`).
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRow {
    /// The cell audited.
    pub cell_id: String,
    /// Its algorithm.
    pub algorithm: String,
    /// Its environment.
    pub environment: String,
    /// Cell label (parameters).
    pub label: String,
    /// What was attacked: `mechanism` (the privacy mechanism's releases) or
    /// `schedule` (the sync times).
    pub view: String,
    /// The mechanism (`ldp`, `sdp_amp`, `sdp_vecsum`, `alt`, `privatizer`,
    /// `partial_sums`).
    pub mechanism: String,
    /// Target (epsilon, delta) of the job.
    pub target_epsilon: Option<f64>,
    /// Target delta.
    pub target_delta: Option<f64>,
    /// The accountant's main figure for the mechanism (`acct_epsilon`),
    /// if it states one.
    pub acct_epsilon: Option<f64>,
    /// Which figure `acct_epsilon` is.
    pub acct_figure: String,
    /// The delta the audit's bound is at.
    pub audit_delta: f64,
    /// Noise multiplier of the audit (1: as calibrated).
    pub noise_scale: f64,
    /// The audit's outcome.
    pub outcome: crate::privacy::audit::AuditOutcome,
    /// Seconds the audit took.
    pub wall_seconds: f64,
    /// `pass`, or `FAIL: ...` naming each upper-bound column the lower
    /// bound exceeds (and any contradicted claim).
    pub verdict: String,
}

/// The schema of `audit.parquet`.
pub fn audit_schema() -> SchemaRef {
    let f = |n: &str, t: DataType, null: bool| Field::new(n, t, null);
    Arc::new(Schema::new(vec![
        f("job", DataType::Utf8, false),
        f("cell_id", DataType::Utf8, false),
        f("algorithm", DataType::Utf8, false),
        f("environment", DataType::Utf8, false),
        f("label", DataType::Utf8, false),
        f("view", DataType::Utf8, false),
        f("mechanism", DataType::Utf8, false),
        f("target_epsilon", DataType::Float64, true),
        f("target_delta", DataType::Float64, true),
        f("acct_epsilon", DataType::Float64, true),
        f("acct_figure", DataType::Utf8, false),
        f("audit_delta", DataType::Float64, false),
        f("noise_scale", DataType::Float64, false),
        f("trials", DataType::UInt64, false),
        f("false_positives", DataType::UInt64, false),
        f("false_negatives", DataType::UInt64, false),
        f("advantage", DataType::Float64, false),
        f("epsilon_lb", DataType::Float64, false),
        f("confidence", DataType::Float64, false),
        f("wall_seconds", DataType::Float64, false),
        f("verdict", DataType::Utf8, false),
    ]))
}

/// The audit table of a job as one record batch.
pub fn audit_batch(job: &Job, rows: &[AuditRow]) -> Result<RecordBatch, OutputError> {
    let text = |f: &dyn Fn(&AuditRow) -> &str| {
        let mut b = StringBuilder::new();
        for r in rows {
            b.append_value(f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let float = |f: &dyn Fn(&AuditRow) -> Option<f64>| {
        let mut b = Float64Builder::new();
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let count = |f: &dyn Fn(&AuditRow) -> u64| {
        let mut b = UInt64Builder::new();
        for r in rows {
            b.append_value(f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let cols = vec![
        {
            let mut b = StringBuilder::new();
            for _ in rows {
                b.append_value(&job.name);
            }
            Arc::new(b.finish()) as ArrayRef
        },
        text(&|r| &r.cell_id),
        text(&|r| &r.algorithm),
        text(&|r| &r.environment),
        text(&|r| &r.label),
        text(&|r| &r.view),
        text(&|r| &r.mechanism),
        float(&|r| r.target_epsilon),
        float(&|r| r.target_delta),
        float(&|r| r.acct_epsilon),
        text(&|r| &r.acct_figure),
        float(&|r| Some(r.audit_delta)),
        float(&|r| Some(r.noise_scale)),
        count(&|r| r.outcome.trials),
        count(&|r| r.outcome.false_positives),
        count(&|r| r.outcome.false_negatives),
        float(&|r| Some(r.outcome.advantage)),
        float(&|r| Some(r.outcome.epsilon_lb)),
        float(&|r| Some(r.outcome.confidence)),
        float(&|r| Some(r.wall_seconds)),
        text(&|r| &r.verdict),
    ];
    Ok(RecordBatch::try_new(audit_schema(), cols)?)
}
