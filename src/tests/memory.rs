//! The memory model holds: a job of 10^6 output rows runs, is
//! compacted and grows (reading its compacted part back) under an
//! address-space limit of 1.2x what `validate` states for it
//! ([`fedbandits::sim::memory::estimate`]), because assembly and reading
//! back stream a repetition (a record batch) at a time (holding a cell's
//! rows as Arrow arrays, or a whole part read back, would need about twice
//! the figure and die at assembly after computing everything). And a
//! shard is sized as a shard: `run
//! --shard` under a limit the whole job would exceed runs.

use fedbandits::job::Job;
use fedbandits::job::shard::Shard;
use fedbandits::sim::memory;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-memory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the binary with `args` under an address-space limit of `limit`
/// bytes (`ulimit -v`, what a Slurm `--mem` may impose).
fn limited(limit: u64, args: &[&str]) -> Output {
    limited_with(limit, args, &[])
}

/// [`limited`] with environment variables `env` set.
fn limited_with(limit: u64, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let cmd = format!("ulimit -v {} && exec \"$0\" \"$@\"", limit / 1024);
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .arg(env!("CARGO_BIN_EXE_fedbandits"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn rows_of(part: &Path) -> usize {
    let mut n = 0;
    fedbandits::output::read_parquet_stream(part, |b| {
        n += b.num_rows();
        Ok(())
    })
    .unwrap();
    n
}

#[test]
fn a_million_row_job_runs_compacts_and_grows_within_its_estimate() {
    let dir = tempdir("million");
    let text = |reps: u32| {
        format!(
            "name: million\nseed: 4\nrepetitions: {reps}\nhorizon: 100\ncheckpoints: {{every: 1}}\n\
             algorithm: [random, independent]\nenvironment: linear_sphere\nparams: {{m: 2, d: 2, k: 3}}\n"
        )
    };
    let path = dir.join("million.yaml");
    std::fs::write(&path, text(5000)).unwrap();
    let job = Job::load(&path).unwrap();
    let threads = 2;
    let limit = memory::estimate(&job, threads, Shard::default()) * 6 / 5;
    let out = dir.join("o");
    let (job_arg, out_arg) = (path.to_str().unwrap(), out.to_str().unwrap());
    let run = |what: &str| {
        let r = limited(limit, &["run", job_arg, "--quiet", "--threads", "2", "--out", out_arg]);
        assert!(
            r.status.success(),
            "{what} under {} ({}): {}",
            memory::human(limit),
            r.status,
            String::from_utf8_lossy(&r.stderr)
        );
    };
    run("the run");
    let part = out.join("million/part-00000-of-00001.parquet");
    assert_eq!(rows_of(&part), 1_000_000);
    let r = limited(limit, &["merge", out.join("million").to_str().unwrap(), "--compact"]);
    assert!(r.status.success(), "merge: {}", String::from_utf8_lossy(&r.stderr));
    // Growth writes every unit back from the compacted part, then
    // assembles 10,002 repetitions.
    std::fs::write(&path, text(5001)).unwrap();
    run("growth after merge --compact");
    assert_eq!(rows_of(&part), 1_000_200);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shard_is_sized_as_a_shard() {
    let dir = tempdir("shard");
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        "name: s\nseed: 5\nrepetitions: 3000\nhorizon: 400\ncheckpoints: {every: 1}\nalgorithm: [random, independent]\n\
         environment: linear_sphere\nparams: {m: 2, d: 2, k: 3}\n",
    )
    .unwrap();
    let job = Job::load(&path).unwrap();
    let whole = memory::estimate(&job, 1, Shard::default());
    let shard = Shard { index: 0, count: 1000 };
    let one = memory::estimate(&job, 1, shard);
    assert!(one * 2 < whole, "shard {} vs job {}", one, whole);
    assert_eq!(
        memory::largest_task(&job, 1, 1000, true),
        one,
        "plan books what the shard needs"
    );
    // Between the two: the whole job would be refused, the shard runs.
    let limit = (one * 6 / 5).max(whole * 9 / 10);
    assert!(limit < whole);
    let out = dir.join("o");
    let (j, o) = (path.to_str().unwrap(), out.to_str().unwrap());
    let r = limited(
        limit,
        &["run", j, "--quiet", "--threads", "1", "--out", o, "--shard", "0/1000"],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = limited(limit, &["run", j, "--quiet", "--threads", "1", "--out", o]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the job needs about") && err.contains("ulimit -v"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_sdp_vecsum_job_loads_and_runs_within_its_estimate_on_a_cold_cache() {
    // The vector-summation accountant's figures (its largest Binomial
    // counts under `calibration: exact`) take about 120 MiB while they are
    // computed: once outside the memory model (29 MiB stated, 180 MB peak).
    let dir = tempdir("vecsum");
    let path = dir.join("v.yaml");
    std::fs::write(
        &path,
        "name: v\nseed: 1\nrepetitions: 2\nhorizon: 2000\ncheckpoints: {log_points: 10}\nalgorithm: private_fedlinucb\n\
         environment: linear_sphere\nparams: {d: 2, k: 5, m: 2, epsilon: 1, delta: 0.1, protocol: sdp_vecsum}\n",
    )
    .unwrap();
    let job = Job::load(&path).unwrap();
    let estimate = memory::estimate(&job, 1, Shard::default());
    assert!(
        estimate > 100 << 20,
        "the accountant's working memory is counted: {}",
        memory::human(estimate)
    );
    let limit = estimate * 6 / 5;
    let cache = dir.join("cache");
    let out = dir.join("o");
    let args = [
        "run",
        path.to_str().unwrap(),
        "--quiet",
        "--threads",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    let r = limited_with(limit, &args, &[("FEDBANDITS_CACHE_DIR", &cache)]);
    assert!(
        r.status.success(),
        "under {}: {}",
        memory::human(limit),
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(
        cache.join("unit-shift-r1.txt").exists(),
        "the figures were computed, not read from a cache"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
