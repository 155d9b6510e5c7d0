//! What a run may allocate, checked before it computes: the one memory
//! model that `validate`, `plan` and `run` use ([`estimate`]), against the
//! memory the process may use: the smallest of its cgroup limit (v2
//! `memory.max`, v1 `memory.limit_in_bytes`), its address-space limit
//! (`RLIMIT_AS`, from `/proc/self/limits`; a Slurm `--mem` may impose
//! either) and the machine's physical memory (`MemTotal`). Linux only;
//! elsewhere nothing is known and nothing is refused.
//!
//! The model, for a task of `units` repetition units on `threads` threads:
//!
//! - [`BASE_BYTES`]: the process (binary, allocator, the job, the part
//!   writer's buffers; a run of a one-round job peaks at 12.3 MiB resident
//!   on the development VM, small studies of each family on 2 threads at
//!   13.3-15.2 MiB);
//! - per thread, the largest federation's state, its largest snapshot (the
//!   serialized state, sealed in place, held while a snapshot is written:
//!   [`crate::algo::CellConfig::snapshot_bytes`]) and
//!   [`THREAD_BYTES`] (its stack and allocator arena in use);
//! - [`BYTES_PER_UNIT`] per unit: the directory index of finished units, the
//!   unit lists and the part's metadata;
//! - the part's assembly, which streams one repetition at a time (its rows
//!   as Arrow arrays, [`ARROW_BYTES_PER_ROW`] each, and a cell's summary
//!   tally, [`TALLY_BYTES_PER_REP`] per repetition), plus the part writer's
//!   open row group, at most [`ROW_GROUP_BYTES`] (about
//!   [`ENCODED_BYTES_PER_ROW`] a row below that); a part read back (growth
//!   after `merge --compact`, `merge` itself) streams one record batch of
//!   [`READ_BATCH_ROWS`] rows at a time.
//!
//! - or, when it is larger, the accountant's working memory while it
//!   computes figures no cache holds ([`crate::algo::CellConfig::accountant_bytes`],
//!   the vector-summation protocol's Binomial figures: up to about 120 MiB
//!   under `calibration: exact`), over every cell of the job (every task
//!   loads the whole job), beside the process: it is freed before the run
//!   starts. With the figures cached ([`crate::privacy::binomial_gdp`]) it
//!   does not occur, and the estimate is high by that much.
//!
//! The other terms are added, not maximized: an allocator keeps some of what the
//! computation freed when the assembly starts. The model bounds the
//! resident memory; [`limit`] compares it with an address-space limit too,
//! which also counts what is reserved but never touched: the thread stacks
//! are in [`THREAD_BYTES`], and under such a limit the binary keeps glibc
//! to one allocator arena (each further one would reserve 64 MiB).

use crate::job::Job;
use crate::job::shard::Shard;

/// The process's own footprint.
pub const BASE_BYTES: u64 = 12 << 20;
/// Per worker thread, beside its federation.
pub const THREAD_BYTES: u64 = 2 << 20;
/// Per repetition unit of the task.
pub const BYTES_PER_UNIT: u64 = 400;
/// Per row of a repetition being assembled or read back (95 columns of 8
/// bytes and their strings, and the repetition's curve read from its unit).
pub const ARROW_BYTES_PER_ROW: u64 = 1200;
/// Per repetition of the cell being assembled: its summary's tally.
pub const TALLY_BYTES_PER_REP: u64 = 64;
/// Rows of a record batch read from a part.
pub const READ_BATCH_ROWS: u64 = 1024;
/// Per row of the part writer's open row group.
pub const ENCODED_BYTES_PER_ROW: u64 = 200;
/// The part writer closes a row group at this size
/// ([`crate::output::PartWriter`]), twice for its encoder's buffers.
pub const ROW_GROUP_BYTES: u64 = 2 * (32 << 20);

/// What a task's memory depends on beside the job's checkpoints: its
/// repetition units, the largest federation among its cells and the most
/// repetitions it holds of one cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskShape {
    /// Repetition units of the task.
    pub units: u64,
    /// The largest memory per federation over the task's cells.
    pub per_federation: u64,
    /// The largest repetition snapshot over the task's cells.
    pub snapshot: u64,
    /// The most repetitions of one cell in the task.
    pub cell_reps: u64,
    /// The accountant's working memory on a cold cache: the largest over
    /// the job's cells (every task loads the whole job).
    pub accountant: u64,
}

