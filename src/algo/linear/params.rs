//! The linear family's parameters: a cell's raw
//! parameters resolved into its [`LinearConfig`] -- the environment, the
//! agents, the learners' confidence parameters, then each algorithm's own
//! (FedLinUCB's batch and protocol, FedUCB's privacy, sync regime and
//! graph), and the rule every privacy figure needs (L at least the largest
//! action norm).

use super::{Calibration, LinearAlgorithm, LinearConfig, Protocol, SyncRegime};
use crate::algo::params::Value;
use crate::algo::resolve::Params;
use crate::env::{LinearEnvKind, LinearEnvSpec};
use crate::graph::GraphSpec;

/// Resolves a linear-family cell.
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (algo, env, horizon) = p.cell();
    let algorithm: LinearAlgorithm = p.algorithm(algo);
    let env_spec = environment(p, env);
    let m = if algorithm == LinearAlgorithm::Linucb {
        1
    } else {
        p.i("m")
    };
    p.set("m", Value::Int(m));
    let mut cfg = LinearConfig {
        algorithm,
        env: env_spec,
        m: m as usize,
        horizon,
        lambda: 1.0,
        alpha: 0.1,
        confidence_scale: 1.0,
        s_bound: 1.0,
        l_bound: 1.0,
        subgaussian: 0.5,
        privacy: None,
        protocol: Protocol::None,
        batch_size: 25,
        calibration: Calibration::Code,
        schedule: super::Schedule::Paper,
        neighbours: crate::privacy::accountant::Neighbours::AddRemove,
        clip_rewards: false,
        sync: SyncRegime::Log,
        refactor_every: 256,
        vecsum_scale: 1.0,
        graph: GraphSpec::Complete,
        gamma: 1,
        noise: true,
    };
    if algorithm != LinearAlgorithm::Random {
        learner(p, &mut cfg);
    }
    match algorithm {
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent => {
            cfg.lambda = p.f("lambda");
            p.set("lambda", Value::Float(cfg.lambda));
        }
        LinearAlgorithm::Random => {}
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb => fedlinucb(p, &mut cfg),
        LinearAlgorithm::FeducbCentralized | LinearAlgorithm::FeducbDecentralized => feducb(p, &mut cfg),
    }
    // Every privacy figure's sensitivity assumes ||x|| <= L: a private cell
    // whose L is below the environment's largest action norm has none.
    let (max_norm, why) = cfg.env.max_action_norm();
    if cfg.privacy.is_some() && cfg.l_bound < max_norm {
        p.err(
            "l_bound",
            format!(
                "L = {} is below {env}'s largest action norm {max_norm} ({why}), and every privacy figure \
                 assumes ||x|| <= L; allowed for a private cell: l_bound >= {max_norm}",
                cfg.l_bound
            ),
        );
    }
    vecsum_reachable(p, &cfg);
    Box::new(cfg)
}

/// `sdp_vecsum` under `calibration: exact`: a target its exact accountant
/// cannot reach (its Binomial parts beyond 2^40 trials are not computed) is
/// refused, naming the least figure it can state. Checked only for values
/// that are themselves valid.
fn vecsum_reachable(p: &mut Params<'_>, cfg: &LinearConfig) {
    let Some((eps, delta)) = cfg.privacy else { return };
    let valid = eps > 0.0 && eps.is_finite() && delta > 0.0 && delta < 1.0 && cfg.m >= 1 && cfg.batch_size >= 1;
    if cfg.protocol != Protocol::SdpVecsum || cfg.calibration != Calibration::Exact || !valid {
        return;
    }
    if let Some(floor) = super::fedlinucb::vecsum_exact_floor(cfg) {
        p.err(
            "epsilon",
            format!(
                "calibration: exact cannot meet epsilon = {eps} for sdp_vecsum here: its exact accountant bounds \
                 Binomial parts of at most 2^40 trials, and with them the figure stays at or above {floor:.4} at \
                 delta = {delta} (T = {}, M = {}, d = {}); allowed: epsilon above {floor:.4}, or calibration: code \
                 (the authors' counts, whose figure is reported, not targeted)",
                cfg.horizon, cfg.m, cfg.env.d
            ),
        );
    }
}

