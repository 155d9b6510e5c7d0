//! Time model of the CPU engine, for `fedbandits plan`: seconds on one
//! thread for a cell's agent-steps, from its family's cost model
//! ([`crate::algo::Cost`]: a reference rate, a relative cost, and the tree
//! noise it regenerates) and the engine's cost per noise entry. Estimates,
//! not promises: a shared machine can be 2x slower.

use crate::algo::CellConfig;

/// Seconds per regenerated noise entry of a tree node: `fedbandits bench
/// --only feducb_ --rounds 2000 --federations 4 --threads 1` on the 2-core
/// VM gave feducb_private_every_d10 1.26e5 and feducb_every_d10 1.79e5
/// agent-steps/s, 2.3 us more per agent-step for two nodes of 110 entries
/// (1.0e-8 s an entry, the release's own bookkeeping included; the block
/// generator alone measured 6.4e-9 to 7.3e-9).
pub const NOISE_ENTRY_SECONDS: f64 = 1.0e-8;

/// Estimated seconds on one thread for `agent_steps` of the cell, at
/// `rate` agent-steps/s per thread for the family's reference workload
/// (default: the family's own), plus its tree releases.
pub fn thread_seconds(cfg: &CellConfig, agent_steps: u64, rate: Option<f64>) -> f64 {
    let (cost, steps) = (cfg.cost(), agent_steps as f64);
    steps * cost.relative / rate.unwrap_or(cost.reference_rate)
        + steps * cost.noise_entries_per_step * NOISE_ENTRY_SECONDS
}
