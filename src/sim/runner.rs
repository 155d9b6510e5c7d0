//! The job runner: a shard's work is a set of (cell, repetition) units; they
//! run on a rayon pool (or as per-cell batches on a GPU), each finished unit
//! is written atomically to `<results>/.units/<cell key>-<rep>.parquet` and
//! finally the shard's part file `<results>/part-IIIII-of-NNNNN.parquet` is
//! assembled. A rerun skips units whose file exists (the cell key covers
//! parameters, seed, repetitions, checkpoints and engine semantics) and says
//! so. Nothing is ever deleted but the temporary files of writers that are
//! gone. One version of a job writes a directory at a time
//! ([`claim_directory`]).

use super::progress::Progress;
pub use super::summary::CellSummary;
use super::summary::{CellTally, federated_regret_ratios};
use super::{RepOutcome, RepResult, Snapshots, run_rep_resumable};
use crate::backend::{Backend, Placement, Selection};
use crate::job::shard::{Shard, assign_units};
use crate::job::{Cell, Job};
use crate::output::{self, lock};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

pub use super::error::RunError;

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Which shard to run.
    pub shard: Shard,
    /// Worker threads (default: all cores).
    pub threads: Option<usize>,
    /// No progress bar.
    pub quiet: bool,
    /// Output root overriding the job's `output`.
    pub out: Option<PathBuf>,
    /// Federations per work unit (0 or 1: one each). A unit runs its
    /// federations one after another on one thread; results do not depend
    /// on it.
    pub batch: usize,
    /// Minimum time between snapshots of a running repetition (None: never).
    pub snapshot_every: Option<std::time::Duration>,
    /// Set to stop: running repetitions snapshot and the run returns
    /// [`RunError::Stopped`].
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Without a terminal: a progress line this often (None: only at the
    /// start and the end; [`super::progress`]).
    pub log_every: Option<std::time::Duration>,
}

/// A pool of `threads` worker threads (0: one per core), or why it cannot
/// be started.
pub fn thread_pool(threads: usize) -> Result<rayon::ThreadPool, RunError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| RunError::Threads {
            threads,
            message: e.to_string(),
        })
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Results directory.
    pub dir: PathBuf,
    /// Part file written.
    pub part: PathBuf,
    /// Units (cell repetitions) computed now.
    pub units_run: usize,
    /// Units found complete (reused: of an interrupted run, or of the job
    /// this one grew from).
    pub units_skipped: usize,
    /// What claiming the directory changed (superseded parts, units
    /// written back from parts).
    pub claimed: Claimed,
    /// Agent-steps computed now (a resumed repetition's steps before its
    /// stop are not counted: [`RunReport::resumed`]).
    pub agent_steps: u64,
    /// Repetitions resumed from snapshots: (count, agent-steps before
    /// their stop, earliest round, latest round).
    pub resumed: (u64, u64, u64, u64),
    /// The shard run.
    pub shard: Shard,
    /// Wall seconds.
    pub seconds: f64,
    /// Per-cell summary, by cell index.
    pub summaries: Vec<CellSummary>,
    /// Warnings (e.g. part files of another shard layout).
    pub warnings: Vec<String>,
}

/// One line per distinct placement: which cells run where and why (the
/// reason is left out where it repeats the selection's note).
fn placement_lines(job: &Job, placements: &[(usize, Placement)], note: &str) -> Vec<String> {
    let mut groups: Vec<(&Placement, Vec<usize>)> = Vec::new();
    for (c, p) in placements {
        match groups.iter_mut().find(|(q, _)| *q == p) {
            Some((_, cells)) => cells.push(*c),
            None => groups.push((p, vec![*c])),
        }
    }
    // Cells by label, not grid index: an index shifts when a grid value
    // is added, and the log of a grown study would name other cells.
    let one = groups.len() == 1;
    groups
        .into_iter()
        .map(|(p, cells)| {
            let list = if one {
                format!("(all {})", cells.len())
            } else {
                let labels: Vec<String> = cells.iter().map(|&c| job.cells[c].label()).collect();
                labels.join("; ")
            };
            if p.reason() == note {
                format!("cells {list} run on {}", p.name())
            } else {
                format!("cells {list} run on {}: {}", p.name(), p.reason())
            }
        })
        .collect()
}

pub use crate::output::directory::{Directory, DirectoryError, check_directory, part_path, snapshot_path, unit_path};

