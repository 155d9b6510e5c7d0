//! `feducb_centralized`: Dubey & Pentland (NeurIPS 2020), Algorithm 1 with the
//! PRIVATIZER (Algorithm 2), as specified in ALGORITHMS.md 1.2.
//!
//! Agent i plays with V = S + U_i, theta_hat = V^{-1} (s + u_i) and
//! beta_{i,t} = sigma sqrt(2 log(2/alpha) + log det V - d log(M rho_min)) +
//! S_bound sqrt(M rho_max) + kappa sqrt(M) (Proposition 2; a negative
//! argument is clamped at 0 and counted). After playing, it tests
//! log det(V + x x^T + M (rho_max - rho_min) I) - log det(S) > D / Delta t_i;
//! if any agent's test fires (or every round under `every_round`), all agents
//! sync after the round: each agent's privatizer inserts its local
//! sum Q = sum [x; y][x; y]^T since the last sync as the next leaf of its
//! tree and releases the noisy prefix sum; S = sum_i (Gram block + shift I),
//! s = sum_i (bias block); local sums reset. Before the first sync
//! S = M rho_min I, s = 0.
//!
//! Constants (private; n = T since the number of rounds is not fixed in
//! advance, Remark 4): m = 1 + ceil(log2 T) tree levels,
//! sigma_N^2 = 16 m (L^2+1)^2 log(2/delta)^2 / eps^2 per entry of a
//! (d+1)x(d+1) N_hat, node noise N = (N_hat + N_hat^T)/sqrt(2);
//! Lambda = sqrt(32 m) (L^2+1) log(4/delta) (4 sqrt(d) + 2 ln(2 n M / alpha)) / eps;
//! rho_min = Lambda, rho_max = 3 Lambda, shift = 2 Lambda;
//! kappa = sqrt(m (L^2+1)) (sqrt(d) + 2 log(2 n M / alpha)) / (sqrt(2) eps).
//! Non-private: no noise, rho_min = rho_max = shift = lambda, kappa = 0.
//!
//! The shifted log det needs (V + c I)^{-1} with c = M (rho_max - rho_min): a
//! second inverse per agent, kept by Sherman-Morrison like the first (only
//! when c > 0). The adaptive schedule leaks information about the data (see
//! Zhou & Chowdhury's critique); it is reported as a property of the
//! algorithm, not fixed here.

use super::{LinearAlgorithm, LinearConfig, SyncRegime};
use crate::algo::{Counters, Federation};
use crate::backend::Backend;
use crate::backend::cpu::bank::AgentBank;
use crate::env::LinearEnv;
use crate::linalg;
use crate::privacy::accountant::{Mechanism, NoiseModel};
use crate::privacy::tree::AgentTrees;

/// FedUCB's constants for one configuration.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DubeyConstants {
    /// Tree levels m.
    pub levels: usize,
    /// Per-entry standard deviation of N_hat (0 if not private).
    pub sigma_n: f64,
    /// rho_min.
    pub rho_min: f64,
    /// rho_max.
    pub rho_max: f64,
    /// Regularizing shift added to each agent's released Gram block.
    pub shift: f64,
    /// kappa.
    pub kappa: f64,
    /// Sync threshold D (infinite for `every_round`, which ignores it).
    pub threshold: f64,
}

impl DubeyConstants {
    /// Constants of a configuration.
    pub fn new(cfg: &LinearConfig) -> Self {
        Self::with_levels(cfg, 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize)
    }

