//! The unit file: one finished repetition of one cell, as small as its data.
//!
//! A unit holds what the repetition measured (one row per checkpoint: the
//! round, the regret, the counters and the family's metric columns, raw:
//! null where the family set none) and what identifies and checks it (job
//! name, cell id and resume key, repetition, engine and semantics version,
//! backend, wall time, the checksum of its data pages). Everything that is a
//! function of the job and the cell (the parameters, the cell's index in
//! the grid, the accountant's figures, the regret exponent, the job text,
//! the family registry) is not stored: the part file is assembled from the
//! units through [`super::cell_batch`] with the current job, so a unit is
//! reused unchanged by a job that grew (more repetitions, grid values or
//! algorithms) and its rows equal a from-scratch run's bit for bit.
//!
//! Units written before this format (format 1: the full rows and every
//! job-wide statement) carry no `fedbandits.unit_format` key; they are read
//! as rows ([`UnitData::Rows`]).
//!
//! The file is Parquet without statistics, page indexes or the Arrow schema
//! (a unit is read whole, never filtered): at the quickstart's 51
//! checkpoints a unit is about 3 KB where format 1 took 30 KB.

use super::OutputError;
use crate::algo::Counters;
use crate::algo::curve::{CurvePoint, METRICS, Metric, MetricKind, N_METRICS, RepResult};
use arrow_array::builder::{Float64Builder, UInt64Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::{ArrowWriter, arrow_writer::ArrowWriterOptions};
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use std::path::Path;
use std::sync::Arc;

/// The metadata key naming a unit's format ("2"); format 1 has none.
pub const UNIT_FORMAT_KEY: &str = "fedbandits.unit_format";
/// The format this engine writes.
pub const UNIT_FORMAT: &str = "2";

/// The measured columns before the metric columns.
/// (`counters.clipped_rewards` is not stored: the linear family reports it
/// as the metric `clipped_observations`, which is; it reads back as 0.)
const POINT_COLUMNS: [(&str, MetricKind); 8] = [
    ("t", MetricKind::U64),
    ("group_regret", MetricKind::F64),
    ("agent_regret", MetricKind::F64),
    ("agent_regret_max", MetricKind::F64),
    ("sync_rounds", MetricKind::U64),
    ("messages", MetricKind::U64),
    ("cholesky_failures", MetricKind::U64),
    ("beta_clamps", MetricKind::U64),
];

fn data_type(kind: MetricKind) -> DataType {
    match kind {
        MetricKind::F64 => DataType::Float64,
        MetricKind::U64 => DataType::UInt64,
    }
}

/// The schema of a unit's rows: [`POINT_COLUMNS`] then every metric (a
/// unit holds only the metric columns its repetition set).
pub fn unit_schema() -> SchemaRef {
    let mut f: Vec<Field> = POINT_COLUMNS
        .iter()
        .map(|(n, k)| Field::new(*n, data_type(*k), false))
        .collect();
    f.extend(METRICS.iter().map(|(n, k, _)| Field::new(*n, data_type(*k), true)));
    Arc::new(Schema::new(f))
}

/// A repetition's points as a record batch of [`unit_schema`], without the
/// metric columns its family set nowhere (a reader takes a missing metric
/// column for nulls).
fn unit_batch(r: &RepResult) -> Result<RecordBatch, OutputError> {
    let u64s = |f: &dyn Fn(&CurvePoint) -> u64| -> ArrayRef {
        let mut b = UInt64Builder::with_capacity(r.points.len());
        r.points.iter().for_each(|p| b.append_value(f(p)));
        Arc::new(b.finish())
    };
    let f64s = |f: &dyn Fn(&CurvePoint) -> f64| -> ArrayRef {
        let mut b = Float64Builder::with_capacity(r.points.len());
        r.points.iter().for_each(|p| b.append_value(f(p)));
        Arc::new(b.finish())
    };
    let mut cols = vec![
        u64s(&|p| p.t),
        f64s(&|p| p.group_regret),
        f64s(&|p| p.agent_regret_mean),
        f64s(&|p| p.agent_regret_max),
        u64s(&|p| p.counters.sync_rounds),
        u64s(&|p| p.counters.messages),
        u64s(&|p| p.counters.cholesky_failures),
        u64s(&|p| p.counters.beta_clamps),
    ];
    let mut fields: Vec<Field> = unit_schema().fields()[..POINT_COLUMNS.len()]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for (i, (name, kind, _)) in METRICS.iter().enumerate() {
        if r.points.iter().all(|p| p.metrics[i].is_none()) {
            continue;
        }
        fields.push(Field::new(*name, data_type(*kind), true));
        cols.push(match kind {
            MetricKind::F64 => {
                let mut b = Float64Builder::with_capacity(r.points.len());
                r.points
                    .iter()
                    .for_each(|p| b.append_option(p.metrics[i].map(Metric::as_f64)));
                Arc::new(b.finish()) as ArrayRef
            }
            MetricKind::U64 => {
                let mut b = UInt64Builder::with_capacity(r.points.len());
                r.points
                    .iter()
                    .for_each(|p| b.append_option(p.metrics[i].and_then(Metric::as_u64)));
                Arc::new(b.finish())
            }
        });
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
}

/// Encodes `batch` as a compact Parquet file with `kv` metadata.
fn encode(path: &Path, batch: &RecordBatch, kv: Vec<KeyValue>) -> Result<Vec<u8>, OutputError> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_dictionary_enabled(false)
        .set_offset_index_disabled(true)
        .set_key_value_metadata(Some(kv))
        .build();
    let options = ArrowWriterOptions::new()
        .with_properties(props)
        .with_skip_arrow_metadata(true);
    let pq = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let mut w = ArrowWriter::try_new_with_options(Vec::new(), batch.schema(), options).map_err(pq)?;
    w.write(batch).map_err(pq)?;
    w.into_inner().map_err(pq)
}

/// Writes repetition `r` as a unit file at `path` atomically, with the
/// identifying metadata `kv` (plus the format, wall time and checksum).
pub fn write_unit(path: &Path, r: &RepResult, backend: &str, mut kv: Vec<KeyValue>) -> Result<(), OutputError> {
    let batch = unit_batch(r)?;
    kv.extend([
        KeyValue::new(UNIT_FORMAT_KEY.to_string(), UNIT_FORMAT.to_string()),
        KeyValue::new("fedbandits.backend".to_string(), backend.to_string()),
        KeyValue::new(
            "fedbandits.wall_seconds".into(),
            format!("{:016x}", r.wall_seconds.to_bits()),
        ),
    ]);
    super::write::write_checksummed_atomic(path, kv, |kv| encode(path, &batch, kv))
}

/// What a unit file holds.
pub enum UnitData {
    /// Format 2: the repetition's measurements and the backend that ran it.
    Rep(RepResult, String),
    /// Format 1: the full rows of the results schema, as written.
    Rows(Vec<RecordBatch>),
}

/// Reads a unit file after checking its checksum: its data and its
/// key-value metadata.
pub fn read_unit_file(path: &Path, rep: u32) -> Result<(UnitData, super::Metadata), OutputError> {
    let (batches, kv) = super::read_parquet_checked(path)?;
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let Some(format) = get(UNIT_FORMAT_KEY) else {
        return Ok((UnitData::Rows(batches), kv));
    };
    let bad = |message: String| OutputError::Checksum {
        path: path.to_path_buf(),
        message,
    };
    if format != UNIT_FORMAT {
        return Err(bad(format!(
            "unit format {format}, this fedbandits reads 1 and {UNIT_FORMAT}"
        )));
    }
    let wall = get("fedbandits.wall_seconds")
        .and_then(|w| u64::from_str_radix(&w, 16).ok())
        .map(f64::from_bits)
        .ok_or_else(|| bad("no fedbandits.wall_seconds in its metadata".into()))?;
    let backend = get("fedbandits.backend").ok_or_else(|| bad("no fedbandits.backend in its metadata".into()))?;
    let mut points = Vec::new();
    for b in &batches {
        points.extend(points_of(b, 0..b.num_rows()).map_err(|e| bad(e.to_string()))?);
    }
    let r = RepResult {
        rep,
        points,
        wall_seconds: wall,
    };
    Ok((UnitData::Rep(r, backend), kv))
}

/// Why rows of the results schema cannot be read back as repetitions.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowsError {
    /// A column the rows need is absent.
    #[error("no column {0}")]
    MissingColumn(String),
    /// A column has another type than the schema's.
    #[error("column {column} is not {expected}")]
    ColumnType {
        /// Column.
        column: String,
        /// The schema's type.
        expected: &'static str,
    },
}

