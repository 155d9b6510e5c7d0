//! The gossip family's parameters (Zhu et al.): a cell's raw
//! parameters resolved into its [`GossipConfig`].

use super::fed_ucb_gossip::{BudgetSplit, PrivacyConfig};
use super::{GossipAlgorithm, GossipConfig};
use crate::algo::params::Value;
use crate::algo::resolve::Params;
use crate::env::mab::MabEnvSpec;

/// Resolves a gossip-family cell: agents `m`, `arms`, `noise_std` (default
/// 1), the graph of the gossiping algorithms (deterministic graphs are
/// built now, so a disconnected one is a job error), `confidence_scale`,
/// and for `fed_ucb_gossip` the
/// privatizer (`epsilon` required, `.inf` for none; `budget_split`,
/// `clip_lo` < `clip_hi`, `c_priv`).
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (algo, env, horizon) = p.cell();
    let algorithm: GossipAlgorithm = p.algorithm(algo);
    let uci = env == "uci_diabetes";
    let agents = p.i("m");
    p.set("m", Value::Int(agents));
    let (arms, noise_std, records) = if uci {
        let path = p.s("data");
        p.set("data", Value::Str(path.clone()));
        let records = match crate::env::uci::load(&p.input_path(&path), agents.max(1) as usize) {
            Ok(r) => Some((*r).clone()),
            Err(e) => {
                p.err("data", e.to_string());
                None
            }
        };
        (crate::env::uci::ARMS as i64, 0.0, records)
    } else {
        let (arms, noise_std) = (p.i("arms"), p.f("noise_std"));
        p.set("arms", Value::Int(arms));
        p.set("noise_std", Value::Float(noise_std));
        (arms, noise_std, None)
    };
    if (horizon as i64) < arms {
        p.err(
            "arms",
            format!("{arms} arms need {arms} initial rounds, more than the horizon T = {horizon}"),
        );
    }
    let c = p.f("confidence_scale");
    p.set("confidence_scale", Value::Float(c));
    // local_ucb never communicates and oracle_ucb shares with every agent:
    // neither reads a graph (one runs on the complete graph the batch
    // holds, checked for its size).
    let graph = if matches!(algorithm, GossipAlgorithm::GossipUcb | GossipAlgorithm::FedUcbGossip) {
        p.graph_spec().and_then(|spec| {
            p.check_graph(&spec, agents as usize)?;
            Some(spec)
        })
    } else {
        p.check_graph(&crate::graph::GraphSpec::Complete, agents as usize);
        None
    };
    let privacy = if algorithm == GossipAlgorithm::FedUcbGossip {
        privatizer(p)
    } else {
        PrivacyConfig::default()
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
fn privatizer(p: &mut Params<'_>) -> PrivacyConfig {
    let mut privacy = PrivacyConfig::default();
    match p.get("epsilon").and_then(Value::as_f64) {
        Some(e) => {
            p.set("epsilon", Value::Float(e));
            privacy.epsilon = e;
        }
        None => p.err(
            "epsilon",
            "missing; fed_ucb_gossip needs epsilon (number > 0, or .inf for no privacy)",
        ),
    }
    if !privacy.epsilon.is_finite() {
        return privacy;
    }
    // The accountant states one relation for the partial sums.
    p.substitute_only("fed_ucb_gossip (its figures replace one observation)");
    let split = p.s("budget_split");
    privacy.budget_split = if split == "paper" {
        BudgetSplit::Paper
    } else {
        BudgetSplit::Exact
    };
    p.set("budget_split", Value::Str(split));
    let (lo, hi) = (p.f("clip_lo"), p.f("clip_hi"));
    if lo >= hi {
        p.err("clip_hi", format!("clip_hi = {hi} must exceed clip_lo = {lo}"));
    }
    privacy.clip = (lo, hi);
    privacy.clipping = p.b("clip");
    p.set("clip", Value::Bool(privacy.clipping));
    privacy.c_priv = p.f("c_priv");
    privacy.noise = p.b("noise");
    p.set("noise", Value::Bool(privacy.noise));
    p.set("clip_lo", Value::Float(lo));
    p.set("clip_hi", Value::Float(hi));
    p.set("c_priv", Value::Float(privacy.c_priv));
    privacy
}
