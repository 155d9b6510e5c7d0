//! `fedbandits audit`: empirical privacy audits of a job's cells
//! ([`crate::algo::audit`], [`crate::privacy::audit`]), one table row per
//! cell and view, printed and written atomically to
//! `<output>/<job>/_audit/audit.parquet` (underscore: Parquet dataset readers of the job directory skip it).
//!
//! Every upper-bound column the accountant writes for a cell
//! (`acct_epsilon`, `acct_epsilon_zcdp`, `acct_epsilon_pure`,
//! `acct_epsilon_basic`, and for the mechanism's own view
//! `acct_epsilon_sums`) is compared with the audit's lower bound at that
//! column's delta; a lower bound above any of them fails the cell (the
//! verdict names the column) and the command exits 1 after writing the
//! table. The schedule attack is tested against the columns that claim the
//! whole run (not `acct_epsilon_sums`). The paper's claim
//! (`paper_claimed_epsilon`) is reported as contradicted, not failed: it is
//! a claim, not a bound.

use super::CliError;
use crate::algo::CellConfig;
use crate::algo::audit::{harness, mechanism_name, schedule_attack, schedule_attackable, schedule_view_epsilon};
use crate::job::{Cell, Job};
use crate::output::{AuditRow, audit_batch, audit_schema, metadata, write_parquet_atomic_with};
use crate::privacy::accountant::Accounting;
use crate::privacy::audit::AuditOutcome;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to audit and how hard.
#[derive(Clone, Copy, Debug)]
pub struct AuditSettings {
    /// Trials per world and half for mechanisms.
    pub trials: u64,
    /// Trials per world and half for the schedule attack.
    pub attack_trials: u64,
    /// Confidence of every bound.
    pub confidence: f64,
    /// Noise multiplier (1: as calibrated).
    pub noise_scale: f64,
}

/// The mechanism's name, the accountant's figure for the mechanism's view
/// and which it is: the run's (`exact`), or the noisy sums' alone (`sums`)
/// where the run has none because something else released is not covered.
fn claim(cell: &CellConfig, acct: Option<&Accounting>) -> (String, Option<f64>, String) {
    let name = mechanism_name(cell);
    let (eps, fig) = match acct {
        Some(a) if a.epsilon.is_some() => (a.epsilon, "exact"),
        Some(a) if a.epsilon_sums.is_some() => (a.epsilon_sums, "sums"),
        _ => (None, "none"),
    };
    (name.into(), eps, fig.into())
}

/// Every upper-bound column the cell's accounting writes for the view of
/// the mechanism's releases, with the delta it is stated at: (column,
/// epsilon, delta). `acct_epsilon_sums` bounds that view (the noisy sums)
/// but not the run.
fn upper_bounds(acct: &Accounting, target_delta: Option<f64>) -> Vec<(&'static str, f64, f64)> {
    let mut v = run_bounds(acct, target_delta);
    if let Some(e) = acct.epsilon_sums {
        v.push(("acct_epsilon_sums", e, target_delta.unwrap_or(0.0)));
    }
    v
}

/// The upper-bound columns that claim to cover everything the agent
/// releases (the schedule included): what the schedule attack tests.
fn run_bounds(acct: &Accounting, target_delta: Option<f64>) -> Vec<(&'static str, f64, f64)> {
    let d = target_delta.unwrap_or(0.0);
    let mut v = Vec::new();
    if let Some(e) = acct.epsilon {
        v.push(("acct_epsilon", e, d));
    }
    if let Some(e) = acct.epsilon_zcdp {
        v.push(("acct_epsilon_zcdp", e, d));
    }
    if let Some(e) = acct.epsilon_pure {
        v.push(("acct_epsilon_pure", e, 0.0));
    }
    if let Some((e, bd)) = acct.basic {
        v.push(("acct_epsilon_basic", e, bd));
    }
    v
}

/// A failed verdict: each column a lower bound exceeds (and the claims it
/// contradicts).
#[derive(Debug, thiserror::Error)]
#[error("FAIL: {}", .0.join("; "))]
pub struct AuditFailure(pub Vec<String>);

