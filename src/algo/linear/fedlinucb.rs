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
//! binary-counter tree, [`crate::privacy::tree`], with Gaussian node noise: the
//! matrix part (Z + Z^T)/2 with Z_ij ~ N(0, sigma^2), the vector part
//! N(0, sigma^2) per entry, as in the authors' code; the server's output is the
//! sum of the agents' noisy prefix sums, which equals the slides' per-level
//! server aggregation). Calibration `code` (default):
//! sigma = L sqrt(N (log(1/delta) + eps)) / eps, N = floor(log2(T/B)) + 1;
//! `theorem`: sigma^2 = 8 kappa (log(2/delta) + eps) / eps^2, kappa = 1 + log(T/B).
//! In both, lambda = sqrt(M N) sigma (sqrt(N + log(1/alpha)) + sqrt(d)).
//! A noisy lambda I + W_syn that is not positive definite is inverted with
//! jitter and counted in `cholesky_failures`.

use super::{AgentBank, Calibration, LinearAlgorithm, LinearConfig, Protocol};
use crate::algo::{Counters, Federation};
use crate::backend::Backend;
use crate::env::LinearEnv;
use crate::linalg;
use crate::privacy::accountant::{Mechanism, NoiseModel};
use crate::privacy::tree::AgentTrees;
use crate::privacy::tree_levels;
use crate::privacy::vecsum::VecSum;
use crate::rng::{Stream, normal_at};

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

/// A (Private-)FedLinUCB federation.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FedLinUcb {
    cfg: LinearConfig,
    env: LinearEnv,
    bank: AgentBank,
    consts: ZhouConstants,
    /// lambda I + W_syn.
    base: Vec<f64>,
    /// U_syn.
    u_syn: Vec<f64>,
    /// The privacy protocol's state.
    privatizer: Privatizer,
    leaf: Vec<f64>,
    release: Vec<f64>,
}

impl FedLinUcb {
    /// New federation.
    pub fn new(cfg: &LinearConfig, env: LinearEnv, algo_key: &[u64]) -> Self {
        let d = cfg.env.d;
        let consts = ZhouConstants::new(cfg);
        let private = consts.sigma > 0.0;
        let width = d * d + d;
        let mut base = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut base, d, consts.lambda);
        let privatizer = match (private, cfg.protocol, cfg.privacy) {
            (true, Protocol::SdpVecsum, Some((eps, delta))) => Privatizer::VecSum {
                vs: VecSum::new(
                    d,
                    consts.levels,
                    cfg.batch_size,
                    cfg.m,
                    cfg.l_bound,
                    eps,
                    delta,
                    cfg.vecsum_scale,
                ),
                agents: (0..cfg.m)
                    .map(|i| Stream::new(&AgentTrees::noise_key(algo_key, i)))
                    .collect(),
                shuffler: Stream::new(&AgentTrees::noise_key(algo_key, cfg.m)),
            },
            (true, ..) => Privatizer::Trees(AgentTrees::new(cfg.m, width, consts.levels, algo_key)),
            (false, ..) => Privatizer::None,
        };
        Self {
            bank: AgentBank::new(&env, cfg.m, consts.lambda),
            cfg: cfg.clone(),
            env,
            consts,
            base,
            u_syn: vec![0.0; d],
            privatizer,
            leaf: vec![0.0; width],
            release: vec![0.0; width],
        }
    }

    /// The constants in use.
    pub fn constants(&self) -> ZhouConstants {
        self.consts
    }

    fn beta(&self, t: u64) -> f64 {
        zhou_beta(&self.cfg, &self.consts, t)
    }

    fn sync(&mut self, backend: &dyn Backend) {
        let (d, dd, m) = (self.cfg.env.d, self.cfg.env.d * self.cfg.env.d, self.cfg.m);
        let private = match &mut self.privatizer {
            Privatizer::Trees(trees) => {
                // Server output: sum over agents of their noisy prefix sums.
                self.release.fill(0.0);
                let sigma = self.consts.sigma;
                for i in 0..m {
                    self.bank.local_leaf(i, &mut self.leaf);
                    // The tree is sized for floor(T/B) leaves, so it cannot be full.
                    let _ = trees.contribute(i, &self.leaf, &mut self.release, |z, key| zhou_noise(z, d, sigma, key));
                }
                true
            }
            Privatizer::VecSum { vs, shuffler, .. } => {
                vs.close_batch(shuffler, &mut self.release);
                true
            }
            Privatizer::None => false,
        };
        if private {
            linalg::set_scaled_identity(&mut self.base, d, self.consts.lambda);
            for (b, r) in self.base.iter_mut().zip(&self.release[..dd]) {
                *b += r;
            }
            self.u_syn.copy_from_slice(&self.release[dd..]);
        } else {
            for i in 0..m {
                for (b, g) in self.base.iter_mut().zip(&self.bank.gram[i * dd..(i + 1) * dd]) {
                    *b += g;
                }
                for (u, g) in self.u_syn.iter_mut().zip(&self.bank.bias[i * d..(i + 1) * d]) {
                    *u += g;
                }
            }
        }
        let base = std::mem::take(&mut self.base);
        let u = std::mem::take(&mut self.u_syn);
        self.bank.reset_all(&base, &u, backend);
        self.base = base;
        self.u_syn = u;
        self.bank.counters.sync_rounds += 1;
        self.bank.counters.messages += 2 * m as u64;
    }
}

