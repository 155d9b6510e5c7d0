//! What a study books and what its files record (issue 73): `plan` books the
//! vector-summation accountant's memory only where a task may find the
//! accountant's cache cold, sets `--time` from the estimate with a stated
//! margin, and warns while runs of another version of the job write the
//! results; a part records the accountant figures its process took from the
//! cache, and `merge --recheck-figures` finds a forged cache line; `merge`
//! refuses, writing nothing, a study whose input file changed, and reads a
//! moved study with `--job`; `run --warnings count` states the privacy
//! warnings in one line, and every run ends with its peak resident memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-bookings-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The engine with `cache` as its cache directory.
fn engine(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(args)
        .env("FEDBANDITS_CACHE_DIR", cache)
        .env_remove("FEDBANDITS_ACCOUNTANT_CACHE")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The `--mem=NM` of plan's array request, in MiB.
fn booked_mib(plan: &str) -> u64 {
    let line = plan.lines().find(|l| l.starts_with("slurm request: array")).unwrap();
    let at = line.find("--mem=").unwrap() + 6;
    line[at..].split('M').next().unwrap().parse().unwrap()
}

/// A two-cell sdp_vecsum job (its accountant needs figures) at `horizon`.
fn vecsum_job(dir: &Path, horizon: u64) -> PathBuf {
    let job = dir.join("vs.yaml");
    std::fs::write(
        &job,
        format!(
            "name: vs\nseed: 3\nrepetitions: 2\nhorizon: {horizon}\ncheckpoints: {{every: {horizon}}}\n\
             algorithm: private_fedlinucb\nenvironment: linear_sphere\ngrid: {{epsilon: [0.5, 1]}}\n\
             params: {{m: 4, d: 3, k: 8, delta: 0.1, protocol: sdp_vecsum}}\n"
        ),
    )
    .unwrap();
    job
}

/// Issue 73 case 12: tasks booked 156M for the accountant's working memory
/// on a cache `plan` had just filled, and 10 minutes for 26 s of work.
#[test]
fn plan_books_the_accountant_only_for_a_cold_cache_and_time_from_the_estimate() {
    let dir = tempdir("plan");
    let (cache, job) = (dir.join("cache"), vecsum_job(&dir, 2000));
    let j = job.to_str().unwrap();
    let plan = |extra: &[&str], cache_on: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_fedbandits"));
        c.args(["plan", j, "--tasks", "2", "--threads", "1"]).args(extra);
        c.env("FEDBANDITS_CACHE_DIR", &cache)
            .env_remove("FEDBANDITS_ACCOUNTANT_CACHE");
        if !cache_on {
            c.env("FEDBANDITS_ACCOUNTANT_CACHE", "0");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    // A cold cache: this plan computes the figures and stores them, so the
    // tasks (sharing the cache) need no accountant memory.
    let first = plan(&[], true);
    assert!(
        first.contains("memory: booked without the vector-summation accountant's"),
        "{first}"
    );
    let computed = |p: &str| -> usize {
        let at = p.find(" of them computed by this plan").unwrap();
        p[..at].rsplit('(').next().unwrap().parse().unwrap()
    };
    assert!(computed(&first) > 0, "{first}");
    let again = plan(&[], true);
    assert_eq!(computed(&again), 0, "{again}");
    let cold = plan(&["--cold-cache"], true);
    assert!(cold.contains("booked with the vector-summation accountant's") && cold.contains("--cold-cache"));
    let off = plan(&[], false);
    assert!(off.contains("the accountant's cache is off"), "{off}");
    // The accountant's ~100 MiB shows in the booking only where it is due.
    assert!(booked_mib(&cold) >= booked_mib(&again) + 50, "{cold}\n{again}");
    assert_eq!(booked_mib(&off), booked_mib(&cold));
    // --time: 1.5 x the longest task plus 3 minutes, rounded up to a minute
    // (this job's longest is about a second: 4 minutes at most).
    assert!(
        again.contains("--time=00:03:00 --mem=") || again.contains("--time=00:04:00 --mem="),
        "{again}"
    );
    assert_eq!(fedbandits::cli::text::time_limit(41.0), 300.0);
    assert_eq!(fedbandits::cli::text::time_limit(3600.0), 5580.0);
}

/// Issue 73 item 4: 1640 forged cache lines with valid checks changed a
/// run's noise and acct_epsilon unseen; now each part records the figures
/// it took from the cache and `merge --recheck-figures` recomputes them.
#[test]
fn a_forged_cache_line_is_found_by_merge_recheck_figures() {
    let dir = tempdir("forged");
    let (cache, job) = (dir.join("cache"), vecsum_job(&dir, 2000));
    let j = job.to_str().unwrap();
    let run = |out: &str| {
        let o = engine(&cache, &["run", j, "--out", dir.join(out).to_str().unwrap(), "--quiet"]);
        assert!(o.status.success(), "{}", text(&o));
    };
    let merge = |out: &str| {
        engine(
            &cache,
            &["merge", dir.join(out).join("vs").to_str().unwrap(), "--recheck-figures"],
        )
    };
    run("cold");
    run("warm");
    let honest = merge("warm");
    assert!(
        honest.status.success() && text(&honest).contains("each computed again: all equal"),
        "{}",
        text(&honest)
    );
    // Every line's mu raised by 0.1%, its check recomputed: still a valid
    // line, and a figure that is not the accountant's.
    let file = cache.join("unit-shift-r1.txt");
    let forged: String = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let mu = f64::from_bits(u64::from_str_radix(f[2], 16).unwrap()) * 1.001;
            let body = format!("{} {} {:016x} {}", f[0], f[1], mu.to_bits(), f[3]);
            format!("{body} {:016x}\n", twox_hash::XxHash64::oneshot(0, body.as_bytes()))
        })
        .collect();
    std::fs::write(&file, forged).unwrap();
    run("forged");
    let caught = merge("forged");
    let t = text(&caught);
    assert!(
        !caught.status.success() && t.contains("differ from the accountant's own computation") && t.contains("part-"),
        "{t}"
    );
    assert!(!dir.join("forged/vs/_manifest.yaml").exists(), "nothing written");
}

