//! The linear family's parameters: a cell's raw
//! parameters resolved into its [`LinearConfig`] -- the environment, the
//! agents, the learners' confidence parameters, then each algorithm's own
//! (FedLinUCB's batch and protocol, FedUCB's privacy, sync regime and
//! graph), and the rule every privacy figure needs (L at least the largest
//! action norm).

use super::table::{
    ACTIONS, ALPHA, BATCH_SIZE, CLIP_REWARDS, DIM, GAMMA, L_BOUND, LAMBDA, PRIVATE, PROTOCOL, REFACTOR_EVERY, REWARD_ON,
    S_BOUND, SCHEDULE, SCHEDULE_CAP, SCHEDULE_SHARE, SUBGAUSSIAN, SYNC, THRESHOLD, VECSUM_SCALE,
};
use super::{
    Calibration, LinearAlgorithm, LinearConfig, LinearEnvironment, Protocol, RewardOn, ScheduleName, SyncName, SyncRegime,
};
use crate::algo::params::{CALIBRATION, CONFIDENCE_SCALE, DELTA, EPSILON, M, NEIGHBOURS, NOISE, NOISE_STD, SAMPLER};
use crate::privacy::lattice::Sampler;
use crate::algo::resolve::Params;
use crate::env::{LinearEnvKind, LinearEnvSpec};
use crate::graph::GraphSpec;

