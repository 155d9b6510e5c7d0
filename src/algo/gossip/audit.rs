//! The gossip family's cells as `fedbandits audit` sees them
//! ([`crate::algo::audit::Audit`]): Fed_UCB's partial sums, one observation
//! at each end of the clipping range (the relation its sensitivity is
//! computed for), every block it enters released with its Laplace noise.

use super::{GossipAlgorithm, GossipConfig};
use crate::algo::audit::{Audit, AuditError};
use crate::privacy::audit::Harness;
use crate::privacy::bits::{BitsOutcome, BitsRelease, bits_test};

impl Audit for GossipConfig {
    fn mechanism_name(&self) -> &'static str {
        "partial_sums"
    }

    fn harness(&self, noise_scale: f64) -> Result<(Harness, f64), AuditError> {
        let private = match self.algorithm {
            GossipAlgorithm::FedUcbGossip => self.privacy.epsilon.is_finite(),
            GossipAlgorithm::GossipUcb | GossipAlgorithm::LocalUcb | GossipAlgorithm::OracleUcb => false,
        };
        if !private {
            return Err(AuditError::NotPrivate);
        }
        let p = &self.privacy;
        let levels = crate::privacy::partial_sum::blocks_per_observation(self.horizon);
        let scale = (p.clip.1 - p.clip.0) / super::fed_ucb_gossip::block_epsilon(p, self.horizon);
        Ok((
            Harness::LaplacePartialSum {
                levels,
                scale: scale * noise_scale,
                x: [p.clip.1, p.clip.0],
            },
            0.0,
        ))
    }

    /// A block's first release holds one observation at one end of the
    /// clipping range: x + noise, tested against the other end.
    fn bits(&self, trials: u64, seed: u64) -> Result<(BitsOutcome, &'static str), AuditError> {
        self.harness(1.0)?;
        let p = &self.privacy;
        let x = [p.clip.1, p.clip.0];
        Ok(match super::fed_ucb_gossip::lattice_laplace(p, self.horizon) {
            Some(lap) => (bits_test(x, BitsRelease::LatticeLaplace(lap), trials, seed), "discrete"),
            None => {
                let scale = (p.clip.1 - p.clip.0) / super::fed_ucb_gossip::block_epsilon(p, self.horizon);
                (bits_test(x, BitsRelease::FloatLaplace { scale }, trials, seed), "float")
            }
        })
    }
}
