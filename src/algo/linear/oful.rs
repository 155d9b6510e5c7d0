//! `linucb` (OFUL, Abbasi-Yadkori et al. 2011) and `independent` (M OFUL
//! agents with no communication: the "no federation" baseline).
//!
//! V = lambda I + sum x x^T, b = sum y x, and
//! beta_t = scale (R sqrt(d log(1 + n L^2 / (d lambda)) + 2 log(1/alpha)) + sqrt(lambda) S)
//! with n = t - 1 the number of observations before round t. As a batch
//! ([`batch`]): no sync; each agent refactorizes lambda I + its own Gram sum.

use super::LinearConfig;
use crate::algo::linear::batch::LinearBatch;

/// The OFUL confidence width after `n` observations.
pub fn beta(cfg: &LinearConfig, n: u64) -> f64 {
    let d = cfg.env.d as f64;
    let l2 = cfg.l_bound * cfg.l_bound;
    cfg.confidence_scale
        * (cfg.subgaussian * (d * (1.0 + n as f64 * l2 / (d * cfg.lambda)).ln() + 2.0 * (1.0 / cfg.alpha).ln()).sqrt()
            + cfg.lambda.sqrt() * cfg.s_bound)
}

/// M independent OFUL agents (M = 1 for `linucb`) as a lockstep batch.
pub fn batch(cfg: &LinearConfig, env_keys: Vec<Vec<u64>>) -> LinearBatch {
    let c = cfg.clone();
    LinearBatch::unsynced(
        cfg.env.clone(),
        env_keys,
        cfg.m,
        cfg.lambda,
        Box::new(move |t| beta(&c, t - 1)),
        cfg.refactor_every,
        None,
        cfg.reward_bound(),
    )
}
