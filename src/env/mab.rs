//! Environments of the decentralized multi-armed family (Zhu et
//! al.): N agents, M arms, agent i's observations of arm k have a locally
//! biased mean mu_{i,k}; the true mean of arm k is mu_k = (1/N) sum_i
//! mu_{i,k}, and regret is measured against the best true arm.
//!
//! `mab_heterogeneous` (Zhu et al.'s synthetic): mu_{i,k} ~ U[0, 1] drawn per
//! federation from the environment key, observations mu_{i,k} + N(0,
//! sigma^2). Agent i's observation noise is one stream keyed by (environment
//! key, agent, rewards) that advances by exactly one normal per round
//! whatever arm is pulled, so every algorithm of a comparison sees the same
//! noise (common random numbers).

use crate::rng::{Purpose, Stream};

/// Shape of a multi-armed environment.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MabEnvSpec {
    /// Agents N.
    pub agents: usize,
    /// Arms M.
    pub arms: usize,
    /// Standard deviation of the observation noise (`mab_heterogeneous`).
    pub noise_std: f64,
    /// `uci_diabetes`: the records pulls resample from (then `arms` is
    /// [`super::uci::ARMS`] and the local means are the records' shares of
    /// reward 1).
    pub records: Option<super::uci::RecordCounts>,
}

/// One federation's instance.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MabEnv {
    /// Its specification.
    pub spec: MabEnvSpec,
    /// mu_{i,k}, agent-major (N x M).
    pub local_means: Vec<f64>,
    /// mu_k.
    pub means: Vec<f64>,
    /// max_k mu_k.
    pub best: f64,
    key: Vec<u64>,
}

impl MabEnv {
    /// Draws the federation's means from its environment key (job seed,
    /// environment scope, repetition): mu_{i,k} in agent-major order.
    pub fn new(spec: &MabEnvSpec, key: &[u64]) -> Self {
        if let Some(r) = &spec.records {
            let means = r
                .ones
                .iter()
                .zip(&r.total)
                .map(|(&o, &n)| o as f64 / n.max(1) as f64)
                .collect();
            return Self::with_means(spec, means, key);
        }
        let mut k = key.to_vec();
        k.push(Purpose::EnvParameter as u64);
        let mut s = Stream::new(&k);
        let local_means: Vec<f64> = (0..spec.agents * spec.arms).map(|_| s.uniform()).collect();
        Self::with_means(spec, local_means, key)
    }

    /// An instance with given local means (agent-major), e.g. a constructed
    /// biased instance in tests.
    pub fn with_means(spec: &MabEnvSpec, local_means: Vec<f64>, key: &[u64]) -> Self {
        let (n, m) = (spec.agents, spec.arms);
        let means: Vec<f64> = (0..m)
            .map(|a| (0..n).map(|i| local_means[i * m + a]).sum::<f64>() / n as f64)
            .collect();
        let best = means.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Self {
            spec: spec.clone(),
            local_means,
            means,
            best,
            key: key.to_vec(),
        }
    }

    /// The key of agent `i`'s observation noise.
    pub fn noise_key(&self, i: usize) -> Vec<u64> {
        let mut k = self.key.clone();
        k.extend_from_slice(&[i as u64, Purpose::Rewards as u64]);
        k
    }

    /// Agent `i`'s observation of arm `arm`, drawing one number from its
    /// stream: mu_{i,k} plus a normal, or (records) the reward of record
    /// floor(u n) of the agent's n records of the arm, ones first.
    #[inline]
    pub fn observe(&self, i: usize, arm: usize, noise: &mut Stream) -> f64 {
        let e = i * self.spec.arms + arm;
        match &self.spec.records {
            Some(r) => {
                let idx = (noise.uniform() * r.total[e] as f64) as u64;
                if idx < r.ones[e] { 1.0 } else { 0.0 }
            }
            None => self.local_means[e] + self.spec.noise_std * noise.normal(),
        }
    }

    /// Pseudo-regret of pulling `arm`: mu_best - mu_arm.
    #[inline]
    pub fn regret(&self, arm: usize) -> f64 {
        self.best - self.means[arm]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_are_uniform_and_true_means_average_agents() {
        let spec = MabEnvSpec {
            agents: 10,
            arms: 5,
            noise_std: 1.0,
            records: None,
        };
        let mut all = Vec::new();
        for rep in 0..200u64 {
            let e = MabEnv::new(&spec, &[1, 2, rep]);
            for a in 0..5 {
                let avg: f64 = (0..10).map(|i| e.local_means[i * 5 + a]).sum::<f64>() / 10.0;
                assert!((avg - e.means[a]).abs() < 1e-15);
            }
            assert_eq!(e.best, e.means.iter().copied().fold(0.0, f64::max));
            all.extend_from_slice(&e.local_means);
        }
        // U[0,1]: mean 1/2, variance 1/12 (10000 draws: tolerance ~5 sigma).
        let n = all.len() as f64;
        let mean = all.iter().sum::<f64>() / n;
        let var = all.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        assert!((mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / n).sqrt(), "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.005, "{var}");
        assert!(all.iter().all(|&x| (0.0..1.0).contains(&x)));
        // Different repetitions, different instances; same key, same instance.
        assert_ne!(MabEnv::new(&spec, &[1, 2, 0]), MabEnv::new(&spec, &[1, 2, 1]));
        assert_eq!(MabEnv::new(&spec, &[1, 2, 0]), MabEnv::new(&spec, &[1, 2, 0]));
    }
}
