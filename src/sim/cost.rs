//! Time model of the CPU engine, for `fedbandits plan`: seconds on one
//! thread for a cell's agent-steps. A cell's family says how many units of
//! each of its cost terms an agent-step does ([`crate::algo::Cost`]); the
//! model prices each unit ([`TimeModel`]): at the terms' built-in seconds
//! (fitted on the development VM), at those seconds scaled to this
//! machine's reference rates (`fedbandits calibrate`, `plan --rate`), or at
//! seconds fitted on this machine from its timed shapes (`fedbandits
//! calibrate --shapes`, [`fit_prices`]). Estimates, not promises: a shared
//! machine can be 2x slower, and the model states its own error.

use crate::algo::family::FAMILIES;
use crate::algo::family_entry::Family;
use crate::algo::{CellConfig, Cost};
use crate::backend::calibration::{Calibration, ShapeRow};

/// What the built-in model's error was when it was last fitted,
/// as `plan` states it: measured CPU time (user + system, warm accountant
/// cache) over planned, on the 2-core development VM: 48 one-thread
/// one-repetition runs of the linear family (six algorithms and protocols
/// at d 2-50, K 5-500, M 2-100), seven two-thread study jobs of every
/// family, and the 28 shapes of `calibrate --shapes` (one thread).
pub const FITTED_ERROR: &str = "measured CPU time was 0.67x to 1.45x of planned on 55 jobs and shapes of every family \
     (d 2-50, K 5-500, M 2-100) and 0.78x to 1.23x on the 28 shapes of `calibrate --shapes` when the built-in model \
     was fitted, on the 2-core development VM";

/// What `plan` adds to every model's error statement.
const CAVEAT: &str = "a loaded or shared machine is slower, and the vector-summation accountant adds 2-10 s per task \
     where its figures are not cached yet";

/// Estimated seconds on one thread for `agent_steps` of the cell.
pub fn thread_seconds(cfg: &CellConfig, agent_steps: u64, model: &TimeModel) -> f64 {
    agent_steps as f64 * model.seconds_per_step(&cfg.cost())
}

/// Seconds per unit of each family's cost terms, where they come from,
/// and how far the model was off where it was fitted.
#[derive(Clone, Debug)]
pub struct TimeModel {
    /// (family, seconds per unit of each of its terms, in order).
    prices: Vec<(&'static str, Vec<f64>)>,
    /// Where the prices come from, for the user.
    pub source: String,
    /// The model's error where it was fitted, for the user.
    pub error: String,
}

impl TimeModel {
    /// The built-in prices, fitted on the 2-core development VM.
    pub fn model() -> Self {
        TimeModel {
            prices: FAMILIES
                .iter()
                .map(|f| (f.name, f.cost_terms.iter().map(|t| t.seconds).collect()))
                .collect(),
            source: "the built-in CPU time model (fitted on the 2-core development VM; run `fedbandits calibrate \
                     --shapes` to fit this machine's)"
                .into(),
            error: format!("{FITTED_ERROR}; {CAVEAT}"),
        }
    }

    /// Seconds per agent-step of a cell of this cost.
    pub fn seconds_per_step(&self, cost: &Cost) -> f64 {
        let Some((_, prices)) = self.prices.iter().find(|p| p.0 == cost.family) else {
            return 0.0;
        };
        prices.iter().zip(cost.units).map(|(p, u)| p * u).sum()
    }

    /// The built-in prices scaled, per family, so that its reference
    /// workload (its first `bench` workload) runs at `rate(family)`
    /// agent-steps/s per thread; families without a rate keep theirs.
    fn scaled(mut self, rate: impl Fn(&Family) -> Option<f64>) -> Self {
        for (family, prices) in &mut self.prices {
            let Some(f) = FAMILIES.iter().find(|f| f.name == *family) else {
                continue;
            };
            let (Some(rate), Some(reference)) = (rate(f), reference_cost(f)) else {
                continue;
            };
            let model: f64 = prices.iter().zip(reference.units).map(|(p, u)| p * u).sum();
            if model > 0.0 && rate > 0.0 {
                let scale = 1.0 / rate / model;
                prices.iter_mut().for_each(|p| *p *= scale);
            }
        }
        self
    }

    /// One rate for every family's reference workload (`plan --rate`).
    pub fn uniform(rate: f64) -> Self {
        TimeModel {
            source: format!("--rate {rate:.3e} agent-steps/s per thread at each family's reference workload"),
            error: format!("{FITTED_ERROR}, before scaling to --rate; {CAVEAT}"),
            ..Self::model().scaled(|_| Some(rate))
        }
    }

