//! A job's results directory: where units, snapshots and parts live, which
//! of them belong to the job, and how a job that grew takes over the
//! directory of the job it grew from.
//!
//! A unit (`.units/<cell key>-<rep>.parquet`, [`crate::output::unit`]) is
//! one repetition of one cell; its key covers the cell's parameters, the
//! seed, the checkpoints and the engine's semantics, not the repetitions or
//! the other cells. So a job that adds repetitions, grid values or
//! algorithms to a finished (or partly finished) job computes exactly the
//! same units for the cells and repetitions they share: [`check_directory`]
//! accepts such a directory and the runner reuses every unit it holds.
//! Any other edit (seed, horizon, checkpoints, a parameter's value, fewer
//! repetitions or values, another engine semantics) is refused, as it
//! would leave results the job does not describe.
//!
//! The parts of the job a directory grew from are superseded: before the
//! run, [`Directory::take_over`] writes every unit such a part holds and
//! `.units/` lacks (after `merge --compact` removed them) back from the
//! part's rows, then removes the part (and `merge`'s `_manifest.yaml`,
//! which described it): every row it held is in a unit, and the new job's
//! parts will hold them again. The same recovery makes a
//! rerun of a compacted job reuse its parts' rows instead of recomputing.

use super::unit::{RowUnits, UnitData, read_unit_file, units_in_rows, write_unit};
use crate::job::shard::Shard;
use crate::job::{Cell, Job};
use crate::output::{self, OutputError, RepResult};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Path of one repetition's unit file (the unit of sharding and resume).
pub fn unit_path(dir: &Path, cell: &Cell, rep: u32) -> PathBuf {
    dir.join(".units").join(format!("{}-{rep:06}.parquet", cell.key))
}

/// Path of one repetition's snapshot while it runs.
pub fn snapshot_path(dir: &Path, cell: &Cell, rep: u32) -> PathBuf {
    dir.join(".snapshots").join(format!("{}-{rep:06}.bin", cell.key))
}

/// Path of a shard's part file.
pub fn part_path(dir: &Path, shard: Shard) -> PathBuf {
    dir.join(format!("part-{:05}-of-{:05}.parquet", shard.index, shard.count))
}

/// The part files (`part-*.parquet`) directly in `dir`, sorted.
pub fn parts_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut parts: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("part-") && n.ends_with(".parquet")
        })
        .collect();
    parts.sort();
    parts
}

/// The shard counts N of this job's part files in `dir`
/// (`part-I-of-N.parquet` whose footer names this job's identity; a grown
/// job's old parts are moved aside by its run, so they do not count).
pub fn own_layouts(dir: &Path, job: &Job) -> std::collections::BTreeSet<usize> {
    let identity = job.identity();
    parts_in(dir)
        .iter()
        .filter(|p| {
            output::read_metadata_key(p, "fedbandits.job_identity")
                .ok()
                .flatten()
                .is_some_and(|id| id == identity)
        })
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            name.strip_suffix(".parquet")?.rsplit_once("-of-")?.1.parse().ok()
        })
        .collect()
}

/// Where the parts a grown job superseded are kept, with their manifest,
/// until the grown job's `merge` completes: `<dir>/.superseded/<job
/// name>/` (the loader wants a directory named as its job, and skips
/// hidden paths below the one it is given).
pub fn superseded_dir(dir: &Path, job: &Job) -> PathBuf {
    dir.join(".superseded").join(&job.name)
}

/// Removes what the engine keeps in a superseded study's folder `keep`
/// (its part files and `_manifest.yaml`), then the folder and
/// `.superseded/` when nothing else is left in them; returns the other
/// files, which are the user's and stay where they are (merge never
/// deletes data it did not write).
pub fn remove_superseded(keep: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir(keep)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let ours =
            path.is_file() && (name == "_manifest.yaml" || (name.starts_with("part-") && name.ends_with(".parquet")));
        if ours {
            std::fs::remove_file(&path)?;
        } else {
            left.push(path);
        }
    }
    left.sort();
    if left.is_empty() {
        std::fs::remove_dir(keep)?;
        if let Some(parent) = keep.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(left)
}

