//! Fault injection on the files a study relies on: every byte of
//! a unit's and of a part's Parquet footer flipped once (one bit each), each
//! damaged file read by the engine's reader. No read may panic (a damaged
//! footer once made the decoder index out of bounds: exit 101); every read
//! fails with a typed error naming the file: zero panics, zero silent
//! changes and zero damaged footers read as intact, since the footer
//! checksum (`fedbandits.footer_xxh64`) is checked on the raw bytes before
//! any decoder sees them, and a file without it (a flip in the key's own
//! name removes it) is refused. The counts of each outcome are printed
//! (`--nocapture`). Also the damage that once passed: the key renamed and
//! two columns' names swapped in the footer. And the inputs a job names:
//! a named pipe, a directory or an empty path is refused at once, by kind.

use fedbandits::output::{
    Metadata, NONDETERMINISTIC_COLUMNS, OutputError, canonical_rows, read_parquet_checked, read_parquet_stream,
};
use std::path::{Path, PathBuf};
use std::process::Command;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fedbandits-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs a tiny job `name` (`reps` repetitions of `algorithms`, 40 rounds)
/// into `dir/o`; returns that output folder.
fn run_tiny(dir: &Path, name: &str, reps: u32, algorithms: &str) -> PathBuf {
    let job = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &job,
        format!(
            "name: {name}\nseed: 2\nrepetitions: {reps}\nhorizon: 40\ncheckpoints: {{every: 20}}\n\
             algorithm: {algorithms}\nenvironment: linear_sphere\nparams: {{m: 2, d: 2, k: 3}}\n"
        ),
    )
    .unwrap();
    let out = dir.join("o");
    let r = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(["run", job.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    out
}

/// A reader under test: the file's rows and metadata.
type Reader = fn(&Path) -> Result<(Vec<arrow_array::RecordBatch>, Metadata), OutputError>;

/// The streaming reader (growth after `merge --compact`, `merge`), its
/// batches collected.
fn streamed(path: &Path) -> Result<(Vec<arrow_array::RecordBatch>, Metadata), OutputError> {
    let mut out = Vec::new();
    let kv = read_parquet_stream(path, |b| {
        out.push(b);
        Ok(())
    })?;
    Ok((out, kv))
}

/// (panics, typed errors, reads equal to the intact file, silent changes)
/// over one bit flip per footer byte of `file`, read by `read`.
fn flip_footer(file: &Path, scratch: &Path, read: Reader) -> (usize, usize, usize, usize) {
    let good = std::fs::read(file).unwrap();
    let (want_batches, want_kv) = read_parquet_checked(file).unwrap();
    let want = canonical_rows(&want_batches, NONDETERMINISTIC_COLUMNS);
    let n = good.len();
    let footer = u32::from_le_bytes(good[n - 8..n - 4].try_into().unwrap()) as usize + 8;
    let (mut panics, mut errors, mut same, mut silent) = (0, 0, 0, 0);
    for (i, at) in (n - footer..n).enumerate() {
        let mut bad = good.clone();
        bad[at] ^= 1 << (i % 8);
        std::fs::write(scratch, &bad).unwrap();
        match std::panic::catch_unwind(|| read(scratch)) {
            Err(_) => panics += 1,
            Ok(Err(e)) => {
                assert!(e.to_string().contains(&scratch.display().to_string()), "{e}");
                errors += 1;
            }
            Ok(Ok((b, kv))) => {
                if canonical_rows(&b, NONDETERMINISTIC_COLUMNS) == want && kv == want_kv {
                    same += 1;
                } else {
                    silent += 1;
                }
            }
        }
    }
    (panics, errors, same, silent)
}

#[test]
fn no_footer_flip_of_a_unit_or_a_part_panics_the_reader() {
    fedbandits::output::install_quiet_decoder_hook();
    let dir = tempdir("footer");
    let out = run_tiny(&dir, "f", 2, "[random, independent]");
    let unit = std::fs::read_dir(out.join("f/.units"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let part = out.join("f/part-00000-of-00001.parquet");
    let read: Reader = read_parquet_checked;
    for (what, file, read) in [
        ("unit", &unit, read),
        ("part", &part, read),
        ("part streamed", &part, streamed as Reader),
    ] {
        let (panics, errors, same, silent) = flip_footer(file, &dir.join("scratch.parquet"), read);
        println!(
            "{what}: {panics} panics, {errors} typed errors, {same} reads equal to the intact file, {silent} silent \
             changes"
        );
        assert_eq!(panics, 0, "{what}: the reader panicked on {panics} damaged footers");
        assert_eq!(silent, 0, "{what}: {silent} damaged footers were read as other data");
        // Every flip refused, the key names' included: a flip in the
        // checksum entry's own key name removes the entry, and a file
        // without it is refused, never read unchecked.
        assert_eq!(same, 0, "{what}: {same} damaged footers were read as the intact file");
        assert!(errors > 0, "{what}: no flip was detected");
    }
}

/// The footer checksum's key renamed by one byte and two columns' names
/// (of equal length) swapped in the footer: before, the file was read
/// unchecked, as one written before footer checksums, with `agent_regret`
/// and `group_regret` exchanged; now the reader refuses it and says why.
#[test]
fn a_renamed_checksum_key_does_not_switch_the_check_off() {
    fedbandits::output::install_quiet_decoder_hook();
    let dir = tempdir("renamed");
    let out = run_tiny(&dir, "r", 1, "independent");
    let part = out.join("r/part-00000-of-00001.parquet");
    let mut bytes = std::fs::read(&part).unwrap();
    let n = bytes.len();
    let start = n - 8 - u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let find = |b: &[u8], what: &[u8]| {
        (start..b.len() - what.len())
            .filter(|&i| &b[i..i + what.len()] == what)
            .collect::<Vec<_>>()
    };
    let key = find(&bytes, b"fedbandits.footer_xxh64");
    assert_eq!(key.len(), 1);
    bytes[key[0] + "fedbandits.".len()] = b'F';
    let (agent, group) = (find(&bytes, b"agent_regret"), find(&bytes, b"group_regret"));
    assert!(!agent.is_empty() && !group.is_empty());
    for &i in &agent {
        bytes[i..i + 12].copy_from_slice(b"group_regret");
    }
    for &i in &group {
        bytes[i..i + 12].copy_from_slice(b"agent_regret");
    }
    std::fs::write(&part, &bytes).unwrap();
    let e = read_parquet_checked(&part).expect_err("a footer without its checksum entry is refused");
    let msg = e.to_string();
    assert!(
        msg.contains(&part.display().to_string()) && msg.contains("has no fedbandits.footer_xxh64 entry"),
        "{msg}"
    );
    // Said once, not twice in one line.
    assert_eq!(
        msg.matches("damaged or was not written by this fedbandits").count(),
        1,
        "{msg}"
    );
    // The CLI's reader of a study's parts: merge refuses it and names it.
    let m = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(["merge", out.join("r").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&m.stderr);
    assert!(!m.status.success(), "{err}");
    assert!(err.contains("has no fedbandits.footer_xxh64 entry"), "{err}");
}

/// `validate` on `job`, killed and failed if it has not ended within 60 s
/// (a named pipe once blocked it forever): its exit code and stderr.
fn validate_within_a_minute(job: &Path) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(["validate", job.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("validate {} did not end within 60 s", job.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.code(), err)
}

/// A named pipe as the job file, the edge file or the data file, a
/// directory as the edge file and empty paths: each refused (exit 2) with
/// the key and what the file is, never waited on.
#[test]
fn special_input_files_are_refused_by_kind_never_waited_on() {
    let dir = tempdir("inputs");
    let fifo = dir.join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo (coreutils) is needed");
    std::fs::create_dir_all(dir.join("folder")).unwrap();
    let (code, err) = validate_within_a_minute(&fifo);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("a named pipe (FIFO), not a regular file") && err.contains("pipe"),
        "{err}"
    );
    let gossip = |edges: &str| {
        format!(
            "name: g\nhorizon: 100\nalgorithm: gossip_ucb\nenvironment: mab_heterogeneous\n\
             params: {{m: 3, arms: 4, graph: edges, graph_edges: '{edges}'}}\n"
        )
    };
    let data = |path: &str| {
        format!(
            "name: u\nhorizon: 100\nalgorithm: gossip_ucb\nenvironment: uci_diabetes\nparams: {{m: 3, data: '{path}'}}\n"
        )
    };
    for (name, text, needles) in [
        (
            "edges_pipe.yaml",
            gossip("pipe"),
            &["params.graph_edges", "a named pipe (FIFO), not a regular file"][..],
        ),
        (
            "edges_dir.yaml",
            gossip("folder"),
            &["params.graph_edges", "a directory, not a regular file"],
        ),
        ("edges_empty.yaml", gossip(""), &["params.graph_edges", "an empty path"]),
        (
            "data_pipe.yaml",
            data("pipe"),
            &["params.data", "a named pipe (FIFO), not a regular file"],
        ),
        ("data_empty.yaml", data(""), &["params.data", "an empty path"]),
    ] {
        let job = dir.join(name);
        std::fs::write(&job, text).unwrap();
        let (code, err) = validate_within_a_minute(&job);
        assert_eq!(code, Some(2), "{name}: {err}");
        for n in needles {
            assert!(err.contains(n), "{name}: no {n:?} in {err}");
        }
    }
}
