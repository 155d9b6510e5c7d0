//! The linear family's cost and memory models, for `fedbandits plan`.
//!
//! Its reference rate is agent-steps per second per thread at its canonical
//! workload, rounded down: `bench --backend cpu --threads 2` on the 2-core
//! development VM gives linear_d10_k100_m100 1.80e6 to 1.85e6 agent-steps/s
//! (9.2e5 per thread, three interleaved runs), so [`REFERENCE_RATE`] =
//! 7e5; `linear_gap`'s decision
//! sets costing [`GAP_FACTOR`] more,
//! and a relative cost that grows with the action set K and the dimension
//! d, fitted to single-thread runs of `feducb_centralized` on `linear_gap`
//! (M = 10, T = 4000, the `log` regime) on the 2-core development VM:
//!
//! | d | K | measured agent-steps/s | model |
//! | --- | --- | --- | --- |
//! | 8 | 64 | 2.18e5 | 2.6e5 |
//! | 10 | 100 | 1.50e5 | 1.5e5 (reference) |
//! | 16 | 100 | 8.73e4 | 9.7e4 |
//! | 32 | 100 | 4.46e4 | 4.7e4 |
//! | 64 | 100 | 2.06e4 | 1.9e4 |
//! | 128 | 100 | 4.2e3 to 4.7e3 | 4.9e3 |
//!
//! (the runs shared the VM with a background job; only the model's ratios
//! are used, scaled to the reference rate). Time per agent-step ~ 1 +
//! 0.0064 K d + 7.0e-5 d^3 microseconds (the UCB scores of K actions against
//! a d x d inverse, and the per-step d^3 work that dominates from d ~ 100).
//!
//! Private tree releases add their own term: a release regenerates about
//! two tree nodes of d^2 + d noise entries per agent on average
//! ([`crate::privacy::tree`]). That is what makes FedUCB's private
//! `every_round` cells slower than the `log` ones (a release every round
//! instead of a few hundred in all).
//!
//! These fits are [`COST_TERMS`]' built-in seconds; `fedbandits calibrate
//! --shapes` times [`SHAPES`] on the user's machine and fits the terms'
//! seconds there (`src/sim/cost.rs`).

use super::{LinearAlgorithm, LinearConfig, Protocol, SyncRegime};
use crate::algo::Cost;
use crate::algo::family_entry::CostTerm;

/// Seconds per unit of [`micros`] on one thread: the reference workload's
/// agent-step (d = 10, K = 100: `micros(10, 100)` = 7.47) at
/// [`REFERENCE_RATE`].
const MICRO_SECONDS: f64 = 1.0e-6 / (7.47e-6 * REFERENCE_RATE);

/// The family's time model: an agent-step's own work (its constant, the
/// K d of its UCB scores, the d^3 of its inverse), the tree noise it
/// regenerates, and the shuffle protocol's rounding per value and level.
/// Built-in seconds from the fits in this module's doc and
/// [`VECSUM_VALUE_SECONDS`]'s; `calibrate --shapes` refits them.
pub const COST_TERMS: &[CostTerm] = &[
    CostTerm::new(
        "step",
        "an agent-step (x 1.1 on linear_gap, x 1.4 above d = 16)",
        MICRO_SECONDS,
    ),
    CostTerm::new(
        "scores",
        "K d of an agent-step's UCB scores (the same factors)",
        0.0064 * MICRO_SECONDS,
    ),
    CostTerm::new(
        "inverse",
        "d^3 of an agent-step's inverse and updates (the same factors)",
        7.0e-5 * MICRO_SECONDS,
    ),
    CostTerm::new("tree_noise", "a regenerated tree-node noise entry", NOISE_ENTRY_SECONDS),
    CostTerm::new(
        "vecsum_values",
        "a value the shuffle protocol randomizes (per level)",
        VECSUM_VALUE_SECONDS,
    ),
    CostTerm::new(
        "vecsum_levels",
        "a tree level of the shuffle protocol per agent-step",
        VECSUM_LEVEL_SECONDS,
    ),
];

/// Seconds per regenerated noise entry of a tree node: `fedbandits bench
/// --threads 2` on the 2-core VM (three interleaved runs, the
/// keyed normals in AVX-512) gave feducb_private_every_d10 1.07e6 and
/// feducb_every_d10 1.57e6 agent-steps/s, 0.61 us more per agent-step and
/// thread for two nodes of 110 entries (2.8e-9 s an entry, the release's
/// own bookkeeping included).
pub const NOISE_ENTRY_SECONDS: f64 = 2.8e-9;

