//! Studies that grow: a finished or partly finished job extended
//! by repetitions, a grid value or an algorithm reuses every unit it shares
//! with the earlier job and computes only the rest, and its parts equal a
//! from-scratch run of the extended job bit for bit (every column but wall
//! time), on one shard and across shard layouts; every other edit is
//! refused and leaves the results as they were. Units hold only their data
//! (`.units/` within 3x the part), `merge --compact` removes them only when
//! the parts are complete, and a compacted study still resumes and grows
//! without recomputing. Units of the earlier format still resume.

use fedbandits::output::{NONDETERMINISTIC_COLUMNS, canonical_rows, read_parquet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-grow-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The base job: two algorithms (one ignores epsilon), epsilon {1, 4}, 3
/// repetitions: 3 cells, 9 units. `{reps}`, `{eps}`, `{algos}`, `{seed}`
/// and `{alpha}` are filled in.
const JOB: &str = "\
name: g
seed: {seed}
repetitions: {reps}
horizon: 400
checkpoints: {log_points: 6}
algorithm: [{algos}]
environment: linear_sphere
params: {m: 3, d: 4, k: 9, delta: 0.1, alpha: {alpha}}
grid:
  epsilon: [{eps}]
";

struct Spec<'a> {
    reps: u32,
    eps: &'a str,
    algos: &'a str,
    seed: u64,
    alpha: &'a str,
}

const BASE: Spec = Spec {
    reps: 3,
    eps: "1, 4",
    algos: "independent, private_fedlinucb",
    seed: 7,
    alpha: "0.1",
};

