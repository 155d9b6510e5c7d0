//! `fedbandits merge RESULTS_DIR`: checks a job's part files against the job
//! they came from (its YAML is in every file's metadata), reports missing and
//! duplicate (cell, repetition) units with the exact command to rerun only
//! what is missing, and writes `_manifest.yaml` (underscore: Parquet dataset readers skip it). It never deletes or rewrites
//! data files.

use crate::job::Job;
use crate::output::{self, OutputError, lock};
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Merge failures (as opposed to findings, which are in the report).
#[derive(Debug, Error)]
pub enum MergeError {
    /// The directory has no part files.
    #[error("{0}: no part-*.parquet files (is this a job's results directory, e.g. results/<job>/?)")]
    Empty(PathBuf),
    /// A file cannot be read.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The embedded job no longer parses.
    #[error("{path}: the job YAML in its metadata is invalid: {message}")]
    Job {
        /// File.
        path: PathBuf,
        /// Cause.
        message: String,
    },
    /// Files from different jobs (or versions of one).
    #[error(
        "{dir}: {first} and {other} come from different job files (another job, or the job edited between runs: \
         seed, grid, horizon, ...); move the parts of the version you do not want out of {dir}, then merge again"
    )]
    Mixed {
        /// Results directory.
        dir: PathBuf,
        /// A part of the first job file.
        first: String,
        /// A part of another.
        other: String,
    },
    /// A run is writing the directory.
    #[error(
        "{dir}: {writers} still running here; merge after it ends (the manifest would describe a directory that is \
         still changing)"
    )]
    Busy {
        /// Results directory.
        dir: PathBuf,
        /// The live writers.
        writers: String,
    },
    /// A part file of another job (its metadata names another job than the
    /// directory).
    #[error(
        "{path} holds results of job {found:?}, but the directory is {dir_name:?}: it was copied or moved here; \
         move it back to the results directory of {found:?} and merge again"
    )]
    Foreign {
        /// The part file.
        path: PathBuf,
        /// The job name in its metadata.
        found: String,
        /// The directory's name.
        dir_name: String,
    },
    /// Writing the manifest failed.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// What merge found.
#[derive(Clone, Debug)]
pub struct MergeReport {
    /// Part files read.
    pub parts: Vec<PathBuf>,
    /// Units expected.
    pub expected: usize,
    /// Units present (at least once).
    pub present: usize,
    /// Missing units as (cell id, repetition).
    pub missing: Vec<(String, u32)>,
    /// Units found in more than one part file: (cell id, repetition, files).
    pub duplicates: Vec<(String, u32, Vec<PathBuf>)>,
    /// The command that reruns exactly what is missing (None when complete).
    pub rerun: Option<String>,
    /// The manifest written.
    pub manifest: PathBuf,
    /// With `--compact`: the unit files removed and their bytes.
    pub compacted: Option<(usize, u64)>,
}

/// The part files (`part-*.parquet`) directly in `dir`, sorted.
fn part_files(dir: &Path) -> Result<Vec<PathBuf>, MergeError> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| MergeError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("part-") && n.ends_with(".parquet")
        })
        .collect();
    parts.sort();
    if parts.is_empty() {
        return Err(MergeError::Empty(dir.to_path_buf()));
    }
    Ok(parts)
}

/// The job all `parts` come from: each part's job name must be the
/// directory's and its job YAML the same as the others'.
fn parts_job(dir: &Path, parts: &[PathBuf]) -> Result<Job, MergeError> {
    let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("job");
    for p in parts {
        let found = output::read_metadata_key(p, "fedbandits.job_name")?.unwrap_or_default();
        if found != dir_name {
            return Err(MergeError::Foreign {
                path: p.clone(),
                found,
                dir_name: dir_name.to_owned(),
            });
        }
    }
    let yaml = output::read_metadata_key(&parts[0], "fedbandits.job_yaml")?.unwrap_or_default();
    for p in &parts[1..] {
        if output::read_metadata_key(p, "fedbandits.job_yaml")?.as_deref() != Some(yaml.as_str()) {
            let name = |p: &Path| {
                p.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            };
            return Err(MergeError::Mixed {
                dir: dir.to_path_buf(),
                first: name(&parts[0]),
                other: name(p),
            });
        }
    }
    Job::parse(Path::new(&format!("{dir_name}.yaml")), &yaml).map_err(|e| MergeError::Job {
        path: parts[0].clone(),
        message: e.to_string(),
    })
}