/// Each of `count` shards' shape, from the same assignment as `run --shard`
/// ([`crate::job::shard::assign_units`]).
pub fn task_shapes(job: &Job, count: usize) -> Vec<TaskShape> {
    let reps = job.repetitions as usize;
    let owner = crate::job::shard::assign_units(&job.cells, job.repetitions, count);
    let accountant = job.cells.iter().map(|c| c.config.accountant_bytes()).max().unwrap_or(0);
    let shape = TaskShape {
        accountant,
        ..TaskShape::default()
    };
    let mut shapes = vec![shape; count.clamp(1, crate::job::shard::MAX_SHARDS)];
    for (c, cell) in job.cells.iter().enumerate() {
        let (per_fed, snapshot) = (cell.config.memory_per_federation(), cell.config.snapshot_bytes());
        let mut of_cell: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
        for &s in &owner[c * reps..(c + 1) * reps] {
            *of_cell.entry(s).or_default() += 1;
        }
        for (s, n) in of_cell {
            let t = &mut shapes[s];
            t.units += n;
            t.per_federation = t.per_federation.max(per_fed);
            t.snapshot = t.snapshot.max(snapshot);
            t.cell_reps = t.cell_reps.max(n);
        }
    }
    shapes
}

/// The memory a task of `job` of shape `task` on `threads` worker threads
/// needs, about (see the module doc).
pub fn estimate_task(job: &Job, threads: usize, task: TaskShape) -> u64 {
    // The longest horizon's (a `horizon` axis gives each its own).
    let checkpoints = job.checkpoint_rounds().len() as u64;
    let rows = task.units.saturating_mul(checkpoints);
    let run = BASE_BYTES
        .saturating_add((task.per_federation + task.snapshot + THREAD_BYTES).saturating_mul(threads as u64))
        .saturating_add(task.units.saturating_mul(BYTES_PER_UNIT))
        .saturating_add((checkpoints + READ_BATCH_ROWS).saturating_mul(ARROW_BYTES_PER_ROW))
        .saturating_add(task.cell_reps.saturating_mul(TALLY_BYTES_PER_REP))
        .saturating_add(rows.saturating_mul(ENCODED_BYTES_PER_ROW).min(ROW_GROUP_BYTES));
    run.max(BASE_BYTES.saturating_add(task.accountant))
}

/// The memory `run --shard` needs for `shard` of `job` on `threads`
/// threads (a shard of 1/1: the whole job, what `validate` states).
pub fn estimate(job: &Job, threads: usize, shard: Shard) -> u64 {
    let shapes = task_shapes(job, shard.count);
    estimate_task(job, threads, shapes.get(shard.index).copied().unwrap_or_default())
}

/// The largest of `tasks` shards' estimates (what `plan` books per task);
/// `accountant`: with the accountant's working memory (a task that
/// computes figures no cache holds).
pub fn largest_task(job: &Job, threads: usize, tasks: usize, accountant: bool) -> u64 {
    task_shapes(job, tasks)
        .into_iter()
        .map(|t| TaskShape {
            accountant: if accountant { t.accountant } else { 0 },
            ..t
        })
        .map(|t| estimate_task(job, threads, t))
        .max()
        .unwrap_or(BASE_BYTES)
}

/// What `fedbandits merge` of the whole job needs: (memory in bytes, a
/// time limit in seconds). It streams every part a record batch at a time
/// and keeps a census entry per unit ([`BYTES_PER_UNIT`]); it read 10^6
/// rows (10,000 units) in 0.26 s at 16.1 MiB resident on the development
/// VM, so [`MERGE_SECONDS_PER_ROW`] (15x that pace) plus a minute, and at
/// least five minutes.
pub fn merge_estimate(job: &Job) -> (u64, f64) {
    let units = job.cells.len() as u64 * u64::from(job.repetitions);
    let rows: u64 = job
        .cells
        .iter()
        .map(|c| job.checkpoint_rounds_of(c).len() as u64 * u64::from(job.repetitions))
        .sum();
    let bytes = BASE_BYTES
        .saturating_add(units.saturating_mul(BYTES_PER_UNIT))
        .saturating_add(READ_BATCH_ROWS * ARROW_BYTES_PER_ROW);
    (bytes, (60.0 + rows as f64 * MERGE_SECONDS_PER_ROW).max(300.0))
}