/// A unit of work: (cell index, repetition).
pub type Unit = (usize, u32);

/// The units of `shard`, in cell then repetition order.
pub fn shard_units(job: &Job, shard: Shard) -> Vec<Unit> {
    let owner = assign_units(&job.cells, job.repetitions, shard.count);
    let reps = job.repetitions as usize;
    (0..job.cells.len() * reps)
        .filter(|u| owner[*u] == shard.index)
        .map(|u| (u / reps, (u % reps) as u32))
        .collect()
}

/// Claims `dir` for this run before any work: checks that it can be written
/// (`.units/`, and `.snapshots/` when snapshotting), then, under the
/// directory's gate ([`lock::Gate`]), refuses it while another version of
/// the job or another run of the same shard is writing it, refuses results
/// of another job ([`check_directory`]), removes the temporary files of
/// writers that are gone, and registers this run as a writer until the
/// returned lock is dropped. Runs of other shards of the same job proceed
/// in parallel.
pub fn claim_directory(
    dir: &Path,
    job: &Job,
    opts: &RunOptions,
) -> Result<(lock::WriterLock, Directory, Claimed), RunError> {
    let mut writable = vec![dir.to_path_buf(), dir.join(".units")];
    if opts.snapshot_every.is_some() {
        writable.push(dir.join(".snapshots"));
    }
    for d in &writable {
        output::files::probe_writable(d).map_err(|source| RunError::NotWritable {
            dir: dir.to_path_buf(),
            source,
        })?;
    }
    let gate = lock::Gate::acquire(dir, "run")?;
    let me = lock::Writer::me(&job.identity(), &format!("{}/{}", opts.shard.index, opts.shard.count));
    let live = gate.live_writers()?;
    if let Some(w) = live.iter().find(|w| w.identity != me.identity) {
        return Err(RunError::Busy {
            dir: dir.to_path_buf(),
            what: format!(
                "another version of job {} (identity {}, this one's is {}) is running here: {w}. Writing here \
                 would mix two versions of the job; wait for it to end (or stop it), or run with --out ANOTHER_DIR",
                job.name, w.identity, me.identity
            ),
        });
    }
    if let Some(w) = live.iter().find(|w| w.shard == me.shard) {
        return Err(RunError::Busy {
            dir: dir.to_path_buf(),
            what: format!(
                "shard {} of job {} is already running here: {w}; wait for it to end, or stop it and rerun \
                 (finished repetitions are kept)",
                me.shard, job.name
            ),
        });
    }
    let mut found = check_directory(dir, job)?;
    let pids: Vec<u32> = live.iter().map(|w| w.pid).collect();
    output::files::remove_stale_tmp(&[dir.to_path_buf(), dir.join(".units"), dir.join(".snapshots")], &pids);
    let superseded = found.superseded.len();
    let restored = found.take_over(job, &shard_units(job, opts.shard), &part_path(dir, opts.shard))?;
    let kept_part = found.complete_part().is_some();
    Ok((
        gate.register(&me)?,
        found,
        Claimed {
            superseded,
            restored,
            kept_part,
        },
    ))
}

/// What claiming a directory changed in it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Claimed {
    /// Parts of the job this one grew from, removed (their rows kept as
    /// units).
    pub superseded: usize,
    /// Units written back from parts (after `merge --compact`).
    pub restored: usize,
    /// Whether this shard's part already held every unit it needs (after
    /// `merge --compact`, nothing to compute): kept as it was.
    pub kept_part: bool,
}