/// The jobs `fedbandits calibrate --shapes` times to fit [`COST_TERMS`] on
/// the user's machine: each term's units vary across them (K d from 10 to
/// 5,000, d^3 from 8 to 125,000, both environments, both sides of
/// [`INTRINSICS_MAX_D`], the tree releases of FedUCB every round and of
/// `ldp` at B = 1, the shuffle protocol at d = 4 and 20).
pub const SHAPES: &[(&str, &str, u64)] = &[
    (
        "independent_d2_k5_m2",
        "algorithm: independent\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 2, k: 5, m: 2}\n",
        20_000,
    ),
    (
        "fedlinucb_d10_k100_m10",
        "algorithm: fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 100, m: 10}\n",
        2_000,
    ),
    (
        "independent_d10_k500_m2",
        "algorithm: independent\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 500, m: 2}\n",
        2_000,
    ),
    (
        "independent_gap_d32_k100_m2",
        "algorithm: independent\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 32, k: 100, m: 2}\n",
        1_000,
    ),
    (
        "independent_d50_k20_m2",
        "algorithm: independent\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 50, k: 20, m: 2}\n",
        1_000,
    ),
    (
        "feducb_private_every_d10_k20_m10",
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 20, m: 10, epsilon: 1, delta: 0.1, sync: every_round}\n",
        1_000,
    ),
    (
        "feducb_log_d4_k20_m20",
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 4, k: 20, m: 20, epsilon: 1, delta: 0.1, sync: log}\n",
        2_000,
    ),
    (
        "decentralized_ring_m8_d10",
        "algorithm: feducb_decentralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 8, epsilon: 1, delta: 0.1, graph: ring, gamma: 2}\n",
        1_000,
    ),
    (
        "ldp_d4_k20_m2_b1",
        "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 4, k: 20, m: 2, epsilon: 1, delta: 0.1, protocol: ldp, batch_size: 1}\n",
        5_000,
    ),
    (
        "sdp_vecsum_d4_k20_m2",
        "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 4, k: 20, m: 2, epsilon: 1, delta: 0.1, protocol: sdp_vecsum}\n",
        5_000,
    ),
    (
        "sdp_vecsum_d20_k20_m2",
        "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 20, k: 20, m: 2, epsilon: 1, delta: 0.1, protocol: sdp_vecsum}\n",
        1_000,
    ),
];

/// The cell's units of [`COST_TERMS`] per agent-step.
pub fn cost(c: &LinearConfig) -> Cost {
    // Above INTRINSICS_MAX_D the step runs the portable code, which the
    // AVX-512 paths did not speed up (feducb_d128 1.02x): its cost is the
    // portable model's (reference 5e5, `linear_gap` 1.2x) times the
    // reference's own speed-up.
    let (portable, gap) = if c.env.d > INTRINSICS_MAX_D {
        (REFERENCE_RATE / 5.0e5, GAP_FACTOR_PORTABLE)
    } else {
        (1.0, GAP_FACTOR)
    };
    let environment = match c.env.kind {
        crate::env::LinearEnvKind::Gap => gap,
        _ => 1.0,
    };
    let (d, k) = (c.env.d as f64, c.env.k as f64);
    let factor = environment * portable;
    let (values, levels) = vecsum_units(c);
    Cost::of(
        "linear",
        &[
            factor,
            factor * k * d,
            factor * d * d * d,
            noise_entries_per_step(c),
            values * levels,
            levels,
        ],
    )
}

/// Seconds per value the shuffle protocol (`sdp_vecsum`) randomizes: each
/// agent-step's data point puts d(d+1)/2 + d coordinates into each of the
/// tree's levels ([`crate::privacy::vecsum::VecSum::add_point`]), and
/// [`VECSUM_LEVEL_SECONDS`] per level beside them (a point's key per level,
/// the level's loop, its share of the batch's closing). Fitted
/// to one-repetition, one-thread runs on the 2-core development VM: the
/// extra CPU time of `sdp_vecsum` over `ldp` per agent-step (the same
/// shape, 1.3-14 s runs) against levels x (level + values x value):
///
/// | d | K | M | levels | measured | model |
/// | --- | --- | --- | --- | --- | --- |
/// | 2 | 5 | 2 | 22 | 0.27 us | 0.27 us |
/// | 4 | 20 | 2 | 21 | 0.46 us | 0.42 us |
/// | 4 | 100 | 100 | 13 | 0.24 us | 0.26 us |
/// | 10 | 100 | 10 | 16 | 0.95 us | 1.0 us |
/// | 10 | 5 | 100 | 15 | 0.83 us | 0.95 us |
/// | 20 | 20 | 2 | 19 | 3.98 us | 3.87 us |
/// | 50 | 20 | 2 | 17 | 19.4 us | 19.3 us |
///
/// (Issue 43's bench at d = 10 gave 0.67 ns a value with no level term:
/// the model then read 1.5-1.8x low at d <= 4 and 1.5x at d = 50.)
pub const VECSUM_VALUE_SECONDS: f64 = 0.85e-9;

