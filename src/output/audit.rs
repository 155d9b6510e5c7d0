//! The table `fedbandits audit` writes (`_audit/audit.parquet`): one row per
//! audited view of a cell.

use super::OutputError;
use crate::job::Job;
use arrow_array::builder::{Float64Builder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

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
