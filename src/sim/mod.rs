//! Running federations: one repetition of one cell from round 1 to T,
//! recording the regret curve at the checkpoints ([`run_rep`]); and the job
//! runner that spreads repetitions over threads, skips finished cells and
//! writes results ([`runner`]).

pub mod merge;
pub mod runner;

use crate::algo::Counters;
use crate::algo::linear::build;
use crate::backend::Backend;
use crate::job::Cell;
use std::time::Instant;

/// The curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurvePoint {
    /// Round.
    pub t: u64,
    /// Cumulative group pseudo-regret.
    pub group_regret: f64,
    /// Mean over agents of cumulative regret (= group / M).
    pub agent_regret_mean: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Counters at this point.
    pub counters: Counters,
}

/// One repetition's result.
#[derive(Clone, Debug, PartialEq)]
pub struct RepResult {
    /// Repetition index.
    pub rep: u32,
    /// Curve.
    pub points: Vec<CurvePoint>,
    /// Wall-clock seconds (not part of the reproducible data).
    pub wall_seconds: f64,
}

/// How often (in rounds) a running repetition reports progress.
const PROGRESS_EVERY: u64 = 256;

/// Runs repetition `rep` of `cell`. `progress` receives agent-steps done
/// since its previous call.
pub fn run_rep(
    cell: &Cell,
    seed: u64,
    rep: u32,
    checkpoints: &[u64],
    backend: &dyn Backend,
    progress: &(dyn Fn(u64) + Sync),
) -> RepResult {
    let start = Instant::now();
    let env_key = [seed, cell.env_scope, u64::from(rep)];
    let algo_key = [seed, cell.cell_scope, u64::from(rep)];
    let mut fed = build(&cell.config, &env_key, &algo_key);
    let m = cell.config.m as u64;
    let mut points = Vec::with_capacity(checkpoints.len());
    let mut next = checkpoints.iter().copied().peekable();
    let mut group = 0.0;
    let mut pending = 0u64;
    for t in 1..=cell.config.horizon {
        group += fed.round(t, backend);
        pending += m;
        if t % PROGRESS_EVERY == 0 {
            progress(pending);
            pending = 0;
        }
        if next.peek() == Some(&t) {
            next.next();
            let per = fed.agent_regret();
            points.push(CurvePoint {
                t,
                group_regret: group,
                agent_regret_mean: group / m as f64,
                agent_regret_max: per.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                counters: fed.counters(),
            });
        }
    }
    progress(pending);
    RepResult {
        rep,
        points,
        wall_seconds: start.elapsed().as_secs_f64(),
    }
}

/// Approximate peak memory of one running federation, in bytes.
pub fn memory_per_federation(cfg: &crate::algo::linear::LinearConfig) -> u64 {
    use crate::algo::linear::LinearAlgorithm as A;
    let (m, d, k) = (cfg.m as u64, cfg.env.d as u64, cfg.env.k as u64);
    let kp = k.div_ceil(8) * 8;
    let per_agent = (2 * d * d + 3 * d + 2) * 8 + 400;
    let workspace = (d * kp * 2 + k * d + 4 * d * d) * 8;
    let levels = match cfg.algorithm {
        A::PrivateFedlinucb if cfg.privacy.is_some() => {
            crate::privacy::tree_levels((cfg.horizon / cfg.batch_size).max(1)) as u64
        }
        A::FeducbCentralized if cfg.privacy.is_some() => 2 + (cfg.horizon.max(1) as f64).log2().ceil() as u64,
        _ => 0,
    };
    let trees = if cfg.protocol == crate::algo::linear::Protocol::SdpVecsum {
        // One accumulator and one released node per level and coordinate.
        2 * levels * (d * (d + 1) / 2 + d) * 8 + m * 64
    } else {
        m * 2 * levels * (d * d + d) * 8
    };
    let shifted = if cfg.algorithm == A::FeducbCentralized && cfg.privacy.is_some() {
        m * d * d * 8
    } else {
        0
    };
    m * per_agent + workspace + trees + shifted
}
