//! `fedlinucb` and `private_fedlinucb` (Zhou & Chowdhury 2023): fixed-batch
//! synchronization, so the communication schedule depends on no data.
//!
//! Agent i plays with V = lambda I + W_syn + W_i and theta_hat = V^{-1}
//! (U_syn + U_i), beta_t = scale (sqrt(lambda) S + R sqrt(d log(1 + t M L^2 /
//! (d lambda)) + log(1/alpha))). Every B rounds (t mod B = 0, batch k = t / B)
//! each agent's batch contribution (W_i, U_i) goes through the protocol, the
//! server's output becomes (W_syn, U_syn) for everyone, and W_i, U_i reset.
//!
//! Protocols implemented here: `none` (exact sums; lambda = sqrt(M), as in the
//! authors' code) and `ldp` (each agent's contributions enter its own
//! binary-counter tree, [`crate::privacy::tree`], with Gaussian node noise
//! ([`crate::privacy::tree::symmetric_gaussian`]): the
//! matrix part (Z + Z^T)/2 with Z_ij ~ N(0, sigma^2), the vector part
//! N(0, sigma^2) per entry, as in the authors' code; the server's output is the
//! sum of the agents' noisy prefix sums, which equals the slides' per-level
//! server aggregation). Calibration `code` (default):
//! sigma = L sqrt(N (log(1/delta) + eps)) / eps, N = floor(log2(T/B)) + 1;
//! `theorem`: sigma^2 = 8 kappa (log(2/delta) + eps) / eps^2, kappa = 1 + log(T/B).
//! In both, lambda = sqrt(M N) sigma (sqrt(N + log(1/alpha)) + sqrt(d)).
//! A noisy lambda I + W_syn that is not positive definite is inverted with
//! jitter and counted in `cholesky_failures`.

use super::{Calibration, LinearAlgorithm, LinearConfig, Protocol};
use crate::backend::{LinearBatch, Release, SyncRule};
use crate::privacy::accountant::{Mechanism, NoiseModel};
use crate::privacy::tree::AgentTrees;
use crate::privacy::tree_levels;
use crate::privacy::vecsum::VecSum;

/// Noise and regularization constants of Private-FedLinUCB.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ZhouConstants {
    /// Tree levels N = floor(log2(T/B)) + 1.
    pub levels: usize,
    /// Gaussian noise standard deviation per node entry (0 when not private).
    pub sigma: f64,
    /// Regularization lambda.
    pub lambda: f64,
}

impl ZhouConstants {
    /// Constants of a configuration.
    pub fn new(cfg: &LinearConfig) -> Self {
        let batches = (cfg.horizon / cfg.batch_size).max(1);
        let levels = tree_levels(batches);
        let m = cfg.m as f64;
        let d = cfg.env.d as f64;
        let n = levels as f64;
        let l = cfg.l_bound;
        let t = cfg.horizon as f64;
        let tail = |sigma: f64| sigma * ((n + (1.0 / cfg.alpha).ln()).sqrt() + d.sqrt());
        match (cfg.algorithm, cfg.privacy, cfg.protocol) {
            (LinearAlgorithm::PrivateFedlinucb, Some((eps, delta)), Protocol::Ldp | Protocol::Alt) => {
                let sigma = match cfg.calibration {
                    Calibration::Code => l * (n * ((1.0 / delta).ln() + eps)).sqrt() / eps,
                    Calibration::Theorem => {
                        let kappa = 1.0 + (cfg.horizon as f64 / cfg.batch_size as f64).ln();
                        (8.0 * kappa * ((2.0 / delta).ln() + eps)).sqrt() / eps
                    }
                };
                Self {
                    levels,
                    sigma,
                    lambda: (m * n).sqrt() * tail(sigma),
                }
            }
            (LinearAlgorithm::PrivateFedlinucb, Some((eps, delta)), Protocol::SdpAmp) => {
                let sigma = l * (n * (1.0 / delta).ln() * (1.0 + n / (t * delta)).ln() * (m * n / delta).ln()).sqrt()
                    / (eps * m.sqrt());
                Self {
                    levels,
                    sigma,
                    lambda: (m * n).sqrt() * tail(sigma),
                }
            }
            (LinearAlgorithm::PrivateFedlinucb, Some((eps, delta)), Protocol::SdpVecsum) => {
                let sigma = l * (n * (1.0 / delta).ln()).sqrt() * (n * d * d / delta).ln() / eps;
                Self {
                    levels,
                    sigma,
                    lambda: n.sqrt() * tail(sigma),
                }
            }
            _ => Self {
                levels,
                sigma: 0.0,
                lambda: m.sqrt(),
            },
        }
    }
}

