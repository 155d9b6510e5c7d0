//! What `fedbandits audit` audits in a cell, whatever its family: its
//! privacy mechanism set up with the cell's own calibration ([`harness`],
//! for [`crate::privacy::audit`]) and, where the server sees a schedule the
//! data decide, the schedule attack ([`schedule_attack`]). Each family
//! says what its cells release through [`Audit`] (in its folder:
//! `audit.rs`, next to its mechanisms), which the cell's configuration
//! hands out ([`crate::algo::FamilyConfig::auditor`]); a family without one
//! is named and not audited.
//!
//! **Neighbouring inputs** follow the cell's `neighbours` relation and are
//! the worst pair its sensitivity is computed for
//! ([`crate::privacy::sensitivity`]); each family's `audit.rs` states its
//! pair. `noise_scale` multiplies the mechanism's noise (1: as calibrated;
//! the auditor's self-test uses 1/4).

use super::CellConfig;
use crate::privacy::audit::{AuditOutcome, Harness};
use crate::privacy::bits::BitsOutcome;

/// What a family's cell offers the auditor: its mechanism, and its
/// schedule where the server sees one the data may decide.
pub trait Audit {
    /// The mechanism's name, as the audit table writes it.
    fn mechanism_name(&self) -> &'static str;

    /// The mechanism as an audit harness with its noise scaled by
    /// `noise_scale`, and the delta to audit at.
    fn harness(&self, noise_scale: f64) -> Result<(Harness, f64), AuditError>;

    /// The exact-bits test of the mechanism's elementary release
    /// ([`crate::privacy::bits`]): `trials` releases from one input of the
    /// worst neighbouring pair, each tested for whether the other input
    /// could produce exactly its bits, with the sampler's name.
    fn bits(&self, _trials: u64, _seed: u64) -> Result<(BitsOutcome, &'static str), AuditError> {
        self.harness(1.0)?;
        Err(AuditError::NoBitsTest(self.mechanism_name()))
    }

    /// Whether [`Audit::schedule_attack`] applies.
    fn schedule_attackable(&self) -> bool {
        false
    }

    /// The pure epsilon the schedule view claims where the schedule is
    /// private (decided by a pure-DP test alone), the figure the attack is
    /// tested against at delta = 0; None otherwise.
    fn schedule_view_epsilon(&self) -> Option<f64> {
        None
    }

    /// The schedule attack (`trials` runs per world and half at
    /// `confidence`, the schedule's noise scaled by `noise_scale`): the
    /// outcome, the dataset and the round the adversary chose.
    fn schedule_attack(
        &self,
        _seed: u64,
        _trials: u64,
        _confidence: f64,
        _noise_scale: f64,
    ) -> Result<(AuditOutcome, u64, u64), AuditError> {
        Err(AuditError::NoScheduleAttack)
    }
}

/// Why a cell cannot be audited (the audit prints it in the cell's row).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The cell releases nothing private.
    #[error("not private")]
    NotPrivate,
    /// The algorithm has no mechanism this auditor covers.
    #[error("{0} has no privacy mechanism")]
    NoMechanism(String),
    /// A family whose mechanisms the auditor does not cover.
    #[error("the auditor covers no mechanism of family {0}")]
    NoAuditor(&'static str),
    /// No communication round within the horizon (P-FCB).
    #[error("no communication round up to T = {0}")]
    NoCommunication(u64),
    /// No exact-bits test of this mechanism's sampler.
    #[error(
        "{0}: no exact-bits test (the test searches the float Laplace's 2^53 words, tests float Gaussian \
         releases by cancellation and lattice releases exactly; this mechanism's noise is none of these)"
    )]
    NoBitsTest(&'static str),
    /// The cell's family has no schedule the attack drives.
    #[error("the schedule attack applies to no algorithm of this family")]
    NoScheduleAttack,
    /// The schedule attack needs an adversary beside silo 1.
    #[error("the schedule attack needs M >= 2 (silo 1 and the adversary)")]
    TooFewAgents,
    /// An algorithm whose sync schedule the attack does not drive.
    #[error("{0}: no schedule to attack")]
    NoSchedule(String),
    /// The attacked federation's batch could not be built or run.
    #[error(transparent)]
    Batch(#[from] crate::backend::BatchError),
}

/// The cell's auditor, or why it has none.
fn auditor(cell: &CellConfig) -> Result<&dyn Audit, AuditError> {
    cell.family().auditor().ok_or(AuditError::NoAuditor(cell.family_name()))
}

/// The name of a private cell's mechanism, as the audit table writes it
/// (`none` for a family without an auditor).
pub fn mechanism_name(cell: &CellConfig) -> &'static str {
    auditor(cell).map_or("none", Audit::mechanism_name)
}

/// Whether [`schedule_attack`] applies to the cell.
pub fn schedule_attackable(cell: &CellConfig) -> bool {
    auditor(cell).is_ok_and(Audit::schedule_attackable)
}

/// The pure epsilon the cell's schedule view claims, if its schedule is
/// private ([`Audit::schedule_view_epsilon`]).
pub fn schedule_view_epsilon(cell: &CellConfig) -> Option<f64> {
    auditor(cell).ok().and_then(Audit::schedule_view_epsilon)
}

/// The exact-bits test of the cell's mechanism ([`Audit::bits`]).
pub fn bits(cell: &CellConfig, trials: u64, seed: u64) -> Result<(BitsOutcome, &'static str), AuditError> {
    auditor(cell)?.bits(trials, seed)
}