/// (cell id, repetition) -> the part files holding it.
fn units_present(job: &Job, parts: &[PathBuf]) -> Result<BTreeMap<(String, u32), Vec<PathBuf>>, MergeError> {
    let ck = job.checkpoint_rounds().len();
    let mut seen: BTreeMap<(String, u32), Vec<PathBuf>> = BTreeMap::new();
    for p in parts {
        // A batch at a time: memory stays bounded however large the part.
        output::read_parquet_stream(p, |b| {
            let (Some(cells), Some(reps)) = (
                b.column_by_name("cell_id").and_then(|c| c.as_string_opt::<i32>()),
                b.column_by_name("repetition")
                    .and_then(|c| c.as_primitive_opt::<UInt32Type>()),
            ) else {
                return Ok(());
            };
            for i in (0..b.num_rows()).step_by(ck.max(1)) {
                let key = (cells.value(i).to_owned(), reps.value(i));
                let files = seen.entry(key).or_default();
                if !files.contains(p) {
                    files.push(p.clone());
                }
            }
            Ok(())
        })?;
    }
    Ok(seen)
}

/// The commands that rerun exactly the shards holding `missing` units.
fn rerun_commands(dir: &Path, job: &Job, parts: &[PathBuf], missing: &[(String, u32)]) -> Result<String, MergeError> {
    let out_root = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let job_path =
        output::read_metadata_key(&parts[0], "fedbandits.job_path")?.unwrap_or_else(|| format!("{}.yaml", job.name));
    // The shard layout in use, from the part files' metadata.
    let count = output::read_metadata_key(&parts[0], "fedbandits.shard")?
        .and_then(|s| s.split('/').nth(1).and_then(|n| n.parse::<usize>().ok()))
        .unwrap_or(1);
    let owner = crate::job::shard::assign_units(&job.cells, job.repetitions, count);
    let mut shards = std::collections::BTreeSet::new();
    for (c, r) in missing {
        if let Some(cell) = job.cells.iter().find(|x| &x.id == c) {
            shards.insert(owner[cell.index * job.repetitions as usize + *r as usize]);
        }
    }
    let list: Vec<String> = shards
        .iter()
        .map(|s| {
            format!(
                "fedbandits run {job_path} --out {} --shard {s}/{count}",
                out_root.display()
            )
        })
        .collect();
    Ok(list.join("\n             "))
}

/// Removes the unit files of `job` from `dir/.units` (the caller verified
/// that its parts hold every unit: each part's checksum and every (cell,
/// repetition) once): those named by a cell's key or its format-1 key and a
/// repetition of the job. Anything else there is left. Returns the files
/// removed and their bytes. A later run of the job, or of a job that grows
/// it, writes the units it needs back from the parts
/// ([`crate::output::directory::Directory::take_over`]).
fn compact_units(dir: &Path, job: &Job) -> Result<(usize, u64), MergeError> {
    let (mut n, mut bytes) = (0, 0);
    for c in &job.cells {
        for r in 0..job.repetitions {
            for key in [&c.key, &c.legacy_key] {
                let p = dir.join(".units").join(format!("{key}-{r:06}.parquet"));
                let Ok(md) = std::fs::metadata(&p) else { continue };
                std::fs::remove_file(&p).map_err(|source| MergeError::Io {
                    path: p.clone(),
                    source,
                })?;
                n += 1;
                bytes += md.len();
            }
        }
    }
    Ok((n, bytes))
}