/// The verdict on one audited mechanism: each upper-bound column against
/// the audit's lower bound at that column's delta (the same test's counts;
/// its threshold was chosen on the other half, so the bound holds at any
/// delta), and the paper's claim likewise (a claim: contradicted, not
/// failed). `Err` names every column a lower bound exceeds.
fn verdict(
    acct: &Accounting,
    bounds: Vec<(&'static str, f64, f64)>,
    target_delta: Option<f64>,
    o: &crate::privacy::audit::AuditOutcome,
) -> Result<String, AuditFailure> {
    use crate::privacy::audit::epsilon_lower_bound;
    let lb = |delta: f64| {
        epsilon_lower_bound(
            o.false_positives,
            o.trials,
            o.false_negatives,
            o.trials,
            delta,
            o.confidence,
        )
    };
    let mut failed = Vec::new();
    if bounds.is_empty() {
        return Ok("no upper-bound figure to test (every epsilon column is null)".into());
    }
    for (col, e, delta) in bounds {
        let l = lb(delta);
        if l > e * (1.0 + 1e-9) {
            failed.push(format!(
                "{col} = {e:.4} is below the audit's lower bound {l:.4} (delta {delta:.3e})"
            ));
        }
    }
    let mut notes = Vec::new();
    if let Some(c) = acct.paper_claimed {
        let l = lb(target_delta.unwrap_or(0.0));
        if l > c * (1.0 + 1e-9) {
            notes.push(format!(
                "paper_claimed_epsilon = {c:.4} is contradicted (lower bound {l:.4})"
            ));
        }
    }
    if failed.is_empty() {
        Ok(if notes.is_empty() {
            "pass".into()
        } else {
            format!("pass; {}", notes.join("; "))
        })
    } else {
        failed.extend(notes);
        Err(AuditFailure(failed))
    }
}

/// Runs the audit of every cell of `job_path`; returns the table text.
pub fn run(job_path: &Path, out: Option<PathBuf>, s: AuditSettings) -> Result<String, CliError> {
    let mut job = Job::load(job_path)?;
    if let Some(o) = out {
        job.output = o;
    }
    check_settings(&s)?;
    let mut text = format!(
        "audit {}: {} trials per world (mechanisms), {} (schedule), confidence {}, noise x {}\n",
        job.name, s.trials, s.attack_trials, s.confidence, s.noise_scale,
    );
    let mut rows: Vec<(AuditRow, &Cell)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for cell in &job.cells {
        if let Some(row) = audit_mechanism(&job, cell, &s, &mut text, &mut failures) {
            rows.push((row, cell));
        }
        if let Some(row) = audit_schedule(&job, cell, &s, &mut text, &mut failures) {
            rows.push((row, cell));
        }
    }
    if rows.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: no cell has a private mechanism this auditor covers (see the lines above)\n{text}",
            job_path.display()
        )));
    }
    text += &table(&job, &rows);
    let rows: Vec<AuditRow> = rows.into_iter().map(|(r, _)| r).collect();
    let batch = audit_batch(&job, &rows).map_err(crate::sim::runner::RunError::from)?;
    let path = job.results_dir().join("_audit").join("audit.parquet");
    let kv = metadata(
        &job,
        &[
            ("audit_trials", s.trials.to_string()),
            ("audit_attack_trials", s.attack_trials.to_string()),
            ("audit_confidence", s.confidence.to_string()),
            ("audit_noise_scale", s.noise_scale.to_string()),
        ],
    );
    write_parquet_atomic_with(&path, audit_schema(), &[batch], kv).map_err(crate::sim::runner::RunError::from)?;
    text += &format!("wrote {}\n", path.display());
    if failures.is_empty() {
        Ok(text)
    } else {
        Err(CliError::AuditFailed {
            report: text,
            failures: failures.join("\n"),
        })
    }
}

/// The settings' ranges: confidence in (0, 1), at least one trial, a
/// positive noise scale.
fn check_settings(s: &AuditSettings) -> Result<(), CliError> {
    if !(s.confidence > 0.0 && s.confidence < 1.0) || s.trials == 0 || s.attack_trials == 0 {
        return Err(CliError::Usage(format!(
            "--confidence {} must lie in (0, 1) and --trials {} / --attack-trials {} must be at least 1",
            s.confidence, s.trials, s.attack_trials
        )));
    }
    if !(s.noise_scale.is_finite() && s.noise_scale > 0.0) {
        return Err(CliError::Usage(format!(
            "--noise-scale {} must be a number > 0",
            s.noise_scale
        )));
    }
    Ok(())
}

