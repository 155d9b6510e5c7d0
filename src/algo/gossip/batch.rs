//! The gossip family's batched contract (Zhu et al.): a batch of
//! federations of one multi-armed configuration, and the batched operations
//! each device runs over all of them (the CPU's in [`super::cpu`], the CUDA
//! host code in [`super::cuda`]; [`super::ops`] picks one for a backend).
//!
//! Round t of every agent of every federation, in lockstep: pull (the
//! initial pulls of rounds 1..M, the forced pull of an arm whose count lags
//! the network estimate by more than N, or the index argmax); observe
//! mu_{i,k} + noise; update the count and the (private) mean estimate; then
//! the network-count estimates n~ from the neighbours' previous values and
//! the gossip of one uniformly random edge. The policy decides which index
//! and which communication ([`GossipPolicy`]).

use crate::env::mab::MabEnv;
use crate::graph::Graph;

/// How agents choose and communicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GossipPolicy {
    /// Zhu et al.'s Gossip_UCB (and, with [`GossipPrivacy`], Fed_UCB):
    /// forced pulls, index theta_{i,k} + C_{i,k}(t), one random edge per
    /// round.
    Gossip,
    /// UCB1 on the agent's own observations; no communication.
    Local,
    /// Full communication without delay: index (1/N) sum_j X_bar_{j,k} +
    /// sqrt(2 c log t / sum_j n_{j,k}), the same for every agent.
    Oracle,
}

/// The binary partial-sum privatizer of every agent's per-arm streams
/// ([`crate::privacy::partial_sum`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GossipPrivacy {
    /// Target epsilon (for the confidence term).
    pub epsilon: f64,
    /// Laplace scale of each block: (hi - lo) / epsilon'.
    pub scale: f64,
    /// Observations are clipped to [lo, hi] before entering the sums.
    pub lo: f64,
    /// Upper clip.
    pub hi: f64,
    /// c_priv of the confidence term.
    pub c_priv: f64,
    /// log2 T.
    pub log2_horizon: f64,
    /// Folded noise key of every agent, federation-major (arm k's key is
    /// `fold_more(key, k)`).
    pub noise_keys: Vec<u64>,
    /// `sampler: discrete`: observations rounded to the lattice and each
    /// block's noise drawn from this discrete Laplace
    /// ([`crate::privacy::partial_sum::DiscretePartialSum`]); `scale` is
    /// then unused. None: the float Laplace of scale `scale`.
    pub discrete: Option<crate::privacy::lattice::DiscreteLaplace>,
}

/// A batch of federations of one gossip-family configuration.
pub struct GossipBatch {
    /// Each federation's environment instance (N agents, M arms).
    pub envs: Vec<MabEnv>,
    /// Each federation's graph.
    pub graphs: Vec<Graph>,
    /// Each federation's key of its random-edge stream.
    pub edge_keys: Vec<Vec<u64>>,
    /// The policy.
    pub policy: GossipPolicy,
    /// c of C_{i,k}(t) = sqrt(2 c log t / n_{i,k}).
    pub confidence_scale: f64,
    /// The privatizer (Fed_UCB), if any.
    pub privacy: Option<GossipPrivacy>,
}

impl GossipBatch {
    /// Federations in the batch.
    pub fn federations(&self) -> usize {
        self.envs.len()
    }
}

/// One federation's state as [`crate::algo::rounds::RoundOps::observe`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GossipObservation {
    /// Cumulative group pseudo-regret (agents summed in order each round).
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Max over arms and agents of |estimate_{i,k} - the agents' mean
    /// estimate of arm k|: how far the agents disagree (0 for the oracle,
    /// which plays on the pooled mean), the estimate being what the agent
    /// plays on (theta for gossip, its own mean for local).
    pub consensus_error: f64,
    /// Max over agents and arms of |estimate_{i,k} - mu_k|: the estimation
    /// error against the agents' average mean (it includes the bias the
    /// privatizer's clipping adds).
    pub estimate_error: f64,
    /// Forced pulls so far (all agents).
    pub forced_pulls: u64,
    /// Observations the privatizer's clipping changed.
    pub clipped: u64,
}

/// The state of one federation a backend reports (agent-major rows of M
/// arms), from which [`observation`] computes what is recorded.
pub struct FederationState<'a> {
    /// theta_{i,k}.
    pub theta: &'a [f64],
    /// X_bar_{i,k}.
    pub xbar: &'a [f64],
    /// Cumulative regret per agent.
    pub regret: &'a [f64],
    /// Cumulative group regret.
    pub group: f64,
    /// Forced pulls (all agents).
    pub forced: u64,
    /// Clipped observations (all agents).
    pub clipped: u64,
}

/// What is recorded of a federation (the same code for every backend).
pub fn observation(policy: GossipPolicy, env: &MabEnv, s: &FederationState<'_>) -> GossipObservation {
    let (n, m) = (env.spec.agents, env.spec.arms);
    let est: &[f64] = match policy {
        GossipPolicy::Gossip => s.theta,
        _ => s.xbar,
    };
    let (mut consensus, mut error) = (0.0f64, 0.0f64);
    for k in 0..m {
        let pooled = (0..n).map(|i| s.xbar[i * m + k]).sum::<f64>() / n as f64;
        let played = |i: usize| {
            if policy == GossipPolicy::Oracle {
                pooled
            } else {
                est[i * m + k]
            }
        };
        let mean = (0..n).map(played).sum::<f64>() / n as f64;
        for i in 0..n {
            consensus = consensus.max((played(i) - mean).abs());
            error = error.max((played(i) - env.means[k]).abs());
        }
    }
    GossipObservation {
        group_regret: s.group,
        agent_regret_max: s.regret.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        consensus_error: consensus,
        estimate_error: error,
        forced_pulls: s.forced,
        clipped: s.clipped,
    }
}