/// What a job finds in its results directory.
#[derive(Debug, Default)]
pub struct Directory {
    dir: PathBuf,
    /// Unit files by (key, repetition).
    units: HashMap<(String, u32), PathBuf>,
    /// Parts of a job this one grew from (superseded).
    pub superseded: Vec<PathBuf>,
    /// Parts of this job.
    own_parts: Vec<PathBuf>,
    /// This shard's part, standing for its units ([`Directory::complete_part`]).
    complete_part: Option<PathBuf>,
    /// Format-1 keys of the jobs this one grew from, by cell id.
    old_keys: HashMap<String, Vec<String>>,
}

impl Directory {
    /// The unit file of `rep` of `cell`, if the directory holds one (this
    /// engine's, or one of format 1 under the key of this job or of a job
    /// it grew from).
    pub fn find(&self, cell: &Cell, rep: u32) -> Option<&Path> {
        let old = self.old_keys.get(&cell.id).into_iter().flatten();
        std::iter::once(&cell.key)
            .chain(std::iter::once(&cell.legacy_key))
            .chain(old)
            .find_map(|k| self.units.get(&(k.clone(), rep)))
            .map(PathBuf::as_path)
    }

    /// The keys a unit of `cell` may have been written under.
    fn accepted_keys<'a>(&'a self, cell: &'a Cell) -> Vec<&'a str> {
        let mut keys = vec![cell.key.as_str(), cell.legacy_key.as_str()];
        keys.extend(self.old_keys.get(&cell.id).into_iter().flatten().map(String::as_str));
        keys
    }

    /// Writes back the units a run of `mine` (this shard's units, whose part
    /// is `own_part`) needs from the parts of this job, and every unit of a
    /// part of a job it grew from, that `.units/` lacks (from the part's
    /// rows, verified by its checksums), then removes the superseded parts.
    /// When `own_part` already holds exactly `mine` and `.units/` lacks
    /// some (after `merge --compact`), nothing is written back: the part
    /// stands ([`Directory::complete_part`]). Returns how many units were
    /// written back.
    pub fn take_over(&mut self, job: &Job, mine: &[(usize, u32)], own_part: &Path) -> Result<usize, DirectoryError> {
        let by_id: HashMap<&str, &Cell> = job.cells.iter().map(|c| (c.id.as_str(), c)).collect();
        let wanted: HashSet<(String, u32)> = mine.iter().map(|&(c, r)| (job.cells[c].id.clone(), r)).collect();
        let mine_listed: Vec<String> = mine.iter().map(|&(c, r)| format!("{}:{r}", job.cells[c].id)).collect();
        let lacking = mine.iter().any(|&(c, r)| self.find(&job.cells[c], r).is_none());
        let mut restored = 0;
        let superseded = self.superseded.clone();
        for part in superseded.iter().chain(&self.own_parts.clone()) {
            let is_superseded = superseded.contains(part);
            let listed = output::read_metadata_key(part, "fedbandits.units")?.unwrap_or_default();
            // The part stands for its units only while it carries this job
            // file's text (`compare:` and comments change no unit, and a
            // rerun reassembles the part with the new text).
            if !is_superseded
                && lacking
                && part == own_part
                && listed == mine_listed.join(",")
                && output::read_metadata_key(part, "fedbandits.job_yaml")?.as_deref() == Some(job.yaml.as_str())
            {
                self.complete_part = Some(part.clone());
                continue;
            }
            let missing = listed.split(',').filter_map(|u| u.rsplit_once(':')).any(|(id, r)| {
                let rep = r.parse::<u32>().unwrap_or(u32::MAX);
                (is_superseded || wanted.contains(&(id.to_owned(), rep)))
                    && by_id
                        .get(id)
                        .is_some_and(|c| rep < job.repetitions && self.find(c, rep).is_none())
            });
            if missing {
                restored += self.restore_from(part, job, &by_id, (!is_superseded).then_some(&wanted))?;
            }
        }
        if self.complete_part.is_some() && restored > 0 {
            // Another part supplied some of this shard's units: assemble anew.
            self.complete_part = None;
        }
        // Before a superseded part (possibly the only intact copy of a
        // unit) goes, every unit the grown job will rely on is verified: a
        // damaged one fails here, with every file as it was.
        if !self.superseded.is_empty() {
            self.verify_units(job)?;
        }
        let superseded = std::mem::take(&mut self.superseded);
        if !superseded.is_empty() {
            self.keep_superseded(job, &superseded)?;
        }
        Ok(restored)
    }

