//! `fedbandits audit JOB --bits`: the exact-bits test of every private
//! cell's mechanism ([`crate::privacy::bits`]). Each cell draws `trials`
//! elementary releases (a statistic at one end of the worst neighbouring
//! pair plus one noise draw, as its mechanism adds it) and asks, bit for
//! bit, whether the other end could have produced each. A release the
//! neighbour cannot produce rules it out with certainty, which no finite
//! epsilon allows: the cell fails, with a Clopper-Pearson lower bound on
//! the delta every figure would need. The float samplers fail (the
//! Laplace by an exact search of its words; the Gaussian, Box-Muller on two
//! words, by a one-sided cancellation test whose pass means only that no
//! release was shown unreachable); the lattice samplers (`sampler:
//! discrete`) pass, and so does sdp_vecsum (sampler `binomial`: its
//! releases are integer sums under either setting). Mechanisms with no
//! such test are listed with the reason. The table is printed; the command exits 1 when a
//! cell fails.

use super::CliError;
use crate::algo::audit::{AuditError, bits};
use crate::job::Job;
use std::path::{Path, PathBuf};

/// Runs the exact-bits test on every cell of `job_path` with `trials`
/// releases each; `confidence` for the lower bounds.
pub fn run(job_path: &Path, out: Option<PathBuf>, trials: u64, confidence: f64) -> Result<String, CliError> {
    let mut job = Job::load(job_path)?;
    if let Some(o) = out {
        job.output = o;
    }
    let mut text = format!(
        "audit --bits {}: {trials} releases per cell, confidence {confidence}\n{:>4}  {:<14} {:<9} {:>9} {:>11} {:>10}  verdict\n",
        job.name, "#", "mechanism", "sampler", "releases", "unreachable", "delta_lb"
    );
    let (mut tested, mut failures) = (0, Vec::new());
    for cell in &job.cells {
        let name = crate::algo::audit::mechanism_name(&cell.config);
        match bits(&cell.config, trials, job.seed ^ cell.index as u64) {
            Ok((o, sampler)) => {
                tested += 1;
                let lb = o.delta_lower_bound(confidence);
                let verdict = if o.unfound > 0 {
                    format!("ERROR: the search missed {} releases from their own input", o.unfound)
                } else if o.unreachable > 0 {
                    format!("FAIL: a release rules the neighbour out (delta >= {lb:.3} at every epsilon)")
                } else if sampler == "discrete" {
                    "pass: every release is reachable from the neighbour".into()
                } else if sampler == "binomial" {
                    "pass: every release is reachable from the neighbour (integer sums; a Binomial count in [0, t])"
                        .into()
                } else {
                    "pass: no release was shown unreachable (the float test is one-sided)".into()
                };
                if o.unreachable > 0 || o.unfound > 0 {
                    failures.push(format!("cell {} ({}): {verdict}", cell.index, cell.label()));
                }
                text += &format!(
                    "{:>4}  {name:<14} {sampler:<9} {:>9} {:>11} {lb:>10.4}  {verdict}  [{}]\n",
                    cell.index,
                    o.releases,
                    o.unreachable,
                    cell.label()
                );
            }
            Err(AuditError::NotPrivate) => {}
            Err(e) => text += &format!("{:>4}  {name:<14} not tested: {e}  [{}]\n", cell.index, cell.label()),
        }
    }
    if tested == 0 {
        return Err(CliError::Usage(format!(
            "{}: no cell has a mechanism the exact-bits test covers (see the lines above)\n{text}",
            job_path.display()
        )));
    }
    if failures.is_empty() {
        Ok(text)
    } else {
        Err(CliError::AuditFailed {
            report: text,
            failures: failures.join("\n"),
        })
    }
}
