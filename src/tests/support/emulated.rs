//! Shared by the CUDA test suites (`cuda`, `cuda_events`): the host
//! emulation of the kernels (built once per test process with g++) as a
//! [`CudaBackend`], and the parity check of a job's cells, emulated batches
//! against the CPU one repetition at a time, bit for bit.

use fedbandits::backend::cuda::CudaBackend;
use fedbandits::backend::cuda::emulation::{self, Emulator};
use fedbandits::job::Job;
use fedbandits::sim::{run_batch, run_rep};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels")
}

pub fn emulator_lib() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let out = std::env::temp_dir().join("fedbandits-emulation");
        emulation::build(&kernels_dir(), &out, &fedbandits::algo::family::kernel_sources())
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// A CUDA backend whose launcher is the host emulation.
pub fn emulated() -> CudaBackend {
    let emu = Emulator::load(emulator_lib()).unwrap_or_else(|e| panic!("{e}"));
    CudaBackend::with_launcher(Box::new(emu), "host emulation")
}

/// The same with a device's shared memory per block (`bytes`: an H100's
/// opt-in 227 KiB shapes the kernels as that device would).
pub fn emulated_with_shared(bytes: usize) -> CudaBackend {
    let emu = Emulator::load(emulator_lib())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_shared_limit(bytes);
    CudaBackend::with_launcher(Box::new(emu), "host emulation")
}

/// Runs a job's cells through the driver under emulation and through the
/// CPU backend, and compares the curves bit for bit.
pub fn assert_parity(yaml: &str) -> u64 {
    assert_parity_on(&emulated(), yaml)
}

/// Runs a job's cells as batches on `dev` and one by one on the CPU
/// backend, and compares the curves bit for bit; returns the rewards
/// clipped over every cell and repetition (so that a test can check that
/// its job exercised the clipping).
pub fn assert_parity_on(dev: &CudaBackend, yaml: &str) -> u64 {
    let mut clipped = 0;
    let job = Job::parse(Path::new("parity.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"));
    let ck = job.checkpoint_rounds();
    let reps: Vec<u32> = (0..job.repetitions).collect();
    for cell in &job.cells {
        let gpu = run_batch(cell, job.seed, &reps, &ck, dev, &|_| {}).unwrap_or_else(|e| panic!("{e}"));
        for (r, g) in reps.iter().zip(&gpu) {
            let cpu = run_rep(cell, job.seed, *r, &ck, &|_| {});
            assert_eq!(cpu.points.len(), g.points.len());
            for (a, b) in cpu.points.iter().zip(&g.points) {
                assert_eq!(a.t, b.t);
                assert_eq!(
                    a.group_regret.to_bits(),
                    b.group_regret.to_bits(),
                    "{} rep {r} t {}: cpu {} emulated gpu {}",
                    cell.label(),
                    a.t,
                    a.group_regret,
                    b.group_regret
                );
                assert_eq!(a.agent_regret_max.to_bits(), b.agent_regret_max.to_bits());
                assert_eq!(a.counters, b.counters, "{} t {}", cell.label(), a.t);
            }
            clipped += g.points.last().map_or(0, |p| p.counters.clipped_rewards);
        }
        println!(
            "parity ok: {} ({} reps, final group regret {:.4})",
            cell.label(),
            reps.len(),
            gpu[0].points.last().map(|p| p.group_regret).unwrap_or(0.0)
        );
    }
    clipped
}

/// The emulated device with the watchdog's fault: the last block of every
/// group of a grouped kernel never runs (a block the device never
/// schedules), and the watchdog's deadline has a floor of `floor`.
pub fn emulated_with_withheld_block(floor: std::time::Duration) -> CudaBackend {
    use fedbandits::backend::cuda::watchdog::Settings;
    let emu = Emulator::load(emulator_lib())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_watchdog(Settings {
            floor,
            grace: std::time::Duration::from_secs(600),
        })
        .withhold_last_block();
    CudaBackend::with_launcher(Box::new(emu), "host emulation")
}
