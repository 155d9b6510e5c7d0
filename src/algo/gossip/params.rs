//! The gossip family's parameters (Zhu et al.): a cell's raw
//! parameters resolved into its [`GossipConfig`].

use super::fed_ucb_gossip::PrivacyConfig;
use super::table::{ARMS, BUDGET_SPLIT, C_PRIV, CLIP, CLIP_HI, CLIP_LO, DATA};
use super::{GossipAlgorithm, GossipConfig, GossipEnvironment};
use crate::algo::params::{CONFIDENCE_SCALE, EPSILON, M, NOISE, NOISE_STD, SAMPLER};
use crate::privacy::lattice::Sampler;
use crate::algo::resolve::Params;
use crate::env::mab::MabEnvSpec;

/// Resolves a gossip-family cell: agents `m`, `arms`, `noise_std` (default
/// 1), the graph of the gossiping algorithms (deterministic graphs are
/// built now, so a disconnected one is a job error), `confidence_scale`,
/// and for `fed_ucb_gossip` the
/// privatizer (`epsilon` required, `.inf` for none; `budget_split`,
/// `clip_lo` < `clip_hi`, `c_priv`).
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (_, _, horizon) = p.cell();
    let algorithm: GossipAlgorithm = p.algorithm();
    let agents = p.take(M);
    let (arms, noise_std, records) = match p.environment() {
        GossipEnvironment::UciDiabetes => {
            let path = p.take(DATA);
            let loaded = if path.trim().is_empty() {
                Err("an empty path: name diabetic_data.csv (a relative path starts at the job file's folder)".to_owned())
            } else {
                crate::env::uci::load(&p.input_path(&path), agents.max(1) as usize).map_err(|e| e.to_string())
            };
            let records = match loaded {
                Ok(r) => Some((*r).clone()),
                Err(e) => {
                    p.err(DATA, e);
                    None
                }
            };
            (crate::env::uci::ARMS as i64, 0.0, records)
        }
        GossipEnvironment::MabHeterogeneous => (p.take(ARMS), p.take(NOISE_STD), None),
    };
    if (horizon as i64) < arms {
        p.err(
            ARMS,
            format!("{arms} arms need {arms} initial rounds, more than the horizon T = {horizon}"),
        );
    }
    let c = p.take(CONFIDENCE_SCALE);
    // local_ucb never communicates and oracle_ucb shares with every agent:
    // neither reads a graph (one runs on the complete graph the batch
    // holds, checked for its size).
    let graph = match algorithm {
        GossipAlgorithm::GossipUcb | GossipAlgorithm::FedUcbGossip => p.graph_spec().and_then(|spec| {
            p.check_graph(&spec, agents as usize)?;
            Some(spec)
        }),
        GossipAlgorithm::LocalUcb | GossipAlgorithm::OracleUcb => {
            p.check_graph(&crate::graph::GraphSpec::Complete, agents as usize);
            None
        }
    };
    let privacy = match algorithm {
        GossipAlgorithm::FedUcbGossip => privatizer(p, horizon),
        GossipAlgorithm::GossipUcb | GossipAlgorithm::LocalUcb | GossipAlgorithm::OracleUcb => {
            PrivacyConfig::default()
        }
    };
    let graph = graph.unwrap_or(crate::graph::GraphSpec::Complete);
    Box::new(GossipConfig {
        algorithm,
        env: MabEnvSpec {
            agents: agents as usize,
            arms: arms as usize,
            noise_std,
            records,
        },
        horizon,
        graph,
        confidence_scale: c,
        privacy,
    })
}

/// `fed_ucb_gossip`'s privatizer: epsilon (required; `.inf` for none, and
/// then its other settings do not apply, so a grid over them yields one
/// cell, not several equal ones), the budget split, clipping and c_priv.
fn privatizer(p: &mut Params<'_>, horizon: u64) -> PrivacyConfig {
    let mut privacy = PrivacyConfig::default();
    match p.given(EPSILON) {
        Some(e) => {
            p.record(EPSILON, &e);
            privacy.epsilon = e;
        }
        None => p.err(
            EPSILON,
            "missing; fed_ucb_gossip needs epsilon (number > 0, or .inf for no privacy)",
        ),
    }
    if !privacy.epsilon.is_finite() {
        return privacy;
    }
    // The accountant states one relation for the partial sums.
    p.substitute_only("fed_ucb_gossip (its figures replace one observation)");
    privacy.budget_split = p.take(BUDGET_SPLIT);
    let (lo, hi) = (p.take(CLIP_LO), p.take(CLIP_HI));
    if lo >= hi {
        p.err(CLIP_HI, format!("clip_hi = {hi} must exceed clip_lo = {lo}"));
    }
    privacy.clip = (lo, hi);
    privacy.clipping = p.take(CLIP);
    privacy.c_priv = p.take(C_PRIV);
    privacy.noise = p.take(NOISE);
    privacy.sampler = p.take(SAMPLER);
    if privacy.sampler == Sampler::Discrete {
        if !privacy.clipping {
            p.err(
                SAMPLER,
                "sampler: discrete needs clipping: true (an unclipped observation has no lattice sensitivity)",
            );
        } else if super::fed_ucb_gossip::lattice_laplace(&privacy, horizon).is_none() {
            p.err(
                SAMPLER,
                format!(
                    "sampler: discrete cannot reach epsilon' = {:.3e} per block on the lattice 2^-20 over the clipping \
                     range (a discrete Laplace needs epsilon' of at least the range's width in steps over 2^40): raise \
                     epsilon or use sampler: float",
                    super::fed_ucb_gossip::block_epsilon(&privacy, horizon)
                ),
            );
        }
    }
    privacy
}