    /// The constants with `levels` tree levels (the decentralized variant uses
    /// 1 + ceil(log2(T / gamma))).
    pub fn with_levels(cfg: &LinearConfig, levels: usize) -> Self {
        let t = cfg.horizon as f64;
        let d = cfg.env.d as f64;
        let m_agents = cfg.m as f64;
        let l2p1 = cfg.l_bound * cfg.l_bound + 1.0;
        let mf = levels as f64;
        let (sigma_n, rho_min, rho_max, shift, kappa) = match cfg.privacy {
            Some((eps, delta)) => {
                let sigma_n = (16.0 * mf).sqrt() * l2p1 * (2.0 / delta).ln() / eps;
                let log_term = (2.0 * t * m_agents / cfg.alpha).ln();
                let lam = (32.0 * mf).sqrt() * l2p1 * (4.0 / delta).ln() * (4.0 * d.sqrt() + 2.0 * log_term) / eps;
                let kappa = (mf * l2p1).sqrt() * (d.sqrt() + 2.0 * log_term) / (std::f64::consts::SQRT_2 * eps);
                (sigma_n, lam, 3.0 * lam, 2.0 * lam, kappa)
            }
            None => (0.0, cfg.lambda, cfg.lambda, cfg.lambda, 0.0),
        };
        let l2 = cfg.l_bound * cfg.l_bound;
        let threshold = match cfg.sync {
            SyncRegime::EveryRound => f64::INFINITY,
            SyncRegime::Log => 2.0 * t * d / ((rho_max / rho_min + t * l2 / (d * rho_min)).ln() + 1.0),
            SyncRegime::SqrtM => t * (m_agents * t).ln() / (d * m_agents),
            SyncRegime::Threshold(v) => v,
        };
        Self {
            levels,
            sigma_n,
            rho_min,
            rho_max,
            shift,
            kappa,
            threshold,
        }
    }

    /// Proposition 1's bound on the number of sync rounds (non-private).
    pub fn proposition1_bound(&self, cfg: &LinearConfig) -> f64 {
        let t = cfg.horizon as f64;
        let d = cfg.env.d as f64;
        let l2 = cfg.l_bound * cfg.l_bound;
        2.0 * ((d * t / self.threshold) * (self.rho_max / self.rho_min + t * l2 / (d * self.rho_min)).ln()).sqrt() + 4.0
    }
}

/// What FedUCB's PRIVATIZER releases about one observation: it enters one
/// node per tree level; a node adds N = (N_hat + N_hat^T)/sqrt(2) to
/// Q = [x; y][x; y]^T (off-diagonal variance sigma_N^2, diagonal 2
/// sigma_N^2), so rho_node = ||Q||_F^2 / (4 sigma_N^2) <= (L^2 + 1)^2 /
/// (4 sigma_N^2): a Gaussian mechanism with sensitivity L^2 + 1 and
/// sigma = sqrt(2) sigma_N. The decentralized variant's noise is calibrated
/// for 1 + ceil(log2(T / gamma)) levels, but a slot may be asked to
/// broadcast every round, so its tree (and an observation's path) can reach
/// 1 + ceil(log2 T) levels: the latter is charged.
pub fn mechanism(cfg: &LinearConfig) -> Option<Mechanism> {
    let target = cfg.privacy?;
    let c = match cfg.algorithm {
        LinearAlgorithm::FeducbCentralized => DubeyConstants::new(cfg),
        LinearAlgorithm::FeducbDecentralized => {
            let t_eff = cfg.horizon.div_ceil(cfg.gamma.max(1) as u64).max(1);
            let mut c = DubeyConstants::with_levels(cfg, 1 + (t_eff as f64).log2().ceil() as usize);
            c.levels = 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize;
            c
        }
        _ => return None,
    };
    let unbounded = super::unbounded_rewards(cfg);
    Some(Mechanism {
        releases_per_observation: c.levels as u64,
        noise: NoiseModel::Gaussian {
            sigma: std::f64::consts::SQRT_2 * c.sigma_n,
            sensitivity: crate::privacy::accountant::dubey_sensitivity(cfg.l_bound, cfg.neighbours),
        },
        target,
        // The PRIVATIZER's sigma follows the paper's formula.
        paper: crate::privacy::accountant::PaperClaim::Target,
        basic: None,
        neighbours: cfg.neighbours,
        unbounded,
        // The schedule is not covered by any figure (it depends on the data).
        warnings: vec![
            "the sync schedule depends on the agents' data and is released too (acct_* cover the noisy \
             sums only; schedule_private is false)"
                .into(),
        ],
    })
}

/// A centralized FedUCB federation.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FedUcb {
    cfg: LinearConfig,
    env: LinearEnv,
    bank: AgentBank,
    /// Syncs, messages and clamps (the bank counts its own factorization
    /// failures).
    counters: Counters,
    consts: DubeyConstants,
    /// M (rho_max - rho_min).
    c_shift: f64,
    /// S and its log det.
    s_mat: Vec<f64>,
    logdet_s: f64,
    /// s.
    s_vec: Vec<f64>,
    /// (S + U_i + c I)^{-1} and its log det per agent (private only).
    vinv_c: Vec<f64>,
    logdet_c: Vec<f64>,
    dt: Vec<u64>,
    /// The agents' privatizer trees (None when not private).
    trees: Option<AgentTrees>,
    /// Non-private: exact sum of all agents' history.
    total: Vec<f64>,
    leaf: Vec<f64>,
    release: Vec<f64>,
    mtmp: Vec<f64>,
}