/// Seconds per tree level of the shuffle protocol per agent-step, beside
/// its values ([`VECSUM_VALUE_SECONDS`]'s fit).
pub const VECSUM_LEVEL_SECONDS: f64 = 8e-9;

/// The shuffle protocol's work per agent-step: (values per level,
/// levels), levels = floor(log2(T / B)) + 1 and d(d+1)/2 + d values per
/// level; (0, 0) for every other protocol and for non-private cells.
fn vecsum_units(c: &LinearConfig) -> (f64, f64) {
    if c.privacy.is_none() || c.protocol != Protocol::SdpVecsum || c.algorithm != LinearAlgorithm::PrivateFedlinucb {
        return (0.0, 0.0);
    }
    let d = c.env.d as f64;
    let levels = crate::privacy::tree_levels((c.horizon / c.batch_size.max(1)).max(1)) as f64;
    (d * (d + 1.0) / 2.0 + d, levels)
}

/// Agent-steps per second and thread of `linear_d10_k100_m100` that `plan`
/// assumes (module doc).
pub const REFERENCE_RATE: f64 = 7.0e5;

/// The largest d whose agent-step takes the AVX-512 scorer, `linear_sphere`
/// rows and `linear_gap` pass (`backend::cpu`'s `MAX_D`, `env`'s
/// `MAX_COORDS` + 1 and `gap_avx512::MAX_D`: 16 for all three; a change to
/// one changes this). The reference rate was measured at d = 10.
pub const INTRINSICS_MAX_D: usize = 16;

/// How much more an agent-step costs on `linear_gap` than on
/// `linear_sphere`: its decision sets take K (d - 1) normals, 2K uniforms
/// and a reflection per action. `bench --threads 2` on the 2-core
/// development VM (three interleaved runs):
/// independent_d10_k100_m100 1.79e6 to 1.83e6 agent-steps/s, the same on
/// `linear_gap` 1.66e6 to 1.70e6 (1.09x).
pub const GAP_FACTOR: f64 = 1.1;

/// [`GAP_FACTOR`] where the step runs the portable code (d above
/// [`INTRINSICS_MAX_D`]): measured with the portable passes of an older
/// decision set that drew d more normals per action (feducb_d128 1.08x
/// since; not re-fitted, so an upper bound).
pub const GAP_FACTOR_PORTABLE: f64 = 1.2;

/// Microseconds per agent-step at (d, K) in the model above.
pub fn micros(d: f64, k: f64) -> f64 {
    1.0 + 0.0064 * k * d + 7.0e-5 * d * d * d
}

/// Tree-node noise entries a cell regenerates per agent-step on average:
/// two nodes of d^2 + d entries per release, a release per agent every
/// round for FedUCB's `every_round` and every B rounds for
/// Private-FedLinUCB's tree protocols. FedUCB's data-dependent regimes
/// (`log`, `sqrt_m`, a threshold) release rarely and count 0, as does the
/// decentralized variant (its broadcasts are data-dependent too).
fn noise_entries_per_step(c: &LinearConfig) -> f64 {
    let node = 2.0 * (c.env.d * c.env.d + c.env.d) as f64;
    match c.algorithm {
        _ if c.privacy.is_none() => 0.0,
        LinearAlgorithm::FeducbCentralized if matches!(c.sync, SyncRegime::EveryRound) => node,
        LinearAlgorithm::PrivateFedlinucb if matches!(c.protocol, Protocol::Ldp | Protocol::SdpAmp | Protocol::Alt) => {
            node / c.batch_size.max(1) as f64
        }
        _ => 0.0,
    }
}

