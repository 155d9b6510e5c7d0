//! The CPU backend: the engine's CPU device. Parallelism lives above this
//! level: the simulation runs federations on rayon's pool (as
//! per-repetition tasks, or inside a family's batched CPU rounds, its
//! folder's `cpu.rs`), and each family's CPU operations (the linear
//! family's step and UCB scorer: `algo::linear::step`) run on it.

use super::Backend;

/// The CPU backend (stateless).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device(&self) -> super::Device<'_> {
        super::Device::Cpu
    }
}