    /// Moves the superseded parts and `merge`'s manifest of them into
    /// [`superseded_dir`], where the study they hold stays loadable until
    /// this job's `merge` completes (and removes it); the parts and
    /// manifest an earlier growth kept there are replaced (this one is the
    /// latest study), any other file there is left.
    fn keep_superseded(&self, job: &Job, parts: &[PathBuf]) -> Result<(), DirectoryError> {
        let keep = superseded_dir(&self.dir, job);
        let fail = |path: &Path, e: std::io::Error| DirectoryError::Corrupt {
            path: path.to_path_buf(),
            message: format!("cannot move it to {}: {e}", keep.display()),
        };
        if keep.exists() {
            // The earlier copy's parts and manifest; a file of the user's
            // there stays.
            remove_superseded(&keep).map_err(|e| fail(&keep, e))?;
        }
        std::fs::create_dir_all(&keep).map_err(|e| fail(&keep, e))?;
        let manifest = self.dir.join("_manifest.yaml");
        let moving = parts.iter().chain(manifest.exists().then_some(&manifest));
        for file in moving {
            let name = file.file_name().unwrap_or_default();
            std::fs::rename(file, keep.join(name)).map_err(|e| fail(file, e))?;
        }
        Ok(())
    }

    /// This shard's part when it holds exactly the shard's units and
    /// `.units/` lacks some of them (after `merge --compact`): a run with
    /// nothing to compute leaves it as it is.
    pub fn complete_part(&self) -> Option<&Path> {
        self.complete_part.as_deref()
    }

    /// The units of `job` (cell index, repetition) a run would reuse: a
    /// unit file in `.units/`, or listed in a part's footer (this job's, or
    /// of a job it grew from). Reads footers only; what `plan` subtracts.
    pub fn finished(&self, job: &Job) -> Result<HashSet<(usize, u32)>, DirectoryError> {
        let by_id: HashMap<&str, usize> = job.cells.iter().map(|c| (c.id.as_str(), c.index)).collect();
        let mut done = HashSet::new();
        for part in self.superseded.iter().chain(&self.own_parts) {
            let listed = output::read_metadata_key(part, "fedbandits.units")?.unwrap_or_default();
            for (id, r) in listed.split(',').filter_map(|u| u.rsplit_once(':')) {
                if let (Some(&c), Ok(r)) = (by_id.get(id), r.parse::<u32>())
                    && r < job.repetitions
                {
                    done.insert((c, r));
                }
            }
        }
        for cell in &job.cells {
            done.extend(
                (0..job.repetitions)
                    .filter(|&r| self.find(cell, r).is_some())
                    .map(|r| (cell.index, r)),
            );
        }
        Ok(done)
    }

    /// Writes back the units of `job` (of `wanted` alone, when given) that
    /// `part` holds and `.units/` lacks, reading the part as a stream
    /// (memory: a batch and one repetition, not the part). Returns how many
    /// were written.
    fn restore_from(
        &mut self,
        part: &Path,
        job: &Job,
        by_id: &HashMap<&str, &Cell>,
        wanted: Option<&HashSet<(String, u32)>>,
    ) -> Result<usize, DirectoryError> {
        let mut rows = RowUnits::default();
        let mut restored = 0;
        let mut failed: Option<DirectoryError> = None;
        let mut restore = |this: &mut Self, (id, r, backend): (String, RepResult, String)| {
            let Some(cell) = by_id.get(id.as_str()) else { return };
            if failed.is_some()
                || r.rep >= job.repetitions
                || this.find(cell, r.rep).is_some()
                || wanted.is_some_and(|w| !w.contains(&(id.clone(), r.rep)))
            {
                return;
            }
            let path = unit_path(&this.dir, cell, r.rep);
            match write_unit(&path, &r, &backend, unit_metadata(job, cell, r.rep)) {
                Ok(()) => {
                    this.units.insert((cell.key.clone(), r.rep), path);
                    restored += 1;
                }
                Err(e) => failed = Some(e.into()),
            }
        };
        output::read_parquet_stream(part, |b| {
            rows.add(&b, |u| restore(self, u))
                .map_err(|e| output::OutputError::Checksum {
                    path: part.to_path_buf(),
                    message: e.to_string(),
                })
        })?;
        if let Some(u) = rows.finish() {
            restore(self, u);
        }
        failed.map_or(Ok(restored), Err)
    }