/// Runs (this shard of) a job. The unit of work, sharding and resume is one
/// repetition of one cell: each finished unit is written atomically to
/// `.units/`, a rerun skips units already there, and the shard's part file is
/// assembled from its units at the end.
pub fn run_job(job: &Job, sel: &Selection, opts: &RunOptions) -> Result<RunReport, RunError> {
    let start = Instant::now();
    let dir = opts.out.clone().unwrap_or_else(|| job.output.clone()).join(&job.name);
    let mine = shard_units(job, opts.shard);
    let (_writer, found, claimed) = claim_directory(&dir, job, opts)?;
    if let Some(part) = found.complete_part() {
        // After `merge --compact`, with nothing to compute: the part stands.
        let summaries = summarize_part(job, part, &mine)?;
        return Ok(RunReport {
            part: part.to_path_buf(),
            dir,
            units_run: 0,
            units_skipped: mine.len(),
            claimed,
            agent_steps: 0,
            resumed: (0, 0, 0, 0),
            shard: opts.shard,
            seconds: start.elapsed().as_secs_f64(),
            summaries,
            warnings: foreign_parts(&dir_of(part), opts.shard),
        });
    }
    // Finished units are verified now, before any work (and read again
    // when the part is assembled, so that memory stays bounded).
    let (mut pending, mut skipped) = (Vec::new(), Vec::new());
    for &(c, r) in &mine {
        match found.find(&job.cells[c], r) {
            Some(path) => {
                found.read(path, job, &job.cells[c], r)?;
                skipped.push((c, r));
            }
            None => pending.push((c, r)),
        }
    }
    let total_steps: u64 = pending.iter().map(|&(c, _)| job.cells[c].agent_steps_per_rep()).sum();
    let mut work = Work {
        job,
        dir,
        checkpoints: job.cells.iter().map(|c| job.checkpoint_rounds_of(c)).collect(),
        progress: Progress::new(job, &pending, opts.quiet, opts.log_every),
    };
    let cpu_units = work.run_placed(sel, opts, &pending)?;
    work.run_cpu(&cpu_units, opts)?;
    work.progress.finish();
    let (part, summaries) = work.write_part(&mine, &found, &skipped, opts.shard)?;
    let warnings = foreign_parts(&work.dir, opts.shard);
    let resumed = work.progress.resumed().totals();
    Ok(RunReport {
        dir: work.dir,
        part,
        units_run: pending.len(),
        units_skipped: skipped.len(),
        claimed,
        agent_steps: total_steps.saturating_sub(resumed.1),
        resumed,
        shard: opts.shard,
        seconds: start.elapsed().as_secs_f64(),
        summaries,
        warnings,
    })
}

/// A run's work on one job directory: where units go, each cell's
/// checkpoints (by cell index) and the progress.
struct Work<'a> {
    job: &'a Job,
    dir: PathBuf,
    checkpoints: Vec<Vec<u64>>,
    progress: Progress,
}