/// The cell's mechanism as an audit harness with its noise scaled by
/// `noise_scale`, and the delta to audit at; `Err(why)` when the cell has
/// no mechanism this auditor covers.
pub fn harness(cell: &CellConfig, noise_scale: f64) -> Result<(Harness, f64), AuditError> {
    auditor(cell)?.harness(noise_scale)
}

/// The schedule attack on the cell ([`Audit::schedule_attack`]): the
/// outcome, the dataset and the round the adversary chose.
pub fn schedule_attack(
    cell: &CellConfig,
    seed: u64,
    trials: u64,
    confidence: f64,
    noise_scale: f64,
) -> Result<(AuditOutcome, u64, u64), AuditError> {
    auditor(cell)?.schedule_attack(seed, trials, confidence, noise_scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(yaml: &str) -> CellConfig {
        let job = crate::job::Job::parse(std::path::Path::new("audit.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"));
        job.cells[0].config.clone()
    }

    /// The auditor's self-test: with 2 x 20000 trials per world
    /// at 99% confidence, a correctly calibrated mechanism's lower bound
    /// stays below the accountant's epsilon, and the same mechanism with its
    /// noise scaled by 1/4 is caught: its bound exceeds both the target and
    /// the accountant's epsilon for the calibrated noise. For the Gaussian
    /// tree (Private-FedLinUCB ldp, the slides' relation) and the Laplace
    /// partial sums (Fed_UCB).
    #[test]
    fn the_auditor_catches_a_quarter_of_the_noise_and_passes_the_real_mechanism() {
        let cells = [
            cell(
                "horizon: 800\nalgorithm: private_fedlinucb\nenvironment: linear_gap\n\
                 params: {m: 2, d: 2, k: 4, epsilon: 1, delta: 0.1, batch_size: 25, calibration: theorem}\n",
            ),
            cell(
                "horizon: 1024\nalgorithm: fed_ucb_gossip\nenvironment: mab_heterogeneous\n\
                 params: {m: 2, arms: 2, graph: complete, epsilon: 1}\n",
            ),
        ];
        for c in &cells {
            let a = c.accounting().unwrap();
            let claim = a.epsilon.unwrap();
            let target = c.target().0.unwrap();
            let (h, delta) = harness(c, 1.0).unwrap();
            let ok = h.run(7, 20_000, delta, 0.99);
            let (h4, _) = harness(c, 0.25).unwrap();
            let caught = h4.run(7, 20_000, delta, 0.99);
            println!(
                "claim {claim:.3} target {target}: calibrated eps_lb {:.3} (adv {:.3}), noise/4 eps_lb {:.3} (adv {:.3})",
                ok.epsilon_lb, ok.advantage, caught.epsilon_lb, caught.advantage
            );
            assert!(
                ok.epsilon_lb <= claim,
                "the accountant's {claim} is below the audit's {ok:?}"
            );
            assert!(
                caught.epsilon_lb > claim.max(target),
                "noise/4 not caught: {caught:?} vs claim {claim}, target {target}"
            );
        }
    }

    /// P-FCB's message (w~, y~) is one Gaussian release with mu = Delta /
    /// sigma = epsilon_1 / sqrt(ln(1.25 / delta)), whose exact epsilon at
    /// delta (mu-GDP, Dong, Roth & Su 2019: delta(eps) = Phi(-eps/mu +
    /// mu/2) - e^eps Phi(-eps/mu - mu/2)) is 0.146 at the paper's settings
    /// and 1.004 with noise/4. The audit (10^5 trials per world and half,
    /// 99%) must stay below both the exact value and the accountant's zCDP
    /// figure (0.414) and come within 0.1 / 0.2 of the exact value; with
    /// noise/4 it must exceed the calibrated accountant's figure.
    #[test]
    fn the_p_fcb_audit_is_nearly_tight_and_catches_a_quarter_of_the_noise() {
        use statrs::distribution::{ContinuousCDF, Normal};
        let phi = |x: f64| Normal::new(0.0, 1.0).map_or(f64::NAN, |n| n.cdf(x));
        let exact = |mu: f64, delta: f64| {
            let gap = |e: f64| phi(-e / mu + mu / 2.0) - e.exp() * phi(-e / mu - mu / 2.0) - delta;
            let (mut lo, mut hi) = (0.0, 50.0);
            for _ in 0..200 {
                let mid: f64 = 0.5 * (lo + hi);
                if gap(mid) > 0.0 { lo = mid } else { hi = mid }
            }
            lo
        };
        let c = cell(
            "horizon: 100000\nalgorithm: p_fcb\nenvironment: procurement\n\
             params: {m: 10, producers: 30, epsilon: 1, delta: 0.01, calibration: paper}\n",
        );
        let claim = c.accounting().unwrap().epsilon.unwrap();
        let mu = (1.0 / (2.0 * 1e5f64.ln()) + 0.25) / 125f64.ln().sqrt();
        for (scale, slack) in [(1.0, 0.1), (0.25, 0.2)] {
            let want = exact(mu / scale, 0.01);
            let (h, delta) = harness(&c, scale).unwrap();
            let o = h.run(11, 100_000, delta, 0.99);
            println!(
                "noise x {scale}: exact {want:.3}, audit {:.3} (adv {:.4}), accountant {claim:.3}",
                o.epsilon_lb, o.advantage
            );
            assert!(
                o.epsilon_lb <= want && o.epsilon_lb > want - slack,
                "{o:?} vs exact {want}"
            );
            if scale == 1.0 {
                assert!(o.epsilon_lb <= claim);
            } else {
                assert!(o.epsilon_lb > claim, "noise/4 not caught: {o:?} vs {claim}");
            }
        }
    }
}
