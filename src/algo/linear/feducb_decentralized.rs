//! `feducb_decentralized`: Dubey & Pentland (NeurIPS 2020), Section 4.2,
//! FedUCB on a peer-to-peer graph with gamma-hop delayed messages.
//!
//! The paper's appendix (with the full pseudocode) is not in the seeds; this
//! is the project's reconstruction of the paper's Section 4.2:
//!
//! * Agents sit on a connected graph G; a message moves one hop per round and
//!   is dropped after gamma hops, so agent v hears v' with delay dist(v, v')
//!   when that is at most gamma. N_i = the agents within gamma hops of i
//!   (itself included), n_i = |N_i|.
//! * Each agent keeps gamma estimator slots; in round t it plays with slot
//!   g = t mod gamma (round-robin subsampling) and its observation enters
//!   that slot's local sums (U_{i,g}, u_{i,g}).
//! * Slot (i, g) plays with V = S_{i,g} + U_{i,g}, theta_hat = V^{-1}(s + u),
//!   and beta as in centralized FedUCB with M replaced by n_i; S starts at
//!   n_i rho_min I, s at 0.
//! * Sync request: after playing, log det(V + x x^T + n_i (rho_max - rho_min) I)
//!   minus log det(S_{i,g}) > D / (Delta_{i,g} + 1), with Delta the rounds since the
//!   slot last synced (D as in 1.2). The requester broadcasts its slot at once
//!   and the request travels to N_i; an agent receiving it (delay dist)
//!   broadcasts its own slot g (at most once per round and slot).
//! * A broadcast of slot (j, g) inserts (U_{j,g}, u_{j,g}) as the next leaf
//!   of that slot's PRIVATIZER tree (noise as in 1.2, levels
//!   m = 1 + ceil(log2(T / gamma))) and sends the increment of its noisy
//!   prefix sum (exact sums when not private) to every agent within gamma
//!   hops; the sender applies it at once, the others after dist(i, j) rounds.
//!   The first message a slot receives from a sender also adds
//!   (shift - rho_min) I, so that once every neighbour has spoken
//!   S = n_i shift I + sum of released sums, as in the centralized algorithm.
//!   The sender's U, u and Delta reset.
//! * Counters: `sync_rounds` counts requests, `messages` counts deliveries
//!   (requests and broadcasts, one per receiver).
//!
//! Trees are sized for one leaf per round (capacity 1 + ceil(log2 T) levels)
//! since a slot can be asked to broadcast in any round; the noise uses the
//! spec's m = 1 + ceil(log2(T / gamma)) levels.

//!
//! The algorithm runs on the batched core as a [`LinearBatch`] with a
//! [`Network`] ([`batch`]); the CPU's operations for it are
//! `algo::linear::cpu::peer`.

use super::LinearConfig;
use super::feducb::{DubeyConstants, det_test, width};
use crate::algo::linear::batch::{LinearBatch, Network, Release, SyncRule, SyncWhen, Width};
use crate::graph::Graph;
use crate::privacy::tree::{AgentTrees, NodeNoise};

/// Decentralized FedUCB as a batch: each federation's graph (random graphs
/// drawn from the federation's algorithm key, redrawn until connected),
/// n_i per agent, the widths, test and shifts with M replaced by n_i, and
/// each slot's tree (its noise key from the slot index). `Err(why)` when a
/// graph cannot be built (a loaded job's graphs were validated).
pub fn batch(
    cfg: &LinearConfig,
    env_keys: Vec<Vec<u64>>,
    algo_keys: &[Vec<u64>],
) -> Result<LinearBatch, crate::graph::GraphError> {
    let m = cfg.m;
    let gamma = cfg.gamma.max(1);
    let t_eff = cfg.horizon.div_ceil(gamma as u64).max(1);
    let c = DubeyConstants::with_levels(cfg, 1 + (t_eff as f64).log2().ceil() as usize);
    let cap_levels = 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize;
    let graphs = algo_keys
        .iter()
        .map(|k| {
            let mut key = k.clone();
            key.push(crate::rng::Purpose::Graph as u64);
            Graph::build(&cfg.graph, m, &mut crate::rng::Stream::new(&key))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let reach: Vec<f64> = graphs
        .iter()
        .flat_map(|g| (0..m).map(move |i| (0..m).filter(|&j| g.dist(i, j) as usize <= gamma).count() as f64))
        .collect();
    let private = cfg.privacy.is_some();
    let slots = m * gamma;
    let noise_keys = if private {
        AgentTrees::folded_keys(algo_keys, slots)
    } else {
        Vec::new()
    };
    // A private schedule: one instance per slot, keyed by the slot's key.
    let test = det_test(cfg, &c, reach.iter().copied(), &noise_keys);
    let release = if private {
        Release::Tree {
            sigma: cfg.drawn(c.sigma_n),
            levels: cap_levels,
            noise: NodeNoise::Dubey,
            lattice: super::feducb::node_lattice(cfg, cfg.drawn(c.sigma_n)),
        }
    } else {
        Release::Cumulative
    };
    Ok(LinearBatch {
        env: cfg.env.clone(),
        env_keys,
        noise_keys,
        m,
        lambda: c.rho_min,
        beta: Width::LogDet {
            scale: cfg.confidence_scale,
            sigma: cfg.subgaussian,
            agents: reach.iter().map(|&n| width(cfg, &c, n)).collect(),
        },
        sync: Some(SyncRule {
            when: SyncWhen::Adaptive(test),
            release,
            diag: c.shift,
            messages_per_sync: 0,
        }),
        network: Some(Network {
            graphs,
            gamma,
            bases: reach.iter().map(|n| n * c.rho_min).collect(),
            first_heard: c.shift - c.rho_min,
        }),
        refactor_every: cfg.refactor_every,
        random_policy: None,
        reward_bound: cfg.reward_bound(),
    })
}
