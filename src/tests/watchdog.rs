//! The watchdog on every launch (src/backend/cuda/watchdog.rs) under the
//! host emulation: a federation that spans several blocks, whose last block
//! never runs (as a block a device never schedules), waits at its group
//! barrier until the watchdog's abort; the launch is then an error naming
//! the kernel and what to do, the device takes no further launch, and a
//! run keeps every unit finished before it and writes nothing of the
//! batch. Without the watchdog the same launch waits forever.
//!
//! And the parity gate (src/backend/gate.rs): a device whose results differ
//! from the CPU's fails the parity check, the failure is recorded, `auto`
//! then leaves the device with a notice naming the record, and `--backend
//! cuda` refuses it.

use fedbandits::backend::cuda::CudaBackend;
use fedbandits::backend::cuda::CudaError;
use fedbandits::backend::cuda::emulation::Emulator;
use fedbandits::backend::cuda::launcher::{Arg, DevPtr, Launcher};
use fedbandits::backend::{BackendChoice, Selection};
use fedbandits::job::Job;
use fedbandits::sim::run_batch;
use fedbandits::sim::runner::{RunOptions, run_job};
use std::path::Path;
use std::time::Duration;

use crate::support::emulated::{emulated_with_withheld_block, emulator_lib};

/// FedUCB with M = 9: a federation spans three blocks of four agents (the
/// last with one), which meet at group barriers every round.
const SPANNING: &str = "algorithm: feducb_centralized\nenvironment: linear_sphere\n\
                        params: {m: 9, d: 3, k: 6, epsilon: 1, delta: 0.1, private: false, sync: every_round}\n";