/// The manifest's text, its last line the XXH64 of every byte before it.
fn manifest_text(job: &Job, r: &MergeReport) -> Result<String, MergeError> {
    let mut text = format!(
        "# fedbandits manifest (written by `fedbandits merge`)\njob: {}\njob_identity: \"{}\"\nsemantics_version: {}\nexpected_units: {}\npresent_units: {}\ncomplete: {}\nparts:\n",
        job.name,
        job.identity(),
        crate::job::SEMANTICS_VERSION,
        r.expected,
        r.present,
        r.missing.is_empty() && r.duplicates.is_empty()
    );
    for p in &r.parts {
        let shard = output::read_metadata_key(p, "fedbandits.shard")?.unwrap_or_default();
        text += &format!(
            "  - {{file: {}, shard: \"{shard}\"}}\n",
            p.file_name().and_then(|n| n.to_str()).unwrap_or("")
        );
    }
    text += "missing:\n";
    for (c, rep) in &r.missing {
        text += &format!("  - {{cell_id: \"{c}\", repetition: {rep}}}\n");
    }
    text += "duplicates:\n";
    for (c, rep, f) in &r.duplicates {
        let names: Vec<&str> = f
            .iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()))
            .collect();
        text += &format!(
            "  - {{cell_id: \"{c}\", repetition: {rep}, files: [{}]}}\n",
            names.join(", ")
        );
    }
    // The last line checks every byte before it (XXH64 of the text up to
    // and including the newline before "checksum").
    text += &format!(
        "checksum_xxh64: \"{:016x}\"\n",
        twox_hash::XxHash64::oneshot(0, text.as_bytes())
    );
    Ok(text)
}

/// Checks `dir` and writes its manifest, holding the directory's gate
/// ([`lock::Gate`]) throughout: a second merge waits for it, and a merge
/// while a run writes the directory is refused ([`MergeError::Busy`]).
pub fn merge(dir: &Path, compact: bool) -> Result<MergeReport, MergeError> {
    // The directory's own name is the job's: `merge .` from inside it too.
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dir = canonical.as_path();
    // A directory with neither parts nor runs is refused before anything is
    // written into it.
    if !dir.join(lock::WRITERS_DIR).is_dir() {
        part_files(dir)?;
    }
    output::files::probe_writable(dir)?;
    let gate = lock::Gate::acquire(dir, "merge")?;
    let live = gate.live_writers()?;
    if !live.is_empty() {
        let writers: Vec<String> = live.iter().map(|w| format!("run {w}")).collect();
        return Err(MergeError::Busy {
            dir: dir.to_path_buf(),
            writers: writers.join(", "),
        });
    }
    output::files::remove_stale_tmp(&[dir.to_path_buf()], &[]);
    let parts = part_files(dir)?;
    let job = parts_job(dir, &parts)?;
    let seen = units_present(&job, &parts)?;
    let mut missing = Vec::new();
    for c in &job.cells {
        for r in 0..job.repetitions {
            if !seen.contains_key(&(c.id.clone(), r)) {
                missing.push((c.id.clone(), r));
            }
        }
    }
    let duplicates: Vec<(String, u32, Vec<PathBuf>)> = seen
        .iter()
        .filter(|(_, f)| f.len() > 1)
        .map(|((c, r), f)| (c.clone(), *r, f.clone()))
        .collect();
    let rerun = if missing.is_empty() {
        None
    } else {
        Some(rerun_commands(dir, &job, &parts, &missing)?)
    };
    let mut report = MergeReport {
        expected: job.cells.len() * job.repetitions as usize,
        present: seen.len(),
        parts,
        missing,
        duplicates,
        rerun,
        manifest: dir.join("_manifest.yaml"),
        compacted: None,
    };
    output::write_bytes_atomic(&report.manifest, manifest_text(&job, &report)?.as_bytes())?;
    if compact && report.missing.is_empty() && report.duplicates.is_empty() {
        report.compacted = Some(compact_units(dir, &job)?);
    }
    drop(gate);
    Ok(report)
}
