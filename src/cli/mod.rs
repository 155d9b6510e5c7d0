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
pub mod text;

use text::{list_text, privacy_warnings};
pub use text::{plan_text, validate_text};

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
        /// workload (its first `fedbandits bench` workload; linear: d = 10,
        /// K = 100). Each cell's time is its agent-steps weighted by the
        /// engine's time model (linear cells cost more with K and d: d = 128 is
        /// about 30x d = 10). Default: this machine's `fedbandits calibrate`
        /// for --threads, else rates measured on the 2-core development VM,
        /// 5e5 (linear), 1.6e6 (gossip), 3.5e6 (combinatorial).
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
        /// When the parts are complete (every repetition once, checksums
        /// verified), remove the job's unit files from .units/ (a later run
        /// that needs them, e.g. of a job grown from this one, writes them
        /// back from the parts). Refused, removing nothing, otherwise.
        #[arg(long)]
        compact: bool,
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
            let rates = rate.map_or_else(
                || crate::sim::cost::Rates::here(threads.max(1)),
                crate::sim::cost::Rates::uniform,
            );
            emit(&plan_text(&job, tasks.max(1), threads.max(1), &rates, all));
            Ok(())
        }
        Command::Merge { dir, compact } => merge_command(&dir, compact),
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
fn merge_command(dir: &std::path::Path, compact: bool) -> Result<(), CliError> {
    let r = crate::sim::merge::merge(dir, compact)?;
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
    match r.compacted {
        Some((n, bytes)) => {
            out += &format!(
                "compacted: removed {n} unit file(s) ({}) from {}; the parts hold every row\n",
                crate::sim::memory::human(bytes),
                dir.join(".units").display()
            )
        }
        None if compact => out += "--compact: nothing removed (the parts are not complete)\n",
        None => {}
    }
    emit(&out);
    if r.missing.is_empty() && r.duplicates.is_empty() {
        Ok(())
    } else {
        Err(CliError::Incomplete)
    }
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

/// A command-line value out of its range (clap prints it after the flag).
#[derive(Debug, Error)]
pub enum ArgError {
    /// `--rate`: not a positive number.
    #[error("must be a positive number of agent-steps per second, e.g. 2e5")]
    NotPositive,
    /// A number that does not parse.
    #[error("expected {what} ({source})")]
    NotANumber {
        /// What was expected.
        what: &'static str,
        /// Why it does not parse.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Seconds out of [0, 1e9].
    #[error("expected seconds, a number in [0, 1e9] (0: none), got '{0}'")]
    Seconds(String),
    /// A count of 0.
    #[error("must be at least 1")]
    Zero,
    /// More tasks than a job can have units.
    #[error(
        "{0} tasks exceed {max}, the most repetition units a job can have (a task beyond a job's units gets no work); \
         use at most the job's units (`fedbandits validate` prints them)",
        max = crate::job::shard::MAX_SHARDS
    )]
    TooManyTasks(usize),
}

/// `--rate`: a positive, finite number.
fn positive_rate(s: &str) -> Result<f64, ArgError> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        Ok(_) => Err(ArgError::NotPositive),
        Err(e) => Err(ArgError::NotANumber {
            what: "a number of agent-steps per second, e.g. 2e5",
            source: Box::new(e),
        }),
    }
}

/// A number of seconds: finite and >= 0.
fn seconds(s: &str) -> Result<f64, ArgError> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e9).contains(&v) => Ok(v),
        _ => Err(ArgError::Seconds(s.to_owned())),
    }
}

/// A shard count: a whole number in [1, MAX_SHARDS].
fn task_count(s: &str) -> Result<usize, ArgError> {
    match at_least_one(s)? {
        n if n > crate::job::shard::MAX_SHARDS => Err(ArgError::TooManyTasks(n)),
        n => Ok(n),
    }
}

/// A whole number >= 1.
fn at_least_one(s: &str) -> Result<usize, ArgError> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err(ArgError::Zero),
        Err(e) => Err(ArgError::NotANumber {
            what: "a whole number >= 1",
            source: Box::new(e),
        }),
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
