//! The combinatorial family's cells as `fedbandits audit` sees them
//! ([`crate::algo::audit::Audit`]): P-FCB's message, one round's
//! procurement of k good units from one producer against none.

use super::batch::{p_fcb_message, p_fcb_noise_scale};
use super::{CombAlgorithm, CombConfig, p_fcb};
use crate::algo::audit::{Audit, AuditError};
use crate::privacy::audit::Harness;

impl Audit for CombConfig {
    fn mechanism_name(&self) -> &'static str {
        "p_fcb"
    }

    /// Round 1's message (the largest budget) about one producer of
    /// capacity k = 1 (the noise scales with k): the sensitive round
    /// procured k good units, or none (the data of every other round since
    /// the last communication is the same in both worlds and cancels). The
    /// message is the backend's own.
    fn harness(&self, noise_scale: f64) -> Result<(Harness, f64), AuditError> {
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
        Ok((
            Harness::GaussianRelease {
                p: [vec![1.0, 1.0], vec![0.0, 0.0]],
                release: Box::new(move |data, key, out| {
                    (out[0], out[1]) = p_fcb_message(data[0], data[1], sigma, key, 0);
                }),
            },
            p.delta,
        ))
    }
}