impl Work<'_> {
    /// Writes one repetition's unit file atomically.
    fn write_unit(&self, cell: &Cell, r: &RepResult, backend_name: &str) -> Result<(), RunError> {
        if let Some((t, column)) = r.first_non_finite() {
            return Err(RunError::NonFinite {
                cell: format!("[{}] {}", cell.index, cell.label()),
                rep: r.rep,
                t,
                column,
            });
        }
        let kv = crate::output::directory::unit_metadata(self.job, cell, r.rep);
        output::unit::write_unit(&unit_path(&self.dir, cell, r.rep), r, backend_name, kv)?;
        Ok(())
    }

    /// Places every cell with pending units (decided before any work, so
    /// that `--backend cuda` with a cell the device cannot run fails before
    /// anything is computed), runs the cells placed on the device, each as
    /// one batch of its pending repetitions, and returns the units left for
    /// the CPU.
    fn run_placed(&self, sel: &Selection, opts: &RunOptions, pending: &[Unit]) -> Result<Vec<Unit>, RunError> {
        let job = self.job;
        let mut by_cell: Vec<(usize, Vec<u32>)> = Vec::new();
        for &(c, r) in pending {
            match by_cell.last_mut() {
                Some((lc, reps)) if *lc == c => reps.push(r),
                _ => by_cell.push((c, vec![r])),
            }
        }
        let mut placements = Vec::with_capacity(by_cell.len());
        let mut batches = Vec::with_capacity(by_cell.len());
        for (c, reps) in &by_cell {
            let cell = &job.cells[*c];
            let batch = super::cell_batch(cell, job.seed, reps);
            let placement = sel
                .place(batch.as_ref().map(|b| b as &dyn crate::backend::Placeable))
                .map_err(|reason| RunError::CellUnsupported {
                    cell: format!("[{c}] {} ({})", cell.id, cell.label()),
                    reason,
                })?;
            placements.push((*c, placement));
            batches.push(batch.ok());
        }
        if !opts.quiet {
            for line in placement_lines(job, &placements, &sel.note) {
                eprintln!("fedbandits: {line}");
            }
        }
        let mut cpu_units = Vec::new();
        for (((c, reps), (_, placement)), batch) in by_cell.into_iter().zip(&placements).zip(&batches) {
            let cell = &job.cells[c];
            match (placement, sel.cuda_backend(), batch) {
                (Placement::Cuda(_), Some(dev), Some(batch)) => {
                    self.progress.started(&self.job.short_label(cell), cell);
                    let progress = |n| self.progress.steps(cell, n);
                    let results =
                        super::run_built_batch(cell, &reps, batch, &self.checkpoints[cell.index], dev, &progress)
                            .map_err(|e| RunError::Backend {
                                backend: dev.name(),
                                cell: cell.id.clone(),
                                message: e.to_string(),
                            })?;
                    for r in &results {
                        self.write_unit(cell, r, dev.name())?;
                        self.progress.unit_done();
                    }
                }
                _ => cpu_units.extend(reps.iter().map(|&r| (c, r))),
            }
        }
        Ok(cpu_units)
    }

    /// Runs the CPU's units on the thread pool, `opts.batch` per task, each
    /// resumable from and writing snapshots; stops at the first error or a
    /// stop request (the running units snapshot).
    fn run_cpu(&self, cpu_units: &[Unit], opts: &RunOptions) -> Result<(), RunError> {
        let pool = thread_pool(opts.threads.unwrap_or(0))?;
        let stopped = std::sync::atomic::AtomicUsize::new(0);
        let first_error: Mutex<Option<RunError>> = Mutex::new(None);
        let fail = |e: RunError| {
            if let Ok(mut fe) = first_error.lock() {
                fe.get_or_insert(e);
            }
        };
        pool.install(|| {
            cpu_units.par_chunks(opts.batch.max(1)).for_each(|chunk| {
                for &(c, rep) in chunk {
                    if first_error.lock().map(|e| e.is_some()).unwrap_or(true)
                        || opts.stop.load(std::sync::atomic::Ordering::Relaxed)
                    {
                        return; // not started: nothing to snapshot
                    }
                    match self.run_unit(&self.job.cells[c], rep, opts) {
                        Ok(true) => self.progress.unit_done(),
                        Ok(false) => {
                            stopped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                        Err(e) => return fail(e),
                    }
                }
            });
        });
        if let Some(e) = first_error.into_inner().ok().flatten() {
            return Err(e);
        }
        if opts.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(RunError::Stopped {
                stopped: stopped.into_inner(),
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// One repetition on the CPU: runs (resuming its snapshot), writes its
    /// unit and removes the snapshot; false when it stopped on request.
    fn run_unit(&self, cell: &Cell, rep: u32, opts: &RunOptions) -> Result<bool, RunError> {
        let snap = opts.snapshot_every.map(|every| Snapshots {
            path: snapshot_path(&self.dir, cell, rep),
            every,
            stop: &opts.stop,
            resumed: self.progress.resumed(),
        });
        self.progress.started(&self.job.short_label(cell), cell);
        let progress = |n: u64| self.progress.steps(cell, n);
        let r = match run_rep_resumable(
            cell,
            self.job.seed,
            rep,
            &self.checkpoints[cell.index],
            &progress,
            snap.as_ref(),
        )? {
            RepOutcome::Done(r) => r,
            RepOutcome::Stopped => return Ok(false),
        };
        // The per-agent path always runs on the CPU.
        self.write_unit(cell, &r, "cpu")?;
        // The unit is safely written; its snapshot is no longer state.
        let _ = std::fs::remove_file(snapshot_path(&self.dir, cell, rep));
        Ok(true)
    }

    /// Assembles the shard's part file from its units, in cell then
    /// repetition order, one repetition at a time (memory: one
    /// repetition's rows and the part writer's row group), and summarizes each cell.
    fn write_part(
        &self,
        mine: &[Unit],
        found: &Directory,
        skipped: &[Unit],
        shard: Shard,
    ) -> Result<(PathBuf, Vec<CellSummary>), RunError> {
        let job = self.job;
        let part = part_path(&self.dir, shard);
        let mut cell_ids: Vec<String> = mine.iter().map(|&(c, _)| job.cells[c].id.clone()).collect();
        cell_ids.dedup();
        let units: Vec<String> = mine.iter().map(|&(c, r)| format!("{}:{r}", job.cells[c].id)).collect();
        let mut extra = vec![
            ("shard", format!("{}/{}", shard.index, shard.count)),
            ("cells", cell_ids.join(",")),
            ("units", units.join(",")),
        ];
        // The accountant's figures this process took from its cache file
        // (`merge --recheck-figures` computes them again).
        extra.extend(crate::privacy::binomial_gdp::cached_record().map(|r| ("accountant_figures", r)));
        let kv = output::metadata(job, &extra);
        let skipped: std::collections::HashSet<&Unit> = skipped.iter().collect();
        let mut writer = output::PartWriter::create(&part, output::job_schema(job)?, kv)?;
        let mut summaries = Vec::new();
        for group in mine.chunk_by(|a, b| a.0 == b.0) {
            let cell = &job.cells[group[0].0];
            // One repetition's rows at a time: written, tallied, dropped.
            let mut tally = CellTally::new(cell);
            for &(c, r) in group {
                let missing = || DirectoryError::Corrupt {
                    path: unit_path(&self.dir, cell, r),
                    message: "the unit disappeared while the run assembled its part".into(),
                };
                let path = match found.find(cell, r) {
                    Some(p) => p.to_path_buf(),
                    None => Some(unit_path(&self.dir, cell, r))
                        .filter(|p| p.exists())
                        .ok_or_else(missing)?,
                };
                let (rep, backend) = found.read(&path, job, &job.cells[c], r)?;
                let batch = output::cell_batch(job, cell, std::slice::from_ref(&rep), &backend)?;
                writer.write(&batch)?;
                tally.add(&batch);
            }
            let all_skipped = group.iter().all(|u| skipped.contains(u));
            summaries.push(tally.finish(job, cell, all_skipped));
        }
        writer.finish()?;
        federated_regret_ratios(job, &mut summaries);
        Ok((part, summaries))
    }
}

/// The folder of a part file.
fn dir_of(part: &Path) -> PathBuf {
    part.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Each cell's summary from this shard's part (read as a stream, one
/// repetition at a time, as [`Work::write_part`] summarizes units), which
/// must hold exactly `mine` in order.
fn summarize_part(job: &Job, part: &Path, mine: &[Unit]) -> Result<Vec<CellSummary>, RunError> {
    let corrupt = |message: String| DirectoryError::Corrupt {
        path: part.to_path_buf(),
        message,
    };
    let mut rows = output::unit::RowUnits::default();
    let mut tallies: Vec<(usize, CellTally)> = Vec::new();
    let mut next = 0;
    let mut failed: Option<RunError> = None;
    let mut take = |(id, rep, backend): (String, super::RepResult, String)| {
        let Some(&(c, _)) = mine.get(next).filter(|&&(c, r)| job.cells[c].id == id && r == rep.rep) else {
            failed
                .get_or_insert(corrupt(format!("its rows hold cell {id} repetition {} out of order", rep.rep)).into());
            return;
        };
        next += 1;
        let cell = &job.cells[c];
        match output::cell_batch(job, cell, std::slice::from_ref(&rep), &backend) {
            Ok(b) => {
                if tallies.last().is_none_or(|t| t.0 != c) {
                    tallies.push((c, CellTally::new(cell)));
                }
                if let Some(t) = tallies.last_mut() {
                    t.1.add(&b);
                }
            }
            Err(e) => drop(failed.get_or_insert(e.into())),
        }
    };
    output::read_parquet_stream(part, |b| {
        rows.add(&b, &mut take).map_err(|e| output::OutputError::Checksum {
            path: part.to_path_buf(),
            message: e.to_string(),
        })
    })
    .map_err(DirectoryError::from)?;
    if let Some(u) = rows.finish() {
        take(u);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if next != mine.len() {
        return Err(corrupt(format!(
            "its rows hold {next} of the shard's {} repetitions",
            mine.len()
        ))
        .into());
    }
    let mut summaries: Vec<CellSummary> = tallies
        .into_iter()
        .map(|(c, t)| t.finish(job, &job.cells[c], true))
        .collect();
    federated_regret_ratios(job, &mut summaries);
    Ok(summaries)
}

/// Part files in `dir` from a different shard layout (they would duplicate
/// cells in a glob); reported, never deleted.
fn foreign_parts(dir: &Path, shard: Shard) -> Vec<String> {
    let suffix = format!("-of-{:05}.parquet", shard.count);
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("part-") && name.ends_with(".parquet") && !name.ends_with(&suffix) {
            out.push(format!(
                "{} is from a different shard layout than {}/{}: globbing *.parquet would count its cells twice; move it away or use another --out",
                e.path().display(),
                shard.index,
                shard.count
            ));
        }
    }
    out.sort();
    out
}
