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
        "gossip: max over arms and agents of |estimate - the agents' mean estimate| (disagreement)",
    ),
    (
        "estimate_error",
        MetricKind::F64,
        "gossip: max over agents and arms of |estimate - mu_k| (estimation error)",
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
        "paper_epsilon_spent",
        MetricKind::F64,
        "combinatorial (P-FCB): the paper's per-agent privacy spent so far (the sum of each message's exact epsilon)",
    ),
    (
        "paper_delta_spent",
        MetricKind::F64,
        "combinatorial (P-FCB): the delta beside paper_epsilon_spent (messages x delta)",
    ),
    (
        "acct_epsilon_basic",
        MetricKind::F64,
        "basic composition over the horizon of the releases one observation enters, where the accountant states it",
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

    /// The cumulative regret column `column` at this point: `group_regret`,
    /// or a metric column (None where not set).
    pub fn regret(&self, column: &str) -> Option<f64> {
        if column == "group_regret" {
            Some(self.group_regret)
        } else {
            self.metric(column).map(Metric::as_f64)
        }
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

/// The exponent at or above which a repetition's regret counts as growing
/// linearly over the last decade of the horizon (the run summary's flag,
/// the report's warning).
pub const LINEAR_GROWTH_EXPONENT: f64 = 0.9;

/// The growth exponent of cumulative regret over the last decade of the
/// horizon: the slope of log R against log t between t = T/10 and T,
/// (ln R(T) - ln R(T/10)) / ln 10, from the checkpoints `curve` (sorted
/// (t, R) pairs). R(T/10) is read off the checkpoints: the checkpoint at
/// T/10, or interpolated linearly in (log t, log R) between the two that
/// bracket it (exact for a power law). The exponent is 1 for regret growing
/// linearly, 1/2 for sqrt t, about 1 + 1 / ln T for t log t, about 1 / ln T
/// for log t; a learner's regret falls below 1 and a policy that has
/// stopped learning tends to 1 (cumulative regret C + a t).
///
/// None when the checkpoints do not span the decade (no checkpoint at T,
/// none at or before T/10, or the two around T/10 more than a factor 2
/// apart: too coarse to read R(T/10) off), or when the regret at either
/// end is not positive (no regret yet, or regret measured against a
/// reference the algorithm can beat, which the combinatorial family's can).
pub fn growth_exponent(curve: &[(u64, f64)], horizon: u64) -> Option<f64> {
    let &(_, end) = curve.iter().find(|(t, _)| *t == horizon)?;
    let t0 = horizon as f64 / 10.0;
    let lo = curve.iter().rev().find(|(t, _)| *t as f64 <= t0)?;
    let hi = curve.iter().find(|(t, _)| *t as f64 >= t0)?;
    let positive = |r: f64| r > 0.0 && r.is_finite();
    if hi.0 > 2 * lo.0 || !positive(end) || !positive(lo.1) || !positive(hi.1) {
        return None;
    }
    let ln_r0 = if hi.0 == lo.0 {
        lo.1.ln()
    } else {
        let w = (t0.ln() - (lo.0 as f64).ln()) / ((hi.0 as f64).ln() - (lo.0 as f64).ln());
        lo.1.ln() + w * (hi.1.ln() - lo.1.ln())
    };
    Some((end.ln() - ln_r0) / std::f64::consts::LN_10)
}

/// The factor in t over which [`linear_stretch`] takes a local slope: a
/// quarter decade, so that integer checkpoints at small t and one noisy
/// round do not cut a stretch.
pub const STRETCH_WINDOW: f64 = 1.778_279_410_038_923; // 10^(1/4)

/// The longest stretch (t_from, t_to) of a regret curve over which its
/// local slope of ln R against ln t is at least
/// [`LINEAR_GROWTH_EXPONENT`]: the stall check over the whole curve that
/// the last-decade exponent cannot make (a private FedUCB grows linearly
/// until its first sync, then learns). `curve`: sorted (t, ln R) pairs of
/// positive regret (the run summary passes the geometric mean over
/// repetitions). The local slope at checkpoint t_i is the secant to the
/// first checkpoint at or beyond t_i x [`STRETCH_WINDOW`]; a stretch runs
/// over consecutive checkpoints whose local slope qualifies, from the
/// first one's t to its last secant's end. None where no slope qualifies.
/// The analysis package's `phases.linear_stretch` is the same function.
pub fn linear_stretch(curve: &[(u64, f64)]) -> Option<(u64, u64)> {
    let n = curve.len();
    let span = |a: u64, b: u64| (b as f64).ln() - (a as f64).ln();
    let mut best: Option<(u64, u64)> = None;
    let mut start: Option<usize> = None;
    for i in 0..n {
        let target = curve[i].0 as f64 * STRETCH_WINDOW - 1e-9;
        let j = curve.partition_point(|(t, _)| (*t as f64) < target).min(n - 1);
        let qualifies = j > i && (curve[j].1 - curve[i].1) / span(curve[i].0, curve[j].0) >= LINEAR_GROWTH_EXPONENT;
        if !qualifies {
            start = None;
            continue;
        }
        let from = curve[*start.get_or_insert(i)].0;
        if best.is_none_or(|(a, b)| span(from, curve[j].0) > span(a, b)) {
            best = Some((from, curve[j].0));
        }
    }
    best
}

/// Whether a linear stretch is long: two decades or more, ending at or
/// beyond sqrt(horizon) (linear over at least half the horizon's decades;
/// an ordinary warm-up, linear for the first tens of rounds, is not).
pub fn long_stretch((from, to): (u64, u64), horizon: u64) -> bool {
    (to as f64 / from as f64).log10() >= 2.0 && (to as f64) >= (horizon as f64).sqrt()
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

impl RepResult {
    /// The first non-finite value the repetition recorded, as (t, column):
    /// a run must fail rather than write it.
    pub fn first_non_finite(&self) -> Option<(u64, &'static str)> {
        for p in &self.points {
            if !p.group_regret.is_finite() {
                return Some((p.t, "group_regret"));
            }
            if !p.agent_regret_max.is_finite() {
                return Some((p.t, "agent_regret_max"));
            }
            for ((name, _, _), m) in METRICS.iter().zip(&p.metrics) {
                if let Some(Metric::F64(v)) = m
                    && !v.is_finite()
                {
                    return Some((p.t, name));
                }
            }
        }
        None
    }

    /// [`growth_exponent`] of the regret column `column` (the family's
    /// [`crate::algo::family::Family::growth_regret`]) over this
    /// repetition's checkpoints.
    pub fn regret_exponent(&self, horizon: u64, column: &str) -> Option<f64> {
        let curve: Vec<(u64, f64)> = self
            .points
            .iter()
            .filter_map(|p| p.regret(column).map(|r| (p.t, r)))
            .collect();
        growth_exponent(&curve, horizon)
    }
}

#[cfg(test)]
mod tests {
    use super::{growth_exponent, linear_stretch, long_stretch};
    use crate::job::CheckpointSpec;

    /// The curve `f` sampled at `spec`'s checkpoints for horizon `t`.
    fn sampled(spec: &CheckpointSpec, t: u64, f: impl Fn(f64) -> f64) -> Vec<(u64, f64)> {
        spec.rounds(t).into_iter().map(|s| (s, f(s as f64))).collect()
    }

    #[test]
    fn exponent_of_synthetic_curves() {
        // Closed forms for the last decade [T/10, T]: t^a gives a exactly;
        // t ln t gives 1 + log10(ln T / ln(T/10)); ln t gives
        // log10(ln T / ln(T/10)). T/10 is a checkpoint (every: T/100) or
        // interpolated (log_points), exact for power laws; for the others
        // the log-log interpolation between checkpoints 10^(6/49) apart is
        // within 1e-3.
        let t = 1_000_000u64;
        let tf = t as f64;
        let lnlog = (tf.ln() / (tf / 10.0).ln()).log10();
        type Case = (&'static str, fn(f64) -> f64, f64);
        let cases: [Case; 5] = [
            ("t", |s| s, 1.0),
            ("3 + 0 t (constant)", |_| 3.0, 0.0),
            ("sqrt t", f64::sqrt, 0.5),
            ("t ln t", |s| s * s.ln(), 1.0 + lnlog),
            ("ln t", |s| s.ln(), lnlog),
        ];
        for spec in [CheckpointSpec::Every(t / 100), CheckpointSpec::LogPoints(50)] {
            for (name, f, want) in cases {
                // ln 1 = 0 at the first checkpoint: shift log t by one round.
                let curve = sampled(&spec, t, |s| if name == "ln t" { f(s + 1.0) } else { f(s) });
                let got = growth_exponent(&curve, t).expect("spans the decade");
                let tol = if matches!(spec, CheckpointSpec::Every(_)) || name == "t" || name == "sqrt t" {
                    1e-9
                } else {
                    1e-3
                };
                let want = if name == "ln t" {
                    ((tf + 1.0).ln() / (tf / 10.0 + 1.0).ln()).log10()
                } else {
                    want
                };
                assert!((got - want).abs() < tol, "{name} under {spec:?}: {got} vs {want}");
            }
        }
        // A stall after learning: C + a t, the linear part dominant over the
        // decade (the stalled repetition of jobs/long_reward_on.yaml goes
        // 74 -> 635 -> 6142 at t = 1.1e4, 1.05e5, 1e6).
        let curve = sampled(&CheckpointSpec::LogPoints(50), t, |s| 60.0 + 6e-3 * s);
        let e = growth_exponent(&curve, t).unwrap_or(0.0);
        assert!(e > 0.9 && e < 1.0, "stall: {e}");
    }

    #[test]
    fn a_non_finite_value_is_found() {
        use super::{CurvePoint, Metric, RepResult};
        let mut p = CurvePoint::new(10, 1.0, 2, 0.5, 0, 0);
        let mut r = RepResult {
            rep: 0,
            points: vec![p, p],
            wall_seconds: 0.0,
        };
        assert_eq!(r.first_non_finite(), None);
        p.set("consensus_error", Metric::F64(f64::NAN));
        r.points[1] = p;
        assert_eq!(r.first_non_finite(), Some((10, "consensus_error")));
        r.points[0].group_regret = f64::INFINITY;
        assert_eq!(r.first_non_finite(), Some((10, "group_regret")));
    }

    #[test]
    fn no_exponent_without_the_decade_or_positive_regret() {
        let t = 10_000u64;
        let lin = |s: f64| s;
        // Only the horizon; a first checkpoint after T/10; a bracket wider
        // than a factor 2 (checkpoints 1 and T only).
        for spec in [
            CheckpointSpec::Every(t),
            CheckpointSpec::Every(t / 5),
            CheckpointSpec::LogPoints(2),
        ] {
            assert_eq!(growth_exponent(&sampled(&spec, t, lin), t), None, "{spec:?}");
        }
        // No point at T.
        let curve: Vec<(u64, f64)> = (1..=99).map(|i| (i * 100, i as f64)).collect();
        assert_eq!(growth_exponent(&curve, t), None);
        // Zero or negative regret at either end.
        let every = CheckpointSpec::Every(t / 100);
        assert_eq!(growth_exponent(&sampled(&every, t, |_| 0.0), t), None);
        assert_eq!(growth_exponent(&sampled(&every, t, |s| s - 2000.0), t), None);
        assert_eq!(growth_exponent(&sampled(&every, t, |s| 5000.0 - s), t), None);
    }

    #[test]
    fn linear_stretch_of_synthetic_curves() {
        let spec = CheckpointSpec::LogPoints(60);
        let t = 1_000_000u64;
        // Linear until 10^4, then sqrt: the stretch starts at t = 1 and
        // ends within a quarter decade of the knee (the last secant whose
        // slope stays >= 0.9).
        let knee = 1e4;
        let f = |s: f64| if s <= knee { s } else { knee * (s / knee).sqrt() };
        let curve: Vec<(u64, f64)> = sampled(&spec, t, f).into_iter().map(|(s, r)| (s, r.ln())).collect();
        let (a, b) = linear_stretch(&curve).expect("a linear start");
        assert_eq!(a, 1);
        assert!(
            (knee / super::STRETCH_WINDOW..=knee * super::STRETCH_WINDOW).contains(&(b as f64)),
            "{b}"
        );
        assert!(long_stretch((a, b), t));
        // sqrt t from the start: no slope reaches 0.9.
        let sqrt: Vec<(u64, f64)> = sampled(&spec, t, f64::sqrt)
            .into_iter()
            .map(|(s, r)| (s, r.ln()))
            .collect();
        assert_eq!(linear_stretch(&sqrt), None);
        // Linear over the first decade only: a stretch, not a long one.
        let warm = |s: f64| if s <= 10.0 { s } else { 10.0 * (s / 10.0).powf(0.3) };
        let curve: Vec<(u64, f64)> = sampled(&spec, t, warm).into_iter().map(|(s, r)| (s, r.ln())).collect();
        let found = linear_stretch(&curve).expect("a linear start");
        assert!(found.1 <= 20 && !long_stretch(found, t), "{found:?}");
        assert_eq!(linear_stretch(&[]), None);
        assert_eq!(linear_stretch(&[(5, 1.0)]), None);
    }
}