/// Issue 73 case 7: an edited edge file made merge report 3 of 3 units
/// present and 3 missing and write a manifest the loader then refused; a
/// moved job named a file that never existed.
#[test]
fn merge_refuses_a_changed_input_and_reads_a_moved_study_with_job() {
    let dir = tempdir("inputs");
    let cache = dir.join("cache");
    std::fs::write(dir.join("edges.txt"), "0 1\n1 2\n2 0\n").unwrap();
    let job = dir.join("my study.yaml");
    std::fs::write(
        &job,
        "name: c7\nseed: 1\nrepetitions: 3\nhorizon: 2000\nalgorithm: gossip_ucb\nenvironment: mab_heterogeneous\n\
         params: {m: 3, arms: 4, graph: edges, graph_edges: edges.txt}\n",
    )
    .unwrap();
    let (out, res) = (dir.join("results"), dir.join("results/c7"));
    let o = engine(
        &cache,
        &["run", job.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let merge = |extra: &[&str]| engine(&cache, &[&["merge", res.to_str().unwrap()][..], extra].concat());
    std::fs::write(dir.join("edges.txt"), "0 1\n1 2\n").unwrap();
    let edited = merge(&[]);
    let t = text(&edited);
    assert!(
        edited.status.code() == Some(1)
            && t.contains("an input it names changed since the run: params.graph_edges: edges.txt")
            && t.contains("Nothing was written"),
        "{t}"
    );
    assert!(!res.join("_manifest.yaml").exists());
    std::fs::write(dir.join("edges.txt"), "0 1\n1 2\n2 0\n").unwrap();
    assert!(merge(&[]).status.success());
    // Moved: the recorded job file's folder lacks the edge list.
    std::fs::create_dir(dir.join("moved")).unwrap();
    std::fs::rename(&job, dir.join("moved/my study.yaml")).unwrap();
    std::fs::rename(dir.join("edges.txt"), dir.join("moved/edges.txt")).unwrap();
    let moved = text(&merge(&[]));
    assert!(
        moved.contains("my study.yaml") && moved.contains("--job PATH") && !moved.contains("c7.yaml"),
        "{moved}"
    );
    let found = merge(&["--job", dir.join("moved/my study.yaml").to_str().unwrap()]);
    assert!(found.status.success() && text(&found).contains("3/3 repetition units present, 0 missing"));
}

/// Issue 73 cases 10 and 11: plan accepted an edited job while the old
/// version was running (every task then failed), and each start printed
/// the job's privacy warnings in full.
#[test]
fn plan_warns_of_another_version_running_and_warnings_count_is_one_line() {
    let dir = tempdir("busy");
    let cache = dir.join("cache");
    let job = |seed: u32, horizon: u64| {
        let p = dir.join(format!("busy{seed}.yaml"));
        std::fs::write(
            &p,
            format!(
                "name: busy\nseed: {seed}\nrepetitions: 1\nhorizon: {horizon}\nalgorithm: private_fedlinucb\n\
                 environment: linear_sphere\nparams: {{m: 2, d: 2, k: 3, epsilon: 1, delta: 0.1}}\n"
            ),
        )
        .unwrap();
        p
    };
    let (long, edited) = (job(1, 400_000_000), job(2, 1000));
    let out = dir.join("out");
    let mut running = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args([
            "run",
            long.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--threads",
            "1",
        ])
        .env("FEDBANDITS_CACHE_DIR", &cache)
        .spawn()
        .unwrap();
    let writers = out.join("busy/.writers");
    for _ in 0..600 {
        if std::fs::read_dir(&writers).is_ok_and(|mut d| d.next().is_some()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let plan = text(&engine(
        &cache,
        &[
            "plan",
            edited.to_str().unwrap(),
            "--tasks",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    let same = text(&engine(
        &cache,
        &[
            "plan",
            long.to_str().unwrap(),
            "--tasks",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    running.kill().unwrap();
    running.wait().unwrap();
    assert!(
        plan.contains("is being written by 1 run(s) of another version of job busy")
            && plan.contains(&format!("pid {}", running.id())),
        "{plan}"
    );
    assert!(!same.contains("another version"), "{same}");
    // --warnings count: one line with the count; the end names the peak.
    let vs = vecsum_job(&dir, 1000);
    let o = engine(
        &cache,
        &[
            "run",
            vs.to_str().unwrap(),
            "--out",
            dir.join("w").to_str().unwrap(),
            "--warnings",
            "count",
        ],
    );
    let t = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success()
            && t.contains("privacy warning(s) about this job's figures, not repeated here (--warnings count)")
            && !t.contains("warning: privacy")
            && t.contains("; peak resident memory "),
        "{t}"
    );
    let full = engine(&cache, &["validate", vs.to_str().unwrap()]);
    assert!(
        text(&full).contains("warning: privacy"),
        "the job has privacy warnings to count"
    );
}