/// The curve points of rows `rows` of `b` (a unit's batch, or a batch of
/// the results schema: the columns are found by name), or what is wrong.
fn points_of(b: &RecordBatch, rows: std::ops::Range<usize>) -> Result<Vec<CurvePoint>, RowsError> {
    let col = |name: &str| {
        b.column_by_name(name)
            .ok_or_else(|| RowsError::MissingColumn(name.to_owned()))
    };
    let typed = |name: &str, expected| RowsError::ColumnType {
        column: name.to_owned(),
        expected,
    };
    let u = |name: &str| {
        col(name)?
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| typed(name, "UInt64"))
    };
    let f = |name: &str| {
        col(name)?
            .as_primitive_opt::<Float64Type>()
            .ok_or_else(|| typed(name, "Float64"))
    };
    let (t, g, a, m) = (u("t")?, f("group_regret")?, f("agent_regret")?, f("agent_regret_max")?);
    // A counter only some families fill is absent from the files of the
    // others ([`super::job_schema`]): 0 there, as those families count none.
    let counter = |name: &str| {
        let own = crate::algo::family::FAMILIES.iter().any(|f| f.columns.contains(&name));
        match b.column_by_name(name) {
            None if own => Ok(None),
            _ => u(name).map(Some),
        }
    };
    let counters: Vec<_> = POINT_COLUMNS[4..]
        .iter()
        .map(|c| counter(c.0))
        .collect::<Result<_, _>>()?;
    let count = |i: usize, r: usize| counters[i].map_or(0, |c| c.value(r));
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let mut metrics = [None; N_METRICS];
        for (i, (name, kind, _)) in METRICS.iter().enumerate() {
            if b.column_by_name(name).is_none_or(|c| c.is_null(r)) {
                continue;
            }
            metrics[i] = Some(match kind {
                MetricKind::F64 => Metric::F64(f(name)?.value(r)),
                MetricKind::U64 => Metric::U64(u(name)?.value(r)),
            });
        }
        out.push(CurvePoint {
            t: t.value(r),
            group_regret: g.value(r),
            agent_regret_mean: a.value(r),
            agent_regret_max: m.value(r),
            counters: Counters {
                sync_rounds: count(0, r),
                messages: count(1, r),
                cholesky_failures: count(2, r),
                beta_clamps: count(3, r),
                clipped_rewards: 0,
            },
            metrics,
        });
    }
    Ok(out)
}

