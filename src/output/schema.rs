//! The results table: its long-format schema (one row per cell, repetition
//! and checkpoint) and the record batch of a cell's repetitions.
//!
//! Every parameter of the registry ([`crate::algo::family::params`]) is its
//! own typed, nullable column (null where the cell's algorithm or
//! environment does not use it); every metric column of
//! [`crate::algo::curve::METRICS`] likewise (null where the cell's family
//! does not set it): [`schema`], the union over families. A job's files
//! carry the columns of its own families only ([`job_schema`]): the
//! parameters some family of the job uses, and of the columns a family
//! lists as its own ([`crate::algo::family_entry::Family::columns`]) those
//! of the job's families; the common columns always. The loader's frame
//! across files is the union of their columns. The schema names no family.

use super::OutputError;
use crate::algo::curve::{CurvePoint, METRICS, Metric, MetricKind, RepResult};
use crate::algo::family::params;
use crate::algo::params::{Kind, Value};
use crate::job::{Cell, Job};
use crate::privacy::accountant::Accounting;
use arrow_array::builder::{Float64Builder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

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

/// The columns of [`schema`] a job's files carry, by position: every column
/// but the parameters no family of the job uses and the columns only other
/// families fill.
fn job_columns(job: &Job) -> Vec<usize> {
    let mut families: Vec<&'static crate::algo::family::Family> = Vec::new();
    for c in &job.cells {
        if let Some(f) = crate::algo::family::family_of(&c.algorithm)
            && !families.iter().any(|g| g.name == f.name)
        {
            families.push(f);
        }
    }
    let used: Vec<&str> = families.iter().flat_map(|f| f.parameters()).collect();
    let own = |col: &str| families.iter().any(|f| f.columns.contains(&col));
    let other = |col: &str| crate::algo::family::FAMILIES.iter().any(|f| f.columns.contains(&col));
    schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| {
            let name = field.name().as_str();
            let is_param = params().iter().any(|p| p.name == name);
            (!is_param || used.contains(&name)) && (!other(name) || own(name))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The schema of a job's files ([`job_columns`] of [`schema`]).
pub fn job_schema(job: &Job) -> Result<SchemaRef, OutputError> {
    Ok(Arc::new(schema().project(&job_columns(job))?))
}

/// The output schema: every family's columns (the union of the job
/// schemas). Built once per process (the registry is fixed).
pub fn schema() -> SchemaRef {
    static SCHEMA: std::sync::OnceLock<SchemaRef> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(union_schema).clone()
}

/// [`schema`], built.
fn union_schema() -> SchemaRef {
    let mut f = vec![
        Field::new("job", DataType::Utf8, false),
        Field::new("cell_id", DataType::Utf8, false),
        Field::new("cell_index", DataType::UInt32, false),
        Field::new("algorithm", DataType::Utf8, false),
        Field::new("environment", DataType::Utf8, false),
        Field::new("horizon", DataType::UInt64, false),
    ];
    for p in params() {
        f.push(Field::new(p.name, param_type(p.kind), true));
    }
    f.extend([
        Field::new("repetition", DataType::UInt32, false),
        Field::new("seed", DataType::UInt64, false),
        Field::new("t", DataType::UInt64, false),
        Field::new("group_regret", DataType::Float64, false),
        Field::new("agent_regret", DataType::Float64, false),
        Field::new("agent_regret_max", DataType::Float64, false),
        Field::new("regret_exponent", DataType::Float64, true),
        Field::new("sync_rounds", DataType::UInt64, false),
        Field::new("messages", DataType::UInt64, false),
        Field::new("cholesky_failures", DataType::UInt64, false),
        Field::new("beta_clamps", DataType::UInt64, false),
        Field::new("target_epsilon", DataType::Float64, true),
        Field::new("target_delta", DataType::Float64, true),
        Field::new("acct_epsilon", DataType::Float64, true),
        Field::new("acct_mu", DataType::Float64, true),
        Field::new("acct_releases_per_observation", DataType::UInt64, true),
        Field::new("acct_noise_multiplier", DataType::Float64, true),
        Field::new("acct_sensitivity", DataType::Float64, true),
        Field::new("paper_claimed_epsilon", DataType::Float64, true),
        Field::new("acct_rho_zcdp", DataType::Float64, true),
        Field::new("acct_epsilon_zcdp", DataType::Float64, true),
        Field::new("acct_epsilon_pure", DataType::Float64, true),
        Field::new("acct_epsilon_sums", DataType::Float64, true),
        Field::new("acct_lattice_step", DataType::Float64, true),
        Field::new("acct_tail", DataType::Float64, true),
        Field::new("acct_binomial_trials", DataType::Utf8, true),
        Field::new("acct_epsilon_composed", DataType::Float64, true),
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

/// What each column holds that is neither a parameter (the parameter
/// table's `doc`) nor a family's metric (its registry entry's `metrics`):
/// `fedbandits list --markdown` prints them, and a test fails on a column
/// with no definition anywhere.
pub const COLUMN_DOCS: &[(&str, &str)] = &[
    ("job", "the job's name"),
    (
        "cell_id",
        "the cell's key: a hash of its algorithm, environment and parameters (the same in every job that has the cell)",
    ),
    ("cell_index", "the cell's position in the job's expanded grid (0-based)"),
    ("algorithm", "the cell's algorithm"),
    ("environment", "the cell's environment"),
    ("horizon", "T, the rounds of the run"),
    (
        "repetition",
        "0-based; repetition r of every cell of a job draws the same environment (common random numbers)",
    ),
    ("seed", "the job's seed"),
    ("t", "the checkpoint's round (T is always a checkpoint)"),
    (
        "group_regret",
        "cumulative pseudo-regret summed over agents, on the true means",
    ),
    ("agent_regret", "group_regret / m: the regret per agent"),
    ("agent_regret_max", "the largest single agent's cumulative regret"),
    (
        "regret_exponent",
        "on a repetition's final row only: the slope of ln regret against ln t over the last decade of the horizon \
         (1: a policy that has stopped learning; a learner's is below 1); null on other rows and where the \
         checkpoints do not span the decade",
    ),
    ("sync_rounds", "rounds with a synchronization (or communication) so far"),
    ("messages", "messages sent so far, all agents"),
    (
        "target_epsilon",
        "the privacy target epsilon of a private cell; null otherwise",
    ),
    (
        "target_delta",
        "the privacy target delta; null where not private or pure DP",
    ),
    (
        "acct_epsilon",
        "the accountant's epsilon at target_delta for everything the agent releases over the run: an upper \
         bound under the cell's neighbouring relation, the figure to report; null (the reason in the file's \
         metadata and in `validate`) where something released is covered by no figure",
    ),
    (
        "acct_mu",
        "the mu-GDP parameter of the run where the noise is Gaussian (sdp_vecsum: of the Gaussian-DP that dominates \
         its Binomial noise up to acct_tail)",
    ),
    ("acct_releases_per_observation", "noisy releases one observation enters"),
    (
        "acct_noise_multiplier",
        "each release's noise standard deviation over its L2 sensitivity",
    ),
    (
        "acct_sensitivity",
        "the L2 sensitivity of each release under the cell's relation",
    ),
    (
        "paper_claimed_epsilon",
        "what the paper's own argument claims for the noise used: a claim, not a bound (`fedbandits list` defines \
         it per algorithm)",
    ),
    (
        "acct_rho_zcdp",
        "zCDP rho of the Gaussian releases (looser than acct_epsilon)",
    ),
    (
        "acct_epsilon_zcdp",
        "acct_rho_zcdp converted to epsilon at target_delta",
    ),
    (
        "acct_epsilon_pure",
        "pure epsilon of the Laplace partial sums by basic composition; null without clipping",
    ),
    (
        "acct_epsilon_sums",
        "FedUCB: the exact figure of its noisy sums alone, a bound on that view, not on the run",
    ),
    (
        "acct_lattice_step",
        "the lattice step of a release drawn with exact integer noise (sampler: discrete): its figures hold for \
         the bits released; null for a floating-point sampler, whose figures hold over the reals only",
    ),
    (
        "acct_tail",
        "sdp_vecsum: the probability spent from target_delta before its Gaussian-DP figure (its Binomial noise is \
         dominated by acct_mu-GDP up to it: acct_epsilon is acct_mu-GDP's epsilon at target_delta - acct_tail)",
    ),
    (
        "acct_binomial_trials",
        "sdp_vecsum: the Binomial(t_j, 1/4) counts of its tree levels, level 0 first, separated by spaces (under \
         calibration: exact t_j = max(1, ceil(tau g_j^2))): with d, batch_size, m, l_bound and acct_sensitivity \
         what acct_mu and acct_tail are computed from (README, \"Recomputing a figure from its row\")",
    ),
    (
        "acct_epsilon_composed",
        "the pure epsilon of a release composed with the Gaussian ones (FedUCB's private schedule): acct_epsilon \
         composes it with the sums' mu, sqrt(acct_releases_per_observation) / acct_noise_multiplier (README, \
         \"Recomputing a figure from its row\")",
    ),
    (
        "schedule_private",
        "false where the communication schedule depends on the data and no figure covers it",
    ),
    ("backend", "where the repetition ran: cpu or cuda"),
    (
        "wall_seconds",
        "the repetition's wall time (the only column that differs between identical runs)",
    ),
];

/// Columns that vary between runs of the same job (excluded from
/// reproducibility comparisons).
pub const NONDETERMINISTIC_COLUMNS: &[&str] = &["wall_seconds"];

/// Builds the record batch of one cell (repetitions in order), in its job's
/// schema ([`job_schema`]): the cell's identity and parameters, the
/// per-point regret and counters, the accountant's figures, the metric
/// columns, the backend and wall time.
pub fn cell_batch(job: &Job, cell: &Cell, reps: &[RepResult], backend: &str) -> Result<RecordBatch, OutputError> {
    let n: usize = reps.iter().map(|r| r.points.len()).sum();
    let mut cols: Vec<ArrayRef> = vec![
        repeat_str(&job.name, n),
        repeat_str(&cell.id, n),
        Arc::new(UInt32Array::from(vec![cell.index as u32; n])),
        repeat_str(&cell.algorithm, n),
        repeat_str(&cell.environment, n),
        Arc::new(UInt64Array::from(vec![cell.horizon(); n])),
    ];
    cols.extend(
        params()
            .iter()
            .map(|p| param_column(p.kind, cell.params.get(p.name), n)),
    );
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
    cols.push(exponent_column(cell.horizon(), cell, reps));
    cols.push(per_point_u64(reps, |p| p.counters.sync_rounds));
    cols.push(per_point_u64(reps, |p| p.counters.messages));
    cols.push(per_point_u64(reps, |p| p.counters.cholesky_failures));
    cols.push(per_point_u64(reps, |p| p.counters.beta_clamps));
    let acct = cell.config.accounting();
    privacy_columns(cell, acct.as_ref(), n, &mut cols);
    cols.extend(metric_columns(reps, acct.as_ref()));
    cols.push(repeat_str(backend, n));
    cols.push(per_point_f64(reps, |r, _| r.wall_seconds));
    Ok(RecordBatch::try_new(schema(), cols)?.project(&job_columns(job))?)
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

/// `regret_exponent`: each repetition's growth exponent of its family's
/// regret over the last decade of the horizon on its final row (t = T),
/// null on the others and where there is none.
fn exponent_column(horizon: u64, cell: &Cell, reps: &[RepResult]) -> ArrayRef {
    let column = crate::algo::family::family_of(&cell.algorithm).map_or("group_regret", |f| f.growth_regret);
    let mut b = Float64Builder::new();
    for r in reps {
        let e = r.regret_exponent(horizon, column);
        for p in &r.points {
            b.append_option(e.filter(|_| p.t == horizon));
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
    cols.push(figure(&|a| a.mu));
    cols.push(Arc::new(UInt64Array::from(vec![
        acct.map(|a| a.releases_per_observation);
        n
    ])));
    cols.push(figure(&|a| a.noise_multiplier));
    cols.push(figure(&|a| a.sensitivity));
    cols.push(figure(&|a| a.paper_claimed));
    cols.push(figure(&|a| a.rho));
    cols.push(figure(&|a| a.epsilon_zcdp));
    cols.push(figure(&|a| a.epsilon_pure));
    cols.push(figure(&|a| a.epsilon_sums));
    cols.push(figure(&|a| a.lattice_step));
    cols.push(figure(&|a| a.tail));
    let trials = acct.and_then(|a| a.binomial_trials.as_ref()).map(|t| {
        let words: Vec<String> = t.iter().map(u64::to_string).collect();
        words.join(" ")
    });
    cols.push(Arc::new(StringArray::from(vec![trials; n])));
    cols.push(figure(&|a| a.pure_part));
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