    /// The built-in prices scaled to a calibration's reference rates: each
    /// family's reference workload on the CPU at the largest batch
    /// measured, divided by the calibration's threads; None when it
    /// measured no family's reference.
    pub fn calibrated(cal: &Calibration, path: &std::path::Path) -> Option<Self> {
        let threads = cal.machine.threads.max(1) as f64;
        let rate = |f: &Family| {
            let reference = f.workloads.first()?.0;
            let row = cal
                .rows
                .iter()
                .filter(|r| r.backend == "cpu" && r.workload == reference && r.agent_steps_per_s > 0.0)
                .max_by_key(|r| r.federations)?;
            Some(row.agent_steps_per_s / threads)
        };
        let list: Vec<String> = FAMILIES
            .iter()
            .filter_map(|f| rate(f).map(|r| format!("{} {r:.2e}", f.name)))
            .collect();
        (!list.is_empty()).then(|| TimeModel {
            source: format!(
                "this machine's calibration {} ({} threads; per thread: {})",
                path.display(),
                cal.machine.threads,
                list.join(", ")
            ),
            error: format!(
                "{FITTED_ERROR}, before scaling to this machine's reference rates (`fedbandits calibrate --shapes` \
                 fits the shapes here); {CAVEAT}"
            ),
            ..Self::model().scaled(rate)
        })
    }

    /// Prices fitted to a calibration's shapes (`calibrate --shapes`): per
    /// family with shapes, [`fit_prices`] from the built-in prices; the
    /// error is the measured/modelled range over the shapes. None when it
    /// timed no shape.
    pub fn fitted(cal: &Calibration, path: &std::path::Path) -> Option<Self> {
        let mut model = Self::model();
        let (mut low, mut high, mut n) = (f64::INFINITY, 0.0f64, 0usize);
        let mut families = Vec::new();
        for (family, prices) in &mut model.prices {
            let Some(f) = FAMILIES.iter().find(|f| f.name == *family) else {
                continue;
            };
            let rows: Vec<&ShapeRow> = cal.shapes.iter().filter(|s| s.family == f.name).collect();
            let Some(fit) = fit_family(f, &rows) else { continue };
            *prices = fit.prices;
            (low, high, n) = (low.min(fit.low), high.max(fit.high), n + rows.len());
            families.push(f.name);
        }
        (n > 0).then(|| TimeModel {
            source: format!(
                "this machine's shape calibration {} (one thread; {} fitted{})",
                path.display(),
                families.join(", "),
                if families.len() < FAMILIES.len() {
                    ", the other families built in"
                } else {
                    ""
                }
            ),
            error: format!(
                "measured time was {low:.2}x to {high:.2}x of the model on this machine's {n} calibration shapes \
                 ({}); {CAVEAT}",
                families.join(", ")
            ),
            ..model
        })
    }

    /// This machine's model for `threads` worker threads: a shape fit of
    /// this engine and CPU (any thread count: shapes are timed on one),
    /// else the reference rates of this engine, CPU and thread count, else
    /// the built-in model.
    pub fn here(threads: usize) -> Self {
        let mut shaped = None;
        let mut scaled = None;
        let (found, skipped) = calibrations_here();
        for (path, cal) in found {
            if shaped.is_none() {
                shaped = Self::fitted(&cal, &path);
            }
            if scaled.is_none() && cal.machine.threads == threads {
                scaled = Self::calibrated(&cal, &path);
            }
        }
        let mut model = shaped.or(scaled).unwrap_or_else(Self::model);
        if !skipped.is_empty() {
            model.source += &format!(
                "; ignored {} unusable calibration file(s): {} (`fedbandits calibrate` measures again)",
                skipped.len(),
                skipped.join("; ")
            );
        }
        model
    }
}

/// Every calibration of this engine and CPU in the cache directory, newest
/// first, and each calibration file that cannot be used, with why (it
/// does not parse, or a time or rate in it is negative, NaN or infinite):
/// those are named, never silently replaced by the built-in prices.
fn calibrations_here() -> (Vec<(std::path::PathBuf, Calibration)>, Vec<String>) {
    use crate::backend::calibration::{MachineKey, cache_dir};
    let key = MachineKey::here(1, None);
    let Some(rd) = cache_dir().ok().and_then(|d| std::fs::read_dir(d).ok()) else {
        return (Vec::new(), Vec::new());
    };
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let paths = rd.flatten().map(|e| e.path()).filter(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("calibration-"))
    });
    for p in paths {
        let read = std::fs::read_to_string(&p).map_err(|e| e.to_string());
        match read.and_then(|t| serde_yaml::from_str::<Calibration>(&t).map_err(|e| e.to_string())) {
            Err(why) => skipped.push(format!("{} ({why})", p.display())),
            Ok(cal) if cal.machine.engine != key.engine || cal.machine.cpu != key.cpu => {}
            Ok(cal) => match unusable_figure(&cal) {
                Some(why) => skipped.push(format!("{} ({why})", p.display())),
                None => found.push((p, cal)),
            },
        }
    }
    found.sort_by(|a, b| b.1.measured_at.cmp(&a.1.measured_at).then(a.0.cmp(&b.0)));
    (found, skipped)
}