/// The batch's launch gives up past the deadline (one second here) instead
/// of waiting forever; the error names the kernel, the deadline and what to
/// do; a second batch on the same device is refused at once.
#[test]
fn a_group_whose_last_block_never_arrives_is_aborted_by_the_watchdog() {
    let dev = emulated_with_withheld_block(Duration::from_secs(1));
    let job = Job::parse(
        Path::new("watchdog.yaml"),
        &format!("seed: 3\nrepetitions: 2\nhorizon: 40\n{SPANNING}"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ck = job.checkpoint_rounds();
    let e = run_batch(&job.cells[0], job.seed, &[0, 1], &ck, &dev, &|_| {}).unwrap_err();
    let msg = e.to_string();
    println!("{msg}");
    for part in [
        "watchdog: fb_feducb_rounds on the host emulation did not finish within its deadline of 1.0 s",
        "gave up",
        "nothing of it is written; the units finished before it are kept",
        "--backend cpu",
    ] {
        assert!(msg.contains(part), "missing {part:?} in: {msg}");
    }
    let again = run_batch(&job.cells[0], job.seed, &[0], &ck, &dev, &|_| {}).unwrap_err();
    assert!(again.to_string().contains("watchdog"), "{again}");
}

/// A run on the faulty device: the cell before the spanning one (whose
/// kernel has no group barrier) finishes and its units are written; the
/// spanning cell's batch is aborted, the run fails naming it, and nothing
/// of that cell is on disk; the same run on the CPU then resumes, keeping
/// the finished units, and its results equal a CPU run's from scratch.
#[test]
fn a_run_keeps_the_finished_units_and_writes_nothing_of_the_aborted_batch() {
    use fedbandits::output::{NONDETERMINISTIC_COLUMNS, canonical_rows, read_parquet};
    let job = Job::parse(
        Path::new("watchdog_run.yaml"),
        "name: watchdog_run\nseed: 4\nrepetitions: 2\nhorizon: 30\ncheckpoints: {every: 10}\n\
         algorithm: [independent, feducb_centralized]\nenvironment: linear_sphere\n\
         params: {m: 9, d: 3, k: 6, epsilon: 1, delta: 0.1, private: false, sync: every_round}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let root = std::env::temp_dir().join(format!("fedbandits-watchdog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let opts = |sub: &str| RunOptions {
        out: Some(root.join(sub)),
        quiet: true,
        ..RunOptions::default()
    };
    let sel = Selection::with_cuda(
        BackendChoice::Cuda,
        emulated_with_withheld_block(Duration::from_secs(1)),
        None,
    );
    let e = run_job(&job, &sel, &opts("faulty")).unwrap_err().to_string();
    println!("{e}");
    assert!(e.contains(&job.cells[1].id) && e.contains("watchdog"), "{e}");
    let files: Vec<String> = walk(&root.join("faulty"));
    let of = |c: usize| files.iter().filter(|f| f.contains(&job.cells[c].key)).count();
    println!("{files:#?}");
    assert_eq!(of(0), 2, "both units of the finished cell are kept: {files:?}");
    assert_eq!(of(1), 0, "nothing of the aborted cell is written: {files:?}");
    assert!(!files.iter().any(|f| f.contains("part-")), "no part: {files:?}");
    let resumed = run_job(&job, &Selection::cpu(), &opts("faulty")).unwrap_or_else(|e| panic!("{e}"));
    let fresh = run_job(&job, &Selection::cpu(), &opts("fresh")).unwrap_or_else(|e| panic!("{e}"));
    let mut exclude = NONDETERMINISTIC_COLUMNS.to_vec();
    exclude.push("backend");
    let rows = |p: &Path| canonical_rows(&read_parquet(p).unwrap_or_else(|e| panic!("{e}")), &exclude);
    assert_eq!(rows(&resumed.part), rows(&fresh.part));
    let _ = std::fs::remove_dir_all(&root);
}

/// Every file under `dir`, as paths relative to it.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(r) = p.strip_prefix(dir) {
                out.push(r.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// A device whose every copy back of a regret-like value (a normal, non-zero
/// f64 first) differs from the kernel's in its last bit: a kernel made to
/// differ.
struct Skewed(Box<dyn Launcher + Send>);

impl Launcher for Skewed {
    fn name(&self) -> &'static str {
        "emulation"
    }
    fn alloc_zeroed(&mut self, bytes: usize) -> Result<DevPtr, CudaError> {
        self.0.alloc_zeroed(bytes)
    }
    fn upload(&mut self, dst: DevPtr, bytes: &[u8]) -> Result<(), CudaError> {
        self.0.upload(dst, bytes)
    }
    fn download(&mut self, src: DevPtr, out: &mut [u8]) -> Result<(), CudaError> {
        self.0.download(src, out)?;
        if out.len() >= 8 && out.len().is_multiple_of(8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(&out[..8]);
            let v = f64::from_le_bytes(w);
            if v.is_normal() {
                out[..8].copy_from_slice(&f64::from_bits(v.to_bits() ^ 1).to_le_bytes());
            }
        }
        Ok(())
    }
    fn launch_grid(
        &mut self,
        kernel: &str,
        grid: usize,
        block: usize,
        shared: usize,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        self.0.launch_grid(kernel, grid, block, shared, args)
    }
    fn free_all(&mut self) {
        self.0.free_all();
    }
    fn max_shared_per_block(&self) -> usize {
        self.0.max_shared_per_block()
    }
}

fn skewed() -> CudaBackend {
    let emu = Emulator::load(emulator_lib()).unwrap_or_else(|e| panic!("{e}"));
    CudaBackend::with_launcher(Box::new(Skewed(Box::new(emu))), "skewed emulation")
}

/// The gate on a device that differs: the check fails and is recorded;
/// `auto` with a calibration that names the device (one measured before)
/// runs every cell on the CPU with a notice naming the record, and so it
/// does with only the record (a device that failed is not calibrated,
/// and is not even opened); `--backend cuda` refuses it, naming the record.
#[test]
fn a_recorded_parity_failure_keeps_auto_off_the_device() {
    use fedbandits::backend::calibration::{Calibration, MachineKey};
    use fedbandits::backend::gate::{ParityRecord, Verdict};
    use fedbandits::backend::select_auto_in;
    use fedbandits::cli::calibrate::{check_recorded, gate_cuda};
    let dir = std::env::temp_dir().join(format!("fedbandits-gate-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (record, path) = check_recorded(&skewed(), Some(&dir));
    let path = path.unwrap_or_else(|| panic!("not recorded"));
    println!("{}: {record:?}", path.display());
    assert_eq!(record.verdict, Verdict::Failed);
    assert!(record.detail.contains("against the CPU's"), "{}", record.detail);
    assert_eq!(
        ParityRecord::load(&dir, "skewed emulation").unwrap(),
        Some(record.clone())
    );
    // Only the record: auto says which record and never opens the device.
    let auto = select_auto_in(&dir, 2, || {
        panic!("auto opened a device with a failed record and no calibration")
    });
    println!("{}", auto.note);
    let notice = format!(
        "backend cpu (auto: skips CUDA device skewed emulation: its parity check with this engine failed at {}",
        record.at
    );
    assert!(auto.note.starts_with(&notice), "{}", auto.note);
    assert!(auto.note.contains(&path.display().to_string()) && auto.cuda_backend().is_none());
    // A calibration that names the device (measured before the failure):
    // the device opens and the record keeps it off.
    Calibration::empty(MachineKey::here(2, Some("skewed emulation")))
        .save(&dir)
        .unwrap_or_else(|e| panic!("{e}"));
    let auto = select_auto_in(&dir, 2, || Ok(skewed()));
    assert!(
        auto.note.starts_with(&notice) && auto.cuda_backend().is_none(),
        "{}",
        auto.note
    );
    // `--backend cuda`: the check runs again (no pass recorded) and fails.
    let sel = Selection::with_cuda(BackendChoice::Cuda, skewed(), None);
    let e = gate_cuda(&sel, Some(&dir)).unwrap_err().to_string();
    println!("{e}");
    assert!(
        e.contains("failed the parity check with the CPU") && e.contains(&path.display().to_string()),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A device that hangs fails the gate too: the watchdog's abort is the
/// check's failure, recorded as such.
#[test]
fn a_parity_check_the_watchdog_aborted_is_recorded_as_failed() {
    use fedbandits::backend::gate::Verdict;
    use fedbandits::cli::calibrate::check_recorded;
    let dir = std::env::temp_dir().join(format!("fedbandits-gate-hang-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (record, _) = check_recorded(&emulated_with_withheld_block(Duration::from_secs(1)), Some(&dir));
    println!("{record:?}");
    assert_eq!(record.verdict, Verdict::Failed);
    assert!(record.detail.contains("watchdog"), "{}", record.detail);
    let _ = std::fs::remove_dir_all(&dir);
}
