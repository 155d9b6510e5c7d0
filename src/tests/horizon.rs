//! `horizon` as a grid axis: each value is a cell of its
//! own with its own checkpoints and summary; the federated regret ratio
//! and the report pair cells of one horizon; a job grown by a horizon
//! reuses every unit of the others and equals a run from scratch bit for
//! bit; a horizon given twice, or a value listed twice, is refused at its
//! line.

use fedbandits::job::Job;
use fedbandits::output::{NONDETERMINISTIC_COLUMNS, canonical_rows, read_parquet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-horizon-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn job_text(horizons: &str) -> String {
    format!(
        "name: hz\nseed: 3\nrepetitions: 3\ncheckpoints: {{every: 100}}\nalgorithm: [independent, fedlinucb]\n\
         environment: linear_sphere\nparams: {{d: 3, k: 8, m: 3}}\ngrid:\n  horizon: [{horizons}]\n  alpha: [0.1, 0.5]\n"
    )
}

fn run(job: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(["run", job.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap()
}

fn rows(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "parquet") {
            v.extend(canonical_rows(&read_parquet(&p).unwrap(), NONDETERMINISTIC_COLUMNS));
        }
    }
    v.sort();
    v
}

#[test]
fn each_horizon_is_a_cell_with_its_own_checkpoints() {
    let job = Job::parse(Path::new("hz.yaml"), &job_text("200, 500")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job.horizons, vec![200, 500]);
    assert_eq!(job.horizon, 500);
    assert_eq!(job.cells.len(), 8, "2 algorithms x 2 horizons x 2 alphas");
    for c in &job.cells {
        let want: Vec<u64> = (1..=c.horizon() / 100).map(|i| i * 100).collect();
        assert_eq!(job.checkpoint_rounds_of(c), want);
        assert!(
            job.short_label(c).contains(&format!("horizon={}", c.horizon())),
            "{}",
            job.short_label(c)
        );
    }
    // The same cell at another horizon is another cell (another key).
    let keys: std::collections::HashSet<&str> = job.cells.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys.len(), 8);
    // A one-horizon job's cell is the axis's cell of that horizon.
    let single = job_text("200").replace("grid:\n  horizon: [200]\n", "horizon: 200\ngrid:\n");
    let one = Job::parse(Path::new("hz.yaml"), &single).unwrap_or_else(|e| panic!("{e}"));
    assert!(one.cells.iter().all(|c| keys.contains(c.key.as_str())));
}

#[test]
fn a_horizon_given_twice_or_a_value_repeated_is_refused_at_its_line() {
    for (text, want) in [
        (
            job_text("200, 500").replace("seed: 3\n", "seed: 3\nhorizon: 200\n"),
            "also set at the top level",
        ),
        (job_text("200, 200"), "value 200 appears twice"),
        (job_text("200, 0"), "whole numbers of rounds >= 1"),
        (job_text("200, 1.5"), "whole numbers of rounds >= 1"),
        (job_text("50"), "exceeds the horizon 50"),
    ] {
        let err = Job::parse(Path::new("hz.yaml"), &text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(want) && err.contains("hz.yaml:"), "{want}: {err}");
    }
}

#[test]
fn a_study_grown_by_a_horizon_reuses_the_others_and_equals_scratch() {
    let dir = tempdir("grow");
    let job = dir.join("hz.yaml");
    std::fs::write(&job, job_text("200, 500")).unwrap();
    let out = dir.join("o");
    let r = run(&job, &out);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::write(&job, job_text("200, 500, 1000")).unwrap();
    let r = run(&job, &out);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(err.contains("reused 24 finished repetition(s)"), "{err}");
    assert!(err.contains("ran 12 repetition(s)"), "{err}");
    let scratch = dir.join("scratch");
    assert!(run(&job, &scratch).status.success());
    let (grown, fresh) = (rows(&out.join("hz")), rows(&scratch.join("hz")));
    assert_eq!(grown.len(), 3 * 2 * 2 * (2 + 5 + 10), "each horizon's own checkpoints");
    assert!(grown == fresh, "a grown study must equal a run from scratch");
    let _ = std::fs::remove_dir_all(&dir);
}

/// README: any axis may be a linspace or logspace. On the horizon axis the
/// values must be whole numbers of rounds: `logspace: [1e4, 1e7, 4]` gives
/// the four decades exactly (numpy's geomspace, each within 1e-9 of a whole
/// number), the same cells as the list; a value that is not whole is
/// refused, not rounded, and so is a horizon below 1.
#[test]
fn a_horizon_axis_may_be_a_linspace_or_logspace_of_whole_numbers() {
    let text = |axis: &str| {
        format!(
            "name: hz\ncheckpoints: {{log_points: 10}}\nalgorithm: independent\nenvironment: linear_sphere\n\
             params: {{d: 3, k: 8, m: 3}}\ngrid: {{horizon: {axis}}}\n"
        )
    };
    let ids = |axis: &str| {
        let job = Job::parse(Path::new("hz.yaml"), &text(axis)).unwrap_or_else(|e| panic!("{axis}: {e}"));
        job.cells.iter().map(|c| c.id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        ids("{logspace: [1e4, 1e7, 4]}"),
        ids("[10000, 100000, 1000000, 10000000]")
    );
    assert_eq!(ids("{linspace: [1000, 4000, 4]}"), ids("[1000, 2000, 3000, 4000]"));
    for (axis, needle) in [
        (
            "{logspace: [1000, 10000, 3]}",
            "3162.2776601683795 is not a whole number of rounds",
        ),
        ("{linspace: [0, 10, 3]}", "0 is out of range; allowed: number >= 1"),
    ] {
        let e = Job::parse(Path::new("hz.yaml"), &text(axis))
            .expect_err(axis)
            .to_string();
        assert!(e.contains("grid.horizon") && e.contains(needle), "{axis}: {e}");
    }
}