impl FedUcb {
    /// New federation.
    pub fn new(cfg: &LinearConfig, env: LinearEnv, algo_key: &[u64]) -> Self {
        let d = cfg.env.d;
        let m = cfg.m;
        let consts = DubeyConstants::new(cfg);
        let private = cfg.privacy.is_some();
        let c_shift = m as f64 * (consts.rho_max - consts.rho_min);
        let s0 = m as f64 * consts.rho_min;
        let mut s_mat = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut s_mat, d, s0);
        let width = d * d + d;
        let mut vinv_c1 = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut vinv_c1, d, 1.0 / (s0 + c_shift));
        let trees = private.then(|| AgentTrees::new(cfg.m, width, consts.levels, algo_key));
        Self {
            bank: AgentBank::new(&env, m, s0, cfg.reward_bound()),
            counters: Counters::default(),
            cfg: cfg.clone(),
            env,
            consts,
            c_shift,
            logdet_s: d as f64 * s0.ln(),
            s_mat,
            s_vec: vec![0.0; d],
            vinv_c: if c_shift > 0.0 { vinv_c1.repeat(m) } else { Vec::new() },
            logdet_c: vec![d as f64 * (s0 + c_shift).ln(); m],
            dt: vec![0; m],
            trees,
            total: vec![0.0; width],
            leaf: vec![0.0; width],
            release: vec![0.0; width],
            mtmp: vec![0.0; d * d],
        }
    }

    /// The constants in use.
    pub fn constants(&self) -> DubeyConstants {
        self.consts
    }

    fn sync(&mut self, backend: &dyn Backend) {
        let (d, m) = (self.cfg.env.d, self.cfg.m);
        let dd = d * d;
        self.release.fill(0.0);
        let sigma = self.consts.sigma_n;
        for i in 0..m {
            self.bank.local_leaf(i, &mut self.leaf);
            match self.trees.as_mut() {
                // Sized for T leaves: at most one sync per round, never full.
                Some(trees) => {
                    let _ = trees.contribute(i, &self.leaf, &mut self.release, |z, key| dubey_noise(z, d, sigma, key));
                }
                None => {
                    for (t, l) in self.total.iter_mut().zip(&self.leaf) {
                        *t += l;
                    }
                }
            }
        }
        if self.trees.is_none() {
            self.release.copy_from_slice(&self.total);
        }
        linalg::set_scaled_identity(&mut self.s_mat, d, m as f64 * self.consts.shift);
        for (s, r) in self.s_mat.iter_mut().zip(&self.release[..dd]) {
            *s += r;
        }
        self.s_vec.copy_from_slice(&self.release[dd..]);
        let s_mat = std::mem::take(&mut self.s_mat);
        let s_vec = std::mem::take(&mut self.s_vec);
        self.bank.reset_all(&s_mat, &s_vec, backend);
        self.logdet_s = self.bank.logdet[0];
        if self.c_shift > 0.0 {
            self.mtmp.copy_from_slice(&s_mat);
            for j in 0..d {
                self.mtmp[j * d + j] += self.c_shift;
            }
            let (first, rest) = self.vinv_c.split_at_mut(dd);
            match backend.spd_inverse(&self.mtmp, d, first, &mut self.bank.ws) {
                Ok((ld, jitter)) => {
                    self.logdet_c.fill(ld);
                    if jitter > 0.0 {
                        self.counters.cholesky_failures += 1;
                    }
                }
                Err(_) => self.counters.cholesky_failures += 1,
            }
            for chunk in rest.chunks_exact_mut(dd) {
                chunk.copy_from_slice(first);
            }
        }
        self.s_mat = s_mat;
        self.s_vec = s_vec;
        self.dt.fill(0);
        self.counters.sync_rounds += 1;
        self.counters.messages += 2 * m as u64;
    }
}