/// What Private-FedLinUCB releases about one observation: it enters one
/// node per tree level (N of them); each node adds (Z + Z^T)/2 to the Gram
/// sum and N(0, sigma^2) to the bias sum, a Gaussian mechanism over the
/// upper-triangle parameters with Delta^2 = ||x x^T||_F^2 + ||x y||^2 <=
/// L^4 + L^2 (|y| <= 1 assumed). For `sdp_amp` the figure is for the
/// server's view of the sum over M agents (variance M sigma^2); the
/// vector-summation protocol's Binomial noise is not converted.
pub fn mechanism(cfg: &LinearConfig) -> Option<Mechanism> {
    let target = cfg.privacy?;
    if cfg.algorithm != LinearAlgorithm::PrivateFedlinucb {
        return None;
    }
    let c = ZhouConstants::new(cfg);
    let l2 = cfg.l_bound * cfg.l_bound;
    let sensitivity = (l2 * l2 + l2).sqrt();
    let noise = match cfg.protocol {
        Protocol::SdpVecsum => NoiseModel::Unaccounted {
            sigma: c.sigma,
            sensitivity,
        },
        Protocol::SdpAmp => NoiseModel::Gaussian {
            sigma: c.sigma * (cfg.m as f64).sqrt(),
            sensitivity,
        },
        _ => NoiseModel::Gaussian {
            sigma: c.sigma,
            sensitivity,
        },
    };
    Some(Mechanism {
        releases_per_observation: c.levels as u64,
        noise,
        target,
    })
}

/// (Private-)FedLinUCB as a lockstep batch: sync every B rounds (2M
/// messages each), releasing the exact sums (`fedlinucb`, or no privacy
/// target), each agent's tree with node noise sigma (`ldp`, `sdp_amp`,
/// `alt`), or the vector-summation protocol (`sdp_vecsum`, its randomizer
/// streams keyed per agent and the shuffler's after them).
pub fn batch(cfg: &LinearConfig, env_keys: Vec<Vec<u64>>, algo_keys: &[Vec<u64>]) -> LinearBatch {
    let consts = ZhouConstants::new(cfg);
    let m = cfg.m;
    let release = match (consts.sigma > 0.0, cfg.protocol, cfg.privacy) {
        (true, Protocol::SdpVecsum, Some((eps, delta))) => Release::VecSum {
            proto: Box::new(VecSum::new(
                cfg.env.d,
                consts.levels,
                cfg.batch_size,
                m,
                cfg.l_bound,
                eps,
                delta,
                cfg.vecsum_scale,
            )),
            keys: algo_keys
                .iter()
                .flat_map(|k| (0..=m).map(move |i| AgentTrees::noise_key(k, i)))
                .collect(),
        },
        (true, ..) => Release::Tree {
            sigma: consts.sigma,
            levels: consts.levels,
        },
        (false, ..) => Release::Exact,
    };
    let noise_keys = if matches!(release, Release::Tree { .. }) {
        algo_keys
            .iter()
            .flat_map(|k| (0..m).map(move |i| crate::rng::fold_key(&AgentTrees::noise_key(k, i))))
            .collect()
    } else {
        Vec::new()
    };
    let c = cfg.clone();
    LinearBatch {
        env: cfg.env.clone(),
        env_keys,
        noise_keys,
        m,
        horizon: cfg.horizon,
        lambda: consts.lambda,
        beta: Box::new(move |t| zhou_beta(&c, &consts, t)),
        sync: Some(SyncRule {
            every: cfg.batch_size,
            release,
            messages_per_sync: 2 * m as u64,
        }),
        refactor_every: cfg.refactor_every,
        random_policy: None,
    }
}

/// beta_t of (Private-)FedLinUCB.
pub fn zhou_beta(c: &LinearConfig, consts: &ZhouConstants, t: u64) -> f64 {
    let d = c.env.d as f64;
    let lam = consts.lambda;
    let inner = d * (1.0 + t as f64 * c.m as f64 * c.l_bound * c.l_bound / (d * lam)).ln() + (1.0 / c.alpha).ln();
    c.confidence_scale * (lam.sqrt() * c.s_bound + c.subgaussian * inner.sqrt())
}

#[cfg(test)]
mod tests {
    use crate::job::Job;
    use crate::privacy::accountant::zcdp_epsilon;

    #[test]
    fn accounting_counts_tree_levels() {
        let j = Job::parse(
            std::path::Path::new("a.yaml"),
            "horizon: 10000\nalgorithm: private_fedlinucb\nenvironment: linear_sphere\nparams: {m: 10, d: 5, epsilon: 1, delta: 0.1}\n",
        )
        .unwrap();
        let a = j.cells[0].config.accounting().unwrap();
        // T/B = 400 batches: floor(log2 400) + 1 = 9 levels.
        assert_eq!(a.releases_per_observation, 9);
        let sigma = super::ZhouConstants::new(j.cells[0].config.linear().unwrap()).sigma;
        let rho = 9.0 * 2.0 / (2.0 * sigma * sigma);
        assert!((a.rho.unwrap() - rho).abs() < 1e-12);
        assert!((a.epsilon_zcdp.unwrap() - zcdp_epsilon(rho, 0.1)).abs() < 1e-12);
        assert_eq!(a.epsilon_paper, 1.0);
    }
}