/// The environment: d, K (its default on linear_gap reads d), and for
/// linear_sphere (d >= 2) its noise and reward (`reward_on: normalized`,
/// the well-specified variant, by default; `raw` is the authors' code,
/// kept for reproducing their figures).
fn environment(p: &mut Params<'_>, env: &str) -> LinearEnvSpec {
    let d = p.i("d");
    p.set("d", Value::Int(d));
    let k = p.i("k");
    p.set("k", Value::Int(k));
    let kind = if env == "linear_gap" {
        LinearEnvKind::Gap
    } else {
        if d < 2 {
            p.err("d", "linear_sphere needs d >= 2");
        }
        let noise_std = p.f("noise_std");
        let reward_on = p.s("reward_on");
        p.set("noise_std", Value::Float(noise_std));
        p.set("reward_on", Value::Str(reward_on.clone()));
        LinearEnvKind::Sphere {
            noise_std,
            reward_on_raw: reward_on == "raw",
        }
    };
    LinearEnvSpec {
        kind,
        d: d as usize,
        k: k as usize,
    }
}

/// A learner's confidence parameters (the table's defaults for
/// (Private-)FedLinUCB are Zhou & Chowdhury's: alpha 0.01, S = sqrt(d)).
fn learner(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    cfg.alpha = p.f("alpha");
    cfg.confidence_scale = p.f("confidence_scale");
    cfg.s_bound = p.f("s_bound");
    cfg.l_bound = p.f("l_bound");
    cfg.subgaussian = p.f("subgaussian");
    cfg.refactor_every = p.i("refactor_every") as u32;
    p.set("alpha", Value::Float(cfg.alpha));
    p.set("confidence_scale", Value::Float(cfg.confidence_scale));
    p.set("s_bound", Value::Float(cfg.s_bound));
    p.set("l_bound", Value::Float(cfg.l_bound));
    p.set("subgaussian", Value::Float(cfg.subgaussian));
    p.set("refactor_every", Value::Int(i64::from(cfg.refactor_every)));
}

/// A private cell's (epsilon, delta), both required (`.inf` is refused:
/// no privacy is another algorithm or setting).
fn privacy(p: &mut Params<'_>) -> Option<(f64, f64)> {
    match (
        p.get("epsilon").and_then(Value::as_f64),
        p.get("delta").and_then(Value::as_f64),
    ) {
        (Some(e), _) if e.is_infinite() => {
            p.err(
                "epsilon",
                "= .inf means no privacy: use fedlinucb, protocol: none or private: false",
            );
            None
        }
        (Some(e), _) if crate::privacy::gdp::epsilon_beyond(e).is_some() => {
            p.err("epsilon", crate::privacy::gdp::epsilon_beyond(e).unwrap_or_default());
            None
        }
        (Some(e), Some(dl)) => {
            p.set("epsilon", Value::Float(e));
            p.set("delta", Value::Float(dl));
            Some((e, dl))
        }
        (e, dl) => {
            if e.is_none() {
                p.err("epsilon", "missing; a private run needs epsilon (number > 0)");
            }
            if dl.is_none() {
                p.err("delta", "missing; a private run needs delta (number in (0, 1))");
            }
            None
        }
    }
}

/// The private mechanism's noise (`noise`) and accounting parameters: the neighbouring relation
/// (`neighbours`, validated as a choice by the parameter table, whose
/// default is each paper's own) and reward clipping (`clip_rewards`).
fn accounting(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    use crate::privacy::accountant::Neighbours;
    cfg.noise = p.b("noise");
    p.set("noise", Value::Bool(cfg.noise));
    cfg.neighbours = if p.s("neighbours") == "add_remove" {
        Neighbours::AddRemove
    } else {
        Neighbours::Substitute
    };
    p.set("neighbours", Value::Str(cfg.neighbours.name().into()));
    cfg.clip_rewards = p.b("clip_rewards");
    p.set("clip_rewards", Value::Bool(cfg.clip_rewards));
}

