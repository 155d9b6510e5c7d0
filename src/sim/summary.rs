//! What `fedbandits run` says of each cell when it is done: the final
//! per-agent regret over repetitions (mean, sd, median, largest; the
//! combinatorial family's after exploration, its exploration cost apart), how many
//! repetitions grow linearly over the last decade of the horizon
//! (`regret_exponent`), the longest stretch over which the curve grows
//! linearly, sync rounds, the accountant's epsilon and the federated
//! regret ratio.

use crate::job::{Cell, Job};
use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt64Type};

/// Final numbers of one cell.
#[derive(Clone, Debug)]
pub struct CellSummary {
    /// The cell's index.
    pub index: usize,
    /// Description.
    pub label: String,
    /// The output column of the regret summarized (per agent): its
    /// family's `growth_regret` (`group_regret`, or the combinatorial
    /// family's `regret_after_exploration`).
    pub regret: &'static str,
    /// Mean over repetitions of the final per-agent regret (of `regret`).
    pub agent_regret_mean: f64,
    /// Its standard deviation over repetitions.
    pub agent_regret_sd: f64,
    /// Its median over repetitions.
    pub agent_regret_median: f64,
    /// Its largest value over repetitions.
    pub agent_regret_max: f64,
    /// Where the family reads the regret after exploration: the mean final
    /// per-agent regret of the exploration rounds (total less `regret`).
    pub exploration_cost: Option<f64>,
    /// Repetitions summarized.
    pub repetitions: usize,
    /// Repetitions whose `regret_exponent` is at least
    /// [`crate::algo::curve::LINEAR_GROWTH_EXPONENT`]: regret growing
    /// linearly over the last decade of the horizon.
    pub linear_growth: usize,
    /// The largest `regret_exponent` over repetitions (None: none has one).
    pub max_exponent: Option<f64>,
    /// The longest stretch (t_from, t_to) over which the geometric mean of
    /// the repetitions' per-agent regret grows linearly
    /// ([`crate::algo::curve::linear_stretch`]), and whether it is long
    /// ([`crate::algo::curve::long_stretch`]).
    pub linear_stretch: Option<((u64, u64), bool)>,
    /// Mean final sync rounds.
    pub sync_rounds_mean: f64,
    /// The accountant's epsilon (private cells): zCDP at the target delta
    /// for Gaussian mechanisms, pure-DP for Laplace ones.
    pub epsilon: Option<f64>,
    /// Why a private cell's `acct_epsilon` is null (None: not private, or
    /// it has one).
    pub epsilon_null: Option<String>,
    /// The target delta `epsilon` holds at (printed beside a figure near 0).
    pub delta: Option<f64>,
    /// Federated Regret Ratio (Solanki et al.): this cell's final regret over
    /// that of its family's baseline cell with the same parameters, when the
    /// job has one.
    pub frr: Option<f64>,
    /// Whether it was already complete.
    pub skipped: bool,
}

/// Fills [`CellSummary::frr`]: a cell whose family names a baseline
/// algorithm ([`crate::algo::family::Family::baseline`]) is compared with the
/// first baseline cell of its environment and horizon that agrees with it on
/// every swept parameter both have (one that takes two or more values among
/// an algorithm's cells: `m`, say, not epsilon, which the baseline lacks, nor
/// a default that differs between algorithms, as `alpha`, nor `lambda`, which
/// private FedUCB does not read).
pub(super) fn federated_regret_ratios(job: &Job, summaries: &mut [CellSummary]) {
    let regret: std::collections::HashMap<usize, f64> =
        summaries.iter().map(|s| (s.index, s.agent_regret_mean)).collect();
    let swept = swept_keys(job);
    for s in summaries.iter_mut() {
        let cell = &job.cells[s.index];
        let baseline = crate::algo::family::family_of(&cell.algorithm).and_then(|f| f.baseline);
        let Some(baseline) = baseline.filter(|b| *b != cell.algorithm) else {
            continue;
        };
        let base = job.cells.iter().find(|b| {
            b.algorithm == baseline
                && b.environment == cell.environment
                && b.horizon() == cell.horizon()
                && b.params
                    .iter()
                    .all(|(k, v)| !swept.contains(k) || cell.params.get(k).is_none_or(|c| c == v))
        });
        if let Some(r) = base.and_then(|b| regret.get(&b.index)).filter(|&&r| r > 0.0) {
            s.frr = Some(s.agent_regret_mean / r);
        }
    }
}

/// The parameters that take two or more values among the cells of one
/// algorithm and environment.
fn swept_keys(job: &Job) -> std::collections::HashSet<&'static str> {
    let mut seen: std::collections::HashMap<(&str, &str, &str), &crate::algo::params::Value> =
        std::collections::HashMap::new();
    let mut swept = std::collections::HashSet::new();
    for c in &job.cells {
        for (k, v) in &c.params {
            let first = *seen
                .entry((c.algorithm.as_str(), c.environment.as_str(), k))
                .or_insert(v);
            if first != v {
                swept.insert(*k);
            }
        }
    }
    swept
}

