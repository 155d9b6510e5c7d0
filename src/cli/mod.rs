//! The `fedbandits` command line: `run`, `validate`, `plan`, `merge`, `audit`,
//! `list`, `bench` and `calibrate`.
//!
//! Raw arguments (clap) are resolved once into a validated [`Job`] and run
//! options; the library below never sees clap types. Exit codes: 0 success,
//! 1 runtime failure (or incomplete results for `merge`), 2 invalid job file
//! or arguments, 3 stopped by SIGTERM/SIGINT after snapshotting (rerun to
//! resume).

pub mod args;
pub mod audit;
pub mod audit_bits;
pub mod bench;
pub mod calibrate;
pub mod kernels;
pub mod occupancy_table;
pub mod reference;
pub mod shapes;
pub mod summary;
#[cfg(test)]
mod tests;
pub mod text;

pub use args::{ArgError, BenchArgs, CalibrateArgs, Cli, Command};
use text::privacy_warnings;
pub use text::{plan_text, validate_text};

use crate::backend::{self, BackendChoice};
use crate::job::{Job, JobError};
use crate::sim::runner::{RunError, RunOptions, run_job};
use clap::Parser;
use std::process::ExitCode;
use thiserror::Error;

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
            warnings,
        } => {
            // In [0, 1e6] minutes (the flag's parser): always a duration.
            let snapshot_every = Some(std::time::Duration::from_secs_f64(snapshot_every * 60.0));
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
            run_command(&job, backend, (threads, warnings), opts)
        }
        Command::Validate { job, threads } => {
            // It writes nothing: the accountant's figures it needs are
            // computed in memory, the cache file only read.
            crate::privacy::binomial_gdp::cache_read_only();
            let job = Job::load(&job)?;
            // Capped as `run` caps them (4 x the cores), so the estimate is
            // the run's.
            emit(&validate_text(&job, worker_threads(capped_threads(threads))));
            Ok(())
        }
        plan @ Command::Plan { .. } => plan_command(plan),
        Command::Merge {
            dir,
            compact,
            job,
            recheck_figures,
        } => merge_command(
            &dir,
            &crate::sim::merge::MergeOptions {
                compact,
                job,
                recheck_figures,
            },
        ),
        Command::Audit {
            job,
            out,
            trials,
            attack_trials,
            confidence,
            noise_scale,
            threads,
            bits,
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
            bits,
        ),
        Command::Calibrate(c) => {
            if let Some(file) = &c.occupancy_table {
                let file = (file.as_os_str() != "-").then_some(file.as_path());
                emit(&occupancy_table::run(file)?);
                return Ok(());
            }
            let opts = calibrate::CalibrateOptions {
                threads: worker_threads(capped_threads(c.threads)),
                federations: c.federations,
                seconds: c.seconds,
                only: c.only,
                report: c.report,
                shapes: c.shapes,
            };
            emit(&calibrate::run(&opts)?);
            Ok(())
        }
        Command::List { markdown } => {
            emit(&reference::list(markdown));
            Ok(())
        }
        Command::Bench(b) => bench_command(b),
    }
}

/// `fedbandits audit`: the audit on a pool of the requested threads, or
/// with `bits` the exact-bits test ([`audit_bits`]).
fn audit_command(
    job: &std::path::Path,
    out: Option<std::path::PathBuf>,
    settings: audit::AuditSettings,
    threads: Option<usize>,
    bits: bool,
) -> Result<(), CliError> {
    if bits {
        emit(&audit_bits::run(job, out, settings.trials, settings.confidence)?);
        return Ok(());
    }
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
        bench::micro("linalg");
        return Ok(());
    }
    let opts = bench::BenchOptions {
        threads: capped_threads(b.threads),
        rounds: b.rounds,
        only: b.only,
        federations: b.federations,
    };
    let sel = open_backend(b.backend, worker_threads(opts.threads))?;
    eprintln!("fedbandits bench: {}", sel.note);
    if b.kernels {
        bench::micro("kernels");
    }
    bench::run(&sel, &opts).map_err(CliError::Run)
}

/// The backends of `choice` for `threads` workers, a CUDA device opened for
/// `--backend cuda` passing the parity gate first ([`calibrate::gate_cuda`]).
fn open_backend(choice: BackendChoice, threads: usize) -> Result<backend::Selection, CliError> {
    let sel = backend::select(choice, threads, &crate::algo::family::kernel_sources())?;
    calibrate::gate_cuda(&sel, backend::calibration::cache_dir().ok().as_deref())?;
    Ok(sel)
}

/// The line printed while the accountant computes figures no cache held.
fn accountant_progress(n: usize, cache: Option<&std::path::Path>) {
    let kept = cache.map_or_else(
        || "not kept: no cache directory".to_string(),
        |p| format!("kept in {} for later runs", p.display()),
    );
    eprintln!("fedbandits: accounting the vector-summation protocol: {n} Binomial figure(s) computed ({kept})");
}