    /// Reads every unit of `job` the directory holds (checksum, cell and
    /// repetition), the first failure an error that says nothing was
    /// removed and how the unit comes back: moved away, it is restored from
    /// a part that holds it, or recomputed.
    fn verify_units(&self, job: &Job) -> Result<(), DirectoryError> {
        for cell in &job.cells {
            for rep in 0..job.repetitions {
                if let Some(path) = self.find(cell, rep)
                    && let Err(e) = self.read(path, job, cell, rep)
                {
                    let why = match e {
                        DirectoryError::Corrupt { message, .. } => message,
                        other => other.to_string(),
                    };
                    return Err(DirectoryError::Corrupt {
                        path: path.to_path_buf(),
                        message: format!(
                            "{why}; found while growing the job, before anything was removed: every part is still \
                             in {}, and a unit moved away is restored from a part that holds it, else recomputed",
                            self.dir.display()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Reads the unit of `rep` of `cell` (found by [`Directory::find`]),
    /// checking its checksum and that it holds that repetition of that cell
    /// of this job: a file copied under another unit's name, damaged, or
    /// written by another engine semantics is an error naming the file.
    pub fn read(&self, path: &Path, job: &Job, cell: &Cell, rep: u32) -> Result<(RepResult, String), DirectoryError> {
        let corrupt = |message: String| DirectoryError::Corrupt {
            path: path.to_path_buf(),
            message,
        };
        let (data, kv) = read_unit_file(path, rep).map_err(|e| corrupt(e.to_string()))?;
        let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        // A unit belongs to its job: a renamed job directory, or `.units`
        // copied into another job's, would relabel another job's rows.
        if get("fedbandits.job_name") != Some(job.name.as_str()) {
            return Err(DirectoryError::ForeignUnit {
                path: path.to_path_buf(),
                found: get("fedbandits.job_name").unwrap_or("(none)").to_owned(),
                job: job.name.clone(),
            });
        }
        let semantics = crate::job::SEMANTICS_VERSION.to_string();
        let want_rep = rep.to_string();
        let key = get("fedbandits.cell_key").unwrap_or("(missing)");
        if !self.accepted_keys(cell).contains(&key) {
            return Err(corrupt(format!(
                "its metadata says fedbandits.cell_key = {key}, expected {} for cell {} repetition {rep}",
                cell.key, cell.id
            )));
        }
        for (k, want) in [
            ("fedbandits.repetition", want_rep.as_str()),
            ("fedbandits.semantics_version", semantics.as_str()),
        ] {
            if get(k) != Some(want) {
                return Err(corrupt(format!(
                    "its metadata says {k} = {}, expected {want} for cell {} repetition {rep}",
                    get(k).unwrap_or("(missing)"),
                    cell.id
                )));
            }
        }
        match data {
            UnitData::Rep(r, backend) => Ok((r, backend)),
            UnitData::Rows(batches) => {
                let mut units = units_in_rows(&batches).map_err(|e| corrupt(e.to_string()))?;
                match (units.len(), units.pop()) {
                    (1, Some((id, r, backend))) if id == cell.id && r.rep == rep => Ok((r, backend)),
                    (_, Some((id, r, _))) => Err(corrupt(format!(
                        "its rows hold cell {id} repetition {} (and {} more), expected cell {} repetition {rep}",
                        r.rep,
                        units.len(),
                        cell.id
                    ))),
                    _ => Err(corrupt("no rows".into())),
                }
            }
        }
    }
}

/// The metadata that identifies a unit: job name, cell id and key,
/// repetition, engine and semantics version.
pub fn unit_metadata(job: &Job, cell: &Cell, rep: u32) -> Vec<parquet::file::metadata::KeyValue> {
    use parquet::file::metadata::KeyValue;
    [
        ("job_name", job.name.clone()),
        ("cell_id", cell.id.clone()),
        ("cell_key", cell.key.clone()),
        ("repetition", rep.to_string()),
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("git_commit", output::GIT_COMMIT.to_string()),
        ("semantics_version", crate::job::SEMANTICS_VERSION.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| KeyValue::new(format!("fedbandits.{k}"), v))
    .collect()
}

/// Checks what `dir` holds before any work and returns it: parts of this
/// job; parts of a job this one extends (same seed, horizon, checkpoints,
/// semantics; every cell and repetition of it also in this job), which are
/// superseded; anything else is refused ([`DirectoryError::OtherJob`]) naming
/// what changed. Units in `.units/` must each be a repetition of a cell of
/// this job or of the job it grew from. Only names and footers are read.
pub fn check_directory(dir: &Path, job: &Job) -> Result<Directory, DirectoryError> {
    let identity = job.identity();
    let other = |what: String| DirectoryError::OtherJob {
        dir: dir.to_path_buf(),
        what,
    };
    let mut d = Directory {
        dir: dir.to_path_buf(),
        ..Directory::default()
    };
    for p in parts_in(dir) {
        let found = output::read_metadata_key(&p, "fedbandits.job_identity").map_err(|e| DirectoryError::Corrupt {
            path: p.clone(),
            message: e.to_string(),
        })?;
        // Every part with a footer checksum (every part this engine reads)
        // has its job's identity: without one the part was edited, not
        // written for another version of the job.
        let Some(found) = found else {
            return Err(DirectoryError::Corrupt {
                path: p,
                message: "its metadata has no fedbandits.job_identity, which every part of this engine carries \
                          (the part was edited or written by another program)"
                    .into(),
            });
        };
        if found == identity {
            d.own_parts.push(p);
            continue;
        }
        let old = extends(&p, job).map_err(|why| {
            other(format!(
                "{} was written for job identity {} (this job's is {identity}) and this job does not extend it: \
                 {why}",
                p.display(),
                found
            ))
        })?;
        for c in &old.cells {
            d.old_keys.entry(c.id.clone()).or_default().push(c.legacy_key.clone());
        }
        d.superseded.push(p);
    }
    let mut foreign = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir.join(".units")) {
        for e in rd.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Some(stem) = name.strip_suffix(".parquet").filter(|_| !name.starts_with('.')) else {
                continue;
            };
            match stem
                .rsplit_once('-')
                .and_then(|(k, r)| Some((k, r.parse::<u32>().ok()?)))
            {
                Some((key, rep)) => {
                    d.units.insert((key.to_owned(), rep), e.path());
                }
                None => foreign.push(name),
            }
        }
    }
    let mut known: HashSet<(&str, u32)> = HashSet::new();
    for c in &job.cells {
        for r in 0..job.repetitions {
            for k in d.accepted_keys(c) {
                known.insert((k, r));
            }
        }
    }
    foreign.extend(
        d.units
            .iter()
            .filter(|((k, r), _)| !known.contains(&(k.as_str(), *r)))
            .filter_map(|(_, p)| p.file_name().and_then(|n| n.to_str()).map(str::to_owned)),
    );
    foreign.sort();
    if let Some(first) = foreign.first() {
        return Err(other(format!(
            "{} file(s) in {} belong to no cell and repetition of this job, e.g. {first} (the job was edited: \
             its seed, horizon, checkpoints or a parameter's value changed, or repetitions or grid values were \
             removed{}; adding repetitions, values or algorithms is allowed)",
            foreign.len(),
            dir.join(".units").display(),
            input_files(job)
        )));
    }
    Ok(d)
}

/// ", or an input file a cell reads changed: graph_edges = edges.txt" for
/// the file parameters (text kind) the job's cells set, each once; a cell's
/// identity holds its input files' content, so an edited file is an edited
/// job. Empty without one.
fn input_files(job: &Job) -> String {
    let mut files: Vec<String> = Vec::new();
    for c in &job.cells {
        for p in crate::algo::family::params() {
            if let (crate::algo::params::Kind::Text, Some(v)) = (p.kind, c.params.get(p.name)) {
                let f = format!("{} = {}", p.name, v.as_str().unwrap_or_default());
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
    }
    if files.is_empty() {
        String::new()
    } else {
        format!(", or an input file a cell reads changed: {}", files.join(", "))
    }
}

/// The job `part` was written for, when `job` extends it (the same engine
/// semantics; every cell of it also in `job`, with at least as many
/// repetitions), else why not.
fn extends(part: &Path, job: &Job) -> Result<Job, NotExtended> {
    let semantics = output::read_metadata_key(part, "fedbandits.semantics_version")?.unwrap_or_default();
    if semantics != crate::job::SEMANTICS_VERSION.to_string() {
        return Err(NotExtended::Semantics(semantics));
    }
    let yaml = output::read_metadata_key(part, "fedbandits.job_yaml")?.ok_or(NotExtended::NoJobText)?;
    // Its input files are read where this job's are (its folder).
    let at = crate::job::job_folder(&job.path).join(format!("{}.yaml", job.name));
    let old = Job::parse(&at, &yaml).map_err(NotExtended::JobText)?;
    if old.repetitions > job.repetitions {
        return Err(NotExtended::FewerRepetitions {
            old: old.repetitions,
            new: job.repetitions,
        });
    }
    let keys: HashSet<&str> = job.cells.iter().map(|c| c.key.as_str()).collect();
    let gone: Vec<&Cell> = old.cells.iter().filter(|c| !keys.contains(c.key.as_str())).collect();
    match gone.first() {
        None => Ok(old),
        Some(_) if gone.len() == old.cells.len() => Err(NotExtended::NoCellShared(changed_keys(&old, job))),
        Some(c) => Err(NotExtended::CellsGone {
            gone: gone.len(),
            of: old.cells.len(),
            example: old.short_label(c),
        }),
    }
}

/// The job-level keys that differ between the job a part was written for
/// and this one, as "seed: 3 -> 4" (joined by "; "), or, where none does,
/// that a parameter common to all cells changed.
fn changed_keys(old: &Job, new: &Job) -> String {
    let mut v = Vec::new();
    if old.seed != new.seed {
        v.push(format!("seed: {} -> {}", old.seed, new.seed));
    }
    if old.horizons != new.horizons {
        let list = |h: &[u64]| h.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        v.push(format!("horizon: {} -> {}", list(&old.horizons), list(&new.horizons)));
    }
    if old.checkpoints != new.checkpoints {
        v.push(format!(
            "checkpoints: {} -> {}",
            old.checkpoints.describe(),
            new.checkpoints.describe()
        ));
    }
    if v.is_empty() {
        "a parameter common to all cells (or an input file they read) changed".into()
    } else {
        v.join("; ")
    }
}

/// Why a job does not extend the one a part was written for.
#[derive(Debug, thiserror::Error)]
pub enum NotExtended {
    /// The part cannot be read.
    #[error(transparent)]
    Read(#[from] crate::output::OutputError),
    /// Another engine semantics computed it.
    #[error("it was computed under engine semantics {0}, this engine's is {v}", v = crate::job::SEMANTICS_VERSION)]
    Semantics(String),
    /// No job text in its metadata.
    #[error("it holds no job text")]
    NoJobText,
    /// Its job text does not parse with this engine.
    #[error("its job text no longer parses ({0})")]
    JobText(crate::job::JobError),
    /// Repetitions were removed.
    #[error("repetitions fell from {old} to {new} (removing results is refused)")]
    FewerRepetitions {
        /// The part's job's.
        old: u32,
        /// This job's.
        new: u32,
    },
    /// Every cell changed.
    #[error("none of its cells is in this job ({0})")]
    NoCellShared(String),
    /// Some cells are gone.
    #[error(
        "{gone} of its {of} cells are not in this job, e.g. {example} (a parameter's value changed, or a grid value or \
         algorithm was removed)"
    )]
    CellsGone {
        /// How many.
        gone: usize,
        /// Of how many.
        of: usize,
        /// One of them.
        example: String,
    },
}

/// Why a results directory cannot be used as it is.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// Reading or writing a file failed.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The results directory holds results of another job (or of another
    /// version of this one).
    #[error(
        "{dir} holds results of a different job: {what}. Writing here would mix two versions of the job; \
         run with --out ANOTHER_DIR, or move {dir} away to start over"
    )]
    OtherJob {
        /// Results directory.
        dir: PathBuf,
        /// What differs.
        what: String,
    },
    /// A unit file of another job (copied into this job's `.units`, or the
    /// whole directory is another job's, renamed).
    #[error(
        "{path} is a unit of job {found:?}, not of {job:?}: copied from another job's .units, move this file away \
         (its repetition is restored from a part that holds it, else recomputed; nothing else is touched); if every \
         unit here is {found:?}'s, the directory is that job's, renamed: give it its name back, or run with --out \
         ANOTHER_DIR"
    )]
    ForeignUnit {
        /// The unit file.
        path: PathBuf,
        /// The job its metadata names.
        found: String,
        /// This job.
        job: String,
    },
    /// A cell file exists but cannot be used.
    #[error("{path}: existing result is unusable ({message}); move it away and rerun to recompute it")]
    Corrupt {
        /// File.
        path: PathBuf,
        /// Cause.
        message: String,
    },
}