/// The first time or rate of `cal` that is not a finite number >= 0 (0:
/// not measured).
fn unusable_figure(cal: &Calibration) -> Option<String> {
    let bad = |x: f64| !(x.is_finite() && x >= 0.0);
    if let Some(r) = cal.rows.iter().find(|r| bad(r.agent_steps_per_s)) {
        return Some(format!(
            "{} on {}: {} agent-steps/s",
            r.workload, r.backend, r.agent_steps_per_s
        ));
    }
    cal.shapes
        .iter()
        .find(|s| bad(s.seconds_per_step) || s.units.iter().any(|u| !u.1.is_finite()))
        .map(|s| format!("a {} shape: {} s per step", s.family, s.seconds_per_step))
}

/// A family's reference workload's cost (its first `bench` workload at
/// a horizon of 10,000).
fn reference_cost(f: &Family) -> Option<Cost> {
    let yaml = f.workloads.first()?.2.replace("{T}", "10000");
    let job = crate::job::Job::parse(std::path::Path::new("reference"), &yaml).ok()?;
    Some(job.cells.first()?.config.cost())
}

/// A family's prices fitted to its shapes, and measured/modelled over them.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyFit {
    /// Seconds per unit of each term.
    pub prices: Vec<f64>,
    /// Smallest measured/modelled ratio over the shapes.
    pub low: f64,
    /// Largest.
    pub high: f64,
}

/// Fits a family's prices to its timed shapes (rows whose units name
/// another term set are ignored); None without a usable row.
pub fn fit_family(f: &Family, rows: &[&ShapeRow]) -> Option<FamilyFit> {
    let terms = f.cost_terms;
    let units: Vec<(Vec<f64>, f64)> = rows
        .iter()
        .filter(|r| r.seconds_per_step > 0.0 && fits_terms(r, f))
        .map(|r| (r.units.iter().map(|u| u.1).collect(), r.seconds_per_step))
        .collect();
    if units.is_empty() {
        return None;
    }
    let prior: Vec<f64> = terms.iter().map(|t| t.seconds).collect();
    let prices = fit_prices(&units, &prior);
    let ratios = units
        .iter()
        .map(|(u, y)| y / u.iter().zip(&prices).map(|(a, p)| a * p).sum::<f64>());
    let (low, high) = ratios.fold((f64::INFINITY, 0.0f64), |(l, h), r| (l.min(r), h.max(r)));
    Some(FamilyFit { prices, low, high })
}

/// Whether a timed shape's units name the family's terms, in order (a
/// calibration of an engine whose model had other terms does not).
pub fn fits_terms(r: &ShapeRow, f: &Family) -> bool {
    r.units.len() == f.cost_terms.len() && r.units.iter().zip(f.cost_terms).all(|(u, t)| u.0 == t.name)
}

/// Non-negative prices c minimizing the squared relative error of
/// sum_j c_j units_ij against each measured seconds y_i, plus a weak pull
/// (weight [`PRIOR_WEIGHT`]) of each c_j / prior_j towards 1, so that a
/// term no shape separates keeps its prior. Solved in x = c / prior by
/// projected Gauss-Seidel on the normal equations (a convex quadratic
/// with a positive definite matrix: it converges).
pub fn fit_prices(rows: &[(Vec<f64>, f64)], prior: &[f64]) -> Vec<f64> {
    let n = prior.len();
    let mut g: Vec<Vec<f64>> = (0..n)
        .map(|j| (0..n).map(|k| if j == k { PRIOR_WEIGHT } else { 0.0 }).collect())
        .collect();
    let mut h = vec![PRIOR_WEIGHT; n];
    for (units, y) in rows {
        let b: Vec<f64> = units.iter().zip(prior).map(|(u, p)| u * p / y).collect();
        for ((gj, hj), bj) in g.iter_mut().zip(&mut h).zip(&b) {
            *hj += bj;
            gj.iter_mut().zip(&b).for_each(|(g, bk)| *g += bj * bk);
        }
    }
    let mut x = vec![1.0; n];
    for _ in 0..10_000 {
        let mut change = 0.0f64;
        for j in 0..n {
            let rest: f64 = (0..n).filter(|&k| k != j).map(|k| g[j][k] * x[k]).sum();
            let next = ((h[j] - rest) / g[j][j]).max(0.0);
            change = change.max((next - x[j]).abs());
            x[j] = next;
        }
        if change < 1e-12 {
            break;
        }
    }
    x.iter().zip(prior).map(|(x, p)| x * p).collect()
}