/// One cell's summary, gathered a repetition's rows at a time so that
/// assembly holds no more than one repetition's batch: [`CellTally::add`]
/// each batch, then [`CellTally::finish`]. The regret it reads is its
/// family's ([`crate::algo::family_entry::Family::growth_regret`]) per
/// agent: the cumulative regret, or for the combinatorial family the regret
/// after exploration (whose exploration phase costs every algorithm alike
/// and dominates the total), with the exploration cost beside it.
pub(super) struct CellTally {
    horizon: u64,
    column: &'static str,
    agents: f64,
    finals: Vec<f64>,
    totals: Vec<f64>,
    syncs: Vec<f64>,
    exponents: Vec<f64>,
    /// Per checkpoint: the sum of ln regret, the repetitions, the smallest.
    logs: std::collections::BTreeMap<u64, (f64, usize, f64)>,
}

impl CellTally {
    /// An empty tally for `cell` of `job`.
    pub(super) fn new(cell: &Cell) -> Self {
        CellTally {
            horizon: cell.horizon(),
            column: crate::algo::family::family_of(&cell.algorithm).map_or("group_regret", |f| f.growth_regret),
            agents: cell.config.agents().max(1) as f64,
            finals: Vec::new(),
            totals: Vec::new(),
            syncs: Vec::new(),
            exponents: Vec::new(),
            logs: std::collections::BTreeMap::new(),
        }
    }

    /// Adds a batch of the cell's rows (a batch without the columns read
    /// adds nothing).
    pub(super) fn add(&mut self, b: &RecordBatch) {
        let (Some(t), Some(reg), Some(total), Some(sr), Some(ex)) = (
            b.column_by_name("t").and_then(|c| c.as_primitive_opt::<UInt64Type>()),
            b.column_by_name(self.column)
                .and_then(|c| c.as_primitive_opt::<Float64Type>()),
            b.column_by_name("agent_regret")
                .and_then(|c| c.as_primitive_opt::<Float64Type>()),
            b.column_by_name("sync_rounds")
                .and_then(|c| c.as_primitive_opt::<UInt64Type>()),
            b.column_by_name("regret_exponent")
                .and_then(|c| c.as_primitive_opt::<Float64Type>()),
        ) else {
            return;
        };
        for i in 0..t.len() {
            let r = reg.value(i) / self.agents;
            let at = self.logs.entry(t.value(i)).or_insert((0.0, 0, f64::INFINITY));
            *at = (at.0 + r.ln(), at.1 + 1, at.2.min(r));
            if t.value(i) == self.horizon {
                self.finals.push(r);
                self.totals.push(total.value(i));
                self.syncs.push(sr.value(i) as f64);
                if arrow_array::Array::is_valid(ex, i) {
                    self.exponents.push(ex.value(i));
                }
            }
        }
    }

    /// The summary of what was added (`skipped`: every repetition was
    /// already complete).
    pub(super) fn finish(mut self, job: &Job, cell: &Cell, skipped: bool) -> CellSummary {
        let finals = &self.finals;
        let n = finals.len().max(1) as f64;
        let mean = finals.iter().sum::<f64>() / n;
        let var = if finals.len() > 1 {
            finals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        CellSummary {
            index: cell.index,
            label: job.short_label(cell),
            regret: self.column,
            agent_regret_mean: mean,
            agent_regret_sd: var.sqrt(),
            agent_regret_median: median(&mut finals.clone()),
            agent_regret_max: finals.iter().copied().fold(f64::NAN, f64::max),
            exploration_cost: (self.column != "group_regret").then(|| self.totals.iter().sum::<f64>() / n - mean),
            repetitions: finals.len(),
            linear_growth: self
                .exponents
                .iter()
                .filter(|&&e| e >= crate::algo::curve::LINEAR_GROWTH_EXPONENT)
                .count(),
            max_exponent: self.exponents.iter().copied().reduce(f64::max),
            linear_stretch: geometric_stretch(&std::mem::take(&mut self.logs), self.horizon),
            sync_rounds_mean: self.syncs.iter().sum::<f64>() / n,
            epsilon: cell.config.accounting().and_then(|a| a.epsilon),
            epsilon_null: cell.config.accounting().and_then(|a| a.epsilon_null),
            delta: cell.config.target().1,
            frr: None,
            skipped,
        }
    }
}

/// The longest linear stretch of the geometric-mean curve (the
/// checkpoints where every repetition's regret is positive) and whether it
/// is long; the analysis package's `phases.linear_phases` reads the same.
fn geometric_stretch(
    logs: &std::collections::BTreeMap<u64, (f64, usize, f64)>,
    horizon: u64,
) -> Option<((u64, u64), bool)> {
    let curve: Vec<(u64, f64)> = logs
        .iter()
        .filter(|(_, (_, _, low))| *low > 0.0)
        .map(|(&t, &(sum, n, _))| (t, sum / n as f64))
        .collect();
    let found = crate::algo::curve::linear_stretch(&curve)?;
    Some((found, crate::algo::curve::long_stretch(found, horizon)))
}

/// The median of `v` (the mean of the middle two for an even count; NaN
/// when empty).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}
