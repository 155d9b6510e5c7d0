//! When `--backend auto` puts a cell on the GPU: only where a measurement on
//! a real device showed the CUDA path faster than the same machine's CPU
//! cores for a batch of that size. The table below is the record of those
//! measurements; a size not covered by a row runs on the CPU.
//!
//! The one measurement so far (issue 10, one NVIDIA H100 80GB beside 16 CPU
//! cores, the kernels of the time): the GPU path was slower at every size
//! tried -- `bench linear_d10_k100_m100` at 64 federations 3.42e6 vs 4.04e6
//! agent-steps/s, `independent_d10_k100_m100` 3.44e6 vs 4.40e6, and
//! private_fedlinucb (M = 100, d = 10, K = 100) at 2048 federations 1.7e6 vs
//! 4.9e6 -- so the table is empty and `auto` never picks the GPU. A row is
//! added only with a measured `fedbandits bench --backend cuda` vs
//! `--backend cpu` pair on one machine (say which in the row's comment).

use crate::backend::LinearBatch;

/// One measured win of the GPU path.
#[derive(Clone, Copy, Debug)]
pub struct Crossover {
    /// Device name prefix the measurement holds for (e.g. "NVIDIA H100").
    pub device: &'static str,
    /// Fewest agents in the batch (federations x M) from which the GPU won.
    pub min_agents: usize,
    /// Dimensions d the measurement covers (inclusive).
    pub d_range: (usize, usize),
    /// Whether it covers federated (syncing) batches too.
    pub federated: bool,
    /// Measured speed-up at `min_agents`, for the message.
    pub speedup: f64,
}

/// The measured wins (none yet; see the module docs).
pub const MEASURED: &[Crossover] = &[];

/// Why `auto` runs everything on the CPU while [`MEASURED`] is empty (no
/// batch size has been measured faster on a GPU than on the CPU; on an H100
/// 3.4e6 vs 4.0e6 agent-steps/s at 64 federations, 1.7e6 vs 4.9e6 at 2048;
/// README "GPU (CUDA)"). Short: it is printed at the start of every run.
pub const NONE_MEASURED: &str = "no GPU speed-up measured; see --backend";

/// Whether any size was ever measured faster on a GPU.
pub fn any_measured() -> bool {
    !MEASURED.is_empty()
}

/// `Ok(why)` when a measurement says the GPU `device` runs `batch` faster
/// than the CPU, else `Err(why not)`.
pub fn gpu_measured_faster(device: &str, batch: &LinearBatch) -> Result<String, String> {
    find(MEASURED, device, batch)
}

fn find(table: &[Crossover], device: &str, batch: &LinearBatch) -> Result<String, String> {
    let agents = batch.federations() * batch.m;
    let d = batch.env.d;
    table
        .iter()
        .find(|c| {
            device.starts_with(c.device)
                && agents >= c.min_agents
                && (c.d_range.0..=c.d_range.1).contains(&d)
                && (c.federated || batch.sync.is_none())
        })
        .map(|c| {
            format!(
                "{agents} agents at d = {d}: measured {:.1}x faster on {} from {} agents",
                c.speedup, c.device, c.min_agents
            )
        })
        .ok_or_else(|| {
            if table.is_empty() {
                NONE_MEASURED.to_string()
            } else {
                format!("{agents} agents at d = {d} on {device}: no measurement says the GPU is faster")
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{LinearEnvKind, LinearEnvSpec};

    fn batch(feds: usize, m: usize, d: usize) -> LinearBatch {
        LinearBatch {
            env: LinearEnvSpec {
                kind: LinearEnvKind::Gap,
                d,
                k: 10,
            },
            env_keys: vec![vec![1]; feds],
            noise_keys: Vec::new(),
            m,
            horizon: 10,
            lambda: 1.0,
            beta: crate::backend::Width::Schedule(Box::new(|_| 1.0)),
            sync: None,
            network: None,
            refactor_every: 8,
            random_policy: None,
            reward_bound: f64::INFINITY,
        }
    }

    #[test]
    fn empty_table_never_picks_the_gpu() {
        assert!(!any_measured());
        let e = gpu_measured_faster("NVIDIA H100 80GB HBM3", &batch(4096, 100, 10)).unwrap_err();
        assert!(e.contains("no GPU speed-up measured") && e.contains("--backend"), "{e}");
    }

    #[test]
    fn a_row_covers_only_its_device_size_and_dimensions() {
        let table = [Crossover {
            device: "NVIDIA H100",
            min_agents: 10_000,
            d_range: (4, 32),
            federated: false,
            speedup: 3.0,
        }];
        assert!(find(&table, "NVIDIA H100 80GB", &batch(200, 100, 10)).is_ok());
        assert!(
            find(&table, "NVIDIA H100 80GB", &batch(10, 100, 10)).is_err(),
            "too few agents"
        );
        assert!(
            find(&table, "NVIDIA H100 80GB", &batch(200, 100, 64)).is_err(),
            "d outside"
        );
        assert!(
            find(&table, "NVIDIA A100", &batch(200, 100, 10)).is_err(),
            "other device"
        );
        let mut fed = batch(200, 100, 10);
        fed.sync = Some(crate::backend::SyncRule {
            when: crate::backend::SyncWhen::Every(5),
            release: crate::backend::Release::Exact,
            diag: 1.0,
            messages_per_sync: 200,
        });
        assert!(find(&table, "NVIDIA H100 80GB", &fed).is_err(), "federated not covered");
    }
}
