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
//!
//! The accountant knows no algorithm: each private algorithm describes what
//! it releases as a [`Mechanism`] (`algo::linear::mechanism`), and the
//! accountant turns that description into the figures.

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
    /// Pure (delta = 0) epsilon by basic composition, for Laplace
    /// mechanisms (the gossip family's partial sums).
    pub epsilon_pure: Option<f64>,
}

/// How an algorithm's noise enters the releases, as the algorithm states it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NoiseModel {
    /// Gaussian node noise: the observer's view of each node adds noise of
    /// standard deviation `sigma` per parameter to a statistic of L2
    /// sensitivity `sensitivity` (one observation).
    Gaussian {
        /// Noise standard deviation in the observer's view.
        sigma: f64,
        /// L2 sensitivity of the node's statistic to one observation.
        sensitivity: f64,
    },
    /// Noise this accountant does not convert to zCDP (e.g. Binomial); the
    /// noise multiplier is still reported.
    Unaccounted {
        /// Equivalent noise standard deviation.
        sigma: f64,
        /// L2 sensitivity.
        sensitivity: f64,
    },
}

/// What a private algorithm releases about one observation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mechanism {
    /// Noisy releases (tree nodes) one observation enters.
    pub releases_per_observation: u64,
    /// Noise of each release.
    pub noise: NoiseModel,
    /// The target (epsilon, delta) the user asked for.
    pub target: (f64, f64),
}

/// The accounting of a mechanism: rho = releases x rho_node (zCDP
/// composition) and its epsilon at the target delta.
pub fn account(m: &Mechanism) -> Accounting {
    let (eps, delta) = m.target;
    let levels = m.releases_per_observation;
    let (sigma, sens, rho) = match m.noise {
        NoiseModel::Gaussian { sigma, sensitivity } => (
            sigma,
            sensitivity,
            Some(levels as f64 * gaussian_rho(sensitivity, sigma)),
        ),
        NoiseModel::Unaccounted { sigma, sensitivity } => (sigma, sensitivity, None),
    };
    Accounting {
        releases_per_observation: levels,
        noise_multiplier: sigma / sens,
        epsilon_paper: eps,
        rho,
        epsilon_zcdp: rho.map(|r| zcdp_epsilon(r, delta)),
        epsilon_pure: None,
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
    fn composition_counts_releases() {
        let m = Mechanism {
            releases_per_observation: 9,
            noise: NoiseModel::Gaussian {
                sigma: 3.0,
                sensitivity: 2f64.sqrt(),
            },
            target: (1.0, 0.1),
        };
        let a = account(&m);
        let rho = 9.0 * 2.0 / (2.0 * 9.0);
        assert!((a.rho.unwrap() - rho).abs() < 1e-12);
        assert!((a.epsilon_zcdp.unwrap() - zcdp_epsilon(rho, 0.1)).abs() < 1e-12);
        assert!((a.noise_multiplier - 3.0 / 2f64.sqrt()).abs() < 1e-15);
        assert_eq!(a.epsilon_paper, 1.0);
        let u = account(&Mechanism {
            noise: NoiseModel::Unaccounted {
                sigma: 3.0,
                sensitivity: 1.0,
            },
            ..m
        });
        assert_eq!((u.rho, u.epsilon_zcdp, u.noise_multiplier), (None, None, 3.0));
    }
}
