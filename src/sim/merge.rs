//! `fedbandits merge RESULTS_DIR`: checks a job's part files against the job
//! they came from (its YAML is in every file's metadata), reports missing and
//! duplicate (cell, repetition) units with the exact command to rerun only
//! what is missing, and writes `_manifest.yaml` (underscore: Parquet dataset readers skip it). It never deletes or rewrites
//! data files.

use crate::job::Job;
use crate::output::{self, OutputError};
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
    /// Files from different jobs.
    #[error("{0}: part files come from different job files; merge one job at a time")]
    Mixed(PathBuf),
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
}

/// Checks `dir` and writes its manifest.
pub fn merge(dir: &Path) -> Result<MergeReport, MergeError> {
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
    let yaml = output::read_metadata_key(&parts[0], "fedbandits.job_yaml")?.unwrap_or_default();
    for p in &parts[1..] {
        if output::read_metadata_key(p, "fedbandits.job_yaml")?.as_deref() != Some(yaml.as_str()) {
            return Err(MergeError::Mixed(dir.to_path_buf()));
        }
    }
    let job_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("job");
    let job = Job::parse(Path::new(&format!("{job_name}.yaml")), &yaml).map_err(|e| MergeError::Job {
        path: parts[0].clone(),
        message: e.to_string(),
    })?;
    let ck = job.checkpoint_rounds().len();
    // (cell id, rep) -> files holding it
    let mut seen: BTreeMap<(String, u32), Vec<PathBuf>> = BTreeMap::new();
    for p in &parts {
        for b in output::read_parquet(p)? {
            let (Some(cells), Some(reps)) = (
                b.column_by_name("cell_id").and_then(|c| c.as_string_opt::<i32>()),
                b.column_by_name("repetition")
                    .and_then(|c| c.as_primitive_opt::<UInt32Type>()),
            ) else {
                continue;
            };
            for i in (0..b.num_rows()).step_by(ck.max(1)) {
                let key = (cells.value(i).to_owned(), reps.value(i));
                let files = seen.entry(key).or_default();
                if !files.contains(p) {
                    files.push(p.clone());
                }
            }
        }
    }
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
    let expected = job.cells.len() * job.repetitions as usize;
    let present = seen.len();
    let out_root = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let job_path =
        output::read_metadata_key(&parts[0], "fedbandits.job_path")?.unwrap_or_else(|| format!("{job_name}.yaml"));
    // The shard layout in use, from the part files' metadata.
    let count = output::read_metadata_key(&parts[0], "fedbandits.shard")?
        .and_then(|s| s.split('/').nth(1).and_then(|n| n.parse::<usize>().ok()))
        .unwrap_or(1);
    let rerun = (!missing.is_empty()).then(|| {
        let owner = crate::job::shard::assign_units(&job.cells, job.repetitions, count);
        let mut shards = std::collections::BTreeSet::new();
        for (c, r) in &missing {
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
        list.join("\n             ")
    });
    let manifest = dir.join("_manifest.yaml");
    let mut text = format!(
        "# fedbandits manifest (written by `fedbandits merge`)\njob: {}\njob_identity: \"{}\"\nsemantics_version: {}\nexpected_units: {expected}\npresent_units: {present}\ncomplete: {}\nparts:\n",
        job.name,
        job.identity(),
        crate::job::SEMANTICS_VERSION,
        missing.is_empty() && duplicates.is_empty()
    );
    for p in &parts {
        let shard = output::read_metadata_key(p, "fedbandits.shard")?.unwrap_or_default();
        text += &format!(
            "  - {{file: {}, shard: \"{shard}\"}}\n",
            p.file_name().and_then(|n| n.to_str()).unwrap_or("")
        );
    }
    text += "missing:\n";
    for (c, r) in &missing {
        text += &format!("  - {{cell_id: \"{c}\", repetition: {r}}}\n");
    }
    text += "duplicates:\n";
    for (c, r, f) in &duplicates {
        let names: Vec<&str> = f
            .iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()))
            .collect();
        text += &format!(
            "  - {{cell_id: \"{c}\", repetition: {r}, files: [{}]}}\n",
            names.join(", ")
        );
    }
    // The last line checks every byte before it (XXH64 of the text up to
    // and including the newline before "checksum").
    text += &format!(
        "checksum_xxh64: \"{:016x}\"\n",
        twox_hash::XxHash64::oneshot(0, text.as_bytes())
    );
    output_atomic_text(&manifest, &text)?;
    Ok(MergeReport {
        parts,
        expected,
        present,
        missing,
        duplicates,
        rerun,
        manifest,
    })
}

fn output_atomic_text(path: &Path, text: &str) -> Result<(), MergeError> {
    let io = |source| MergeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension(format!("yaml.tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