/// One PRIVATIZER node's noise in the flat (Gram, bias) layout, entry by
/// entry a pure function of the node's key. Dubey & Pentland draw N_hat,
/// (d+1)x(d+1) with i.i.d. N(0, sigma^2) entries, and add N = (N_hat +
/// N_hat^T)/sqrt(2) to [x; y][x; y]^T: off-diagonal entries N(0, sigma^2),
/// diagonal entries N(0, 2 sigma^2), the (i, d+1) column entries N(0,
/// sigma^2), all independent but for the symmetry. This draws exactly that
/// distribution from the d^2 + d entries Z_e = sigma normal_entry(key, e)
/// of the leaf's layout ([`crate::rng::keyed`], generated in vectorized
/// blocks): Gram (i, j) and (j, i) get (Z_ij + Z_ji)/sqrt(2) (the diagonal
/// (Z_ii + Z_ii)/sqrt(2) = sqrt(2) Z_ii), the bias entries Z itself (the one
/// normal (N_hat_{i,d+1} + N_hat_{d+1,i})/sqrt(2) is a single N(0, sigma^2)
/// draw). The y^2 corner is unused.
pub fn dubey_noise(z: &mut [f64], d: usize, sigma: f64, key: u64) {
    debug_assert_eq!(z.len(), d * d + d);
    let inv_sqrt2 = std::f64::consts::FRAC_1_SQRT_2;
    crate::rng::keyed::fill_normals_at(key, sigma, z);
    for i in 0..d {
        for j in i..d {
            let v = (z[i * d + j] + z[j * d + i]) * inv_sqrt2;
            z[i * d + j] = v;
            z[j * d + i] = v;
        }
    }
}

impl Federation for FedUcb {
    fn round(&mut self, _t: u64, backend: &dyn Backend) -> f64 {
        let (d, m) = (self.cfg.env.d, self.cfg.m);
        let dd = d * d;
        let c = &self.consts;
        let two_log = 2.0 * (2.0 / self.cfg.alpha).ln() - d as f64 * (m as f64 * c.rho_min).ln();
        let tail = self.cfg.s_bound * (m as f64 * c.rho_max).sqrt() + c.kappa * (m as f64).sqrt();
        let sigma = self.cfg.subgaussian;
        let scale = self.cfg.confidence_scale;
        let threshold = c.threshold;
        let mut fire = matches!(self.cfg.sync, SyncRegime::EveryRound);
        let mut regret = 0.0;
        for i in 0..m {
            let arg = two_log + self.bank.logdet[i];
            if arg < 0.0 {
                self.counters.beta_clamps += 1;
            }
            let beta = scale * (sigma * arg.max(0.0).sqrt() + tail);
            let st = self.bank.step(i, &self.env, backend, beta);
            regret += st.regret();
            self.dt[i] += 1;
            let stat = if self.c_shift > 0.0 {
                let q = linalg::sherman_morrison(
                    &mut self.vinv_c[i * dd..(i + 1) * dd],
                    &self.bank.ws.x,
                    &mut self.bank.ws.w,
                    d,
                );
                self.logdet_c[i] += crate::math::ln_1p(q);
                self.logdet_c[i] - self.logdet_s
            } else {
                self.bank.logdet[i] - self.logdet_s
            };
            if stat > threshold / self.dt[i] as f64 {
                fire = true;
            }
            if self.bank.since_factor[i] >= self.cfg.refactor_every {
                self.bank.refactor(i, &self.s_mat, backend);
                if self.c_shift > 0.0 {
                    for (t, (s, g)) in self
                        .mtmp
                        .iter_mut()
                        .zip(self.s_mat.iter().zip(&self.bank.gram[i * dd..(i + 1) * dd]))
                    {
                        *t = s + g;
                    }
                    for j in 0..d {
                        self.mtmp[j * d + j] += self.c_shift;
                    }
                    match backend.spd_inverse(&self.mtmp, d, &mut self.vinv_c[i * dd..(i + 1) * dd], &mut self.bank.ws)
                    {
                        Ok((ld, _)) => self.logdet_c[i] = ld,
                        Err(_) => self.counters.cholesky_failures += 1,
                    }
                }
            }
        }
        if fire {
            self.sync(backend);
        }
        regret
    }

    fn counters(&self) -> Counters {
        Counters {
            cholesky_failures: self.counters.cholesky_failures + self.bank.cholesky_failures,
            clipped_rewards: self.bank.clipped,
            ..self.counters
        }
    }

    fn agent_regret(&self) -> &[f64] {
        &self.bank.regret
    }
}
