//! The `fedbandits` command line: `run`, `validate`, `list`, `bench`.
//!
//! Raw arguments (clap) are resolved once into a validated [`Job`] and run
//! options; the library below never sees clap types. Exit codes: 0 success,
//! 1 runtime failure (or incomplete results for `merge`), 2 invalid job file
//! or arguments, 3 stopped by SIGTERM/SIGINT after snapshotting (rerun to
//! resume).

pub mod audit;
pub mod bench;
pub mod calibrate;
pub mod summary;

use crate::algo::family::FAMILIES;
use crate::algo::params::PARAMS;
use crate::backend::{self, BackendChoice};
use crate::job::shard::Shard;
use crate::job::{Job, JobError};
use crate::sim::runner::{RunError, RunOptions, run_job};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use thiserror::Error;

/// Simulate (differentially private) federated bandits at scale.
#[derive(Debug, Parser)]
#[command(name = "fedbandits", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a job file: expand its grid, simulate every cell, write Parquet.
    Run {
        /// The job file (YAML).
        job: PathBuf,
        /// Output root directory (overrides the job's `output`); results go
        /// to OUT/<job name>/.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Backend: auto, cpu, or cuda. auto runs a cell on a CUDA device only
        /// where a measurement has shown the GPU faster for its batch size
        /// (none yet: on an H100, 3.4e6 vs 4.0e6 agent-steps/s at 64
        /// federations, 1.7e6 vs 4.9e6 at 2048); cuda forces the GPU.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
        /// Worker threads (default: all cores; at most 4 x the cores).
        /// Results do not depend on it.
        #[arg(long, value_parser = at_least_one)]
        threads: Option<usize>,
        /// Run only shard I of N (0-based, e.g. 3/10); cells are assigned
        /// deterministically, balanced by agent-steps.
        #[arg(long, default_value = "0/1")]
        shard: Shard,
        /// Federations per work unit (default 1). Results do not depend on it.
        #[arg(long, default_value_t = 1, value_parser = at_least_one)]
        batch: usize,
        /// Snapshot each running repetition at most every this many minutes
        /// (0: at every check, every 256 rounds). SIGTERM/SIGINT snapshot and
        /// stop (exit code 3); rerunning resumes bit-identically.
        #[arg(long, default_value_t = 10.0)]
        snapshot_every: f64,
        /// No progress bar (and no progress lines).
        #[arg(long, short)]
        quiet: bool,
        /// Without a terminal (a Slurm .out file, a redirect): a progress
        /// line every this many seconds (units, agent-steps, rate, a
        /// cost-weighted ETA, the cell being computed); 0: only at the start
        /// and the end.
        #[arg(long, default_value_t = 60.0, value_parser = seconds)]
        log_every: f64,
    },
    /// Check a job file and print its expanded grid, totals and memory
    /// estimate; writes nothing.
    Validate {
        /// The job file (YAML).
        job: PathBuf,
        /// Worker threads assumed for the memory estimate (default: all cores).
        #[arg(long, value_parser = at_least_one)]
        threads: Option<usize>,
    },
    /// Plan a sharded run: the cost-balanced shard table, total agent-steps,
    /// memory per task and a suggested Slurm `--array` and time limit.
    Plan {
        /// The job file (YAML).
        job: PathBuf,
        /// Number of array tasks (shards), at most 1000000 (the most
        /// repetition units a job can have).
        #[arg(long, value_parser = task_count)]
        tasks: usize,
        /// Worker threads per task (for memory and time).
        #[arg(long, default_value_t = 2, value_parser = at_least_one)]
        threads: usize,
        /// Agent-steps per second per thread of each family's reference
        /// workload (measure with `fedbandits bench`; linear: d = 10,
        /// K = 100). Each cell's time is its agent-steps weighted by the
        /// engine's time model (linear cells cost more with K and d: d = 128 is
        /// about 30x d = 10). Default: rates measured on the 2-core
        /// development VM, 2e5 (linear), 1e6 (gossip), 2.5e6 (combinatorial).
        #[arg(long, value_parser = positive_rate)]
        rate: Option<f64>,
        /// Print every shard's line (default: the first 10 and the last 5).
        #[arg(long)]
        all: bool,
        /// Output root directory, as for `run --out` (only changes the
        /// `results:` line).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a job's results directory: every (cell, repetition) present
    /// once; writes _manifest.yaml, lists what is missing and the command that
    /// reruns only that. Never deletes data. Exit 1 when incomplete.
    Merge {
        /// The job's results directory (e.g. results/<job>).
        dir: PathBuf,
    },
    /// Audit the privacy of a job's private cells empirically: run each
    /// mechanism on neighbouring inputs many times, test, and bound the
    /// epsilon it provides from below (Clopper-Pearson); attack the sync
    /// schedule of the linear algorithms. Writes <out>/<job>/_audit/audit.parquet.
    Audit {
        /// The job file (YAML); see jobs/audit_*.yaml.
        job: PathBuf,
        /// Output root directory (overrides the job's `output`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Trials per world for each mechanism (twice: half choose the
        /// test's threshold, half are counted).
        #[arg(long, default_value_t = 100_000)]
        trials: u64,
        /// Trials per world for the schedule attack (each a full run).
        #[arg(long, default_value_t = 2_000)]
        attack_trials: u64,
        /// Confidence of the lower bounds.
        #[arg(long, default_value_t = 0.99)]
        confidence: f64,
        /// Multiply each mechanism's noise by this (1: as calibrated; the
        /// auditor's self-test: 0.25 must be caught).
        #[arg(long, default_value_t = 1.0)]
        noise_scale: f64,
        /// Worker threads (default: all cores; at most 4 x the cores).
        #[arg(long, value_parser = at_least_one)]
        threads: Option<usize>,
    },
    /// List algorithms, environments and parameters.
    List,
    /// Run the canonical benchmark workloads and print agent-steps per second.
    Bench(BenchArgs),
    /// Measure every bench workload on every backend that works here (the
    /// CPU; CUDA when a device opens and agrees with the CPU bit for bit)
    /// at several batch sizes, print the table and record it as this
    /// machine's calibration, which `--backend auto` follows.
    Calibrate(CalibrateArgs),
}