/// What a FedLinUCB federation privatizes with.
#[derive(serde::Serialize, serde::Deserialize)]
enum Privatizer {
    /// No privacy: exact sums.
    None,
    /// Per-agent binary-counter trees with Gaussian node noise (ldp, sdp_amp, alt).
    Trees(AgentTrees),
    /// The shuffle vector-summation protocol: per-agent randomizer streams and
    /// the shuffler's stream for the Binomial parts.
    VecSum {
        vs: VecSum,
        agents: Vec<Stream>,
        shuffler: Stream,
    },
}

/// beta_t of (Private-)FedLinUCB.
pub fn zhou_beta(c: &LinearConfig, consts: &ZhouConstants, t: u64) -> f64 {
    let d = c.env.d as f64;
    let lam = consts.lambda;
    let inner = d * (1.0 + t as f64 * c.m as f64 * c.l_bound * c.l_bound / (d * lam)).ln() + (1.0 / c.alpha).ln();
    c.confidence_scale * (lam.sqrt() * c.s_bound + c.subgaussian * inner.sqrt())
}

/// Fills one tree node's noise, entry by entry a pure function of the node's
/// key (so a GPU thread per entry computes the same bits): Z_e = sigma
/// normal_at(key, e) for every entry of the flat (Gram, bias) layout; the
/// Gram part is then symmetrized, (Z + Z^T)/2.
pub fn zhou_noise(z: &mut [f64], d: usize, sigma: f64, key: u64) {
    let dd = d * d;
    for (e, v) in z.iter_mut().enumerate() {
        *v = sigma * normal_at(key, e as u64);
    }
    for i in 0..d {
        for j in i + 1..d {
            let s = 0.5 * (z[i * d + j] + z[j * d + i]);
            z[i * d + j] = s;
            z[j * d + i] = s;
        }
    }
    debug_assert_eq!(z.len(), dd + d);
}

impl Federation for FedLinUcb {
    fn round(&mut self, t: u64, backend: &dyn Backend) -> f64 {
        let beta = self.beta(t);
        let mut regret = 0.0;
        for i in 0..self.cfg.m {
            let st = self.bank.step(i, &self.env, backend, beta);
            regret += st.regret();
            if let Privatizer::VecSum { vs, agents, .. } = &mut self.privatizer {
                vs.add_point(&self.bank.ws.x, st.y, &mut agents[i]);
            }
            if self.bank.since_factor[i] >= self.cfg.refactor_every {
                self.bank.refactor(i, &self.base, backend);
            }
        }
        if t.is_multiple_of(self.cfg.batch_size) {
            self.sync(backend);
        }
        regret
    }

    fn counters(&self) -> Counters {
        self.bank.counters
    }

    fn agent_regret(&self) -> &[f64] {
        &self.bank.regret
    }
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
        let a = crate::algo::linear::accounting(&j.cells[0].config).unwrap();
        // T/B = 400 batches: floor(log2 400) + 1 = 9 levels.
        assert_eq!(a.releases_per_observation, 9);
        let sigma = super::ZhouConstants::new(&j.cells[0].config).sigma;
        let rho = 9.0 * 2.0 / (2.0 * sigma * sigma);
        assert!((a.rho.unwrap() - rho).abs() < 1e-12);
        assert!((a.epsilon_zcdp.unwrap() - zcdp_epsilon(rho, 0.1)).abs() < 1e-12);
        assert_eq!(a.epsilon_paper, 1.0);
    }
}
