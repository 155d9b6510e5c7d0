//! The combinatorial family's cells as `fedbandits audit` sees them
//! ([`crate::algo::audit::Audit`]): P-FCB's message, one round's
//! procurement of k good units from one producer against none.

use super::batch::{p_fcb_lattice_message, p_fcb_message, p_fcb_noise_scale};
use super::{CombAlgorithm, CombConfig, p_fcb};
use crate::algo::audit::{Audit, AuditError};
use crate::privacy::audit::{Harness, Release};
use crate::privacy::bits::{BitsOutcome, EntryTest, vector_bits_test};

/// Round 1's message about one producer of capacity k = 1 with the noise
/// times `noise_scale`: a function of (w, y, key) writing (w~, y~), and the
/// lattice step under `sampler: discrete`.
type Message = (Release, Option<f64>);

impl CombConfig {
    /// The backend's own message function for round 1 (the largest
    /// budget), the noise times `noise_scale`.
    fn message(&self, noise_scale: f64) -> Result<(Message, f64), AuditError> {
        match self.algorithm {
            CombAlgorithm::PFcb => {}
            CombAlgorithm::NonFederated | CombAlgorithm::Fcb => return Err(AuditError::NotPrivate),
        }
        let p = &self.private;
        let eps = p_fcb::epsilons(p, self.horizon);
        let Some(&eps1) = eps.first() else {
            return Err(AuditError::NoCommunication(self.horizon));
        };
        let sigma = p_fcb_noise_scale(p.delta, eps1) * noise_scale;
        let lattice = p_fcb::message_lattice(p, self.horizon).ok().flatten().map(|l| l.step);
        let f: Release = match lattice {
            Some(step) => Box::new(move |data, key, out| {
                (out[0], out[1]) = p_fcb_lattice_message(data[0], data[1], sigma, step, key, 0);
            }),
            None => Box::new(move |data, key, out| {
                (out[0], out[1]) = p_fcb_message(data[0], data[1], sigma, key, 0);
            }),
        };
        Ok(((f, lattice), p.delta))
    }
}

impl Audit for CombConfig {
    fn mechanism_name(&self) -> &'static str {
        "p_fcb"
    }

    /// Round 1's message (the largest budget) about one producer of
    /// capacity k = 1 (the noise scales with k): the sensitive round
    /// procured k good units, or none (the data of every other round since
    /// the last communication is the same in both worlds and cancels). The
    /// message is the backend's own, under either sampler.
    fn harness(&self, noise_scale: f64) -> Result<(Harness, f64), AuditError> {
        let ((release, _), delta) = self.message(noise_scale)?;
        Ok((
            Harness::GaussianRelease {
                p: [vec![1.0, 1.0], vec![0.0, 0.0]],
                release,
            },
            delta,
        ))
    }

    /// The same message's exact-bits test: (w, y) = (0, 0) against (1, 1).
    /// Under `sampler: discrete` every message is a lattice point at a
    /// lattice distance from both (it passes); under the float sampler a
    /// message of 0 that lands within 1/4 of 0 off the grid 2^-53 cannot
    /// come from 1 ([`crate::privacy::bits::float_sum_unreachable`]).
    fn bits(&self, trials: u64, seed: u64) -> Result<(BitsOutcome, &'static str), AuditError> {
        let ((release, lattice), _) = self.message(1.0)?;
        let (test, sampler) = match lattice {
            Some(step) => (EntryTest::Lattice(step), "discrete"),
            None => (EntryTest::Float, "float"),
        };
        // The noise alone: the message of (0, 0).
        let noise = |key: u64, z: &mut [f64]| release(&[0.0, 0.0], key, z);
        Ok((vector_bits_test([&[0.0, 0.0], &[1.0, 1.0]], test, trials, seed, noise), sampler))
    }
}
