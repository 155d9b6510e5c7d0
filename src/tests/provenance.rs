//! Where a job's input files and a part's provenance come from:
//! an input file's relative path starts at the job file's folder for `run`,
//! `validate` and `merge`, whatever their working directory (a file of that
//! name in the working directory alone is named, not used); `merge`
//! refuses a part another engine semantics wrote, or whose metadata lacks a
//! key every part has, naming the file and the key.

use fedbandits::output::{read_metadata, read_parquet_checked, write_parquet_atomic};
use parquet::file::metadata::KeyValue;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-provenance-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The binary with `args`, run in `cwd`.
fn engine(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const EDGES_JOB: &str = "name: e\nseed: 3\nrepetitions: 2\nhorizon: 64\ncheckpoints: {every: 64}\n\
                         algorithm: gossip_ucb\nenvironment: mab_heterogeneous\n\
                         params: {m: 4, arms: 2, graph: edges, graph_edges: ring.txt}\n";

#[test]
fn input_files_resolve_against_the_job_files_folder() {
    let dir = tempdir("inputs");
    let jobs = dir.join("jobs");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(jobs.join("e.yaml"), EDGES_JOB).unwrap();
    std::fs::write(jobs.join("ring.txt"), "0 1\n1 2\n2 3\n3 0\n").unwrap();
    let out = dir.join("out");
    let job = jobs.join("e.yaml");
    let (j, o) = (job.to_str().unwrap(), out.to_str().unwrap());
    // From another working directory: validate and run find ring.txt
    // beside the job file.
    let v = engine(&elsewhere, &["validate", j]);
    assert!(v.status.success(), "{}", stderr(&v));
    let r = engine(&elsewhere, &["run", j, "--quiet", "--out", o, "--shard", "0/2"]);
    assert!(r.status.success(), "{}", stderr(&r));
    // merge from a third directory reads the edge list where the run did,
    // and its rerun command names the job file by its folder.
    let m = engine(&dir, &["merge", out.join("e").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&m.stdout);
    assert_eq!(m.status.code(), Some(1), "one shard missing: {text}{}", stderr(&m));
    let expected = format!("fedbandits run {} --out", jobs.join("e.yaml").display());
    assert!(text.contains(&expected), "{text}");
    // The missing shard, and the line that submits only it on Slurm (issue
    // 58).
    assert!(text.contains("missing shards: 1 (of 2)\n"), "{text}");
    let slurm = format!(
        "  FEDBANDITS_TASKS=2 FEDBANDITS_SHARDS=1 FEDBANDITS_OUT={} slurm/submit.sh {}\n",
        out.display(),
        jobs.join("e.yaml").display()
    );
    assert!(text.contains(&slurm), "{text}");
    // A job file given by a relative path, run from its parent: the same.
    let r = engine(&dir, &["run", "jobs/e.yaml", "--quiet", "--out", o, "--shard", "1/2"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let m = engine(&elsewhere, &["merge", out.join("e").to_str().unwrap()]);
    assert!(
        m.status.success(),
        "{}{}",
        String::from_utf8_lossy(&m.stdout),
        stderr(&m)
    );
    // ring.txt in the working directory only: named, not used.
    std::fs::rename(jobs.join("ring.txt"), elsewhere.join("ring.txt")).unwrap();
    let v = engine(&elsewhere, &["validate", j]);
    let err = stderr(&v);
    assert_eq!(v.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&jobs.join("ring.txt").display().to_string())
            && err.contains("starts at the job file's folder")
            && err.contains("in the working directory is not used"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrites part `p` with its metadata changed by `edit` (sealed anew, as
/// another tool or engine would write it).
fn rewrite(p: &Path, edit: impl Fn(&mut Vec<(String, String)>)) {
    let (batches, _) = read_parquet_checked(p).unwrap();
    let mut kv = read_metadata(p).unwrap();
    kv.retain(|(k, _)| k != "fedbandits.data_xxh64" && k != "fedbandits.footer_xxh64");
    edit(&mut kv);
    let kv = kv.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect();
    write_parquet_atomic(p, &batches, kv).unwrap();
}

#[test]
fn merge_refuses_a_part_of_another_semantics_or_without_its_keys() {
    let dir = tempdir("meta");
    let job = dir.join("q.yaml");
    std::fs::write(
        &job,
        "name: q\nseed: 1\nrepetitions: 2\nhorizon: 20\ncheckpoints: {every: 10}\nalgorithm: random\n\
         environment: linear_sphere\nparams: {m: 2, d: 2, k: 3}\n",
    )
    .unwrap();
    let out = dir.join("o");
    let r = engine(&dir, &["run", "q.yaml", "--quiet", "--out", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", stderr(&r));
    let part = out.join("q/part-00000-of-00001.parquet");
    let original = std::fs::read(&part).unwrap();
    let merge = || engine(&dir, &["merge", out.join("q").to_str().unwrap()]);
    assert!(merge().status.success());
    rewrite(&part, |kv| {
        for (k, v) in kv.iter_mut() {
            if k == "fedbandits.semantics_version" {
                *v = "16".into();
            }
        }
    });
    let m = merge();
    let err = stderr(&m);
    assert_eq!(m.status.code(), Some(1), "{err}");
    assert!(
        err.contains("part-00000-of-00001.parquet") && err.contains("semantics 16"),
        "{err}"
    );
    for key in ["fedbandits.shard", "fedbandits.job_name"] {
        std::fs::write(&part, &original).unwrap();
        rewrite(&part, |kv| kv.retain(|(k, _)| k != key));
        let m = merge();
        let err = stderr(&m);
        assert_eq!(m.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("lacks {key}")), "{err}");
    }
    // Issue 73: a part without its job identity was blamed on an edited
    // job ("written for job identity none, by an older fedbandits ... this
    // job does not extend it"); a run now says what the part lacks.
    std::fs::write(&part, &original).unwrap();
    rewrite(&part, |kv| kv.retain(|(k, _)| k != "fedbandits.job_identity"));
    let r = engine(&dir, &["run", "q.yaml", "--quiet", "--out", out.to_str().unwrap()]);
    let err = stderr(&r);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains("part-00000-of-00001.parquet") && err.contains("has no fedbandits.job_identity"),
        "{err}"
    );
    assert!(!err.contains("does not extend"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_accepts_what_the_run_accepted_a_description_edit() {
    let dir = tempdir("description");
    let text = |d: &str| {
        format!(
            "name: d\ndescription: {d}\nseed: 1\nrepetitions: 2\nhorizon: 20\ncheckpoints: {{every: 10}}\n\
             algorithm: random\nenvironment: linear_sphere\nparams: {{m: 2, d: 2, k: 3}}\n"
        )
    };
    let out = dir.join("o");
    for (d, shard) in [("first", "0/2"), ("second wording", "1/2")] {
        std::fs::write(dir.join("d.yaml"), text(d)).unwrap();
        let r = engine(
            &dir,
            &[
                "run",
                "d.yaml",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
                "--shard",
                shard,
            ],
        );
        assert!(r.status.success(), "{}", stderr(&r));
    }
    let m = engine(&dir, &["merge", out.join("d").to_str().unwrap()]);
    assert!(
        m.status.success(),
        "{}{}",
        String::from_utf8_lossy(&m.stdout),
        stderr(&m)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
