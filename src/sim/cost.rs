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

/// Estimated seconds on one thread for `agent_steps` of the cell, at
/// `rate` agent-steps/s per thread for the family's reference workload
/// (default: [`reference_rate`]).
pub fn thread_seconds(cfg: &CellConfig, agent_steps: u64, rate: Option<f64>) -> f64 {
    agent_steps as f64 * relative_cost(cfg) / rate.unwrap_or_else(|| reference_rate(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

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
