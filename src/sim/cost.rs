//! Time model of the CPU engine, for `fedbandits plan`: seconds per
//! agent-step of a cell on one thread.
//!
//! Each family has a reference rate (agent-steps per second per thread at its
//! canonical workload, measured with `fedbandits bench` on the 2-core
//! development VM and rounded down) and, for the linear family, a relative
//! cost that grows with the action set K and the dimension d. The linear
//! model, fitted to single-thread runs of `feducb_centralized` on
//! `linear_gap` (M = 10, T = 4000, the `log` regime) on that VM:
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
//! (the runs shared the VM with a background job; only the model's ratios are
//! used, scaled to the reference rate below). Time per agent-step ~ 1 + 0.0064 K d + 7.0e-5 d^3 microseconds (the UCB
//! scores of K actions against a d x d inverse, and the per-step d^3 work
//! that dominates from d ~ 100). The gossip and combinatorial families use
//! a flat rate: their per-step work is small and their paper workloads vary
//! little. Estimates, not promises: a shared machine can be 2x slower.
//!
//! Private tree releases add their own term: a release regenerates about
//! two tree nodes of d^2 + d noise entries per agent on average
//! ([`crate::privacy::tree`]), at [`NOISE_ENTRY_SECONDS`] each. That is
//! what makes FedUCB's private `every_round` cells slower than the `log`
//! ones (a release every round instead of a few hundred in all).

use crate::algo::CellConfig;

/// Agent-steps per second per thread of each family's reference workload
/// (`fedbandits bench`: linear_d10_k100_m100 about 2.5e5 per thread,
/// gossip_n10_m5 1.2e6 to 2e6, pfcb_n10_m30 8e5; rounded down to what full
/// paper jobs achieved: zhou_fig2a 2.3e5, zhu_fig1a_medium 1.2e6,
/// solanki_exp1 5.5e5 agent-steps/s per thread).
pub fn reference_rate(cfg: &CellConfig) -> f64 {
    match cfg {
        CellConfig::Linear(_) => 2.0e5,
        CellConfig::Gossip(_) => 1.0e6,
        CellConfig::Comb(_) => 5.0e5,
    }
}

/// Cost of one agent-step of the cell relative to its family's reference
/// workload (1 at linear d = 10, K = 100; 1 for the other families).
pub fn relative_cost(cfg: &CellConfig) -> f64 {
    match cfg {
        CellConfig::Linear(c) => linear_micros(c.env.d as f64, c.env.k as f64) / linear_micros(10.0, 100.0),
        CellConfig::Gossip(_) | CellConfig::Comb(_) => 1.0,
    }
}

fn linear_micros(d: f64, k: f64) -> f64 {
    1.0 + 0.0064 * k * d + 7.0e-5 * d * d * d
}

/// Seconds per regenerated noise entry of a tree node: `fedbandits bench
/// --only feducb_ --rounds 2000 --federations 4 --threads 1` on the 2-core
/// VM gave feducb_private_every_d10 1.26e5 and feducb_every_d10 1.79e5
/// agent-steps/s, 2.3 us more per agent-step for two nodes of 110 entries
/// (1.0e-8 s an entry, the release's own bookkeeping included; the block
/// generator alone measured 6.4e-9 to 7.3e-9).
pub const NOISE_ENTRY_SECONDS: f64 = 1.0e-8;

/// Tree-node noise entries a cell regenerates per agent-step on average:
/// two nodes of d^2 + d entries per release, a release per agent every
/// round for FedUCB's `every_round` and every B rounds for
/// Private-FedLinUCB's tree protocols. FedUCB's data-dependent regimes
/// (`log`, `sqrt_m`, a threshold) release rarely and count 0, as does the
/// decentralized variant (its broadcasts are data-dependent too).
pub fn noise_entries_per_step(cfg: &CellConfig) -> f64 {
    use crate::algo::linear::{LinearAlgorithm, Protocol, SyncRegime};
    let CellConfig::Linear(c) = cfg else {
        return 0.0;
    };
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

/// Estimated seconds on one thread for `agent_steps` of the cell, at
/// `rate` agent-steps/s per thread for the family's reference workload
/// (default: [`reference_rate`]), plus its tree releases
/// ([`noise_entries_per_step`]).
pub fn thread_seconds(cfg: &CellConfig, agent_steps: u64, rate: Option<f64>) -> f64 {
    let steps = agent_steps as f64;
    steps * relative_cost(cfg) / rate.unwrap_or_else(|| reference_rate(cfg))
        + steps * noise_entries_per_step(cfg) * NOISE_ENTRY_SECONDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_releases_are_charged_per_release() {
        let job = crate::job::Job::parse(
            std::path::Path::new("cost.yaml"),
            "horizon: 100\nalgorithm: [feducb_centralized, private_fedlinucb]\nenvironment: linear_gap\n\
             params: {m: 4, d: 10, k: 100, epsilon: 1, delta: 0.1, batch_size: 25}\n\
             grid: {sync: [every_round, log], private: [true, false], protocol: [ldp, sdp_vecsum]}\n",
        )
        .unwrap();
        let entries: Vec<(String, f64)> = job
            .cells
            .iter()
            .map(|c| (job.short_label(c), noise_entries_per_step(&c.config)))
            .collect();
        let get = |needle: &[&str]| {
            entries
                .iter()
                .filter(|(l, _)| needle.iter().all(|n| l.contains(n)))
                .map(|e| e.1)
                .collect::<Vec<f64>>()
        };
        assert_eq!(get(&["feducb", "every_round", "private=true"]), [220.0]);
        assert_eq!(get(&["feducb", "every_round", "private=false"]), [0.0]);
        assert_eq!(get(&["feducb", "sync=log", "private=true"]), [0.0]);
        assert_eq!(get(&["private_fedlinucb", "ldp"]), [220.0 / 25.0]);
        assert_eq!(get(&["private_fedlinucb", "sdp_vecsum"]), [0.0]);
        // Private every_round at d = 10: 2.2 us more per agent-step, about
        // the 1.4x the two bench workloads measured.
        let label = |c: &&crate::job::Cell| {
            let l = job.short_label(c);
            l.contains("every_round") && l.contains("private=true")
        };
        let cfg = &job.cells.iter().find(label).unwrap().config;
        let base = thread_seconds(cfg, 1_000_000, Some(2e5)) - 1e6 * 220.0 * NOISE_ENTRY_SECONDS;
        assert!((thread_seconds(cfg, 1_000_000, Some(2e5)) / base - 1.44).abs() < 0.05);
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
            let model = reference * linear_micros(10.0, 100.0) / linear_micros(d, k);
            assert!(
                (model / rate - 1.0).abs() < 0.2,
                "d {d} K {k}: model {model:.3e}, measured {rate:.3e}"
            );
        }
        // Monotone in d and K.
        assert!(linear_micros(128.0, 100.0) > 30.0 * linear_micros(10.0, 100.0));
        assert!(linear_micros(10.0, 200.0) > linear_micros(10.0, 100.0));
    }
}
