//! Fault injection on the files a study relies on: every byte of
//! a unit's and of a part's Parquet footer flipped once (one bit each), each
//! damaged file read by the engine's reader. No read may panic (a damaged
//! footer once made the decoder index out of bounds: exit 101); each read
//! either fails with a typed error naming the file or returns exactly what
//! the intact file holds (rows and metadata): zero panics and zero silent
//! changes, since the footer checksum (`fedbandits.footer_xxh64`) is
//! checked on the raw bytes before any decoder sees them. The counts of
//! each outcome are printed (`--nocapture`).

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
    let sealed = want_kv
        .iter()
        .find(|(k, _)| k == "fedbandits.footer_xxh64")
        .map(|(_, v)| v);
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
                // A flip inside the footer checksum's own key name leaves
                // an intact file under a renamed integrity entry (its
                // value unchanged): that entry is not compared.
                let footer = |kv: &[(String, String)]| {
                    kv.iter()
                        .filter(|(_, v)| Some(v) != sealed)
                        .cloned()
                        .collect::<Vec<_>>()
                };
                if canonical_rows(&b, NONDETERMINISTIC_COLUMNS) == want && footer(&kv) == footer(&want_kv) {
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
    let job = dir.join("f.yaml");
    std::fs::write(
        &job,
        "name: f\nseed: 2\nrepetitions: 2\nhorizon: 40\ncheckpoints: {every: 20}\nalgorithm: [random, independent]\n\
         environment: linear_sphere\nparams: {m: 2, d: 2, k: 3}\n",
    )
    .unwrap();
    let out = dir.join("o");
    let r = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args(["run", job.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
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
        assert!(errors > 0, "{what}: no flip was detected");
    }
}