/// A row of `cell`'s audit: the view's fields are filled by the caller.
fn row(cell: &Cell, s: &AuditSettings, view: &str, mechanism: &str, outcome: AuditOutcome) -> AuditRow {
    let (target_epsilon, target_delta) = cell.config.target();
    AuditRow {
        cell_id: cell.id.clone(),
        algorithm: cell.algorithm.clone(),
        environment: cell.environment.clone(),
        label: cell.label(),
        view: view.into(),
        mechanism: mechanism.into(),
        target_epsilon,
        target_delta,
        acct_epsilon: None,
        acct_figure: "none".into(),
        audit_delta: 0.0,
        noise_scale: s.noise_scale,
        outcome,
        wall_seconds: 0.0,
        verdict: String::new(),
    }
}

/// The audit of `cell`'s mechanism (its engine release code driven by the
/// harness), its verdict against every upper-bound figure (a failure is
/// recorded); None with the reason in `text` where not audited.
fn audit_mechanism(
    job: &Job,
    cell: &Cell,
    s: &AuditSettings,
    text: &mut String,
    failures: &mut Vec<String>,
) -> Option<AuditRow> {
    let acct = cell.config.accounting();
    let (mechanism, acct_epsilon, acct_figure) = claim(&cell.config, acct.as_ref());
    let (h, delta) = match harness(&cell.config, s.noise_scale) {
        Ok(hd) => hd,
        Err(why) => {
            *text += &format!("{}: mechanism not audited: {why}\n", job.short_label(cell));
            return None;
        }
    };
    let key = crate::rng::fold_key(&[job.seed, cell.index as u64, 0xa0d1]);
    let t0 = Instant::now();
    let o = h.run(key, s.trials, delta, s.confidence);
    let target_delta = cell.config.target().1;
    let verdict = match acct
        .as_ref()
        .map(|a| verdict(a, upper_bounds(a, target_delta), target_delta, &o))
    {
        Some(Ok(v)) => v,
        Some(Err(v)) => {
            failures.push(format!("{}: {v}", job.short_label(cell)));
            v.to_string()
        }
        None => "no figure".into(),
    };
    *text += &format!("{}: mechanism: {}\n", job.short_label(cell), h.source());
    Some(AuditRow {
        acct_epsilon,
        acct_figure,
        audit_delta: delta,
        wall_seconds: t0.elapsed().as_secs_f64(),
        verdict,
        ..row(cell, s, "mechanism", &mechanism, o)
    })
}

/// The schedule attack on a private centralized cell whose sync times
/// depend on the data (FedUCB) or are fixed (Private-FedLinUCB, the
/// control), tested against every figure that claims to cover the whole
/// run (a lower bound above one is a failure, recorded): FedUCB's
/// `acct_epsilon` is null because its schedule is not covered, and
/// `acct_epsilon_sums` claims the noisy sums only.
fn audit_schedule(
    job: &Job,
    cell: &Cell,
    s: &AuditSettings,
    text: &mut String,
    failures: &mut Vec<String>,
) -> Option<AuditRow> {
    if !schedule_attackable(&cell.config) {
        return None;
    }
    let t0 = Instant::now();
    let acct = cell.config.accounting();
    let target_delta = cell.config.target().1;
    let pure = schedule_view_epsilon(&cell.config);
    match schedule_attack(&cell.config, job.seed, s.attack_trials, s.confidence, s.noise_scale) {
        Ok((o, dataset, round)) => {
            *text += &format!(
                "{}: schedule attack on dataset {dataset}, silo 1's user of round {round}: the adversary's \
                 high-leverage observation or none{}\n",
                job.short_label(cell),
                pure.map_or(String::new(), |e| format!(
                    "; the first sync round is the sparse vector test's alone: {e:.4}-DP, tested at delta 0"
                ))
            );
            let with_pure = |a: &Accounting| {
                let mut v = run_bounds(a, target_delta);
                v.extend(pure.map(|e| ("schedule_share x epsilon (first sync)", e, 0.0)));
                v
            };
            let verdict = match acct.as_ref().map(|a| (a, with_pure(a))) {
                Some((a, bounds)) if !bounds.is_empty() => match verdict(a, bounds, target_delta, &o) {
                    Ok(v) => v,
                    Err(v) => {
                        failures.push(format!("{} (schedule): {v}", job.short_label(cell)));
                        v.to_string()
                    }
                },
                Some((a, _)) => match a.epsilon_sums {
                    Some(e) => format!(
                        "no figure claims the run (acct_epsilon null); acct_epsilon_sums = {e:.4} covers the sums only"
                    ),
                    None => "no figure claims the run (acct_epsilon null)".into(),
                },
                None => "no figure (not private)".into(),
            };
            // A private schedule's row states the view's own pure figure
            // at delta 0; otherwise the run's figure at the target delta.
            let (acct_epsilon, acct_figure, audit_delta) = match pure {
                Some(e) => (Some(e), "schedule_pure".to_string(), 0.0),
                None => (
                    acct.as_ref().and_then(|a| a.epsilon),
                    if acct.as_ref().is_some_and(|a| a.epsilon.is_some()) {
                        "exact".to_string()
                    } else {
                        "none".to_string()
                    },
                    target_delta.unwrap_or(0.0),
                ),
            };
            Some(AuditRow {
                acct_epsilon,
                acct_figure,
                audit_delta,
                wall_seconds: t0.elapsed().as_secs_f64(),
                verdict,
                ..row(cell, s, "schedule", "sync_times", o)
            })
        }
        Err(why) => {
            *text += &format!("{}: schedule not attacked: {why}\n", job.short_label(cell));
            None
        }
    }
}