/// The repetitions held in rows of the results schema (a format-1 unit or
/// a part file), in order: each run of consecutive rows with one cell id
/// and repetition as (cell id, repetition, backend, its measurements). The
/// metric columns read as the rows show them (where a family set none, the
/// accountant's figure a part shows in its place), which
/// [`super::cell_batch`] turns back into the same rows.
pub fn units_in_rows(batches: &[RecordBatch]) -> Result<Vec<(String, RepResult, String)>, RowsError> {
    let mut units = RowUnits::default();
    let mut out = Vec::new();
    for b in batches {
        units.add(b, |u| out.push(u))?;
    }
    out.extend(units.finish());
    Ok(out)
}

/// [`units_in_rows`] a batch at a time, for a part read as a stream: each
/// repetition is handed on once its rows end (a repetition split across
/// two batches continues), the last by [`RowUnits::finish`].
#[derive(Default)]
pub struct RowUnits {
    open: Option<(String, RepResult, String)>,
}

impl RowUnits {
    /// Reads the repetitions of `b`, handing each completed one to `done`.
    pub fn add(&mut self, b: &RecordBatch, mut done: impl FnMut((String, RepResult, String))) -> Result<(), RowsError> {
        let text = |name: &str| {
            b.column_by_name(name)
                .ok_or_else(|| RowsError::MissingColumn(name.to_owned()))?
                .as_string_opt::<i32>()
                .ok_or(RowsError::ColumnType {
                    column: name.to_owned(),
                    expected: "Utf8",
                })
        };
        let (ids, backends) = (text("cell_id")?, text("backend")?);
        let reps = b
            .column_by_name("repetition")
            .and_then(|c| c.as_primitive_opt::<arrow_array::types::UInt32Type>())
            .ok_or_else(|| RowsError::MissingColumn("repetition".into()))?;
        let walls = b
            .column_by_name("wall_seconds")
            .and_then(|c| c.as_primitive_opt::<Float64Type>())
            .ok_or_else(|| RowsError::MissingColumn("wall_seconds".into()))?;
        let mut start = 0;
        while start < b.num_rows() {
            let (id, rep) = (ids.value(start), reps.value(start));
            let end = (start..b.num_rows())
                .find(|&i| ids.value(i) != id || reps.value(i) != rep)
                .unwrap_or(b.num_rows());
            let points = points_of(b, start..end)?;
            match &mut self.open {
                Some((lid, r, _)) if lid == id && r.rep == rep => r.points.extend(points),
                open => {
                    let next = (
                        id.to_owned(),
                        RepResult {
                            rep,
                            points,
                            wall_seconds: walls.value(start),
                        },
                        backends.value(start).to_owned(),
                    );
                    if let Some(finished) = open.replace(next) {
                        done(finished);
                    }
                }
            }
            start = end;
        }
        Ok(())
    }

    /// The last repetition read, if any.
    pub fn finish(self) -> Option<(String, RepResult, String)> {
        self.open
    }
}
