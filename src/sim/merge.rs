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
    #[error("{path}: the job recorded in its metadata cannot be loaded: {message}")]
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
    /// A part whose metadata lacks a key every part has, or that another
    /// engine semantics wrote.
    #[error("{path}: {message}")]
    Metadata {
        /// The part file.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// The job read from the parts' YAML (or `--job`) with today's input
    /// files is another job than the parts': an input was edited.
    #[error(
        "{dir}: the job read now is not the one its parts were written by (identity {now}, the parts' {parts}): {why}. \
         Nothing was written. Put back the input the parts were computed from, or run the job again (an edited input \
         is another cell: its repetitions are recomputed)"
    )]
    InputsChanged {
        /// Results directory.
        dir: PathBuf,
        /// The identity read now.
        now: String,
        /// The parts' identity.
        parts: String,
        /// Which file was read, and what the job names.
        why: String,
    },
    /// `--recheck-figures` found accountant figures a part took from a
    /// cache that the accountant computes to other values.
    #[error(
        "{dir}: {count} accountant figure(s) that parts took from a cache differ from the accountant's own \
         computation (a forged or damaged cache line with a valid check), so their noise and acct_epsilon may be \
         wrong: {examples}. Remove the cache file named in those parts (fedbandits.accountant_figures), then rerun \
         the job (its units were computed with the wrong figures: move them away first). Nothing was written"
    )]
    FiguresDiffer {
        /// Results directory.
        dir: PathBuf,
        /// Distinct figures that differ.
        count: usize,
        /// The first few: part, line and the figure computed now.
        examples: String,
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
    /// What reruns exactly what is missing (None when complete).
    pub rerun: Option<Rerun>,
    /// The manifest written.
    pub manifest: PathBuf,
    /// With `--compact`: the unit files removed and their bytes.
    pub compacted: Option<(usize, u64)>,
    /// The superseded study removed, once this one is complete, and the
    /// files found there that the engine did not write (left in place).
    pub removed_superseded: Option<(PathBuf, Vec<PathBuf>)>,
    /// With `--recheck-figures`: the distinct cached figures the parts
    /// recorded, all computed again and equal.
    pub figures: Option<usize>,
}

/// The shards that hold missing units, and how to run only them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rerun {
    /// The job file, as a command names it (absolute, or in the job
    /// file's folder).
    pub job_path: String,
    /// The results root (`--out`).
    pub out_root: PathBuf,
    /// Shards (indices) holding missing units, ascending.
    pub shards: Vec<usize>,
    /// The shard count of the layout in use.
    pub count: usize,
}

impl Rerun {
    /// The commands that compute the missing units on one machine, one
    /// per shard.
    pub fn commands(&self) -> Vec<String> {
        let (job, out) = (
            shell_word(&self.job_path),
            shell_word(&self.out_root.display().to_string()),
        );
        self.shards
            .iter()
            .map(|s| format!("fedbandits run {job} --out {out} --shard {s}/{}", self.count))
            .collect()
    }

    /// The `slurm/submit.sh` line that submits only the missing shards
    /// (and a new merge job after them); the other settings are
    /// `submit.sh`'s defaults unless the caller's environment sets them.
    pub fn submit_line(&self) -> String {
        let list: Vec<String> = self.shards.iter().map(usize::to_string).collect();
        format!(
            "FEDBANDITS_TASKS={} FEDBANDITS_SHARDS={} FEDBANDITS_OUT={} slurm/submit.sh {}",
            self.count,
            list.join(","),
            shell_word(&self.out_root.display().to_string()),
            shell_word(&self.job_path)
        )
    }
}

/// A word for a POSIX shell: as it is when it holds only safe characters,
/// else in single quotes.
pub fn shell_word(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
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

/// The metadata keys every part has: without one a part cannot be merged
/// (damaged, or rewritten by another tool).
const REQUIRED_KEYS: [&str; 5] = ["job_name", "job_yaml", "semantics_version", "shard", "units"];

/// A part's key-value metadata, by key.
type PartMeta = std::collections::HashMap<String, String>;

/// `key` (without the `fedbandits.` prefix) of part `p` whose metadata is
/// `md`, which every part has ([`REQUIRED_KEYS`]).
fn required<'a>(p: &Path, md: &'a PartMeta, key: &str) -> Result<&'a str, MergeError> {
    md.get(&format!("fedbandits.{key}"))
        .map(String::as_str)
        .ok_or_else(|| MergeError::Metadata {
            path: p.to_path_buf(),
            message: format!(
                "its metadata lacks fedbandits.{key}, which every part written by fedbandits has (damaged, or \
                 rewritten by another tool): move it away; merge then names the units to recompute"
            ),
        })
}

