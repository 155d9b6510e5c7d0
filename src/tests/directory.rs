//! Nothing silently lost or mixed outside the run loop: job
//! names stay inside the output root, oversized grids are refused before
//! anything is built, one version of a job writes a directory at a time
//! (shards of one job in parallel), an unwritable directory is found before
//! any work, the engine's temporary files do not outlive their writers, and
//! `merge` refuses a part of another job. Each test failed on the engine
//! before these checks existed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fedbandits"))
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-dir-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

/// A small job; `{name}`, `{seed}` and `{horizon}` are filled in.
const JOB: &str = "\
name: {name}
seed: {seed}
repetitions: 2
horizon: {horizon}
checkpoints: {log_points: 5}
algorithm: [independent, private_fedlinucb]
environment: linear_sphere
params: {m: 3, d: 4, k: 9, delta: 0.1, epsilon: 1}
";

fn job(dir: &Path, file: &str, name: &str, seed: u64, horizon: u64) -> PathBuf {
    let text = JOB
        .replace("{name}", name)
        .replace("{seed}", &seed.to_string())
        .replace("{horizon}", &horizon.to_string());
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

fn run_job(job: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", job.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    run(&args)
}

/// A background run, killed if the test fails while it runs (its horizon
/// is 10^9 rounds: it must not outlive the test).
struct Running(Option<Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM (the run snapshots and exits 3); its exit code.
    fn stop(mut self) -> Option<i32> {
        let mut child = self.0.take()?;
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        child.wait().unwrap().code()
    }

    /// SIGKILL, as a crash or an out-of-memory kill would.
    fn kill(mut self) {
        if let Some(mut child) = self.0.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts a long run in the background and waits until it has registered
/// as a writer of `out/<name>` (a file `.writers/<host>-<pid>-<n>`).
fn start_long(job: &Path, out: &Path, name: &str, shard: &str) -> Running {
    let child = bin()
        .args([
            "run",
            job.to_str().unwrap(),
            "--quiet",
            "--threads",
            "1",
            "--shard",
            shard,
        ])
        .args(["--snapshot-every", "1000", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Running(Some(child));
    let dir = out.join(name).join(".writers");
    let mine = format!("-{}-", run.id());
    let registered = || {
        std::fs::read_dir(&dir)
            .map(|r| r.flatten().any(|e| e.file_name().to_string_lossy().contains(&mine)))
            .unwrap_or(false)
    };
    let start = Instant::now();
    while !registered() {
        if let Some(child) = run.0.as_mut()
            && child.try_wait().unwrap().is_some()
        {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            panic!("the long run ended early: {err}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the long run never registered"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    run
}

#[test]
fn job_names_that_leave_or_hide_in_the_output_root_are_refused() {
    let dir = tempdir("names");
    let out = dir.join("root").join("out");
    for bad in ["..", ".", ".units", "_audit", "a/b", "a b"] {
        let j = job(&dir, "j.yaml", &format!("\"{bad}\""), 1, 200);
        for cmd in ["validate", "run"] {
            let o = if cmd == "run" {
                run_job(&j, &out, &[])
            } else {
                run(&["validate", j.to_str().unwrap()])
            };
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd} name {bad:?}: {err}");
            assert!(
                err.contains("j.yaml:1: name:") && err.contains("not a valid job name"),
                "{err}"
            );
            assert!(err.contains("not starting with '.' or '_'"), "states the rule: {err}");
        }
    }
    // A name taken from the file name follows the same rule.
    let text = std::fs::read_to_string(dir.join("j.yaml")).unwrap();
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    for file in ["....yaml", "with space.yaml", "_x.yaml"] {
        std::fs::write(dir.join(file), &body).unwrap();
        let o = run_job(&dir.join(file), &out, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.contains("the file name gives") && err.contains("set `name:`"),
            "{err}"
        );
    }
    assert!(!dir.join("root").exists(), "nothing written for a refused name");
    std::fs::write(dir.join("fine.name.yaml"), &body).unwrap();
    assert!(run_job(&dir.join("fine.name.yaml"), &out, &[]).status.success());
    assert!(out.join("fine.name").join("part-00000-of-00001.parquet").exists());
}

#[test]
fn oversized_grids_are_refused_before_anything_is_built() {
    let dir = tempdir("grids");
    let base = "horizon: 10\nalgorithm: independent\nenvironment: linear_sphere\nparams: {m: 3, d: 4, k: 9}\n";
    for (grid, needle) in [
        // 10^12 values: building them aborted the process (exit 134).
        (
            "grid: {noise_std: {linspace: [0.1, 1, 1000000000000]}}\n",
            "linspace of 1000000000000 values",
        ),
        (
            "grid: {noise_std: {logspace: [0.1, 1, 100000000]}}\n",
            "logspace of 100000000 values",
        ),
        (
            "grid: {noise_std: {linspace: [0.1, 1, 100001]}}\n",
            "linspace of 100001 values",
        ),
        (
            "grid: {noise_std: {linspace: [0.1, 1, 1000]}, lambda: {linspace: [0.5, 2, 1000]}}\n",
            "the grid expands to 1000000 combinations",
        ),
        // 10^5 cells x 10^6 repetitions = 10^11 units: the shard
        // assignment's allocation aborted `run`.
        (
            "repetitions: 1000000\ngrid: {noise_std: {linspace: [0.1, 1, 100000]}}\n",
            "= 100000000000 units",
        ),
    ] {
        let p = dir.join("big.yaml");
        std::fs::write(&p, format!("{base}{grid}")).unwrap();
        for o in [
            run(&["validate", p.to_str().unwrap()]),
            run_job(&p, &dir.join("out"), &[]),
        ] {
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{grid}: {err}");
            assert!(err.contains("big.yaml") && err.contains(needle), "{grid}: {err}");
            assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{err}");
        }
    }
    assert!(!dir.join("out").exists());
}

#[test]
fn one_version_of_a_job_writes_a_directory_shards_run_in_parallel() {
    let dir = tempdir("versions");
    let out = dir.join("out");
    let long = job(&dir, "v7.yaml", "kjob", 7, 1_000_000_000);
    let edited_dir = dir.join("edited");
    std::fs::create_dir_all(&edited_dir).unwrap();
    let edited = job(&edited_dir, "v7.yaml", "kjob", 8, 1_000_000_000);
    let a = start_long(&long, &out, "kjob", "0/2");
    let pid = a.id().to_string();
    // Another version of the job: refused at start, naming the writer.
    let o = run_job(&edited, &out, &["--shard", "1/2"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("another version of job kjob") && err.contains(&format!("pid {pid}")),
        "{err}"
    );
    // The same shard again: refused, naming the writer.
    let o = run_job(&long, &out, &["--shard", "0/2"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("shard 0/2 of job kjob is already running") && err.contains(&pid),
        "{err}"
    );
    // merge while a run writes: refused.
    let o = run(&["merge", out.join("kjob").to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("still running here") && err.contains(&pid), "{err}");
    // Another shard of the same job runs beside it (and is stopped).
    let b = start_long(&long, &out, "kjob", "1/2");
    assert_eq!(std::fs::read_dir(out.join("kjob/.writers")).unwrap().count(), 2);
    assert_eq!(b.stop(), Some(3));
    assert_eq!(a.stop(), Some(3));
    // kill -9 leaves no stale lock: a run of the same shard proceeds, and
    // the dead writer's registration is gone.
    start_long(&long, &out, "kjob", "0/2").kill();
    let left = std::fs::read_dir(out.join("kjob/.writers")).unwrap().count();
    assert_eq!(left, 1, "the killed run's registration stays until the next run looks");
    let d = start_long(&long, &out, "kjob", "0/2");
    assert_eq!(std::fs::read_dir(out.join("kjob/.writers")).unwrap().count(), 1);
    assert_eq!(d.stop(), Some(3));
    assert_eq!(std::fs::read_dir(out.join("kjob/.writers")).unwrap().count(), 0);
}

#[test]
fn two_versions_started_together_leave_one_consistent_directory() {
    // The probe's case: both exited 0 and the part held only one of them.
    let dir = tempdir("race");
    let out = dir.join("out");
    let a = job(&dir, "race.yaml", "race", 7, 20_000);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let b = job(&dir.join("b"), "race.yaml", "race", 8, 20_000);
    let spawn = |j: &Path| {
        bin()
            .args(["run", j.to_str().unwrap(), "--quiet", "--threads", "1", "--out"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (ca, cb) = (spawn(&a), spawn(&b));
    let (oa, ob) = (ca.wait_with_output().unwrap(), cb.wait_with_output().unwrap());
    let ok = [oa.status.success(), ob.status.success()];
    assert_eq!(
        ok.iter().filter(|&&s| s).count(),
        1,
        "exactly one wins: {}{}",
        stderr(&oa),
        stderr(&ob)
    );
    let winner = if ok[0] { &a } else { &b };
    // The directory is the winner's alone: a rerun of it finds everything.
    let o = run_job(winner, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(out.join("race/.units")).unwrap().count(), 4);
}

#[test]
fn an_unwritable_directory_is_refused_before_any_work() {
    let dir = tempdir("readonly");
    let j = job(&dir, "ro.yaml", "ro", 1, 200_000);
    let out = dir.join("out");
    std::fs::create_dir_all(out.join("ro")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for (d, mode) in [(&dir, 0o755), (&out, 0o777), (&out.join("ro"), 0o555)] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Root ignores permission bits: run as nobody (setpriv, util-linux).
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    let mut c = if root.unwrap_or(false) {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_fedbandits"));
        c
    } else {
        bin()
    };
    let o = c
        .args(["run", j.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write results in") && err.contains("Permission denied"),
        "{err}"
    );
    assert!(std::fs::read_dir(out.join("ro")).unwrap().count() == 0);
}

#[test]
fn stale_temporary_files_are_removed_and_merge_refuses_another_jobs_part() {
    let dir = tempdir("tmp");
    let out = dir.join("out");
    let small = job(&dir, "small.yaml", "small", 1, 300);
    assert!(run_job(&small, &out, &[]).status.success());
    // Leftovers of killed writers (a pid above any pid_max) in the job
    // directory and .units/; a rerun that rewrites the part removes them.
    let dead = "4294967000";
    let leftovers = [
        out.join(format!("small/.part-00000-of-00001.parquet.tmp-{dead}")),
        out.join(format!("small/.units/.x-000000.parquet.tmp-{dead}")),
    ];
    for f in &leftovers {
        std::fs::write(f, b"partial").unwrap();
    }
    std::fs::remove_file(out.join("small/part-00000-of-00001.parquet")).unwrap();
    assert!(run_job(&small, &out, &[]).status.success());
    for f in &leftovers {
        assert!(!f.exists(), "{} left", f.display());
    }
    // merge: a part of job `other` copied into small/ is refused.
    let other = job(&dir, "other.yaml", "other", 1, 300);
    assert!(run_job(&other, &out, &[]).status.success());
    std::fs::copy(
        out.join("other/part-00000-of-00001.parquet"),
        out.join("small/part-00000-of-00001.parquet"),
    )
    .unwrap();
    let o = run(&["merge", out.join("small").to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds results of job \"other\", but the directory is \"small\""),
        "{err}"
    );
    assert!(!out.join("small/_manifest.yaml").exists());
}

/// Issue 39, case 3: a renamed job directory (or `.units` copied into
/// another job's) relabelled the old job's units as the new job's: the
/// part's metadata said `small3`, every row `small`. Now the run refuses,
/// naming the unit and both jobs, and writes no part.
#[test]
fn units_of_another_job_are_refused_not_relabelled() {
    let dir = tempdir("renamed");
    let out = dir.join("out");
    let first = job(&dir, "small.yaml", "small", 3, 40);
    assert!(run_job(&first, &out, &[]).status.success());
    std::fs::rename(out.join("small"), out.join("small3")).unwrap();
    for e in std::fs::read_dir(out.join("small3")).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("part-") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let renamed = job(&dir, "small3.yaml", "small3", 3, 40);
    let o = run_job(&renamed, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is a unit of job \"small\", not of \"small3\""),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("small3/part-00000-of-00001.parquet").exists());
}

/// Issue 39, case 8: a job larger than the process may allocate aborted
/// with an allocation failure and a backtrace under a 6 GB address-space
/// limit (as a Slurm `--mem` imposes). Now `run` refuses before any work,
/// with the estimate, the limit and its source, exit 2, and writes nothing.
#[test]
fn a_job_larger_than_the_memory_limit_is_refused_before_work() {
    let dir = tempdir("huge");
    let job = dir.join("huge.yaml");
    std::fs::write(
        &job,
        "name: huge\nhorizon: 10\nalgorithm: independent\nenvironment: linear_sphere\nparams: {m: 2, d: 1024, k: 1000000}\n",
    )
    .unwrap();
    let out = dir.join("out");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 6000000 && exec '{}' run '{}' --out '{}' --threads 1",
            env!("CARGO_BIN_EXE_fedbandits"),
            job.display(),
            out.display()
        ))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs about 23.00 GiB") && err.contains("the address-space limit (ulimit -v)"),
        "{err}"
    );
    // Issue 73: its terms add up to the total, the snapshot named.
    assert!(
        err.contains("of federation state + ")
            && err.contains(" of its snapshot + ")
            && err.contains("x 1 thread(s) = "),
        "{err}"
    );
    assert!(!out.join("huge").exists(), "nothing may be written");
}

/// Issue 39's smaller merge cases: `merge .` inside a job directory took
/// the directory's name as "" ("copied or moved here"); parts of two job
/// versions were only "from different job files" (now both are named).
#[test]
fn merge_from_inside_and_of_two_versions_says_what_is_there() {
    let dir = tempdir("merge-dot");
    let out = dir.join("out");
    let a = job(&dir, "a.yaml", "mj", 3, 40);
    assert!(run_job(&a, &out, &["--shard", "0/2"]).status.success());
    assert!(run_job(&a, &out, &["--shard", "1/2"]).status.success());
    let inside = bin().args(["merge", "."]).current_dir(out.join("mj")).output().unwrap();
    assert!(inside.status.success(), "{}", stderr(&inside));
    // Another version (another seed) of shard 1 copied over this one's.
    let other = dir.join("other");
    let b = job(&dir, "b.yaml", "mj", 4, 40);
    assert!(run_job(&b, &other, &["--shard", "1/2"]).status.success());
    std::fs::copy(
        other.join("mj/part-00001-of-00002.parquet"),
        out.join("mj/part-00001-of-00002.parquet"),
    )
    .unwrap();
    let o = run(&["merge", out.join("mj").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("part-00000-of-00002.parquet and part-00001-of-00002.parquet come from different job files"),
        "{}",
        stderr(&o)
    );
}

/// Issue 40, item 1: without a terminal (a Slurm `.out` file) a run says
/// where it is: a line at the start and at the end with the units and
/// agent-steps (and every `--log-every` seconds between); `--quiet` says
/// nothing of its progress.
#[test]
fn a_run_without_a_terminal_logs_its_progress() {
    let dir = tempdir("log-every");
    let j = job(&dir, "j.yaml", "logged", 3, 40);
    let o = run(&[
        "run",
        j.to_str().unwrap(),
        "--out",
        dir.join("o").to_str().unwrap(),
        "--log-every",
        "0",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("] start: 4 unit(s), 4.80e2 agent-steps to run"), "{err}");
    assert!(err.contains("] done: 4/4 units, 4.80e2/4.80e2 agent-steps"), "{err}");
    let q = run(&[
        "run",
        j.to_str().unwrap(),
        "--out",
        dir.join("q").to_str().unwrap(),
        "--quiet",
    ]);
    assert!(q.status.success() && !stderr(&q).contains("start:"), "{}", stderr(&q));
    let bad = run(&["run", j.to_str().unwrap(), "--log-every", "-1"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

/// Every numeric flag is range-checked: out-of-range, NaN and
/// infinite values exit 2 naming the flag and the allowed range, before
/// anything runs (`--snapshot-every 1e18` panicked converting to a
/// duration; -1, nan and inf silently disabled snapshots; `plan --rate
/// 1e-300` printed a 300-digit total).
#[test]
fn every_numeric_flag_is_range_checked() {
    let dir = tempdir("flags");
    let j = job(&dir, "f.yaml", "f", 1, 10);
    let j = j.to_str().unwrap();
    let out = dir.join("o");
    let o = out.to_str().unwrap();
    for (args, flag, range) in [
        (
            vec!["run", j, "--out", o, "--snapshot-every", "1e18"],
            "--snapshot-every",
            "[0, 1e6]",
        ),
        (
            vec!["run", j, "--out", o, "--snapshot-every=-1"],
            "--snapshot-every",
            "[0, 1e6]",
        ),
        (
            vec!["run", j, "--out", o, "--snapshot-every", "nan"],
            "--snapshot-every",
            "[0, 1e6]",
        ),
        (
            vec!["run", j, "--out", o, "--snapshot-every", "inf"],
            "--snapshot-every",
            "[0, 1e6]",
        ),
        (
            vec!["plan", j, "--tasks", "2", "--rate", "1e-300"],
            "--rate",
            "[1, 1e15]",
        ),
        (vec!["plan", j, "--tasks", "2", "--rate", "inf"], "--rate", "[1, 1e15]"),
        (vec!["calibrate", "--seconds", "0"], "--seconds", "(0, 3600]"),
        (vec!["calibrate", "--seconds", "nan"], "--seconds", "(0, 3600]"),
        (vec!["calibrate", "--federations", "0"], "--federations", "1..=1000000"),
        (vec!["bench", "--rounds", "0"], "--rounds", "1..=1000000000"),
    ] {
        let r = run(&args[..]);
        let e = stderr(&r);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.contains(flag) && e.contains(range) && !e.contains("panicked"),
            "{args:?}: {e}"
        );
    }
    assert!(!out.exists(), "nothing may be written");
}

/// `plan` and `validate` print one memory figure for the same job and
/// threads (they disagreed, 64.1 against 30.6 MiB), and it grows
/// with the threads and with the part's assembly.
#[test]
fn plan_and_validate_share_one_memory_model() {
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/quickstart.yaml");
    let j = job.to_str().unwrap();
    let figure = |args: &[&str], prefix: &str| -> String {
        let o = run(args);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{text}"));
        let about = line.split("about ").nth(1).unwrap_or_else(|| panic!("{line}"));
        about
            .split(" (")
            .next()
            .unwrap()
            .split(" with")
            .next()
            .unwrap()
            .to_owned()
    };
    for threads in ["1", "3"] {
        let v = figure(&["validate", j, "--threads", threads], "memory: ");
        let p = figure(&["plan", j, "--tasks", "1", "--threads", threads], "memory per task: ");
        assert_eq!(v, p, "threads {threads}");
    }
    let one = figure(&["validate", j, "--threads", "1"], "memory: ");
    let three = figure(&["validate", j, "--threads", "3"], "memory: ");
    assert_ne!(one, three);
}
