//! `linucb` (OFUL, Abbasi-Yadkori et al. 2011) and `independent` (M OFUL
//! agents with no communication: the "no federation" baseline).
//!
//! V = lambda I + sum x x^T, b = sum y x, and
//! beta_t = scale (R sqrt(d log(1 + n L^2 / (d lambda)) + 2 log(1/alpha)) + sqrt(lambda) S)
//! with n = t - 1 the number of observations before round t.

use super::{AgentBank, LinearConfig};
use crate::algo::{Counters, Federation};
use crate::backend::Backend;
use crate::env::LinearEnv;
use crate::linalg;

/// M independent OFUL agents (M = 1 for `linucb`).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Oful {
    cfg: LinearConfig,
    env: LinearEnv,
    bank: AgentBank,
    base: Vec<f64>,
}

impl Oful {
    /// New federation.
    pub fn new(cfg: &LinearConfig, env: LinearEnv) -> Self {
        let d = cfg.env.d;
        let mut base = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut base, d, cfg.lambda);
        Self {
            bank: AgentBank::new(&env, cfg.m, cfg.lambda),
            cfg: cfg.clone(),
            env,
            base,
        }
    }

    /// The OFUL confidence width after `n` observations.
    pub fn beta(cfg: &LinearConfig, n: u64) -> f64 {
        let d = cfg.env.d as f64;
        let l2 = cfg.l_bound * cfg.l_bound;
        cfg.confidence_scale
            * (cfg.subgaussian
                * (d * (1.0 + n as f64 * l2 / (d * cfg.lambda)).ln() + 2.0 * (1.0 / cfg.alpha).ln()).sqrt()
                + cfg.lambda.sqrt() * cfg.s_bound)
    }
}

impl Federation for Oful {
    fn round(&mut self, t: u64, backend: &dyn Backend) -> f64 {
        let beta = Self::beta(&self.cfg, t - 1);
        let mut regret = 0.0;
        for i in 0..self.cfg.m {
            regret += self.bank.step(i, &self.env, backend, beta).regret();
            if self.bank.since_factor[i] >= self.cfg.refactor_every {
                self.bank.refactor(i, &self.base, backend);
            }
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
