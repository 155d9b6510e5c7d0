//! The privacy accountant (ALGORITHMS.md section 5): what a private run
//! actually provides, next to the target (epsilon, delta) the user asked for.
//!
//! Neighbouring relation: two datasets differing in one (x, y) observation of
//! one agent, as in the papers; ||x|| <= L and |y| <= 1 are assumed for the
//! sensitivity (rewards outside [-1, 1], as linear_sphere's Gaussian noise
//! produces, make the guarantee nominal).
//!
//! For every Gaussian tree mechanism an observation enters exactly one node
//! per tree level, so it touches `levels` noisy releases. For each node:
//! * Private-FedLinUCB (ldp, alt, sdp_amp): the node adds (Z + Z^T)/2 to the
//!   Gram sum and N(0, sigma^2) to the bias sum; over the upper-triangle
//!   parameters this is a Gaussian mechanism with Delta^2 = ||x x^T||_F^2 +
//!   ||x y||^2 <= L^4 + L^2, so rho_node = (L^4 + L^2) / (2 sigma^2).
//!   For sdp_amp sigma is each agent's (amplified) noise; the zCDP figure is
//!   for the server's view of the sum over M agents (variance M sigma^2): the
//!   shuffle amplification the paper relies on is not a zCDP statement.
//! * FedUCB's PRIVATIZER: Q = [x; y][x; y]^T plus (N_hat + N_hat^T)/sqrt(2)
//!   (off-diagonal variance sigma_N^2, diagonal 2 sigma_N^2): rho_node =
//!   ||Q||_F^2 / (4 sigma_N^2) <= (L^2 + 1)^2 / (4 sigma_N^2).
//!
//! zCDP composes additively: rho = levels x rho_node, and
//! epsilon = rho + 2 sqrt(rho log(1/delta)) at the job's delta (Bun & Steinke
//! 2016, Prop. 1.3). The "paper" figure is the epsilon each paper's own
//! composition argument claims for its calibration: the target epsilon.
//! The vector-summation protocol adds Binomial noise, which this accountant
//! does not convert to zCDP (reported as null).

use crate::algo::linear::fedlinucb::ZhouConstants;
use crate::algo::linear::feducb::DubeyConstants;
use crate::algo::linear::{LinearAlgorithm, LinearConfig, Protocol};

/// rho of a Gaussian mechanism with L2 sensitivity `sensitivity` and noise
/// standard deviation `sigma`: Delta^2 / (2 sigma^2).
pub fn gaussian_rho(sensitivity: f64, sigma: f64) -> f64 {
    sensitivity * sensitivity / (2.0 * sigma * sigma)
}

/// (epsilon, delta)-DP implied by rho-zCDP: rho + 2 sqrt(rho log(1/delta)).
pub fn zcdp_epsilon(rho: f64, delta: f64) -> f64 {
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

/// What a configuration's mechanism provides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Accounting {
    /// Noisy releases one observation touches.
    pub releases_per_observation: u64,
    /// Noise standard deviation over L2 sensitivity (per node).
    pub noise_multiplier: f64,
    /// The paper's claimed epsilon (its own composition argument).
    pub epsilon_paper: f64,
    /// Total rho (zCDP), where the accountant can state it.
    pub rho: Option<f64>,
    /// epsilon at the target delta from rho.
    pub epsilon_zcdp: Option<f64>,
}

/// The accounting of a configuration (None when it is not private).
pub fn account(cfg: &LinearConfig) -> Option<Accounting> {
    let (eps, delta) = cfg.privacy?;
    let l2 = cfg.l_bound * cfg.l_bound;
    match cfg.algorithm {
        LinearAlgorithm::PrivateFedlinucb => {
            let c = ZhouConstants::new(cfg);
            let levels = c.levels as u64;
            let sens = (l2 * l2 + l2).sqrt();
            let (sigma_view, rho) = match cfg.protocol {
                Protocol::SdpVecsum => (c.sigma, None),
                Protocol::SdpAmp => {
                    let s = c.sigma * (cfg.m as f64).sqrt();
                    (s, Some(levels as f64 * gaussian_rho(sens, s)))
                }
                _ => (c.sigma, Some(levels as f64 * gaussian_rho(sens, c.sigma))),
            };
            Some(Accounting {
                releases_per_observation: levels,
                noise_multiplier: sigma_view / sens,
                epsilon_paper: eps,
                rho,
                epsilon_zcdp: rho.map(|r| zcdp_epsilon(r, delta)),
            })
        }
        LinearAlgorithm::FeducbCentralized | LinearAlgorithm::FeducbDecentralized => {
            let c = if cfg.algorithm == LinearAlgorithm::FeducbDecentralized {
                // Noise calibrated for 1 + ceil(log2(T / gamma)) levels, but a
                // slot may be asked to broadcast every round, so its tree (and
                // an observation's path) can reach 1 + ceil(log2 T) levels:
                // the accountant charges the latter.
                let t_eff = cfg.horizon.div_ceil(cfg.gamma.max(1) as u64).max(1);
                let mut c = DubeyConstants::with_levels(cfg, 1 + (t_eff as f64).log2().ceil() as usize);
                c.levels = 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize;
                c
            } else {
                DubeyConstants::new(cfg)
            };
            let levels = c.levels as u64;
            let q = l2 + 1.0;
            // ||Q||_F^2 / (4 sigma^2) = (sens)^2 / (2 sigma_eff^2) with sigma_eff = sqrt(2) sigma.
            let rho_node = q * q / (4.0 * c.sigma_n * c.sigma_n);
            let rho = levels as f64 * rho_node;
            Some(Accounting {
                releases_per_observation: levels,
                noise_multiplier: std::f64::consts::SQRT_2 * c.sigma_n / q,
                epsilon_paper: eps,
                rho: Some(rho),
                epsilon_zcdp: Some(zcdp_epsilon(rho, delta)),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_mechanism_closed_forms() {
        assert_eq!(gaussian_rho(1.0, 1.0), 0.5);
        assert!((gaussian_rho(2.0, 4.0) - 0.125).abs() < 1e-15);
        let e = zcdp_epsilon(0.5, 1e-5);
        assert!((e - (0.5 + 2.0 * (0.5 * 1e5f64.ln()).sqrt())).abs() < 1e-12);
        // rho = 0 gives epsilon 0; epsilon grows with rho and with 1/delta.
        assert_eq!(zcdp_epsilon(0.0, 0.1), 0.0);
        assert!(zcdp_epsilon(1.0, 1e-6) > zcdp_epsilon(1.0, 1e-3));
    }

    #[test]
    fn tree_composition_counts_levels() {
        use crate::job::Job;
        let j = Job::parse(
            std::path::Path::new("a.yaml"),
            "horizon: 10000\nalgorithm: private_fedlinucb\nenvironment: linear_sphere\nparams: {m: 10, d: 5, epsilon: 1, delta: 0.1}\n",
        )
        .unwrap();
        let a = account(&j.cells[0].config).unwrap();
        // T/B = 400 batches: floor(log2 400) + 1 = 9 levels.
        assert_eq!(a.releases_per_observation, 9);
        let sigma = ZhouConstants::new(&j.cells[0].config).sigma;
        let rho = 9.0 * 2.0 / (2.0 * sigma * sigma);
        assert!((a.rho.unwrap() - rho).abs() < 1e-12);
        assert!((a.epsilon_zcdp.unwrap() - zcdp_epsilon(rho, 0.1)).abs() < 1e-12);
        assert_eq!(a.epsilon_paper, 1.0);
    }
}