/// Seconds per row a merge job is given (module doc of [`merge_estimate`]).
pub const MERGE_SECONDS_PER_ROW: f64 = 4e-6;

/// The smallest memory limit of this process and where it comes from; None
/// when none can be read.
pub fn limit() -> Option<(u64, &'static str)> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let mut found: Vec<(u64, &'static str)> = Vec::new();
    for (path, what) in [
        ("/sys/fs/cgroup/memory.max", "the cgroup's memory.max"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "the cgroup's memory limit",
        ),
    ] {
        if let Some(v) = read(path).and_then(|t| t.trim().parse::<u64>().ok()) {
            found.push((v, what));
        }
    }
    if let Some(v) = read("/proc/self/limits").and_then(|t| address_space(&t)) {
        found.push((v, "the address-space limit (ulimit -v)"));
    }
    if let Some(v) = read("/proc/meminfo").and_then(|t| mem_total(&t)) {
        found.push((v, "the machine's physical memory"));
    }
    found.into_iter().min_by_key(|f| f.0)
}

/// The soft `Max address space` of `/proc/self/limits` (None: unlimited).
fn address_space(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// This process's peak resident memory so far (`VmHWM` of
/// `/proc/self/status`, in bytes; None where there is none): what a task
/// prints at its end, to set against what it booked.
pub fn peak_resident() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Why `shard` of `job` on `threads` threads cannot fit in this process's
/// memory (None: it fits, or no limit is known).
pub fn too_big(job: &Job, threads: usize, shard: Shard) -> Option<String> {
    let task = task_shapes(job, shard.count)
        .get(shard.index)
        .copied()
        .unwrap_or_default();
    let need = estimate_task(job, threads, task);
    let (have, what) = limit()?;
    let whose = if shard.count > 1 {
        format!(
            "shard {}/{} of the job ({} unit(s))",
            shard.index, shard.count, task.units
        )
    } else {
        "the job".to_string()
    };
    (need > have).then(|| {
        // The terms, adding up to the total (module doc): per thread the
        // largest federation's state, its snapshot and the thread's own
        // buffers; the rest the process, the part's assembly and the
        // tallies, or the accountant's tables when those are larger.
        let per_thread = task.per_federation + task.snapshot + THREAD_BYTES;
        let threads_total = per_thread.saturating_mul(threads as u64);
        let terms = if need == BASE_BYTES.saturating_add(task.accountant) && task.accountant > threads_total {
            format!(
                "the privacy accountant's tables {} plus the process {}",
                human(task.accountant),
                human(BASE_BYTES)
            )
        } else {
            format!(
                "per thread {} = {} of federation state + {} of its snapshot + {} of buffers, x {threads} thread(s) \
                 = {}; plus {} for the process, the part's assembly and the tallies",
                human(per_thread),
                human(task.per_federation),
                human(task.snapshot),
                human(THREAD_BYTES),
                human(threads_total),
                human(need.saturating_sub(threads_total))
            )
        };
        format!(
            "{whose} needs about {} ({terms}), more than the {} this process may use ({what}); run with fewer \
             --threads, more shards, shrink the largest cell (d, k, m or the horizon's tree), or ask for more memory \
             (Slurm --mem)",
            human(need),
            human(have)
        )
    })
}

/// Bytes in the largest binary unit that keeps the number above 1.
pub fn human(b: u64) -> String {
    let b = b as f64;
    if b >= 1024f64.powi(3) {
        format!("{:.2} GiB", b / 1024f64.powi(3))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_from_the_kernel_texts() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         6000000000           unlimited            bytes\n";
        assert_eq!(address_space(limits), Some(6_000_000_000));
        assert_eq!(
            address_space("Max address space         unlimited            unlimited            bytes"),
            None
        );
        assert_eq!(
            mem_total("MemTotal:       24683656 kB\nMemFree: 1 kB\n"),
            Some(24_683_656 * 1024)
        );
        assert_eq!(human(46 * 1024 * 1024 * 1024), "46.00 GiB");
    }
}
