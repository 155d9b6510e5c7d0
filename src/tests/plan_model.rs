//! `plan`'s time model: the built-in model weighs cells by their cost and
//! `--rate` scales it; fitted on the user's machine, `calibrate --shapes`
//! times shapes on one thread and records them with
//! this machine's calibration; `plan` then prices cells with the fit and
//! states its error on those shapes. A job of one timed shape is planned
//! at that shape's measured seconds per agent-step; a second `--shapes`
//! run adds to the first, and a plain `calibrate` keeps them.

use std::path::{Path, PathBuf};
use std::process::Output;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-plan-model-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn engine(cache: &Path, args: &[&str]) -> Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(args)
        .env("FEDBANDITS_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The one calibration file in `cache`.
fn calibration(cache: &Path) -> fedbandits::backend::calibration::Calibration {
    let files: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("calibration-"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    serde_yaml::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap()
}

/// CPU-seconds in `plan`'s "time per task" line.
fn planned_seconds(plan: &str) -> f64 {
    let line = plan.lines().find(|l| l.starts_with("time per task:")).unwrap();
    let at = line.find("= ").unwrap() + 2;
    line[at..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn plan_prices_cells_with_the_shapes_timed_here() {
    let cache = tempdir("cache");
    let job = cache.join("shape.yaml");
    // The first linear shape as a job (one repetition: its agent-steps
    // are the horizon x 2 agents).
    std::fs::write(
        &job,
        "name: shape\nrepetitions: 1\nhorizon: 200000\nalgorithm: independent\nenvironment: linear_sphere\n\
         params: {d: 2, k: 5, m: 2}\n",
    )
    .unwrap();
    let job = job.to_str().unwrap();
    let built_in = stdout(&engine(&cache, &["plan", job, "--tasks", "1", "--threads", "1"]));
    assert!(built_in.contains("run `fedbandits calibrate --shapes`"), "{built_in}");

    let out = stdout(&engine(
        &cache,
        &["calibrate", "--shapes", "--seconds", "0.05", "--only", "independent_d2"],
    ));
    assert!(
        out.contains("independent_d2_k5_m2") && out.contains("fitted prices:"),
        "{out}"
    );
    let cal = calibration(&cache);
    assert_eq!(cal.shapes.len(), 1);
    let shape = &cal.shapes[0];
    assert_eq!((shape.family.as_str(), shape.units.len()), ("linear", 6));
    assert!(shape.seconds_per_step > 0.0 && shape.horizon >= 20_000);

    let fitted = stdout(&engine(&cache, &["plan", job, "--tasks", "1", "--threads", "1"]));
    assert!(fitted.contains("this machine's shape calibration"), "{fitted}");
    assert!(
        fitted.contains("of the model on this machine's 1 calibration shapes (linear)"),
        "{fitted}"
    );
    // One shape, six terms: the fit meets that shape (the pull towards the
    // built-in prices is weak: within 1%, plus plan's one decimal).
    let expect = 400_000.0 * shape.seconds_per_step;
    let got = planned_seconds(&fitted);
    assert!(
        (got - expect).abs() <= 0.01 * expect + 0.05,
        "planned {got}, measured {expect}"
    );

    // A second shape adds to the first; a plain calibrate keeps both.
    engine(
        &cache,
        &["calibrate", "--shapes", "--seconds", "0.05", "--only", "p_fcb_n10_m30"],
    );
    let names = |c: &fedbandits::backend::calibration::Calibration| {
        let mut n: Vec<String> = c.shapes.iter().map(|s| s.shape.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&calibration(&cache)), ["independent_d2_k5_m2", "p_fcb_n10_m30"]);
    engine(
        &cache,
        &[
            "calibrate",
            "--seconds",
            "0.05",
            "--federations",
            "2",
            "--only",
            "pfcb",
            "--threads",
            "1",
        ],
    );
    // The shapes are kept with the one-thread calibration: one file.
    let cal = calibration(&cache);
    assert_eq!(names(&cal), ["independent_d2_k5_m2", "p_fcb_n10_m30"]);
    assert!(cal.rows.iter().any(|r| r.workload == "pfcb_n10_m30"), "{:?}", cal.rows);
    let _ = std::fs::remove_dir_all(&cache);
}

/// Issue 73, cases 5 and 8: `plan --tasks 4` after a first `--shard 0/2`
/// run warns that the directory holds another layout's parts (merge would
/// refuse the mix), and `--tasks 2` does not; a calibration file whose
/// rates are infinite or NaN is named as unusable, not fitted ("measured
/// time was infx to infx") and not silently replaced.
#[test]
fn plan_warns_of_another_layout_and_names_an_unusable_calibration() {
    let dir = tempdir("layout");
    let cache = dir.join("cache");
    let job = dir.join("lay.yaml");
    std::fs::write(
        &job,
        "name: lay\nrepetitions: 4\nhorizon: 200\ncheckpoints: {every: 100}\nalgorithm: independent\n\
         environment: linear_sphere\nparams: {m: 2, d: 2, k: 3}\n",
    )
    .unwrap();
    let (j, out) = (job.to_str().unwrap(), dir.join("out"));
    let o = out.to_str().unwrap();
    engine(&cache, &["run", j, "--out", o, "--shard", "0/2", "--quiet"]);
    let text = |args: &[&str]| String::from_utf8_lossy(&engine(&cache, args).stdout).into_owned();
    let four = text(&["plan", j, "--out", o, "--tasks", "4"]);
    assert!(
        four.contains("holds this job's parts of another shard layout (part-*-of-00002.parquet)")
            && four.contains("--tasks 2 (the layout there)"),
        "{four}"
    );
    let two = text(&["plan", j, "--out", o, "--tasks", "2"]);
    assert!(!two.contains("another shard layout"), "{two}");
    // A calibration whose measured rate is infinite: named, not used.
    engine(
        &cache,
        &[
            "calibrate",
            "--only",
            "linear_d10",
            "--federations",
            "2",
            "--seconds",
            "0.01",
        ],
    );
    let cal = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("calibration-"))
        .expect("calibrate records a file");
    let yaml = std::fs::read_to_string(&cal).unwrap();
    let forged: String = yaml
        .lines()
        .map(|l| match l.split_once("agent_steps_per_s:") {
            Some((head, _)) => format!("{head}agent_steps_per_s: .inf"),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(forged, yaml, "the calibration has rates");
    std::fs::write(&cal, forged).unwrap();
    let p = text(&["plan", j, "--out", o, "--tasks", "2"]);
    assert!(
        p.contains("ignored 1 unusable calibration file(s)") && p.contains("inf agent-steps/s") && !p.contains("infx"),
        "{p}"
    );
}

/// `plan`'s times follow the time model: at equal agent-steps a d = 128 shard
/// takes about 37x a d = 10 shard (measured 4.5e3 against 1.5e5 agent-steps/s
/// before the AVX-512 step of d <= 16 made d = 10 1.3x faster, `sim::cost`),
/// and `--rate` scales every estimate.
#[test]
fn plan_weights_cells_by_their_cost() {
    let dir = tempdir("plan-cost");
    let job = dir.join("cost.yaml");
    std::fs::write(
        &job,
        "name: cost\nrepetitions: 1\nhorizon: 1000000\nalgorithm: feducb_centralized\nenvironment: linear_gap\n\
         params: {m: 10, epsilon: 1.0, delta: 0.1}\ngrid: {d: [10, 128]}\n",
    )
    .unwrap();
    let bin = || std::process::Command::new(env!("CARGO_BIN_EXE_fedbandits"));
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let secs = |rate: Option<&str>, threads: &str| -> Vec<f64> {
        let mut args = vec!["plan", job.to_str().unwrap(), "--tasks", "2", "--threads", threads];
        if let Some(r) = rate {
            args.extend(["--rate", r]);
        }
        // An empty cache: no calibration of this machine is used.
        let o = bin().args(&args).env("FEDBANDITS_CACHE_DIR", &dir).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let source = if rate.is_some() {
            "at --rate"
        } else {
            "at the built-in CPU time model"
        };
        assert!(text.contains(source), "{text}");
        // shard lines: index, units, agent-steps, hh:mm:ss
        let rows: Vec<f64> = text
            .lines()
            .skip_while(|l| !l.starts_with("shard"))
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(f[2], "10000000", "{text}");
                let hms: Vec<f64> = f[3].split(':').map(|x| x.parse().unwrap()).collect();
                hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]
            })
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        rows
    };
    let model = secs(None, "1");
    // A shard of one unit (one repetition) runs on one thread, however
    // many the task has.
    assert_eq!(secs(None, "2"), model);
    let (hi, lo) = (model[0].max(model[1]), model[0].min(model[1]));
    // 1e7 agent-steps on linear_gap (1.1x linear_sphere's cost) at 7e5/s
    // is 16 s for d = 10.
    assert!((lo - 15.7).abs() <= 1.0, "{model:?}");
    // The d = 128 cell runs the portable step: about 47x the d = 10 one
    // (1.2 / 1.1 x 7e5 / 5e5 x the (d, K) model's 30.7).
    assert!(hi / lo > 35.0 && hi / lo < 60.0, "{model:?}");
    // --rate 1e6 prices the reference workload at 1e6/s: built in, it
    // runs at 7e5/s plus its tree releases (about 2% more), so 0.687x the
    // time.
    let fast = secs(Some("1e6"), "1");
    let ratio = (fast[0] + fast[1]) / (model[0] + model[1]);
    assert!((ratio - 0.687).abs() <= 0.01, "{fast:?} vs {model:?}");
    // Once this machine is calibrated (for the plan's thread count), plan
    // uses its measured rate and says so.
    let cal = bin()
        .args([
            "calibrate",
            "--only",
            "linear_d10",
            "--federations",
            "2",
            "--seconds",
            "0.2",
            "--threads",
            "1",
        ])
        .env("FEDBANDITS_CACHE_DIR", &dir)
        .output()
        .unwrap();
    assert!(cal.status.success(), "{}", stderr(&cal));
    let o = bin()
        .args(["plan", job.to_str().unwrap(), "--tasks", "2", "--threads", "1"])
        .env("FEDBANDITS_CACHE_DIR", &dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("at this machine's calibration") && text.contains("per thread: linear "),
        "{text}"
    );
}