/// `fedbandits bench`'s options.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Backend: auto, cpu or cuda.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Worker threads (default: all cores; at most 4 x the cores).
    #[arg(long, value_parser = at_least_one)]
    pub threads: Option<usize>,
    /// Rounds per federation (more rounds: steadier numbers).
    #[arg(long, default_value_t = 200)]
    pub rounds: u64,
    /// Run only workloads whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Federations per workload (default: each workload's own, 64 for
    /// d = 10); a GPU needs thousands to fill.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub federations: Option<u32>,
    /// Also time the per-step kernels (one thread, ns per call).
    #[arg(long)]
    pub kernels: bool,
    /// Print the faer crossover table (hand-written vs faer inverse and
    /// scoring, d = 4..256, one thread) and exit.
    #[arg(long)]
    pub linalg: bool,
}

/// `fedbandits calibrate`'s options.
#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Worker threads (default: all cores); part of the machine's key.
    #[arg(long, value_parser = at_least_one)]
    pub threads: Option<usize>,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32, 1024, 4096])]
    pub federations: Vec<u32>,
    /// Seconds per measurement (at least one round each).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Only workloads whose name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Also write the table as a Markdown report.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Errors reaching the command line.
#[derive(Debug, Error)]
pub enum CliError {
    /// Invalid job file (exit code 2).
    #[error(transparent)]
    Job(#[from] JobError),
    /// Backend selection failed (exit code 2).
    #[error(transparent)]
    Backend(#[from] backend::BackendError),
    /// The run failed (exit code 1).
    #[error(transparent)]
    Run(#[from] RunError),
    /// merge failed (exit code 1).
    #[error(transparent)]
    Merge(#[from] crate::sim::merge::MergeError),
    /// merge found missing or duplicate units (exit code 1).
    #[error("results are incomplete or duplicated (see above)")]
    Incomplete,
    /// A command-line value out of range (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// An audit found a lower bound above an upper-bound column (exit
    /// code 1); `report` is the audit's table, printed first.
    #[error("{report}audit failed: a privacy figure is below the audit's lower bound:\n{failures}")]
    AuditFailed {
        /// The audit's output.
        report: String,
        /// One line per failed cell.
        failures: String,
    },
}

impl CliError {
    /// Process exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Job(_)
            | CliError::Backend(_)
            | CliError::Usage(_)
            | CliError::Run(RunError::CellUnsupported { .. }) => ExitCode::from(2),
            CliError::Run(RunError::Stopped { .. }) => ExitCode::from(3),
            CliError::Run(_) | CliError::Merge(_) | CliError::Incomplete | CliError::AuditFailed { .. } => {
                ExitCode::from(1)
            }
        }
    }
}

/// Executes a parsed command line.
pub fn execute(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Run {
            job,
            out,
            backend,
            threads,
            shard,
            batch,
            snapshot_every,
            quiet,
            log_every,
        } => {
            let snapshot_every = (snapshot_every.is_finite() && snapshot_every >= 0.0)
                .then(|| std::time::Duration::from_secs_f64(snapshot_every * 60.0));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let threads_used = capped_threads(threads);
            let opts = RunOptions {
                shard,
                threads: threads_used,
                quiet,
                out,
                batch,
                snapshot_every,
                stop,
                log_every: (log_every > 0.0).then(|| std::time::Duration::from_secs_f64(log_every)),
            };
            run_command(&job, backend, threads, opts)
        }
        Command::Validate { job, threads } => {
            let job = Job::load(&job)?;
            // Capped as `run` caps them (4 x the cores), so the estimate is
            // the run's.
            emit(&validate_text(&job, worker_threads(capped_threads(threads))));
            Ok(())
        }
        Command::Plan {
            job,
            tasks,
            threads,
            rate,
            all,
            out,
        } => {
            let mut job = Job::load(&job)?;
            job.output = out.unwrap_or(job.output);
            emit(&plan_text(&job, tasks.max(1), threads.max(1), rate, all));
            Ok(())
        }
        Command::Merge { dir } => merge_command(&dir),
        Command::Audit {
            job,
            out,
            trials,
            attack_trials,
            confidence,
            noise_scale,
            threads,
        } => audit_command(
            &job,
            out,
            audit::AuditSettings {
                trials,
                attack_trials,
                confidence,
                noise_scale,
            },
            threads,
        ),
        Command::Calibrate(c) => {
            let opts = calibrate::CalibrateOptions {
                threads: worker_threads(capped_threads(c.threads)),
                federations: c.federations,
                seconds: c.seconds,
                only: c.only,
                report: c.report,
            };
            emit(&calibrate::run(&opts)?);
            Ok(())
        }
        Command::List => {
            emit(&list_text());
            Ok(())
        }
        Command::Bench(b) => bench_command(b),
    }
}

/// `fedbandits audit`: the audit on a pool of the requested threads.
fn audit_command(
    job: &std::path::Path,
    out: Option<std::path::PathBuf>,
    settings: audit::AuditSettings,
    threads: Option<usize>,
) -> Result<(), CliError> {
    let threads = capped_threads(threads);
    let pool = crate::sim::runner::thread_pool(threads.unwrap_or(0))?;
    let text = pool.install(|| audit::run(job, out, settings))?;
    emit(&text);
    Ok(())
}

/// `fedbandits bench`: the faer crossover table alone when asked, else the
/// backend, the kernel timings when asked, then the workloads.
fn bench_command(b: BenchArgs) -> Result<(), CliError> {
    if b.linalg {
        bench::linalg_crossover();
        return Ok(());
    }
    let opts = bench::BenchOptions {
        threads: capped_threads(b.threads),
        rounds: b.rounds,
        only: b.only,
        federations: b.federations,
    };
    let sel = backend::select(b.backend, worker_threads(opts.threads))?;
    eprintln!("fedbandits bench: {}", sel.note);
    if b.kernels {
        bench::kernels(sel.cpu_backend());
    }
    bench::run(&sel, &opts).map_err(CliError::Run)
}

/// `fedbandits run`: loads the job, selects the backend, says what will
/// run and the accountant's warnings, installs the stop signals and runs.
fn run_command(
    job: &std::path::Path,
    backend: BackendChoice,
    threads: Option<usize>,
    opts: RunOptions,
) -> Result<(), CliError> {
    let job = Job::load(job)?;
    let sel = backend::select(backend, worker_threads(threads))?;
    // Refused before any work when it cannot fit (an allocation that fails
    // aborts the process).
    if let Some(why) = crate::sim::memory::too_big(&job, worker_threads(threads)) {
        return Err(CliError::Usage(format!("{}: {why}", job.path.display())));
    }
    if !opts.quiet {
        eprintln!(
            "fedbandits: job {}: {} cell(s) x {} repetition(s), {:.3e} agent-steps",
            job.name,
            job.cells.len(),
            job.repetitions,
            job.total_agent_steps() as f64,
        );
        eprintln!("fedbandits: {}", sel.note);
        let units = job.cells.len() as u64 * u64::from(job.repetitions);
        if opts.shard.index as u64 >= units {
            eprintln!(
                "fedbandits: shard {}/{} gets no work: the job has {units} repetition unit(s), one per shard at most \
                 (an empty part is written so the layout is complete)",
                opts.shard.index, opts.shard.count
            );
        }
        for w in privacy_warnings(&job) {
            eprintln!("warning: {w}");
        }
    }
    // A misspecified model decides a long run's result: said even with
    // --quiet.
    for w in job.model_warning_lines() {
        eprintln!("warning: {w}");
    }
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // Failing to install a handler only loses graceful stopping.
        let _ = signal_hook::flag::register(sig, opts.stop.clone());
    }
    let report = run_job(&job, &sel, &opts)?;
    summary::print_report(&report);
    Ok(())
}

