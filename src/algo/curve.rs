//! What a repetition records at a checkpoint, whatever its family: the
//! regret and communication columns every family writes ([`CurvePoint`]),
//! and the metric columns only some families fill ([`METRICS`]: each
//! family's point sets its own by name; the others stay null). The output
//! schema and writer read [`METRICS`] and know no family.

use super::Counters;

/// The type of a metric column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Float64.
    F64,
    /// UInt64.
    U64,
}

/// A metric's value at a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Metric {
    /// A real number.
    F64(f64),
    /// A count.
    U64(u64),
}

impl Metric {
    /// As f64 (counts widen).
    pub fn as_f64(self) -> f64 {
        match self {
            Metric::F64(v) => v,
            Metric::U64(v) => v as f64,
        }
    }

    /// As a count (None for a real number).
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Metric::U64(v) => Some(v),
            Metric::F64(_) => None,
        }
    }

    /// Bit-exact equality (NaN equals NaN of the same bits).
    fn same(self, other: Metric) -> bool {
        match (self, other) {
            (Metric::F64(a), Metric::F64(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        }
    }
}

/// The metric columns, in output order, with their types and the families
/// that fill them (documentation; a point sets a column by name).
pub const METRICS: &[(&str, MetricKind, &str)] = &[
    (
        "consensus_error",
        MetricKind::F64,
        "gossip: max over agents and arms of |estimate - mu_k|",
    ),
    ("forced_pulls", MetricKind::U64, "gossip: forced pulls so far"),
    (
        "clipped_observations",
        MetricKind::U64,
        "gossip: observations the privatizer's clipping changed; linear: rewards clipped to the mechanism's bound",
    ),
    (
        "gossip_lambda2",
        MetricKind::F64,
        "gossip: lambda_2 of the repetition's expected gossip matrix",
    ),
    (
        "regret_after_exploration",
        MetricKind::F64,
        "combinatorial: group regret of the rounds after exploration",
    ),
    (
        "constraint_violations",
        MetricKind::U64,
        "combinatorial: agent-rounds whose choice violated the constraint under the true q",
    ),
    (
        "messages_accepted",
        MetricKind::U64,
        "combinatorial (P-FCB): messages accepted so far",
    ),
    (
        "messages_rejected",
        MetricKind::U64,
        "combinatorial (P-FCB): messages rejected so far",
    ),
    (
        "acct_epsilon_basic",
        MetricKind::F64,
        "basic composition: P-FCB's epsilon spent so far; the linear family's non-Gaussian mechanisms over the horizon",
    ),
    (
        "acct_delta_basic",
        MetricKind::F64,
        "basic composition: the delta beside acct_epsilon_basic",
    ),
];

/// The number of metric columns.
pub const N_METRICS: usize = METRICS.len();

/// The curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CurvePoint {
    /// Round.
    pub t: u64,
    /// Cumulative group pseudo-regret.
    pub group_regret: f64,
    /// Mean over agents of cumulative regret (= group / M).
    pub agent_regret_mean: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Counters at this point.
    pub counters: Counters,
    /// The metric columns' values ([`METRICS`] order; None: null).
    pub metrics: [Option<Metric>; N_METRICS],
}

impl CurvePoint {
    /// A point with the regret and communication columns every family
    /// writes (no metric, no factorization counters).
    pub fn new(t: u64, group: f64, agents: u64, max: f64, sync_rounds: u64, messages: u64) -> Self {
        CurvePoint {
            t,
            group_regret: group,
            agent_regret_mean: group / agents as f64,
            agent_regret_max: max,
            counters: Counters {
                sync_rounds,
                messages,
                ..Counters::default()
            },
            metrics: [None; N_METRICS],
        }
    }

    /// Sets metric column `name` (one of [`METRICS`]; its type is the
    /// column's).
    pub fn set(&mut self, name: &str, value: Metric) {
        match METRICS.iter().position(|m| m.0 == name) {
            Some(i) => self.metrics[i] = Some(value),
            None => debug_assert!(false, "no metric column {name}"),
        }
    }

    /// Metric column `name`, if set.
    pub fn metric(&self, name: &str) -> Option<Metric> {
        METRICS.iter().position(|m| m.0 == name).and_then(|i| self.metrics[i])
    }

    /// Whether two points are equal bit for bit (regret, counters, metrics).
    pub fn same(&self, other: &CurvePoint) -> bool {
        self.t == other.t
            && self.group_regret.to_bits() == other.group_regret.to_bits()
            && self.agent_regret_max.to_bits() == other.agent_regret_max.to_bits()
            && self.counters == other.counters
            && self.metrics.iter().zip(&other.metrics).all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => a.same(*b),
                (None, None) => true,
                _ => false,
            })
    }
}

/// One repetition's result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RepResult {
    /// Repetition index.
    pub rep: u32,
    /// Curve.
    pub points: Vec<CurvePoint>,
    /// Wall-clock seconds (not part of the reproducible data).
    pub wall_seconds: f64,
}