/// (Private-)FedLinUCB: the batch B <= T; the protocol, its privacy,
/// calibration and accounting.
fn fedlinucb(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    let (b, horizon) = (p.i("batch_size"), cfg.horizon);
    if b as u64 > horizon {
        let default = if p.get("batch_size").is_none() {
            " (the default: set batch_size)"
        } else {
            ""
        };
        p.err(
            "batch_size",
            format!("B = {b}{default} exceeds the horizon T = {horizon}; allowed: 1 <= B <= T"),
        );
    }
    cfg.batch_size = b as u64;
    p.set("batch_size", Value::Int(b));
    if cfg.algorithm != LinearAlgorithm::PrivateFedlinucb {
        return;
    }
    let proto = p.s("protocol");
    p.set("protocol", Value::Str(proto.clone()));
    cfg.protocol = match proto.as_str() {
        "sdp_amp" => Protocol::SdpAmp,
        "sdp_vecsum" => Protocol::SdpVecsum,
        "alt" => Protocol::Alt,
        "none" => Protocol::None,
        _ => Protocol::Ldp,
    };
    if cfg.protocol == Protocol::SdpVecsum {
        cfg.vecsum_scale = p.f("vecsum_scale");
        p.set("vecsum_scale", Value::Float(cfg.vecsum_scale));
    }
    if cfg.protocol != Protocol::None {
        cfg.privacy = privacy(p);
        let cal = p.choice("calibration", &["exact", "code", "theorem"], "private_fedlinucb");
        if cfg.protocol == Protocol::SdpVecsum && cal == "exact" && p.get("vecsum_scale").is_some() {
            p.err(
                "vecsum_scale",
                "vecsum_scale is the constant of the authors' Binomial count and applies to calibration: code or \
                 theorem only (calibration: exact, the default, solves the count from the target)",
            );
        }
        cfg.calibration = Calibration::from_name(&cal);
        p.set("calibration", Value::Str(cal));
        accounting(p, cfg);
    }
}

/// FedUCB: the graph (decentralized), privacy (default on) or lambda, the
/// sync regime (`threshold` needs its D) and, private, its schedule.
fn feducb(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    if cfg.algorithm == LinearAlgorithm::FeducbDecentralized {
        graph(p, cfg);
    }
    let private = p.b("private");
    p.set("private", Value::Bool(private));
    cfg.sync = sync_regime(p);
    if private {
        cfg.privacy = privacy(p);
        let cal = p.choice("calibration", &["exact", "paper"], "FedUCB");
        cfg.calibration = Calibration::from_name(&cal);
        p.set("calibration", Value::Str(cal));
        schedule(p, cfg);
        accounting(p, cfg);
    } else {
        cfg.lambda = p.f("lambda");
        p.set("lambda", Value::Float(cfg.lambda));
    }
}

/// The sync regime (`threshold` needs its D).
fn sync_regime(p: &mut Params<'_>) -> SyncRegime {
    let sync = p.s("sync");
    p.set("sync", Value::Str(sync.clone()));
    match sync.as_str() {
        "every_round" => SyncRegime::EveryRound,
        "sqrt_m" => SyncRegime::SqrtM,
        "threshold" => match p.get("threshold").and_then(Value::as_f64) {
            Some(v) => {
                p.set("threshold", Value::Float(v));
                SyncRegime::Threshold(v)
            }
            None => {
                p.err("threshold", "missing; sync = threshold needs threshold (number > 0)");
                SyncRegime::Log
            }
        },
        _ => SyncRegime::Log,
    }
}

/// A private FedUCB's schedule: `private` (the determinant test through the
/// sparse vector technique; the default of both forms under `calibration:
/// exact`) with its budget share and cap, or `paper`. A schedule that syncs every round depends on no data: nothing
/// to choose.
fn schedule(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    if cfg.sync == SyncRegime::EveryRound {
        return;
    }
    let name = p.choice("schedule", &["private", "paper"], "FedUCB");
    p.set("schedule", Value::Str(name.clone()));
    if name == "private" {
        let share = p.f("schedule_share");
        let cap = p.i("schedule_cap");
        p.set("schedule_share", Value::Float(share));
        p.set("schedule_cap", Value::Int(cap));
        cfg.schedule = super::Schedule::Private {
            share,
            cap: u32::try_from(cap).unwrap_or(u32::MAX),
        };
    }
}

/// Graph and gamma of decentralized FedUCB: builds deterministic graphs (and
/// edge files) now, so that a disconnected graph or gamma > diameter is a job
/// error naming the components or the diameter.
fn graph(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    let Some(spec) = p.graph_spec() else {
        return;
    };
    let gamma = p.i("gamma") as usize;
    p.set("gamma", Value::Int(gamma as i64));
    cfg.gamma = gamma;
    let random = matches!(spec, GraphSpec::ErdosRenyi { .. } | GraphSpec::RandomRegular { .. });
    if let Some(diameter) = p.check_graph(&spec, cfg.m)
        && !random
        && gamma as u32 > diameter
    {
        p.err(
            "gamma",
            format!("gamma = {gamma} exceeds the graph's diameter {diameter}; allowed: 1 <= gamma <= diameter"),
        );
    }
    cfg.graph = spec;
}
