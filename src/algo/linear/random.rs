//! `random`: every agent plays a uniformly random action. Not from a paper:
//! the floor every learning algorithm must beat (used by the sanity tests).
//! Agent i's picks come from its own stream ([`pick_key`]); its environment
//! streams advance as a learner's do (the reward is drawn and discarded), so
//! it sees the same decision sets as every algorithm it is compared with.

use super::LinearConfig;
use crate::algo::linear::batch::LinearBatch;
use crate::rng::Purpose;

/// The key of agent `i`'s action picks.
pub fn pick_key(algo_key: &[u64], i: usize) -> Vec<u64> {
    let mut k = algo_key.to_vec();
    k.extend_from_slice(&[i as u64, Purpose::Policy as u64]);
    k
}

/// M agents playing uniformly at random, as a lockstep batch.
pub fn batch(cfg: &LinearConfig, env_keys: Vec<Vec<u64>>, algo_keys: &[Vec<u64>]) -> LinearBatch {
    let keys = algo_keys
        .iter()
        .flat_map(|k| (0..cfg.m).map(move |i| pick_key(k, i)))
        .collect();
    LinearBatch::unsynced(
        cfg.env.clone(),
        env_keys,
        cfg.m,
        1.0,
        Box::new(|_| 0.0),
        u32::MAX,
        Some(keys),
        cfg.reward_bound(),
    )
}