/// Every part's metadata, each checked: every required key, this engine's
/// semantics, the directory's job name.
fn parts_meta(dir: &Path, parts: &[PathBuf]) -> Result<Vec<PartMeta>, MergeError> {
    let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("job");
    let engine = crate::job::SEMANTICS_VERSION.to_string();
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        let md: PartMeta = output::read_metadata(p)?.into_iter().collect();
        for key in REQUIRED_KEYS {
            required(p, &md, key)?;
        }
        let semantics = required(p, &md, "semantics_version")?;
        if semantics != engine {
            let commit = md.get("fedbandits.git_commit").map_or("unknown", String::as_str);
            return Err(MergeError::Metadata {
                path: p.clone(),
                message: format!(
                    "written by engine semantics {semantics} (commit {commit}), this fedbandits is semantics {engine}: \
                     its cells and figures are another engine's; merge it with the engine that wrote it, or rerun \
                     the job into another --out"
                ),
            });
        }
        let found = required(p, &md, "job_name")?;
        if found != dir_name {
            return Err(MergeError::Foreign {
                path: p.clone(),
                found: found.to_owned(),
                dir_name: dir_name.to_owned(),
            });
        }
        out.push(md);
    }
    Ok(out)
}

/// The job all `parts` (metadata `meta`) come from: the same job identity
/// in every part (what a run checks: an edit that changes no result, a
/// description or a comment, is the same job), or without identities the
/// same job YAML.
fn parts_job(dir: &Path, parts: &[PathBuf], meta: &[PartMeta], job_file: Option<&Path>) -> Result<Job, MergeError> {
    let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("job");
    let yaml = required(&parts[0], &meta[0], "job_yaml")?;
    fn version<'a>(p: &Path, md: &'a PartMeta) -> Result<&'a str, MergeError> {
        match md.get("fedbandits.job_identity") {
            Some(id) => Ok(id.as_str()),
            None => required(p, md, "job_yaml"),
        }
    }
    let first = version(&parts[0], &meta[0])?;
    for (p, md) in parts.iter().zip(meta).skip(1) {
        if version(p, md)? != first {
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
    // Input files (an edge list, a data set) are read where the run read
    // them: relative to the job file's folder, whatever the working
    // directory of `merge` (parts before that key: the working directory);
    // with `--job`, relative to that file's.
    let folder = meta[0].get("fedbandits.job_dir").map_or(".", String::as_str);
    let recorded = meta[0].get("fedbandits.job_path").map_or_else(
        || Path::new(folder).join(format!("{dir_name}.yaml")),
        |p| Path::new(folder).join(Path::new(p).file_name().unwrap_or(p.as_ref())),
    );
    let job = match job_file {
        Some(f) => Job::load(f).map_err(|e| MergeError::Job {
            path: f.to_path_buf(),
            message: e.to_string(),
        })?,
        None => Job::parse(&recorded, yaml).map_err(|e| MergeError::Job {
            path: parts[0].clone(),
            message: format!(
                "{e}\n(merge reads the job from its parts' metadata and its input files where the run read them, \
                 relative to the job file {}; if the job and its inputs moved, name the job file: fedbandits merge {} \
                 --job PATH)",
                recorded.display(),
                shell_word(&dir.display().to_string())
            ),
        })?,
    };
    if job.identity() != first {
        let inputs = input_files(&job);
        let read = job_file.map_or_else(
            || {
                format!(
                    "the job YAML recorded in the parts, its inputs read relative to {}",
                    recorded.display()
                )
            },
            |f| format!("the job file {}", f.display()),
        );
        return Err(MergeError::InputsChanged {
            dir: dir.to_path_buf(),
            now: job.identity(),
            parts: first.to_string(),
            why: if inputs.is_empty() {
                format!("{read} defines other cells (another seed, grid, horizon or repetitions?)")
            } else {
                format!("{read}; an input it names changed since the run: {}", inputs.join(", "))
            },
        });
    }
    Ok(job)
}

/// Computes again every accountant figure the parts record as taken from
/// a cache ([`crate::privacy::binomial_gdp::cached_record`]), each
/// distinct figure once: the count when all are equal.
fn recheck_figures(dir: &Path, parts: &[PathBuf], meta: &[PartMeta]) -> Result<usize, MergeError> {
    let mut lines: BTreeMap<String, &Path> = BTreeMap::new();
    for (p, md) in parts.iter().zip(meta) {
        for l in md
            .get("fedbandits.accountant_figures")
            .map_or("", String::as_str)
            .lines()
        {
            lines.entry(l.to_string()).or_insert(p);
        }
    }
    let record: String = lines.keys().map(|l| format!("{l}\n")).collect();
    let (checked, bad) = crate::privacy::binomial_gdp::recheck(&record).map_err(|line| MergeError::Metadata {
        path: lines.get(&line).map_or_else(|| dir.to_path_buf(), |p| p.to_path_buf()),
        message: format!("its fedbandits.accountant_figures holds a line that is not a figure: {line:?}"),
    })?;
    if bad.is_empty() {
        return Ok(checked);
    }
    let examples: Vec<String> = bad
        .iter()
        .take(3)
        .map(|m| {
            let part = lines.get(&m.line).map_or_else(String::new, |p| p.display().to_string());
            format!(
                "{part}: {:?} (computed now: mu {}, tail {})",
                m.line, m.computed.mu, m.computed.tail
            )
        })
        .collect();
    Err(MergeError::FiguresDiffer {
        dir: dir.to_path_buf(),
        count: bad.len(),
        examples: examples.join("; "),
    })
}

/// The input files a job's cells name (`params.KEY: path`), each once.
fn input_files(job: &Job) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &job.cells {
        for (k, v) in &c.params {
            let is_path = matches!(*k, "graph_edges" | "data") && !v.to_string().is_empty();
            let text = format!("params.{k}: {v}");
            if is_path && !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

/// (cell id, repetition) -> the part files holding it.
fn units_present(job: &Job, parts: &[PathBuf]) -> Result<BTreeMap<(String, u32), Vec<PathBuf>>, MergeError> {
    // Every repetition has at least the fewest checkpoints of any cell in
    // consecutive rows: a row that often finds each one.
    let ck = job
        .cells
        .iter()
        .map(|c| job.checkpoint_rounds_of(c).len())
        .min()
        .unwrap_or(1);
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
fn rerun_commands(dir: &Path, job: &Job, meta: &PartMeta, missing: &[(String, u32)], given: bool) -> Rerun {
    // The shard layout in use, from the part files' metadata.
    let count = meta
        .get("fedbandits.shard")
        .and_then(|s| s.split('/').nth(1).and_then(|n| n.parse::<usize>().ok()))
        .unwrap_or(1);
    let owner = crate::job::shard::assign_units(&job.cells, job.repetitions, count);
    let mut shards = std::collections::BTreeSet::new();
    for (c, r) in missing {
        if let Some(cell) = job.cells.iter().find(|x| &x.id == c) {
            shards.insert(owner[cell.index * job.repetitions as usize + *r as usize]);
        }
    }
    Rerun {
        // `--job PATH`: that file, which the parts' job_path no longer is.
        job_path: if given {
            std::path::absolute(&job.path)
                .unwrap_or_else(|_| job.path.clone())
                .display()
                .to_string()
        } else {
            rerun_job_path(meta, job)
        },
        out_root: dir.parent().map(Path::to_path_buf).unwrap_or_default(),
        shards: shards.into_iter().collect(),
        count,
    }
}

/// The job file to name in a rerun command: as the run was given it when
/// absolute, else in the job file's folder (`fedbandits.job_dir`), so that
/// the command works from any working directory.
fn rerun_job_path(meta: &PartMeta, job: &Job) -> String {
    let given = meta
        .get("fedbandits.job_path")
        .cloned()
        .unwrap_or_else(|| format!("{}.yaml", job.name));
    match (Path::new(&given).file_name(), meta.get("fedbandits.job_dir")) {
        (Some(name), Some(folder)) if Path::new(&given).is_relative() => {
            Path::new(folder).join(name).display().to_string()
        }
        _ => given,
    }
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
fn manifest_text(job: &Job, r: &MergeReport, meta: &[PartMeta]) -> Result<String, MergeError> {
    let mut text = format!(
        "# fedbandits manifest (written by `fedbandits merge`)\njob: {}\njob_identity: \"{}\"\nsemantics_version: {}\nexpected_units: {}\npresent_units: {}\ncomplete: {}\nparts:\n",
        job.name,
        job.identity(),
        crate::job::SEMANTICS_VERSION,
        r.expected,
        r.present,
        r.missing.is_empty() && r.duplicates.is_empty()
    );
    for (p, md) in r.parts.iter().zip(meta) {
        let shard = required(p, md, "shard")?;
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
/// What `fedbandits merge` is asked beside the directory.
#[derive(Clone, Debug, Default)]
pub struct MergeOptions {
    /// Remove the unit files once the parts are complete.
    pub compact: bool,
    /// The job file to read instead of the YAML recorded in the parts (a
    /// study whose job file and inputs moved).
    pub job: Option<PathBuf>,
    /// Compute again every accountant figure a part took from a cache.
    pub recheck_figures: bool,
}

/// Checks `dir` (see the module doc).
pub fn merge(dir: &Path, opts: &MergeOptions) -> Result<MergeReport, MergeError> {
    let compact = opts.compact;
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
    let meta = parts_meta(dir, &parts)?;
    let job = parts_job(dir, &parts, &meta, opts.job.as_deref())?;
    let figures = if opts.recheck_figures {
        Some(recheck_figures(dir, &parts, &meta)?)
    } else {
        None
    };
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
        Some(rerun_commands(dir, &job, &meta[0], &missing, opts.job.is_some()))
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
        removed_superseded: None,
        figures,
    };
    output::write_bytes_atomic(&report.manifest, manifest_text(&job, &report, &meta)?.as_bytes())?;
    // Complete: the study this one grew from, kept loadable until now,
    // goes (its rows are in this job's parts).
    let old = output::directory::superseded_dir(dir, &job);
    if report.missing.is_empty() && report.duplicates.is_empty() && old.exists() {
        let left = output::directory::remove_superseded(&old).map_err(|source| MergeError::Io {
            path: old.clone(),
            source,
        })?;
        report.removed_superseded = Some((old, left));
    }
    if compact && report.missing.is_empty() && report.duplicates.is_empty() {
        report.compacted = Some(compact_units(dir, &job)?);
    }
    drop(gate);
    Ok(report)
}
