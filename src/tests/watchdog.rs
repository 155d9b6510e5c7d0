//! The watchdog on every launch (src/backend/cuda/watchdog.rs) under the
//! host emulation: a federation that spans several blocks, whose last block
//! never runs (as a block a device never schedules), waits at its group
//! barrier until the watchdog's abort; the launch is then an error naming
//! the kernel and what to do, the device takes no further launch, and a
//! run keeps every unit finished before it and writes nothing of the
//! batch. Without the watchdog the same launch waits forever.

use fedbandits::backend::{BackendChoice, Selection};
use fedbandits::job::Job;
use fedbandits::sim::run_batch;
use fedbandits::sim::runner::{RunOptions, run_job};
use std::path::Path;
use std::time::Duration;

use crate::support::emulated::emulated_with_withheld_block;

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