/// `fedbandits merge`: merges a job directory's parts and says what is
/// missing or duplicated and how to complete it.
fn merge_command(dir: &std::path::Path) -> Result<(), CliError> {
    let r = crate::sim::merge::merge(dir)?;
    let mut out = format!(
        "merge {}: {} part file(s), {}/{} repetition units present, {} missing, {} duplicated; manifest {}\n",
        dir.display(),
        r.parts.len(),
        r.present,
        r.expected,
        r.missing.len(),
        r.duplicates.len(),
        r.manifest.display()
    );
    for (c, rep) in r.missing.iter().take(20) {
        out += &format!("  missing: cell {c} repetition {rep}\n");
    }
    if r.missing.len() > 20 {
        out += &format!("  ... and {} more (see the manifest)\n", r.missing.len() - 20);
    }
    for (c, rep, files) in r.duplicates.iter().take(20) {
        out += &format!("  duplicate: cell {c} repetition {rep} in {files:?}\n");
    }
    if !r.duplicates.is_empty() {
        out += "the directory mixes shard layouts (or holds copied files): keep one layout's part files, \
                move the others away, and merge again; analysis.load.scan refuses it until then\n";
    }
    if let Some(cmd) = &r.rerun {
        out += &format!("to complete (only the missing repetitions are recomputed):\n  {cmd}\n");
    }
    emit(&out);
    if r.missing.is_empty() && r.duplicates.is_empty() {
        Ok(())
    } else {
        Err(CliError::Incomplete)
    }
}