/// The agent-step's workspace, in bytes: the decision set and its scores,
/// recomputed every step (not in a snapshot).
pub fn workspace_bytes(cfg: &LinearConfig) -> u64 {
    let (d, k) = (cfg.env.d as u64, cfg.env.k as u64);
    let kp = k.div_ceil(8) * 8;
    (d * kp * 2 + k * d + 4 * d * d) * 8
}

/// Approximate peak memory of one running federation, in bytes.
pub fn memory_per_federation(cfg: &LinearConfig) -> u64 {
    let (m, d) = (cfg.m as u64, cfg.env.d as u64);
    let per_agent = (2 * d * d + 3 * d + 2) * 8 + 400;
    let workspace = workspace_bytes(cfg);
    let levels = match cfg.algorithm {
        LinearAlgorithm::PrivateFedlinucb if cfg.privacy.is_some() => {
            crate::privacy::tree_levels((cfg.horizon / cfg.batch_size).max(1)) as u64
        }
        LinearAlgorithm::FeducbCentralized if cfg.privacy.is_some() => {
            2 + (cfg.horizon.max(1) as f64).log2().ceil() as u64
        }
        _ => 0,
    };
    let trees = if cfg.protocol == Protocol::SdpVecsum {
        // One accumulator and one released node per level and coordinate.
        2 * levels * (d * (d + 1) / 2 + d) * 8 + m * 64
    } else if levels > 0 {
        // Per agent the exact running sum and the running noise (node
        // noise is regenerated from keys, privacy/tree.rs), plus one node
        // of workspace.
        (2 * m + 1) * (d * d + d) * 8
    } else {
        0
    };
    if cfg.algorithm == LinearAlgorithm::FeducbDecentralized {
        // gamma slots per agent, each with V^{-1}, S, U (and (V + cI)^{-1}),
        // a tree (its exact running sum) and its last release, the
        // first-heard flags, and the payload rings (gamma + 1 rounds).
        let slots = m * cfg.gamma.max(1) as u64;
        let private = u64::from(cfg.privacy.is_some());
        let per_slot = (4 * d * d + 4 * d + 8) * 8 + private * (2 * (d * d + d) * 8 + d * d * 8);
        let rings = slots * (cfg.gamma.max(1) as u64 + 1) * (d * d + d + 1) * 8;
        return slots * per_slot + slots * m + rings + workspace + m * 400;
    }
    let shifted = if cfg.algorithm == LinearAlgorithm::FeducbCentralized && cfg.privacy.is_some() {
        m * d * d * 8
    } else {
        0
    };
    m * per_agent + workspace + trees + shifted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds per agent-step at the built-in prices.
    fn seconds(c: &Cost) -> f64 {
        COST_TERMS.iter().zip(c.units).map(|(t, u)| t.seconds * u).sum()
    }

    fn cells(yaml: &str) -> crate::job::Job {
        crate::job::Job::parse(std::path::Path::new("cost.yaml"), yaml).unwrap()
    }

    #[test]
    fn tree_releases_are_charged_per_release() {
        let job = cells(
            "horizon: 100\nalgorithm: [feducb_centralized, private_fedlinucb]\nenvironment: linear_gap\n\
             params: {m: 4, d: 10, k: 100, epsilon: 1, delta: 0.1, batch_size: 25}\n\
             grid: {sync: [every_round, log], private: [true, false], protocol: [ldp, sdp_vecsum]}\n",
        );
        let entries: Vec<(String, Cost)> = job
            .cells
            .iter()
            .map(|c| (job.short_label(c), c.config.cost()))
            .collect();
        let get = |needle: &[&str]| {
            entries
                .iter()
                .filter(|(l, _)| needle.iter().all(|n| l.contains(n)))
                .map(|e| e.1.units[3])
                .collect::<Vec<f64>>()
        };
        assert_eq!(get(&["feducb", "every_round", "private=true"]), [220.0]);
        assert_eq!(get(&["feducb", "every_round", "private=false"]), [0.0]);
        assert_eq!(get(&["feducb", "sync=log", "private=true"]), [0.0]);
        assert_eq!(get(&["private_fedlinucb", "ldp"]), [220.0 / 25.0]);
        assert_eq!(get(&["private_fedlinucb", "sdp_vecsum"]), [0.0]);
        // Private every_round at d = 10: 0.6 us more per agent-step, about
        // the 1.48x `bench --threads 2` measured (feducb_every_d10 1.57e6, feducb_private_every_d10 1.07e6
        // agent-steps/s), at the rate measured with it (8.75e5 per thread;
        // the reference rate is rounded down, which would dilute the
        // release's share).
        let private = entries
            .iter()
            .find(|(l, _)| l.contains("every_round") && l.contains("private=true"));
        let units = private.unwrap().1.units;
        let release = units[3] * NOISE_ENTRY_SECONDS;
        let step = (seconds(&private.unwrap().1) - release) * REFERENCE_RATE / 8.75e5;
        assert!(
            ((step + release) / step - 1.48).abs() < 0.1,
            "model {}",
            (step + release) / step
        );
    }

    /// `sdp_vecsum` cells pay for their rounding per level: at d = 10 and
    /// 10 levels (T = 1000, B = 1) 650 values and 10 levels, 0.63 us over
    /// the step (the fitted price); ldp cells and non-private ones pay
    /// nothing for it, and a horizon 8x as long adds three levels.
    #[test]
    fn the_shuffle_protocol_is_charged_per_level() {
        let cost = |extra: &str| {
            let job = cells(&format!(
                "algorithm: private_fedlinucb\nenvironment: linear_sphere\n\
                 params: {{m: 4, d: 10, k: 100, epsilon: 1, delta: 0.1, batch_size: 1}}\n{extra}\n"
            ));
            job.cells[0].config.cost()
        };
        let base = cost("horizon: 1000\ngrid: {protocol: [ldp]}");
        assert_eq!(&base.units[4..6], &[0.0, 0.0]);
        let short = cost("horizon: 1000\ngrid: {protocol: [sdp_vecsum]}");
        assert_eq!(&short.units[4..6], &[650.0, 10.0]);
        let extra_us = (seconds(&short) - seconds(&base) + base.units[3] * NOISE_ENTRY_SECONDS) * 1e6;
        assert!((extra_us - 0.6325).abs() < 1e-3, "{extra_us}");
        let long = cost("horizon: 8000\ngrid: {protocol: [sdp_vecsum]}");
        assert_eq!(&long.units[4..6], &[65.0 * 13.0, 13.0]);
    }

    /// Cells above INTRINSICS_MAX_D run the portable step, whose rate issue
    /// 43 did not change: their cost is the old model's (reference 5e5,
    /// `linear_gap` 1.2x); cells at or below it are 7e5 / 5e5 cheaper
    /// relative to that model on `linear_sphere`.
    #[test]
    fn portable_dimensions_keep_their_measured_cost() {
        let cell = |d: usize, env: &str| {
            let job = cells(&format!(
                "horizon: 100\nalgorithm: independent\nenvironment: {env}\nparams: {{m: 4, d: {d}, k: 100}}\n"
            ));
            seconds(&job.cells[0].config.cost())
        };
        for (d, env, old_gap) in [(128, "linear_gap", 1.2), (32, "linear_sphere", 1.0)] {
            let old = old_gap * micros(d as f64, 100.0) / micros(10.0, 100.0) / 5.0e5;
            assert!((cell(d, env) / old - 1.0).abs() < 1e-12, "d {d} {env}");
        }
        let reference = 1.0 / REFERENCE_RATE;
        assert!((cell(10, "linear_sphere") / reference - 1.0).abs() < 1e-12);
        assert!((cell(16, "linear_sphere") / reference - micros(16.0, 100.0) / micros(10.0, 100.0)).abs() < 1e-12);
        assert!((cell(10, "linear_gap") / reference - GAP_FACTOR).abs() < 1e-12);
    }

    #[test]
    fn linear_model_matches_its_measurements_within_20_percent() {
        // (d, K, measured agent-steps/s on one thread of the VM)
        let measured = [
            (8.0, 64.0, 2.18e5),
            (16.0, 100.0, 8.73e4),
            (32.0, 100.0, 4.46e4),
            (64.0, 100.0, 2.06e4),
            (128.0, 100.0, 4.5e3),
        ];
        let reference = 1.50e5;
        for (d, k, rate) in measured {
            let model = reference * micros(10.0, 100.0) / micros(d, k);
            assert!(
                (model / rate - 1.0).abs() < 0.2,
                "d {d} K {k}: model {model:.3e}, measured {rate:.3e}"
            );
        }
        // Monotone in d and K.
        assert!(micros(128.0, 100.0) > 30.0 * micros(10.0, 100.0));
        assert!(micros(10.0, 200.0) > micros(10.0, 100.0));
    }
}