/// Resolves a linear-family cell.
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (_, env, horizon) = p.cell();
    let algorithm: LinearAlgorithm = p.algorithm();
    let env_spec = environment(p);
    let m = if algorithm == LinearAlgorithm::Linucb {
        1
    } else {
        p.read(M)
    };
    p.record(M, &m);
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
        sampler: Sampler::Float,
    };
    if algorithm != LinearAlgorithm::Random {
        learner(p, &mut cfg);
    }
    match algorithm {
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent => cfg.lambda = p.take(LAMBDA),
        LinearAlgorithm::Random => {}
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb => fedlinucb(p, &mut cfg),
        LinearAlgorithm::FeducbCentralized | LinearAlgorithm::FeducbDecentralized => feducb(p, &mut cfg),
    }
    // Every privacy figure's sensitivity assumes ||x|| <= L: a private cell
    // whose L is below the environment's largest action norm has none.
    let (max_norm, why) = cfg.env.max_action_norm();
    if cfg.privacy.is_some() && cfg.l_bound < max_norm {
        p.err(
            L_BOUND,
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
            EPSILON,
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
fn environment(p: &mut Params<'_>) -> LinearEnvSpec {
    let d = p.take(DIM);
    let k = p.take(ACTIONS);
    let kind = match p.environment() {
        LinearEnvironment::LinearGap => LinearEnvKind::Gap,
        LinearEnvironment::LinearSphere => {
            if d < 2 {
                p.err(DIM, "linear_sphere needs d >= 2");
            }
            let noise_std = p.take(NOISE_STD);
            let reward_on_raw = match p.take(REWARD_ON) {
                RewardOn::Raw => true,
                RewardOn::Normalized => false,
            };
            LinearEnvKind::Sphere {
                noise_std,
                reward_on_raw,
            }
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
    cfg.alpha = p.take(ALPHA);
    cfg.confidence_scale = p.take(CONFIDENCE_SCALE);
    cfg.s_bound = p.take(S_BOUND);
    cfg.l_bound = p.take(L_BOUND);
    cfg.subgaussian = p.take(SUBGAUSSIAN);
    cfg.refactor_every = p.read(REFACTOR_EVERY) as u32;
    p.record(REFACTOR_EVERY, &i64::from(cfg.refactor_every));
}

/// A private cell's (epsilon, delta), both required (`.inf` is refused:
/// no privacy is another algorithm or setting).
fn privacy(p: &mut Params<'_>) -> Option<(f64, f64)> {
    match (p.given(EPSILON), p.given(DELTA)) {
        (Some(e), _) if e.is_infinite() => {
            p.err(
                EPSILON,
                "= .inf means no privacy: use fedlinucb, protocol: none or private: false",
            );
            None
        }
        (Some(e), _) if crate::privacy::gdp::epsilon_beyond(e).is_some() => {
            p.err(EPSILON, crate::privacy::gdp::epsilon_beyond(e).unwrap_or_default());
            None
        }
        (Some(e), Some(dl)) => {
            p.record(EPSILON, &e);
            p.record(DELTA, &dl);
            Some((e, dl))
        }
        (e, dl) => {
            if e.is_none() {
                p.err(EPSILON, "missing; a private run needs epsilon (number > 0)");
            }
            if dl.is_none() {
                p.err(DELTA, "missing; a private run needs delta (number in (0, 1))");
            }
            None
        }
    }
}

/// The private mechanism's noise (`noise`, `sampler`) and accounting
/// parameters: the neighbouring relation (`neighbours`, validated as a
/// choice by the parameter table, whose default is each paper's own) and
/// reward clipping (`clip_rewards`). `sampler` chooses how the Gaussian
/// trees draw their node noise; sdp_vecsum has no tree (its randomizer
/// releases integers already) and does not read it: its cells have no
/// `sampler` value, and a sampler axis leaves them as one cell.
fn accounting(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    cfg.noise = p.take(NOISE);
    if cfg.protocol != Protocol::SdpVecsum {
        cfg.sampler = p.take(SAMPLER);
    }
    cfg.neighbours = p.take(NEIGHBOURS);
    cfg.clip_rewards = p.take(CLIP_REWARDS);
}

/// (Private-)FedLinUCB: the batch B <= T; the protocol, its privacy,
/// calibration and accounting.
fn fedlinucb(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    let (b, horizon) = (p.take(BATCH_SIZE), cfg.horizon);
    if b as u64 > horizon {
        let default = if !p.is_set(BATCH_SIZE) {
            " (the default: set batch_size)"
        } else {
            ""
        };
        p.err(
            BATCH_SIZE,
            format!("B = {b}{default} exceeds the horizon T = {horizon}; allowed: 1 <= B <= T"),
        );
    }
    cfg.batch_size = b as u64;
    if cfg.algorithm != LinearAlgorithm::PrivateFedlinucb {
        return;
    }
    cfg.protocol = p.take(PROTOCOL);
    if cfg.protocol == Protocol::SdpVecsum {
        cfg.vecsum_scale = p.take(VECSUM_SCALE);
    }
    if cfg.protocol != Protocol::None {
        cfg.privacy = privacy(p);
        let allowed = [Calibration::Exact, Calibration::Code, Calibration::Theorem];
        cfg.calibration = p.take_in(CALIBRATION, &allowed, "private_fedlinucb");
        if cfg.protocol == Protocol::SdpVecsum && cfg.calibration == Calibration::Exact && p.is_set(VECSUM_SCALE) {
            p.err(
                VECSUM_SCALE,
                "vecsum_scale is the constant of the authors' Binomial count and applies to calibration: code or \
                 theorem only (calibration: exact, the default, solves the count from the target)",
            );
        }
        accounting(p, cfg);
    }
}

/// FedUCB: the graph (decentralized), privacy (default on) or lambda, the
/// sync regime (`threshold` needs its D) and, private, its schedule.
fn feducb(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    if cfg.algorithm == LinearAlgorithm::FeducbDecentralized {
        graph(p, cfg);
    }
    let private = p.take(PRIVATE);
    cfg.sync = sync_regime(p);
    if private {
        cfg.privacy = privacy(p);
        cfg.calibration = p.take_in(CALIBRATION, &[Calibration::Exact, Calibration::Paper], "FedUCB");
        schedule(p, cfg);
        accounting(p, cfg);
        if let (Sampler::Discrete, super::Schedule::Private { share, cap }) = (cfg.sampler, cfg.schedule)
            && cfg.noise
            && super::feducb::svt_lattice(cfg).is_none()
            && let Some((eps, _)) = cfg.privacy
        {
            p.err(
                SAMPLER,
                format!(
                    "sampler: discrete cannot draw the private schedule's sparse vector test at share x epsilon = \
                     {:.3e} with cap {cap}: its discrete Laplace rates round to 0 on the lattice 2^-20 (raise \
                     epsilon or schedule_share, lower schedule_cap, or use sampler: float)",
                    share * eps
                ),
            );
        }
    } else {
        cfg.lambda = p.take(LAMBDA);
    }
}

/// The sync regime (`threshold` needs its D).
fn sync_regime(p: &mut Params<'_>) -> SyncRegime {
    match p.take(SYNC) {
        SyncName::EveryRound => SyncRegime::EveryRound,
        SyncName::SqrtM => SyncRegime::SqrtM,
        SyncName::Log => SyncRegime::Log,
        SyncName::Threshold => match p.given(THRESHOLD) {
            Some(v) => {
                p.record(THRESHOLD, &v);
                SyncRegime::Threshold(v)
            }
            None => {
                p.err(THRESHOLD, "missing; sync = threshold needs threshold (number > 0)");
                SyncRegime::Log
            }
        },
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
    match p.take(SCHEDULE) {
        ScheduleName::Private => {
            let share = p.take(SCHEDULE_SHARE);
            let cap = p.take(SCHEDULE_CAP);
            cfg.schedule = super::Schedule::Private {
                share,
                cap: u32::try_from(cap).unwrap_or(u32::MAX),
            };
        }
        ScheduleName::Paper => cfg.schedule = super::Schedule::Paper,
    }
}

/// Graph and gamma of decentralized FedUCB: builds deterministic graphs (and
/// edge files) now, so that a disconnected graph or gamma > diameter is a job
/// error naming the components or the diameter.
fn graph(p: &mut Params<'_>, cfg: &mut LinearConfig) {
    let Some(spec) = p.graph_spec() else {
        return;
    };
    let gamma = p.take(GAMMA) as usize;
    cfg.gamma = gamma;
    let random = matches!(spec, GraphSpec::ErdosRenyi { .. } | GraphSpec::RandomRegular { .. });
    if let Some(diameter) = p.check_graph(&spec, cfg.m)
        && !random
        && gamma as u32 > diameter
    {
        p.err(
            GAMMA,
            format!("gamma = {gamma} exceeds the graph's diameter {diameter}; allowed: 1 <= gamma <= diameter"),
        );
    }
    cfg.graph = spec;
}