/// The text of `fedbandits list`: every family's algorithms, environments,
/// parameters and columns, then every parameter.
fn list_text() -> String {
    let mut out = String::new();
    for f in FAMILIES {
        out += &format!("family {}: {}\n  algorithms:\n", f.name, f.doc);
        for (n, d) in f.algorithms {
            out += &format!("    {n:<20} {d}\n");
        }
        out += "  environments:\n";
        for (n, d) in f.environments {
            out += &format!("    {n:<20} {d}\n");
        }
        out += &format!("  parameters (output columns): {}\n", f.parameters().join(", "));
        out += &format!("  output columns of this family only: {}\n", f.columns.join(", "));
        if !f.paper_claims.is_empty() {
            out += "  paper_claimed_epsilon (what the paper's own argument claims for the noise used; a claim, not a \
                    bound):\n";
            for (algo, what) in f.paper_claims {
                out += &format!("    {algo:<20} {what}\n");
            }
        }
    }
    out += "a job may list algorithms and environments of several families: each algorithm runs on the listed environments of its own family\n";
    out += "parameters (in params: or grid:):\n";
    for p in PARAMS {
        out += &format!(
            "  {:<17} {}; default {}; {}\n",
            p.name,
            p.kind.describe(),
            p.default,
            p.doc
        );
        out += &format!("  {:<17} used by: {}\n", "", p.used_by.join(", "));
    }
    out
}

