//! End-to-end tests of the `fedbandits` binary: invalid jobs, determinism
//! across threads, batch sizes and shards, resume, and reading the Parquet
//! output back from Python (pyarrow).

use fedbandits::output::{NONDETERMINISTIC_COLUMNS, canonical_rows, read_metadata_key, read_parquet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary, with an empty calibration cache of its own (so that a
/// calibration in the user's cache never changes where `auto` runs a test).
fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fedbandits"));
    c.env(
        "FEDBANDITS_CACHE_DIR",
        std::env::temp_dir().join(format!("fedbandits-test-{}-no-calibration", std::process::id())),
    );
    c
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const GOOD: &str = "\
name: small
seed: 11
repetitions: 3
horizon: 300
checkpoints: {every: 50}
algorithm: [independent, private_fedlinucb, feducb_centralized]
environment: linear_sphere
params:
  m: 3
  d: 4
  k: 9
  delta: 0.1
grid:
  epsilon: [0.5, 2]
";

fn write_job(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn assert_invalid(text: &str, needles: &[&str]) {
    let dir = tempdir(&format!("bad{}", text.len()));
    let job = write_job(&dir, "bad.yaml", text);
    let out_dir = dir.join("out");
    let o = run(&[
        "run",
        job.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--quiet",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "exit code; stderr: {err}");
    assert!(err.contains("bad.yaml"), "names the file: {err}");
    for n in needles {
        assert!(err.contains(n), "expected '{n}' in: {err}");
    }
    assert!(!out_dir.exists(), "nothing may be written for an invalid job");
    // validate reports the same and also exits 2.
    let v = run(&["validate", job.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(2));
}

#[test]
fn invalid_jobs_exit_2_with_file_line_key() {
    // A wrong key (line 2).
    assert_invalid(
        &GOOD.replace("seed: 11", "sede: 11"),
        &["bad.yaml:2", "sede", "unknown key", "allowed:"],
    );
    // A string for epsilon (line 14).
    assert_invalid(
        &GOOD.replace("[0.5, 2]", "[0.5, \"two\"]"),
        &["bad.yaml:14", "grid.epsilon", "expected a number"],
    );
    // delta = 1.5 (line 12).
    assert_invalid(
        &GOOD.replace("delta: 0.1", "delta: 1.5"),
        &["bad.yaml:12", "params.delta", "(0, 1)"],
    );
    // A missing horizon.
    assert_invalid(&GOOD.replace("horizon: 300\n", ""), &["horizon", "missing"]);
    // Issue 39's smaller cases, each saying what was written and what is
    // allowed: an infinite linspace end ("NaN is out of range" before), a
    // fractional count ("n >= 1"), an integer beyond 64 bits ("as u128,
    // expected any YAML value"), a default B above a short horizon.
    assert_invalid(
        &GOOD.replace("[0.5, 2]", "{linspace: [0.1, .inf, 5]}"),
        &["grid.epsilon", "to = inf must be finite"],
    );
    assert_invalid(
        &GOOD.replace("[0.5, 2]", "{linspace: [0.1, 1, 2.5]}"),
        &["grid.epsilon", "n = 2.5 must be a whole number"],
    );
    assert_invalid(
        &GOOD.replace("seed: 11", "seed: 18446744073709551616"),
        &["integer 18446744073709551616 is beyond", "18446744073709551615"],
    );
    assert_invalid(
        &GOOD
            .replace("horizon: 300", "horizon: 1")
            .replace("checkpoints: {every: 50}\n", ""),
        &["B = 25 (the default: set batch_size) exceeds the horizon T = 1"],
    );
    // Issue 40's small traps: a parameter no algorithm of the job uses was
    // dropped silently; near misses get a suggestion.
    assert_invalid(
        &GOOD.replace("  delta: 0.1", "  delta: 0.1\n  arms: 3"),
        &[
            "params.arms",
            "no algorithm or environment of this job uses it",
            "mab_heterogeneous",
        ],
    );
    assert_invalid(
        &GOOD
            .replace("seed: 11", "sed: 11")
            .replace("  delta: 0.1", "  deltta: 0.1"),
        &[
            "unknown key (did you mean 'seed'?)",
            "params.deltta: unknown parameter (did you mean 'delta'?)",
        ],
    );
    // Several problems at once: each reported.
    assert_invalid(
        &GOOD
            .replace("d: 4", "d: 0")
            .replace("k: 9", "k: -1")
            .replace("seed: 11", "seed: x"),
        &["params.d", "params.k", "seed", "3 problem(s)"],
    );
    // B > T.
    assert_invalid(
        &GOOD.replace("  m: 3\n", "  m: 3\n  batch_size: 500\n"),
        &["batch_size", "exceeds the horizon"],
    );
    // Unknown algorithm.
    assert_invalid(
        &GOOD.replace("independent,", "indepndent,"),
        &["unknown algorithm 'indepndent'", "allowed:"],
    );
    // Issue 14's silently accepted or misreported inputs.
    assert_invalid(
        &GOOD.replace("horizon: 300", "horizon: 10.5"),
        &["bad.yaml:4", "whole number of rounds", "10.5"],
    );
    assert_invalid(
        &GOOD.replace("[0.5, 2]", "[0.5, 1e308]"),
        &["grid.epsilon", "beyond 1e12", "zero privacy loss"],
    );
    assert_invalid(
        &GOOD.replace("[0.5, 2]", "[0.5, 2, 0.5]"),
        &["grid.epsilon", "appears twice"],
    );
    assert_invalid(&format!("{GOOD}output: \"\"\n"), &["output", "non-empty directory"]);
    assert_invalid(
        &format!("{GOOD}seed: 12\n"),
        &["bad.yaml:15", "seed", "appears twice at the top level"],
    );
    assert_invalid(
        &GOOD.replace("grid:\n", "grid:\n  k: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n  lambda: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n  alpha: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]\n  noise_std: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]\n  s_bound: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"),
        &["grid", "above the limit of 100000 cells", "split the sweep"],
    );
    assert_invalid(
        &GOOD
            .replace("horizon: 300", "horizon: 9000000000000")
            .replace("repetitions: 3", "repetitions: 1000000")
            .replace("{every: 50}", "{log_points: 10}"),
        &["horizon", "exceed 2^64"],
    );
    assert_invalid(
        &format!("description: \"{}\"\n{GOOD}", "x".repeat(1 << 20)),
        &["(file)", "limit of 1048576 bytes"],
    );
    assert_invalid(
        "horizon: 100\nalgorithm: gossip_ucb\nenvironment: mab_heterogeneous\nparams: {m: 4, graph: ring, graph_edges: e.txt}\n",
        &["params.graph_edges", "applies to graph: edges only"],
    );
}

#[test]
fn bad_flags_and_special_files_exit_with_clear_errors() {
    // A UTF-8 byte-order mark is not a second document.
    let dir = tempdir("bom");
    let job = write_job(&dir, "bom.yaml", &format!("\u{feff}{GOOD}"));
    let v = run(&["validate", job.to_str().unwrap()]);
    assert!(v.status.success(), "{}", stderr(&v));
    // Count flags must be at least 1 (clap usage error, exit 2).
    for flags in [&["--threads", "0"][..], &["--batch", "0"]] {
        let o = run(&[&["run", job.to_str().unwrap()][..], flags].concat());
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("at least 1"), "{}", stderr(&o));
    }
    let o = run(&["plan", job.to_str().unwrap(), "--tasks", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Issue 39: validate's --threads is capped as run's, so its estimate
    // does not wrap around (it printed 54.2 KiB for 2^64 - 1 threads).
    let v = run(&["validate", job.to_str().unwrap(), "--threads", "18446744073709551615"]);
    let text = String::from_utf8_lossy(&v.stdout).into_owned();
    assert!(v.status.success() && stderr(&v).contains("capped at"), "{}", stderr(&v));
    assert!(!text.contains("18446744073709551615 threads"), "{text}");
    // Issue 39: shard and task counts beyond the most units a job can have
    // are refused (exit 2) before anything is sized by them (they aborted
    // allocating 1.6 TB, or overflowed).
    for n in ["99999999999", "18446744073709551615"] {
        let shard = format!("0/{n}");
        for args in [
            &["run", job.to_str().unwrap(), "--shard", &shard][..],
            &["plan", job.to_str().unwrap(), "--tasks", n],
        ] {
            let o = run(args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("exceed") && stderr(&o).contains("1000000"),
                "{}",
                stderr(&o)
            );
        }
    }
    for rate in ["0", "-1", "inf", "fast"] {
        let o = run(&["plan", job.to_str().unwrap(), "--tasks", "2", &format!("--rate={rate}")]);
        assert_eq!(o.status.code(), Some(2), "--rate {rate}: {}", stderr(&o));
        assert!(stderr(&o).contains("agent-steps per second"), "{}", stderr(&o));
    }
    // A device named as the job file is refused by kind, never read
    // (pipes, directories and the other inputs: faults.rs).
    if Path::new("/dev/zero").exists() {
        let o = run(&["validate", "/dev/zero"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("a character device, not a regular file"),
            "{}",
            stderr(&o)
        );
    }
    // validate > /dev/full fails (exit 1) instead of losing its output.
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let o = bin()
            .args(["validate", job.to_str().unwrap()])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("cannot write to standard output"), "{}", stderr(&o));
    }
}

#[test]
fn cuda_backend_fails_cleanly_and_auto_falls_back() {
    let dir = tempdir("cuda");
    let job = write_job(&dir, "j.yaml", GOOD);
    let with_backend = |b: &str| {
        run(&[
            "run",
            job.to_str().unwrap(),
            "--out",
            dir.join("o").to_str().unwrap(),
            "--backend",
            b,
        ])
    };
    let o = with_backend("cuda");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--backend cuda"), "{}", stderr(&o));
    assert!(!dir.join("o").exists());
    let o = with_backend("auto");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("backend cpu (auto"), "{}", stderr(&o));
    // auto says why the CPU (no calibration of a device here) and where
    // each cell ran.
    assert!(
        stderr(&o).contains("no calibration of a GPU on this machine"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("cells (all 5) run on cpu"), "{}", stderr(&o));
}

/// Tree noise is regenerated from keys, so FedUCB's privacy state does not
/// grow with log T: Fig. 1C at d = 128 (M = 100, T = 10^6) fits 64 MiB per
/// federation (it was 593 MiB with stored node noise).
#[test]
fn validate_reports_fig1c_memory_within_64_mib() {
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/dubey_fig1c.yaml");
    let o = run(&["validate", job.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("memory: up to "))
        .unwrap_or_else(|| panic!("{out}"));
    let mib: f64 = line["memory: up to ".len()..]
        .split(" MiB")
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(mib > 20.0 && mib <= 64.0, "{line}");
}

fn all_rows(dir: &Path) -> Vec<String> {
    let mut batches = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "parquet") {
            batches.extend(read_parquet(&p).unwrap());
        }
    }
    canonical_rows(&batches, NONDETERMINISTIC_COLUMNS)
}

#[test]
fn output_is_bit_identical_across_threads_batches_and_shards() {
    let dir = tempdir("det");
    let job = write_job(&dir, "j.yaml", GOOD);
    let j = job.to_str().unwrap();
    let go = |out: &str, extra: &[&str]| {
        let mut args = vec!["run", j, "--quiet", "--out"];
        let o = dir.join(out);
        let os = o.to_str().unwrap().to_owned();
        args.push(&os);
        args.extend_from_slice(extra);
        let r = run(&args);
        assert!(r.status.success(), "{}", stderr(&r));
        o.join("small")
    };
    let a = all_rows(&go("t1", &["--threads", "1"]));
    let b = all_rows(&go("t2", &["--threads", "2"]));
    let c = all_rows(&go("b5", &["--threads", "2", "--batch", "5"]));
    let s = go("sh", &["--shard", "0/3"]);
    go("sh", &["--shard", "2/3", "--threads", "1"]);
    go("sh", &["--shard", "1/3"]);
    let d = all_rows(&s);
    // 5 cells (independent ignores epsilon) x 3 reps x 6 checkpoints.
    assert_eq!(a.len(), 5 * 3 * 6);
    assert_eq!(a, b, "threads 1 vs 2");
    assert_eq!(a, c, "batch sizes");
    assert_eq!(a, d, "shard layouts");
    let parts: Vec<_> = std::fs::read_dir(&s)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("part-"))
        .collect();
    assert_eq!(parts.len(), 3);
}

#[test]
fn rerun_skips_complete_cells_and_keeps_results() {
    let dir = tempdir("rerun");
    let job = write_job(&dir, "j.yaml", GOOD);
    let out = dir.join("o");
    let args = ["run", job.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()];
    let first = run(&args);
    assert!(first.status.success());
    let rows = all_rows(&out.join("small"));
    let second = run(&args);
    assert!(second.status.success());
    assert!(
        stderr(&second).contains("reused 15 finished repetition(s)"),
        "{}",
        stderr(&second)
    );
    assert!(stderr(&second).contains("ran 0 repetition(s)"), "{}", stderr(&second));
    assert_eq!(rows, all_rows(&out.join("small")));
    // An invalid edit of the job leaves the earlier results intact.
    std::fs::write(&job, GOOD.replace("delta: 0.1", "delta: 0")).unwrap();
    let bad = run(&args);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(rows, all_rows(&out.join("small")));
    // Metadata carries the job and version.
    let part = out.join("small/part-00000-of-00001.parquet");
    let yaml = read_metadata_key(&part, "fedbandits.job_yaml").unwrap().unwrap();
    assert!(yaml.contains("private_fedlinucb"));
    assert_eq!(
        read_metadata_key(&part, "fedbandits.version").unwrap().as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        std::fs::read_dir(out.join("small"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
            .count(),
        0
    );
}

/// Results are verified before reuse: a unit with damaged data
/// pages, a unit copied under another repetition's name and a rerun of an
/// edited job are refused with the file and the remedy, and leave every
/// earlier file as it was.
#[test]
fn damaged_copied_or_foreign_results_are_refused_not_reused() {
    let dir = tempdir("verify");
    let job = write_job(&dir, "j.yaml", GOOD);
    let out = dir.join("o");
    let args = ["run", job.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()];
    assert!(run(&args).status.success());
    let res = out.join("small");
    let rows = all_rows(&res);
    let units: Vec<PathBuf> = {
        let mut u: Vec<PathBuf> = std::fs::read_dir(res.join(".units"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        u.sort();
        u
    };
    let part = res.join("part-00000-of-00001.parquet");
    let refused = |needles: &[&str]| {
        let o = run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        for n in needles {
            assert!(err.contains(n), "{n:?} not in {err}");
        }
    };
    // 1. Eight bytes overwritten inside a data page; the part file deleted.
    let good = std::fs::read(&units[0]).unwrap();
    let mut bad = good.clone();
    bad[200..208].copy_from_slice(b"ABCDEFGH");
    std::fs::write(&units[0], &bad).unwrap();
    std::fs::remove_file(&part).unwrap();
    refused(&["checksum mismatch", &units[0].to_string_lossy(), "move it away"]);
    assert!(!part.exists(), "nothing is assembled from a damaged unit");
    std::fs::write(&units[0], &good).unwrap();
    assert!(run(&args).status.success());
    assert_eq!(all_rows(&res), rows);
    // 2. A unit copied under another repetition's name.
    let rep2 = std::fs::read(&units[2]).unwrap();
    std::fs::copy(&units[1], &units[2]).unwrap();
    refused(&["fedbandits.repetition = 1, expected 2", &units[2].to_string_lossy()]);
    std::fs::write(&units[2], &rep2).unwrap();
    // 3. The job edited (horizon 300 -> 200) and rerun into the same place.
    std::fs::write(&job, GOOD.replace("horizon: 300", "horizon: 200")).unwrap();
    refused(&["holds results of a different job", "--out ANOTHER_DIR"]);
    assert_eq!(all_rows(&res), rows);
}

/// The Python interpreter with pyarrow: $FEDBANDITS_PYTHON, else the venv
/// that `.ci/run` creates.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("FEDBANDITS_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("analysis/.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with pyarrow: run .ci/run (it creates analysis/.venv) or set FEDBANDITS_PYTHON"
    );
    venv
}

#[test]
fn python_reads_schema_and_values() {
    let dir = tempdir("py");
    let job = write_job(&dir, "j.yaml", GOOD);
    let out = dir.join("o");
    let r = run(&["run", job.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", stderr(&r));
    let script = r#"
import sys, glob
import pyarrow.parquet as pq, pyarrow as pa, pyarrow.compute as pc
t = pq.read_table(glob.glob(sys.argv[1] + "/*.parquet"))
s = t.schema
want = {"job": pa.string(), "cell_id": pa.string(), "algorithm": pa.string(), "m": pa.int64(), "d": pa.int64(),
        "epsilon": pa.float64(), "delta": pa.float64(), "protocol": pa.string(), "sync": pa.string(), "private": pa.bool_(),
        "repetition": pa.uint32(), "seed": pa.uint64(), "t": pa.uint64(), "group_regret": pa.float64(),
        "agent_regret": pa.float64(), "agent_regret_max": pa.float64(), "regret_exponent": pa.float64(),
        "sync_rounds": pa.uint64(), "messages": pa.uint64(),
        "target_epsilon": pa.float64(), "backend": pa.string(), "wall_seconds": pa.float64()}
for k, v in want.items():
    assert s.field(k).type == v, (k, s.field(k).type)
assert t.num_rows == 5 * 3 * 6, t.num_rows
rows = t.to_pylist()
for r in rows:
    assert abs(r["agent_regret"] * r["m"] - r["group_regret"]) < 1e-9 * max(1, r["group_regret"])
    assert r["group_regret"] >= 0 and r["t"] in (50, 100, 150, 200, 250, 300)
    # the first checkpoint (50) is after T/10 = 30: no exponent
    assert r["regret_exponent"] is None
    if r["algorithm"] == "independent":
        assert r["epsilon"] is None and r["target_epsilon"] is None and r["sync_rounds"] == 0
        assert r["acct_epsilon_zcdp"] is None
        assert r["clipped_observations"] == 0
    else:
        # private cells on linear_sphere clip rewards to [-1, 1] (counted,
        # at most one per agent and round), so the figures exist
        assert r["acct_releases_per_observation"] >= 1 and r["acct_noise_multiplier"] > 0
        assert r["clip_rewards"] is True and 0 < r["clipped_observations"] <= 3 * r["t"]
    if r["algorithm"] == "private_fedlinucb":
        assert r["acct_rho_zcdp"] > 0 and r["acct_epsilon_zcdp"] > 0 and r["acct_mu"] > 0
        assert r["acct_epsilon"] > 0 and r["acct_epsilon_sums"] is None
        assert r["epsilon"] in (0.5, 2.0) and r["protocol"] == "ldp"
        assert r["sync_rounds"] == r["t"] // 25 and r["messages"] == 2 * 3 * r["sync_rounds"]
    if r["algorithm"] == "feducb_centralized":
        # the default: exact calibration and the private schedule, which
        # acct_epsilon covers with the sums (no mu: not Gaussian-DP)
        assert r["private"] is True and r["sync"] == "log" and r["schedule_private"] is True
        assert r["schedule"] == "private" and r["calibration"] == "exact"
        assert abs(r["acct_epsilon"] - r["epsilon"]) <= 0.01 * r["epsilon"] and r["acct_epsilon"] <= r["epsilon"]
        # the sums' figure alone is below the composed one; 1 + floor(log2 N) nodes, N = 3 * 9 + 9
        assert r["acct_mu"] is None and 0 < r["acct_epsilon_sums"] < r["acct_epsilon"]
        assert r["acct_releases_per_observation"] == 6 and r["acct_sensitivity"] == 3 ** 0.5
key = lambda r: (r["cell_id"], r["repetition"], r["t"])
rows.sort(key=key)
for a, b in zip(rows, rows[1:]):
    if (a["cell_id"], a["repetition"]) == (b["cell_id"], b["repetition"]):
        assert b["group_regret"] >= a["group_regret"]
md = pq.read_metadata(glob.glob(sys.argv[1] + "/part-*.parquet")[0]).metadata
assert b"fedbandits.job_yaml" in md and b"fedbandits.git_commit" in md
print("python ok", t.num_rows)
"#;
    let o = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(out.join("small"))
        .output()
        .expect("python runs");
    assert!(
        o.status.success(),
        "python check failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("python ok 90"));
}

#[test]
fn every_bundled_job_validates_and_small_paper_jobs_run() {
    let jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs");
    // `.ci/run` names a folder the analysis package's tests read these
    // results from afterwards (its fixture runs them itself without it).
    let out = match std::env::var_os("FEDBANDITS_SMALL_RESULTS") {
        Some(d) => {
            let d = PathBuf::from(d);
            std::fs::create_dir_all(&d).unwrap();
            d
        }
        None => tempdir("jobs"),
    };
    let mut ran = 0;
    let mut names: Vec<PathBuf> = std::fs::read_dir(&jobs)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    names.sort();
    // Jobs on the UCI diabetes data read the user's diabetic_data.csv beside
    // the job file: validated as a copy beside a generated one.
    let data_dir = tempdir("uci");
    let header = fedbandits::env::uci::HEADER;
    let mut csv = format!("{header}\n");
    for i in 0..30 {
        let row: Vec<&str> = header
            .split(',')
            .map(|c| match c {
                "readmitted" => [">30", "NO", "<30"][i % 3],
                "metformin" | "glipizide" | "pioglitazone" | "insulin" | "examide" => "Steady",
                c if fedbandits::env::uci::MEDICATIONS.iter().any(|(m, _)| *m == c) => "No",
                _ => "?",
            })
            .collect();
        csv += &row.join(",");
        csv.push('\n');
    }
    std::fs::write(data_dir.join("diabetic_data.csv"), csv).unwrap();
    for job in &names {
        let job = &job.canonicalize().unwrap();
        let v = if job.to_string_lossy().contains("diabetes") {
            let missing = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
                .args(["validate", job.to_str().unwrap()])
                .current_dir(tempdir("uci-empty"))
                .output()
                .unwrap();
            assert_eq!(missing.status.code(), Some(2), "without the data file");
            assert!(stderr(&missing).contains("diabetic_data.csv"), "{}", stderr(&missing));
            let beside = data_dir.join(job.file_name().unwrap());
            std::fs::copy(job, &beside).unwrap();
            run(&["validate", beside.to_str().unwrap()])
        } else {
            run(&["validate", job.to_str().unwrap()])
        };
        assert!(v.status.success(), "{}: {}", job.display(), stderr(&v));
        let stem = job.file_stem().unwrap().to_string_lossy().into_owned();
        if stem.ends_with("_small") {
            let r = run(&["run", job.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
            assert!(r.status.success(), "{}: {}", job.display(), stderr(&r));
            assert!(out.join(&stem).join("part-00000-of-00001.parquet").exists());
            ran += 1;
        }
    }
    assert_eq!(ran, 11, "expected the eleven _small paper jobs");
}

/// `fedbandits audit` tests every upper-bound column it writes: FedUCB's
/// PRIVATIZER at delta = 0.1 as calibrated passes (exit 0), and the same
/// mechanism with a quarter of its noise (the accountant's figures
/// unchanged: a deliberately under-noised mechanism) fails, exit 1, naming
/// the columns its lower bound exceeds.
#[test]
fn audit_fails_an_under_noised_mechanism_and_names_the_column() {
    let dir = tempdir("audit-self-test");
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/audit_dubey.yaml");
    let audit = |scale: &str| {
        run(&[
            "audit",
            job.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--trials",
            "20000",
            "--attack-trials",
            "20",
            "--noise-scale",
            scale,
        ])
    };
    let ok = audit("1");
    let out = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert_eq!(ok.status.code(), Some(0), "{out}{}", stderr(&ok));
    assert_eq!(out.matches("  pass").count(), 4, "{out}");
    let bad = audit("0.25");
    let err = stderr(&bad);
    assert_eq!(bad.status.code(), Some(1), "{err}");
    assert!(
        err.contains("audit failed")
            && err.contains(
                "epsilon=10 neighbours=add_remove: FAIL: acct_epsilon_sums = 0.3019 is below the audit's lower bound"
            ),
        "{err}"
    );
    // The table was written before the failure.
    assert!(dir.join("audit_dubey/_audit/audit.parquet").exists());
}

/// `fedbandits calibrate` on a machine without a device: it says so,
/// measures the CPU, prints the table, records the calibration in the
/// cache directory and writes the Markdown report; `run --backend auto`
/// then still runs on the CPU and says why (no device was calibrated).
#[test]
fn calibrate_records_the_cpu_and_auto_says_why_it_stays_there() {
    let dir = tempdir("calibrate");
    let report = dir.join("report.md");
    let o = bin()
        .env("FEDBANDITS_CACHE_DIR", &dir)
        .args("calibrate --only gossip --federations 4,8 --seconds 0.05 --threads 2".split(' '))
        .args(["--report", report.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("no CUDA device opened"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("gossip_n10_m5 ")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        rows.iter().all(|r| r.contains(" gossip ") && r.contains(" cpu ")),
        "{out}"
    );
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("calibration-"))
        .collect();
    assert_eq!(files.len(), 1);
    let text = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(text.contains("device: null") && text.contains("kind: gossip"), "{text}");
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(md.contains("| gossip_n10_m5 | gossip | cpu | 8 |"), "{md}");
    // The kernels' table, without a device through the host emulation
    // (`.ci/run` provides NVRTC and g++), of the workloads `--only` names:
    // the gossip kernel's row, with its occupancy on an H100, and no other
    // family's (every workload's table: `cuda_events`).
    assert!(
        md.contains("## Kernels: launches, registers, shared memory, occupancy"),
        "{md}"
    );
    assert!(md.contains("as an H100 would launch them"), "{md}");
    assert!(
        md.lines()
            .any(|l| l.starts_with("| `fb_gossip_rounds` |") && l.contains("| 25 | 39.1% |")),
        "{md}"
    );
    assert!(!md.contains("fb_linear_rounds_coop"), "{md}");
    // auto: the calibration names no device, so the CPU, with the reason.
    let job = write_job(&dir, "auto.yaml", GOOD);
    let o = bin()
        .env("FEDBANDITS_CACHE_DIR", &dir)
        .args(["run", job.to_str().unwrap(), "--threads", "2", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no calibration of a GPU on this machine"),
        "{}",
        stderr(&o)
    );
}