fn write(dir: &Path, file: &str, s: &Spec) -> PathBuf {
    let text = JOB
        .replace("{reps}", &s.reps.to_string())
        .replace("{eps}", s.eps)
        .replace("{algos}", s.algos)
        .replace("{seed}", &s.seed.to_string())
        .replace("{alpha}", s.alpha);
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

fn run(job: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fedbandits"));
    c.args([
        "run",
        job.to_str().unwrap(),
        "--quiet",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    c.args(extra).output().expect("binary runs")
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
}

fn parts(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("part-"))
        .collect();
    v.sort();
    v
}

/// Every row of the parts in `dir`, as text, in file order (not sorted:
/// the order within a part is part of the result).
fn rows(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for p in parts(dir) {
        for b in read_parquet(&p).unwrap() {
            // canonical_rows sorts; one batch per cell keeps the order
            // within the cell, and cells come in grid order.
            out.extend(canonical_rows(&[b], NONDETERMINISTIC_COLUMNS));
        }
    }
    out
}

fn reused(err: &str) -> usize {
    err.split("reused ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn ran(err: &str) -> usize {
    err.split("ran ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Grows the base job in `grown` into `spec` and checks reuse and
/// equality with a from-scratch run; `shards` are the layouts of the base
/// run and of the grown run.
fn grows(name: &str, spec: &Spec, units_before: usize, units_after: usize, shards: (usize, usize)) {
    let dir = tempdir(name);
    let base = write(&dir, "base.yaml", &BASE);
    let big = write(&dir, "big.yaml", spec);
    let (grown, scratch) = (dir.join("grown"), dir.join("scratch"));
    for s in 0..shards.0 {
        ok(run(&base, &grown, &["--shard", &format!("{s}/{}", shards.0)]));
    }
    let mut reuse = 0;
    let mut computed = 0;
    for s in 0..shards.1 {
        let err = ok(run(&big, &grown, &["--shard", &format!("{s}/{}", shards.1)]));
        reuse += reused(&err);
        computed += ran(&err);
        if s == 0 && !parts(&grown.join("g")).is_empty() {
            assert!(err.contains("superseded"), "{err}");
        }
    }
    assert_eq!(reuse, units_before, "every unit of the base job is reused");
    assert_eq!(computed, units_after - units_before, "only the new units are computed");
    ok(run(&big, &scratch, &[]));
    let (a, b) = (rows(&grown.join("g")), rows(&scratch.join("g")));
    assert_eq!(parts(&grown.join("g")).len(), shards.1, "the base job's parts are gone");
    let mut sa = a.clone();
    let mut sb = b.clone();
    sa.sort();
    sb.sort();
    assert_eq!(sa.len(), units_after * 6, "6 checkpoints per unit");
    assert_eq!(sa, sb, "grown equals from scratch");
    if shards.1 == 1 {
        assert_eq!(a, b, "in the same order");
    }
}

#[test]
fn added_repetitions_are_all_that_is_computed() {
    grows("reps", &Spec { reps: 5, ..BASE }, 9, 15, (1, 1));
}

#[test]
fn an_added_grid_value_shifts_cell_indices_and_still_equals_scratch() {
    // 0.5 comes first: every earlier private cell's index moves by one.
    grows(
        "value",
        &Spec {
            eps: "0.5, 1, 4",
            ..BASE
        },
        9,
        12,
        (1, 1),
    );
}

#[test]
fn an_added_algorithm_across_shard_layouts() {
    let spec = Spec {
        algos: "independent, private_fedlinucb, fedlinucb",
        reps: 4,
        ..BASE
    };
    grows("algo", &spec, 9, 16, (2, 3));
}

#[test]
fn other_edits_are_refused_and_change_nothing() {
    let dir = tempdir("refuse");
    let base = write(&dir, "base.yaml", &BASE);
    let out = dir.join("o");
    ok(run(&base, &out, &[]));
    let before = rows(&out.join("g"));
    for (name, spec, needle) in [
        // The changed job-level key is named with both values (it was only a category, "its seed, horizon, checkpoints or ...").
        (
            "seed",
            Spec { seed: 8, ..BASE },
            "none of its cells is in this job (seed: 7 -> 8)",
        ),
        (
            "alpha",
            Spec { alpha: "0.05", ..BASE },
            "none of its cells is in this job (a parameter common to all cells",
        ),
        (
            "value",
            Spec { eps: "1", ..BASE },
            "1 of its 3 cells are not in this job",
        ),
        ("reps", Spec { reps: 2, ..BASE }, "repetitions fell from 3 to 2"),
    ] {
        let o = run(&write(&dir, &format!("{name}.yaml"), &spec), &out, &[]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("holds results of a different job"),
            "{}",
            stderr(&o)
        );
        assert_eq!(rows(&out.join("g")), before, "{name} changed nothing");
    }
}

fn dir_bytes(d: &Path) -> u64 {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn merge(dir: &Path, compact: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fedbandits"));
    c.args(["merge", dir.to_str().unwrap()]);
    if compact {
        c.arg("--compact");
    }
    c.output().unwrap()
}

#[test]
fn units_are_small_compact_removes_them_and_a_compacted_study_grows() {
    let dir = tempdir("compact");
    let base = write(&dir, "base.yaml", &BASE);
    let out = dir.join("o");
    let res = out.join("g");
    // Incomplete (one of two shards): compact removes nothing.
    ok(run(&base, &out, &["--shard", "0/2"]));
    let units = std::fs::read_dir(res.join(".units")).unwrap().count();
    let o = merge(&res, true);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing removed"));
    assert_eq!(std::fs::read_dir(res.join(".units")).unwrap().count(), units);
    ok(run(&base, &out, &["--shard", "1/2"]));
    let part_bytes: u64 = parts(&res).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    let unit_bytes = dir_bytes(&res.join(".units"));
    assert!(
        unit_bytes <= 3 * part_bytes,
        "units {unit_bytes} B, parts {part_bytes} B: units must hold only their data"
    );
    let before = rows(&res);
    let o = merge(&res, true);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("removed 9 unit file(s)"));
    assert_eq!(std::fs::read_dir(res.join(".units")).unwrap().count(), 0);
    // A rerun of the compacted job recomputes nothing and writes nothing
    // back: each part stands, byte for byte.
    let bytes: Vec<Vec<u8>> = parts(&res).iter().map(|p| std::fs::read(p).unwrap()).collect();
    for shard in ["0/2", "1/2"] {
        let err = ok(run(&base, &out, &["--shard", shard]));
        assert_eq!(ran(&err), 0, "{err}");
        assert!(
            err.contains("the part is kept as it is") && !err.contains("written back"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_dir(res.join(".units")).unwrap().count(), 0);
    let after: Vec<Vec<u8>> = parts(&res).iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(bytes == after, "a no-op rerun rewrote a part");
    assert_eq!(rows(&res), before);
    // Compacted again, then grown by a repetition: 3 units computed, and
    // the manifest of the superseded parts is gone.
    assert!(merge(&res, true).status.success());
    assert!(res.join("_manifest.yaml").exists());
    let big = write(&dir, "big.yaml", &Spec { reps: 4, ..BASE });
    let err = ok(run(&big, &out, &[]));
    assert_eq!((reused(&err), ran(&err)), (9, 3), "{err}");
    assert!(!res.join("_manifest.yaml").exists());
    ok(run(&big, &dir.join("scratch"), &[]));
    let (mut a, mut b) = (rows(&res), rows(&dir.join("scratch/g")));
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

/// Format-1 units (the full rows and every job-wide statement, named by
/// the key with the repetitions) resume: each is written here as the engine
/// before unit format 2 wrote it, from a finished run's rows.
#[test]
fn units_of_the_earlier_format_still_resume() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt32Type;
    let dir = tempdir("legacy");
    let base = write(&dir, "base.yaml", &BASE);
    let out = dir.join("o");
    let res = out.join("g");
    ok(run(&base, &out, &[]));
    let before = rows(&res);
    let job = fedbandits::job::Job::load(&base).unwrap();
    let part = parts(&res).remove(0);
    let batches = read_parquet(&part).unwrap();
    assert_eq!(batches.len(), 1, "a small part reads as one batch");
    let table = &batches[0];
    std::fs::remove_dir_all(res.join(".units")).unwrap();
    std::fs::remove_file(&part).unwrap();
    let ids = table.column_by_name("cell_id").unwrap().as_string::<i32>().clone();
    let reps = table
        .column_by_name("repetition")
        .unwrap()
        .as_primitive::<UInt32Type>()
        .clone();
    for cell in &job.cells {
        for r in 0..job.repetitions {
            // A unit's rows are contiguous in its part.
            let mine: Vec<usize> = (0..table.num_rows())
                .filter(|&i| ids.value(i) == cell.id && reps.value(i) == r)
                .collect();
            assert_eq!(mine.len(), 6);
            let b = table.slice(mine[0], mine.len());
            let kv = fedbandits::output::metadata(
                &job,
                &[
                    ("cell_id", cell.id.clone()),
                    ("cell_key", cell.legacy_key.clone()),
                    ("repetition", r.to_string()),
                ],
            );
            let path = res.join(".units").join(format!("{}-{r:06}.parquet", cell.legacy_key));
            fedbandits::output::write_parquet_atomic(&path, &[b], kv).unwrap();
        }
    }
    let err = ok(run(&base, &out, &[]));
    assert_eq!((reused(&err), ran(&err)), (9, 0), "{err}");
    assert_eq!(rows(&res), before);
}

/// The other families' metric columns (gossip's consensus error and forced
/// pulls, P-FCB's messages and budget) survive the unit and its reuse: a
/// two-family job grown by a repetition equals a from-scratch run.
#[test]
fn gossip_and_combinatorial_units_grow_bit_identically() {
    let dir = tempdir("families");
    let text = |reps: u32| {
        format!(
            "name: f\nseed: 3\nrepetitions: {reps}\nhorizon: 300\ncheckpoints: {{every: 100}}\n\
             algorithm: [fed_ucb_gossip, p_fcb]\nenvironment: [mab_heterogeneous, procurement]\n\
             params: {{m: 3, arms: 3, producers: 6, epsilon: 1, delta: 0.01, t_low: 50, t_high: 250}}\n"
        )
    };
    let (small, big) = (dir.join("small.yaml"), dir.join("big.yaml"));
    std::fs::write(&small, text(2)).unwrap();
    std::fs::write(&big, text(3)).unwrap();
    let (grown, scratch) = (dir.join("grown"), dir.join("scratch"));
    ok(run(&small, &grown, &[]));
    let err = ok(run(&big, &grown, &[]));
    assert_eq!((reused(&err), ran(&err)), (4, 2), "{err}");
    ok(run(&big, &scratch, &[]));
    let (a, b) = (rows(&grown.join("f")), rows(&scratch.join("f")));
    assert_eq!(a.len(), 6 * 3);
    assert!(
        a.iter()
            .any(|r| r.contains("consensus_error=") && !r.contains("consensus_error=null"))
    );
    assert!(
        a.iter()
            .any(|r| r.contains("messages_accepted=") && !r.contains("messages_accepted=null"))
    );
    assert_eq!(a, b);
}

/// An input file is keyed by its content, not its name:
/// a `graph: edges` job run on a ring, the file changed to a line, then the
/// job grown by two repetitions reuses nothing (it was "reused 2": one
/// cell, repetitions 0-1 on the ring and 2-3 on the line), and every row's
/// `gossip_lambda2` is the line's; the file changed back, the ring's units
/// are found again.
#[test]
fn a_changed_input_file_is_a_changed_cell() {
    let dir = tempdir("inputs");
    let edges = dir.join("edges.txt");
    let job = |reps: u32| {
        let p = dir.join("e.yaml");
        let text = format!(
            "name: e\nseed: 3\nrepetitions: {reps}\nhorizon: 64\ncheckpoints: {{every: 64}}\nalgorithm: gossip_ucb\n\
             environment: mab_heterogeneous\nparams: {{m: 4, arms: 2, graph: edges, graph_edges: {}}}\n",
            edges.display()
        );
        std::fs::write(&p, text).unwrap();
        p
    };
    let out = dir.join("o");
    let lambda2 = |out: &Path| -> Vec<f64> {
        let mut v = Vec::new();
        for p in parts(&out.join("e")) {
            for b in read_parquet(&p).unwrap() {
                let i = b.schema().index_of("gossip_lambda2").unwrap();
                let c = b
                    .column(i)
                    .as_any()
                    .downcast_ref::<arrow_array::Float64Array>()
                    .unwrap();
                v.extend(c.iter().flatten());
            }
        }
        v
    };
    std::fs::write(&edges, "0 1\n1 2\n2 3\n3 0\n").unwrap();
    ok(run(&job(2), &out, &[]));
    let ring = lambda2(&out);
    std::fs::write(&edges, "0 1\n1 2\n2 3\n").unwrap();
    // Growing on the changed file is refused, naming the file, and leaves
    // the ring's results as they were.
    let before = rows(&out.join("e"));
    let grown = run(&job(4), &out, &[]);
    let err = stderr(&grown);
    assert!(
        !grown.status.success(),
        "a changed edge file must not be mixed with the ring's units: {err}"
    );
    assert!(
        err.contains("input file") && err.contains("graph_edges = ") && err.contains("edges.txt"),
        "{err}"
    );
    assert_eq!(rows(&out.join("e")), before);
    // Elsewhere it is a new cell of its own: every row on the line.
    let other = dir.join("o2");
    ok(run(&job(4), &other, &[]));
    let line = lambda2(&other);
    assert_eq!(line.len(), 4);
    assert!(
        line.iter().all(|&l| l == line[0]) && line[0] != ring[0],
        "{ring:?} {line:?}"
    );
    // The ring again: its units, keyed by its content, are found and grown.
    std::fs::write(&edges, "0 1\n1 2\n2 3\n3 0\n").unwrap();
    let err = ok(run(&job(4), &out, &[]));
    assert_eq!(reused(&err), 2, "the ring's units are found again: {err}");
}

/// Growth verifies the units it relies on before it removes anything:
/// with one byte of a unit flipped, growing the job
/// fails naming the unit and says nothing was removed, the part (the only
/// intact copy of that repetition) is still there, byte for byte; with the
/// damaged unit moved away, the rerun restores it from the part and grows
/// to the same rows as a job run grown from scratch.
#[test]
fn growth_removes_nothing_before_its_units_are_verified() {
    let dir = tempdir("verify-grow");
    let out = dir.join("o");
    ok(run(&write(&dir, "g.yaml", &BASE), &out, &[]));
    let part = parts(&out.join("g"));
    assert_eq!(part.len(), 1);
    let part_bytes = std::fs::read(&part[0]).unwrap();
    let mut units: Vec<PathBuf> = std::fs::read_dir(out.join("g/.units"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    units.sort();
    let mut bytes = std::fs::read(&units[0]).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x10;
    std::fs::write(&units[0], &bytes).unwrap();
    let grown = Spec { reps: 5, ..BASE };
    let job = write(&dir, "g.yaml", &grown);
    let r = run(&job, &out, &[]);
    let err = stderr(&r);
    assert!(!r.status.success(), "{err}");
    assert!(err.contains("before anything was removed"), "{err}");
    assert_eq!(
        std::fs::read(&part[0]).unwrap(),
        part_bytes,
        "the part must be left as it was"
    );
    std::fs::rename(&units[0], dir.join("damaged.parquet")).unwrap();
    ok(run(&job, &out, &[]));
    let fresh = dir.join("fresh");
    ok(run(&write(&dir, "f.yaml", &grown), &fresh, &[]));
    assert_eq!(rows(&out.join("g")), rows(&fresh.join("g")));
}

/// `compare:` is not part of the job's identity: a rerun after editing it
/// computes nothing and rewrites the part with the new job text (the
/// report reads its question from the part), its rows unchanged; also
/// after `merge --compact`, where an unedited job's part stands as it is.
#[test]
fn an_edited_comparison_recomputes_nothing_and_the_part_carries_it() {
    let dir = tempdir("compare");
    let job = write(&dir, "g.yaml", &BASE);
    ok(run(&job, &dir, &[]));
    let before = rows(&dir.join("g"));
    let asked = |dir: &Path| {
        let part = &parts(&dir.join("g"))[0];
        fedbandits::output::read_metadata_key(part, "fedbandits.compare").unwrap()
    };
    assert_eq!(asked(&dir).as_deref(), Some("[]"));
    let text = std::fs::read_to_string(&job).unwrap();
    std::fs::write(&job, format!("{text}compare: [[private_fedlinucb, independent]]\n")).unwrap();
    let err = ok(run(&job, &dir, &[]));
    assert_eq!((ran(&err), reused(&err)), (0, 9), "{err}");
    assert_eq!(asked(&dir).as_deref(), Some(r#"[["private_fedlinucb","independent"]]"#));
    assert_eq!(rows(&dir.join("g")), before);
    // Compacted: the unedited job keeps its part, an edit reassembles it.
    assert!(merge(&dir.join("g"), true).status.success());
    assert!(ok(run(&job, &dir, &[])).contains("kept"));
    std::fs::write(&job, format!("{text}compare: [[independent, private_fedlinucb]]\n")).unwrap();
    let err = ok(run(&job, &dir, &[]));
    assert_eq!(ran(&err), 0, "{err}");
    assert_eq!(asked(&dir).as_deref(), Some(r#"[["independent","private_fedlinucb"]]"#));
    assert_eq!(rows(&dir.join("g")), before);
}