fn hms(secs: f64) -> String {
    let s = secs.ceil().max(0.0) as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// The text of `fedbandits validate`: the expanded grid, totals, memory
/// estimate for `threads` worker threads, results directory and the
/// accountant's warnings.
pub fn validate_text(job: &Job, threads: usize) -> String {
    let mut out = job.to_string();
    let per_fed = crate::sim::max_memory_per_federation(job);
    let rows = job.cells.len() as u64 * u64::from(job.repetitions) * job.checkpoint_rounds().len() as u64;
    out += &format!(
        "totals: {} cells, {} repetitions each, {} federations, {} agent-steps ({:.3e})\n",
        job.cells.len(),
        job.repetitions,
        job.cells.len() as u64 * u64::from(job.repetitions),
        job.total_agent_steps(),
        job.total_agent_steps() as f64
    );
    out += &format!(
        "memory: up to {} per federation, about {} with {threads} threads; output about {rows} rows\n",
        human_bytes(per_fed),
        human_bytes(crate::sim::memory::estimate(job, threads))
    );
    if let Some(why) = crate::sim::memory::too_big(job, threads) {
        out += &format!("warning: run would refuse: {why}\n");
    }
    out += &format!("results: {}\n", job.results_dir().display());
    out += &privacy_table(job);
    for w in privacy_warnings(job).into_iter().chain(job.model_warning_lines()) {
        out += &format!("warning: {w}\n");
    }
    out
}

/// Each private cell's figures before anything runs (the accountant
/// depends only on the configuration): target, `acct_epsilon` (null*, with
/// the reason below), mu, releases per observation, noise multiplier, the
/// zCDP conversion, basic composition and the paper's claim; at most 40
/// lines; then each neighbouring relation and each reason for a null
/// figure once, with the cells it concerns.
fn privacy_table(job: &Job) -> String {
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let mut relations: Vec<(String, Vec<usize>)> = Vec::new();
    let mut nulls: Vec<(String, Vec<usize>)> = Vec::new();
    let note = |list: &mut Vec<(String, Vec<usize>)>, text: &str, cell: usize| match list
        .iter_mut()
        .find(|(t, _)| t == text)
    {
        Some((_, cells)) => cells.push(cell),
        None => list.push((text.to_string(), vec![cell])),
    };
    let mut rows = Vec::new();
    for c in &job.cells {
        let Some(a) = c.config.accounting() else { continue };
        let (te, td) = c.config.target();
        note(&mut relations, &a.relation, c.index);
        if let Some(why) = &a.epsilon_null {
            note(&mut nulls, why, c.index);
        }
        // A run without a figure shows its sums' figure where it has one.
        let eps = match (a.epsilon_null.is_some(), a.epsilon_sums) {
            (false, _) => fmt(a.epsilon),
            (true, Some(s)) => format!("null* ({s:.4})"),
            (true, None) => "null*".to_string(),
        };
        rows.push(format!(
            "  {:>4} {:>8} {:>7} {:>15} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8}  {}\n",
            format!("[{}]", c.index),
            fmt(te),
            td.map_or("-".to_string(), |d| format!("{d:.0e}")),
            eps,
            fmt(a.mu),
            a.releases_per_observation,
            fmt(a.noise_multiplier),
            fmt(a.epsilon_zcdp),
            fmt(a.basic.map(|b| b.0)),
            fmt(a.paper_claimed),
            job.short_label(c)
        ));
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "privacy per cell (acct_epsilon: exact for everything released, the figure to report; mu: its \
         Gaussian-DP parameter; null* (x): no figure for the run, x for its noisy sums alone; the others looser \
         or claims):\n  {:>4} {:>8} {:>7} {:>15} {:>8} {:>8} {:>10} \
         {:>10} {:>8} {:>8}  cell\n",
        "#", "target", "delta", "acct_epsilon", "mu", "releases", "noise_mult", "zcdp", "basic", "claimed"
    );
    for r in rows.iter().take(40) {
        out += r;
    }
    if rows.len() > 40 {
        out += &format!("  ... ({} more private cells)\n", rows.len() - 40);
    }
    let cells = |v: &[usize]| v.iter().map(|c| format!("[{c}]")).collect::<Vec<_>>().join(" ");
    for (text, v) in &relations {
        out += &format!("  neighbours of {}: {text}\n", cells(v));
    }
    for (why, v) in &nulls {
        out += &format!("  * null acct_epsilon, cells {}: {why}\n", cells(v));
    }
    out
}

/// The text of `fedbandits plan`. Times come from the engine's time model
/// ([`crate::sim::cost`]): each cell's agent-steps weighted by its relative
/// cost, at `rate` agent-steps/s per thread for each family's reference
/// workload (default: the family's measured rate).
pub fn plan_text(job: &Job, tasks: usize, threads: usize, rate: Option<f64>, all: bool) -> String {
    use crate::sim::cost;
    let reps = job.repetitions as usize;
    let owner = crate::job::shard::assign_units(&job.cells, job.repetitions, tasks);
    // Per shard: (units, agent-steps, thread-seconds, longest unit's).
    let mut loads = vec![(0usize, 0u64, 0.0f64, 0.0f64); tasks.max(1)];
    for (u, &s) in owner.iter().enumerate() {
        let cell = &job.cells[u / reps];
        let steps = cell.agent_steps_per_rep();
        let secs = cost::thread_seconds(&cell.config, steps, rate);
        loads[s].0 += 1;
        loads[s].1 += steps;
        loads[s].2 += secs;
        loads[s].3 = loads[s].3.max(secs);
    }
    let units = job.cells.len() * reps;
    let total = job.total_agent_steps();
    let mut sorted: Vec<u64> = loads.iter().map(|l| l.1).collect();
    sorted.sort_unstable();
    let max = sorted.last().copied().unwrap_or(0);
    let mean = total as f64 / tasks as f64;
    let per_fed = crate::sim::max_memory_per_federation(job);
    // Wall time of a task: its thread-seconds over its threads, but no less
    // than its longest unit (a repetition runs on one thread).
    let wall = |l: &(usize, u64, f64, f64)| (l.2 / threads as f64).max(l.3);
    let longest = loads.iter().map(wall).fold(0.0, f64::max);
    let total_secs: f64 = loads.iter().map(|l| l.2).sum();
    let limit = (longest * 1.5).max(600.0);
    let mut out = format!(
        "job {}: {} cells x {} repetitions = {units} units, {total} agent-steps ({:.3e})\n",
        job.name,
        job.cells.len(),
        job.repetitions,
        total as f64
    );
    out += &format!(
        "tasks {tasks}: agent-steps per task min {:.3e} median {:.3e} max {:.3e} (max / mean {:.3}); {} tasks get no work\n",
        sorted[0] as f64,
        sorted[sorted.len() / 2] as f64,
        max as f64,
        if mean > 0.0 { max as f64 / mean } else { 0.0 },
        loads.iter().filter(|l| l.0 == 0).count()
    );
    out += &format!(
        "memory per task: about {} ({threads} threads x {} per federation)\n",
        human_bytes(per_fed.saturating_mul(threads as u64).saturating_add(64 << 20)),
        human_bytes(per_fed)
    );
    let rates = match rate {
        Some(r) => format!("{r:.2e} agent-steps/s per thread at each family's reference workload"),
        None => "the CPU time model (linear d = 10, K = 100: 2e5 agent-steps/s per thread)".to_string(),
    };
    out += &format!(
        "time per task at {rates}: longest {} (total {:.1} core-hours, CPU; no GPU rate measured)\n",
        hms(longest),
        total_secs / 3600.0
    );
    out += &format!("results: {}\n", job.results_dir().display());
    out += &format!(
        "suggested: FEDBANDITS_TASKS={tasks} slurm/submit.sh {}   (sbatch --array=0-{} --cpus-per-task={threads} --time={})\n",
        job.path.display(),
        tasks - 1,
        hms(limit)
    );
    out += "shard  units      agent-steps  est. time\n";
    for (i, l) in loads.iter().enumerate() {
        let (u, steps) = (l.0, l.1);
        if all || i < 10 || i + 5 >= loads.len() {
            out += &format!("{i:>5}  {u:>5}  {steps:>15}  {}\n", hms(wall(l)));
        } else if i == 10 {
            out += "  ...  (--all prints every shard)\n";
        }
    }
    out
}

fn human_bytes(b: u64) -> String {
    crate::sim::memory::human(b)
}

/// The accountant's warnings over a job's cells, each once, with how many
/// cells it concerns and the first of them.
fn privacy_warnings(job: &Job) -> Vec<String> {
    let mut seen: Vec<(String, usize, String)> = Vec::new();
    for cell in &job.cells {
        let Some(a) = cell.config.accounting() else { continue };
        for w in a.warnings {
            match seen.iter_mut().find(|(s, _, _)| *s == w) {
                Some((_, n, _)) => *n += 1,
                None => seen.push((w, 1, job.short_label(cell))),
            }
        }
    }
    seen.into_iter()
        .map(|(w, n, first)| {
            let cells = if n == 1 {
                "cell".to_string()
            } else {
                format!("{n} cells, e.g.")
            };
            format!("privacy ({cells} {first}): {w}")
        })
        .collect()
}

/// Writes to stdout; a closed pipe (`fedbandits list | head`) is not an
/// error, any other write failure (a full disk) ends the process with exit
/// code 1 and the reason.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// A count flag's value: an integer >= 1.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        Ok(_) => Err("must be a positive number of agent-steps per second, e.g. 2e5".into()),
        Err(e) => Err(format!("expected a number of agent-steps per second, e.g. 2e5 ({e})")),
    }
}