/// `fedbandits run`: loads the job, selects the backend, says what will
/// run and the accountant's warnings, installs the stop signals and runs.
fn run_command(
    job: &std::path::Path,
    backend: BackendChoice,
    (threads, warnings): (Option<usize>, args::WarningsShown),
    opts: RunOptions,
) -> Result<(), CliError> {
    let job = Job::load(job)?;
    let sel = open_backend(backend, worker_threads(threads))?;
    // Refused before any work when it cannot fit (an allocation that fails
    // aborts the process).
    if let Some(why) = crate::sim::memory::too_big(&job, worker_threads(threads), opts.shard) {
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
        let lines = privacy_warnings(&job);
        if warnings == args::WarningsShown::Count && !lines.is_empty() {
            eprintln!(
                "fedbandits: {} privacy warning(s) about this job's figures, not repeated here (--warnings count): \
                 `fedbandits validate {}` prints them",
                lines.len(),
                crate::sim::merge::shell_word(&job.path.display().to_string())
            );
        } else {
            for w in lines {
                eprintln!("warning: {w}");
            }
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

/// The units of `job` its results directory already holds (a run reuses
/// them), for `plan`; none when the directory is absent, or holds what a
/// run would refuse (the run says why; `plan` plans the whole job and says
/// so).
fn finished_units(job: &Job) -> std::collections::HashSet<(usize, u32)> {
    let dir = job.results_dir();
    if !dir.is_dir() {
        return Default::default();
    }
    match crate::output::directory::check_directory(&dir, job).and_then(|d| d.finished(job)) {
        Ok(done) => done,
        Err(e) => {
            eprintln!(
                "fedbandits: planning the whole job: {} cannot be reused ({e})",
                dir.display()
            );
            Default::default()
        }
    }
}

/// `fedbandits merge`: merges a job directory's parts and says what is
/// `fedbandits plan` (its arguments as parsed).
fn plan_command(plan: Command) -> Result<(), CliError> {
    let Command::Plan {
        job,
        tasks,
        threads,
        rate,
        all,
        out,
        cold_cache,
    } = plan
    else {
        return Err(CliError::Usage("plan_command was given another command".into()));
    };
    let mut job = Job::load(&job)?;
    job.output = out.clone().unwrap_or(job.output);
    let model = rate.map_or_else(
        || crate::sim::cost::TimeModel::here(threads.max(1)),
        crate::sim::cost::TimeModel::uniform,
    );
    let finished = finished_units(&job);
    emit(&plan_text(
        &job,
        &text::PlanRequest {
            tasks,
            threads,
            model: &model,
            all,
            out: out.as_deref(),
            finished: &finished,
            cold_cache,
        },
    ));
    Ok(())
}

/// missing or duplicated and how to complete it.
fn merge_command(dir: &std::path::Path, opts: &crate::sim::merge::MergeOptions) -> Result<(), CliError> {
    let r = crate::sim::merge::merge(dir, opts)?;
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
    if let Some(rerun) = &r.rerun {
        let list: Vec<String> = rerun.shards.iter().map(usize::to_string).collect();
        out += &format!(
            "missing shards: {} (of {})\nto complete (only the missing repetitions are recomputed), on this \
             machine:\n  {}\nor on Slurm (those shards as an array, then a new merge job; set the other \
             FEDBANDITS_* as for the first submission):\n  {}\n",
            list.join(","),
            rerun.count,
            rerun.commands().join("\n  "),
            rerun.submit_line()
        );
    }
    if let Some((old, left)) = &r.removed_superseded {
        out += &format!(
            "removed the parts and manifest of {}: the study this job grew from (its rows are in this job's parts)\n",
            old.display()
        );
        if !left.is_empty() {
            let names: Vec<String> = left.iter().map(|p| p.display().to_string()).collect();
            out += &format!(
                "kept {} file(s) there that fedbandits did not write (merge deletes only what it wrote): {}\n",
                left.len(),
                names.join(", ")
            );
        }
    }
    match r.compacted {
        Some((n, bytes)) => {
            out += &format!(
                "compacted: removed {n} unit file(s) ({}) from {}; the parts hold every row\n",
                crate::sim::memory::human(bytes),
                dir.join(".units").display()
            )
        }
        None if opts.compact => out += "--compact: nothing removed (the parts are not complete)\n",
        None => {}
    }
    if let Some(n) = r.figures {
        out += &format!(
            "--recheck-figures: {n} accountant figure(s) the parts took from a cache, each computed again: all equal\n"
        );
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
    // Loading a job can compute privacy figures for a minute on a cold
    // cache (the vector-summation protocol at long horizons): said, unless
    // a run was asked to be quiet.
    if !matches!(cli.command, Command::Run { quiet: true, .. }) {
        crate::privacy::binomial_gdp::on_progress(accountant_progress);
    }
    match execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
