//! `random`: every agent plays a uniformly random action. Not from a paper:
//! the floor every learning algorithm must beat (used by the sanity tests).

use super::LinearConfig;
use crate::algo::{Counters, Federation};
use crate::backend::{Backend, Workspace};
use crate::env::{AgentStreams, LinearEnv};
use crate::rng::{Purpose, Stream};

/// M agents playing uniformly at random.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RandomPolicy {
    env: LinearEnv,
    streams: Vec<AgentStreams>,
    picks: Vec<Stream>,
    ws: Workspace,
    regret: Vec<f64>,
}

impl RandomPolicy {
    /// New federation.
    pub fn new(cfg: &LinearConfig, env: LinearEnv, algo_key: &[u64]) -> Self {
        let picks = (0..cfg.m).map(|i| Stream::new(&Self::pick_key(algo_key, i))).collect();
        Self {
            streams: (0..cfg.m).map(|i| env.agent_streams(i)).collect(),
            ws: Workspace::new(cfg.env.d, cfg.env.k),
            regret: vec![0.0; cfg.m],
            picks,
            env,
        }
    }
}

impl RandomPolicy {
    /// The key of agent `i`'s action picks.
    pub fn pick_key(algo_key: &[u64], i: usize) -> Vec<u64> {
        let mut k = algo_key.to_vec();
        k.extend_from_slice(&[i as u64, Purpose::Policy as u64]);
        k
    }
}

impl Federation for RandomPolicy {
    fn round(&mut self, _t: u64, _backend: &dyn Backend) -> f64 {
        let mut total = 0.0;
        for (i, s) in self.streams.iter_mut().enumerate() {
            self.env.draw(s, &mut self.ws.ds);
            let arm = self.picks[i].below(self.ws.ds.k as u64) as usize;
            let mean = self.ws.ds.mean[arm];
            let _ = self.env.reward(s, mean); // keeps reward streams aligned with learners
            let r = self.ws.ds.best - mean;
            self.regret[i] += r;
            total += r;
        }
        total
    }

    fn counters(&self) -> Counters {
        Counters::default()
    }

    fn agent_regret(&self) -> &[f64] {
        &self.regret
    }
}