/// The printed table of the audit's rows.
fn table(job: &Job, rows: &[(AuditRow, &Cell)]) -> String {
    let lw = job
        .cells
        .iter()
        .map(|c| job.short_label(c).len())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut table = format!(
        "{:<lw$} {:<10} {:<12} {:>8} {:>10} {:>10} {:>10} {:>10}  verdict\n",
        "cell", "view", "mechanism", "target", "acct_eps", "delta", "eps_lb", "advantage"
    );
    let fmt = |v: Option<f64>| v.map_or("null".to_string(), crate::privacy::accountant::fmt_epsilon);
    for (r, cell) in rows {
        table += &format!(
            "{:<lw$} {:<10} {:<12} {:>8} {:>10} {:>10} {:>10.3} {:>10.4}  {}\n",
            job.short_label(cell),
            r.view,
            r.mechanism,
            fmt(r.target_epsilon),
            fmt(r.acct_epsilon),
            format!("{:.3e}", r.audit_delta),
            r.outcome.epsilon_lb,
            r.outcome.advantage,
            if r.verdict.starts_with("FAIL") {
                "FAIL"
            } else {
                r.verdict.as_str()
            }
        );
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::accountant::{Mechanism, account, gaussian_mechanism};

    /// FedUCB's shape: a Gaussian tree whose sync schedule is released and
    /// not covered (`uncovered`), or the same mechanism with nothing
    /// uncovered (a figure that claims the run).
    fn accounting(uncovered: bool) -> Accounting {
        account(&Mechanism {
            target: (10.0, 0.1),
            uncovered: uncovered.then(|| "the schedule".to_string()),
            ..gaussian_mechanism(12, 10.0, 2.0)
        })
    }

    /// A schedule attack that separates the worlds perfectly: 2000 trials,
    /// no false positive or negative (lower bound about 6.8 at delta 0.1).
    fn perfect() -> AuditOutcome {
        AuditOutcome {
            trials: 2000,
            threshold: 0.0,
            false_positives: 0,
            false_negatives: 0,
            epsilon_lb: 0.0,
            confidence: 0.95,
            advantage: 1.0,
        }
    }

    #[test]
    fn the_schedule_is_tested_against_figures_that_claim_the_run_only() {
        let partial = accounting(true);
        assert_eq!(partial.epsilon, None);
        // mu = sqrt(12) 2 / 10 = 0.69.
        assert!(
            partial.epsilon_sums.is_some_and(|e| e > 0.0 && e < 2.0),
            "{:?}",
            partial.epsilon_sums
        );
        // The sums' figure bounds the mechanism's view, not the run.
        assert!(run_bounds(&partial, Some(0.1)).is_empty());
        let cols: Vec<&str> = upper_bounds(&partial, Some(0.1)).iter().map(|b| b.0).collect();
        assert_eq!(cols, ["acct_epsilon_sums"]);
        // A figure that claims the run fails against the attack's bound.
        let whole = accounting(false);
        let bounds = run_bounds(&whole, Some(0.1));
        assert!(bounds.iter().any(|b| b.0 == "acct_epsilon"));
        let v = verdict(&whole, bounds, Some(0.1), &perfect());
        assert!(
            v.as_ref().is_err_and(|e| {
                let e = e.to_string();
                e.contains("acct_epsilon = ") && e.contains("is below the audit's lower bound")
            }),
            "{v:?}"
        );
    }
}
