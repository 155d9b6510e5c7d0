//! The decentralized multi-armed family (ALGORITHMS.md 2, Zhu et al.):
//! `gossip_ucb`, its epsilon-DP form `fed_ucb_gossip`, and the baselines
//! `local_ucb` and `oracle_ucb`.
//!
//! Each algorithm is a description of its batch ([`gossip_batch`]: the
//! policy, the confidence constant and, for `fed_ucb_gossip`, the
//! privatizer of [`fed_ucb_gossip`]); the round loop ([`run`]) is written
//! once and drives a backend's [`GossipOps`]. Choices where the spec leaves
//! room, for a researcher reproducing the paper:
//! * The M initial pulls are rounds 1..M of the horizon and count in regret;
//!   gossip (one uniformly random edge per round) starts at round M + 1.
//! * C_{i,k}(t) = sqrt(2 c log t / n_{i,k}) (UCB1 form; the paper's Lemma 4
//!   constant was lost in the seed), c = `confidence_scale`, default 1.
//! * n~_{i,k} <- max(n_{i,k}, max over neighbours j of n~_{j,k}) from the
//!   neighbours' previous-round values (the agent's own previous n~ is not
//!   in the max, as written in the spec).
//! * `oracle_ucb`'s bonus uses the pooled count sum_j n_{j,k}.
//! * Before an arm's first pull its mean estimate is 0 (only during the
//!   initial pulls).

pub mod fed_ucb_gossip;
pub mod params;

use crate::backend::BatchError;
use crate::backend::gossip::{GossipBatch, GossipObservation, GossipOps, GossipPolicy};
use crate::env::mab::{MabEnv, MabEnvSpec};
use crate::graph::{Graph, GraphSpec};
use crate::rng::{Purpose, Stream};

/// Algorithms of the decentralized multi-armed family.
pub const ALGORITHMS: &[(&str, &str)] = &[
    (
        "gossip_ucb",
        "Gossip_UCB: local UCB with gossip-averaged estimates, one random edge per round (Zhu et al.)",
    ),
    (
        "fed_ucb_gossip",
        "Fed_UCB: Gossip_UCB with epsilon-DP binary partial sums, Laplace noise (Zhu et al.)",
    ),
    (
        "local_ucb",
        "UCB1 on each agent's own biased observations, no communication",
    ),
    (
        "oracle_ucb",
        "full communication without delay: pooled means and counts",
    ),
];

/// Environments of the decentralized multi-armed family.
pub const ENVIRONMENTS: &[(&str, &str)] = &[
    (
        "mab_heterogeneous",
        "Zhu et al.'s synthetic: mu_{i,k} ~ U[0,1] per federation, observations mu_{i,k} + N(0, noise_std^2)",
    ),
    (
        "uci_diabetes",
        "Zhu et al.'s real data: the UCI diabetes records (user-supplied CSV, `data`), hospitals = consecutive parts, 5 drug-class arms, reward 1 for readmission >30",
    ),
];

/// Gossip-family algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GossipAlgorithm {
    /// Zhu et al.'s Gossip_UCB.
    GossipUcb,
    /// Zhu et al.'s Fed_UCB: Gossip_UCB with every agent's per-arm stream
    /// privatized by the binary partial-sum mechanism.
    FedUcbGossip,
    /// UCB1 on own (biased) observations, no communication.
    LocalUcb,
    /// Full communication without delay.
    OracleUcb,
}

/// A cell's resolved configuration for the gossip family.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GossipConfig {
    /// Algorithm.
    pub algorithm: GossipAlgorithm,
    /// Environment (N agents, M arms, noise).
    pub env: MabEnvSpec,
    /// Rounds T.
    pub horizon: u64,
    /// Communication graph.
    pub graph: GraphSpec,
    /// c of the confidence width.
    pub confidence_scale: f64,
    /// The privatizer's settings (`fed_ucb_gossip`; epsilon = infinity
    /// gives back `gossip_ucb`).
    pub privacy: fed_ucb_gossip::PrivacyConfig,
}

/// The key of a federation's random-edge stream (from the algorithm key,
/// so that each algorithm draws its own edges but repetitions compare).
pub fn edge_key(algo_key: &[u64]) -> Vec<u64> {
    let mut k = algo_key.to_vec();
    k.push(Purpose::Graph as u64);
    k.push(1);
    k
}

/// The configuration as a batch of federations: `env_keys` and `algo_keys`
/// are the federations' keys (one pair per repetition). One graph per
/// federation, drawn from its algorithm key (random graphs differ per
/// repetition); a graph that cannot be built is an error naming why.
pub fn gossip_batch(cfg: &GossipConfig, env_keys: &[Vec<u64>], algo_keys: &[Vec<u64>]) -> Result<GossipBatch, String> {
    let mut graphs = Vec::with_capacity(algo_keys.len());
    for k in algo_keys {
        let mut key = k.clone();
        key.push(Purpose::Graph as u64);
        graphs.push(Graph::build(&cfg.graph, cfg.env.agents, &mut Stream::new(&key)).map_err(|e| e.to_string())?);
    }
    let policy = match cfg.algorithm {
        GossipAlgorithm::GossipUcb | GossipAlgorithm::FedUcbGossip => GossipPolicy::Gossip,
        GossipAlgorithm::LocalUcb => GossipPolicy::Local,
        GossipAlgorithm::OracleUcb => GossipPolicy::Oracle,
    };
    let privacy = match cfg.algorithm {
        GossipAlgorithm::FedUcbGossip => {
            fed_ucb_gossip::privatizer(&cfg.privacy, cfg.horizon, cfg.env.agents, algo_keys)
        }
        _ => None,
    };
    Ok(GossipBatch {
        envs: env_keys.iter().map(|k| MabEnv::new(&cfg.env, k)).collect(),
        graphs,
        edge_keys: algo_keys.iter().map(|k| edge_key(k)).collect(),
        horizon: cfg.horizon,
        policy,
        confidence_scale: cfg.confidence_scale,
        privacy,
    })
}

/// One federation's curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GossipPoint {
    /// Round.
    pub t: u64,
    /// The federation's state.
    pub obs: GossipObservation,
}

/// The round loop, written once for every backend: runs `ops` from round
/// `from + 1` to `until` (at most the horizon), observing at each
/// checkpoint in that range; returns one curve per federation.
pub fn run(
    batch: &GossipBatch,
    ops: &mut dyn GossipOps,
    from: u64,
    until: u64,
    checkpoints: &[u64],
    points: &mut [Vec<GossipPoint>],
) -> Result<(), BatchError> {
    crate::algo::rounds::run_curves(
        ops,
        batch.federations(),
        from,
        until.min(batch.horizon),
        checkpoints,
        points,
        |t, obs| GossipPoint { t, obs },
    )
}
