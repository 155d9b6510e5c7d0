//! The gossip family's cells as `fedbandits audit` sees them
//! ([`crate::algo::audit::Audit`]): Fed_UCB's partial sums, one observation
//! at each end of the clipping range (the relation its sensitivity is
//! computed for), every block it enters released with its Laplace noise.

use super::{GossipAlgorithm, GossipConfig};
use crate::algo::audit::{Audit, AuditError};
use crate::privacy::audit::Harness;

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
}