/// A number of seconds: finite and >= 0.
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e9).contains(&v) => Ok(v),
        _ => Err(format!("expected seconds, a number in [0, 1e9] (0: none), got '{s}'")),
    }
}

/// A shard count: a whole number in [1, MAX_SHARDS].
fn task_count(s: &str) -> Result<usize, String> {
    let max = crate::job::shard::MAX_SHARDS;
    match at_least_one(s)? {
        n if n > max => Err(format!(
            "{n} tasks exceed {max}, the most repetition units a job can have (a task beyond a job's units gets no \
             work); use at most the job's units (`fedbandits validate` prints them)"
        )),
        n => Ok(n),
    }
}

fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("must be at least 1".into()),
        Err(e) => Err(format!("expected a whole number >= 1 ({e})")),
    }
}

/// The worker threads a run with `--threads` (None: all cores) uses, capped
/// as [`capped_threads`] caps them (silently: the cap warns once).
pub fn worker_threads(threads: Option<usize>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    threads.map_or(cores, |t| t.clamp(1, 4 * cores))
}

/// `--threads`, capped at 4 x the machine's cores (more threads only add
/// contention; thousands exhaust the process's limits), with a warning.
pub fn capped_threads(threads: Option<usize>) -> Option<usize> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    threads.map(|t| {
        if t > 4 * cores {
            eprintln!("warning: --threads {t} capped at {} (4 x the {cores} cores)", 4 * cores);
            4 * cores
        } else {
            t
        }
    })
}

/// Parses arguments and runs; the binary's whole `main`.
pub fn main_with_args() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