/// How strongly [`fit_prices`] keeps a price at its prior, against one
/// shape's squared relative error.
pub const PRIOR_WEIGHT: f64 = 1e-3;

#[cfg(test)]
mod tests {
    use super::*;

    /// Shapes timed at known prices are fitted back to them, whatever the
    /// prior; a term no shape has keeps its prior; the error range is 1.
    #[test]
    fn a_fit_recovers_the_prices_that_made_the_times() {
        let truth = [2e-7, 1e-9, 3e-11];
        let units = [
            [1.0, 10.0, 8.0],
            [1.0, 1000.0, 1000.0],
            [1.0, 5000.0, 1000.0],
            [1.4, 1400.0, 175_000.0],
            [1.1, 3520.0, 36_044.8],
        ];
        let rows: Vec<(Vec<f64>, f64)> = units
            .iter()
            .map(|u| {
                let y = u.iter().zip(truth).map(|(a, p)| a * p).sum();
                (u.to_vec(), y)
            })
            .collect();
        let fit = fit_prices(&rows, &[1e-6, 1e-8, 1e-10]);
        for (f, t) in fit.iter().zip(truth) {
            assert!((f / t - 1.0).abs() < 1e-3, "{fit:?}");
        }
        let with_unused: Vec<(Vec<f64>, f64)> = rows
            .iter()
            .map(|(u, y)| ([u.as_slice(), &[0.0]].concat(), *y))
            .collect();
        let fit = fit_prices(&with_unused, &[1e-6, 1e-8, 1e-10, 5e-9]);
        assert_eq!(fit[3], 5e-9);
        // A price the data want negative is 0, not negative.
        let fit = fit_prices(&[(vec![1.0, 1.0], 1.0), (vec![1.0, 2.0], 1.0)], &[1.0, 1.0]);
        assert!(fit[1] >= 0.0 && (fit[0] - 1.0).abs() < 0.01, "{fit:?}");
    }

    /// The built-in model prices every family's reference workload at its
    /// family's built-in rate, and `--rate` rescales it exactly.
    #[test]
    fn a_rate_prices_each_reference_workload_at_it() {
        for f in FAMILIES {
            let reference = reference_cost(f).unwrap();
            let rate = 1.0 / TimeModel::uniform(1.25e6).seconds_per_step(&reference);
            assert!((rate / 1.25e6 - 1.0).abs() < 1e-12, "{}: {rate}", f.name);
        }
    }

    /// Every family's shapes load, and together they vary each of its
    /// terms independently (the units' matrix has full column rank), so
    /// `calibrate --shapes` can tell every term apart.
    #[test]
    fn every_familys_shapes_span_its_terms() {
        for f in FAMILIES {
            assert!(f.cost_terms.len() <= crate::algo::cell::MAX_COST_TERMS, "{}", f.name);
            let rows: Vec<Cost> = f
                .shapes
                .iter()
                .map(|(name, yaml, t)| {
                    let text = yaml.replace("{T}", &t.to_string());
                    let job = crate::job::Job::parse(std::path::Path::new(name), &text).unwrap();
                    job.cells[0].config.cost()
                })
                .collect();
            assert!(rows.iter().all(|c| c.family == f.name), "{}", f.name);
            // Gram-Schmidt on the columns, each scaled to unit length.
            let mut basis: Vec<Vec<f64>> = Vec::new();
            for (j, term) in f.cost_terms.iter().enumerate() {
                let mut v: Vec<f64> = rows.iter().map(|c| c.units[j]).collect();
                let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
                assert!(norm > 0.0, "{}: no shape has units of {}", f.name, term.name);
                v.iter_mut().for_each(|x| *x /= norm);
                for b in &basis {
                    let dot: f64 = v.iter().zip(b).map(|(x, y)| x * y).sum();
                    v.iter_mut().zip(b).for_each(|(x, y)| *x -= dot * y);
                }
                let rest = v.iter().map(|x| x * x).sum::<f64>().sqrt();
                assert!(
                    rest > 1e-3,
                    "{}: {} is a combination of the other terms",
                    f.name,
                    term.name
                );
                basis.push(v.iter().map(|x| x / rest).collect());
            }
        }
    }
}
