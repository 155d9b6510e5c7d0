//! The command line's grammar: the clap definitions of every command and
//! flag, and the value parsers that refuse an out-of-range value with the
//! allowed range ([`ArgError`]). Dispatch is [`super::execute`]; what the
//! commands print is in [`super::text`] and [`super::summary`].

use crate::backend::BackendChoice;
use crate::job::shard::Shard;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
        /// where this machine's calibration (`fedbandits calibrate`) measured
        /// the GPU faster for its workload and batch size (on an H100: about
        /// 10x 16 CPU cores for d = 10 linear workloads from 1024
        /// federations, README "GPU"); cuda forces the GPU.
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
        #[arg(long, default_value_t = 10.0, value_parser = minutes)]
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
        /// The privacy warnings about the job's figures at the start: each
        /// in full, or one line with their count (`fedbandits validate JOB`
        /// prints them in full; slurm/fedbandits.sbatch passes `count` to
        /// every start but shard 0's first, so a task's .out is not its
        /// warnings). The model warnings are printed in full either way.
        #[arg(long, value_enum, default_value_t = WarningsShown::Full)]
        warnings: WarningsShown,
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
        /// 7e5 (linear), 2.9e6 (gossip), 3.5e6 (combinatorial).
        #[arg(long, value_parser = positive_rate)]
        rate: Option<f64>,
        /// Print every shard's line (default: the first 10 and the last 5).
        #[arg(long)]
        all: bool,
        /// Output root directory, as for `run --out` (only changes the
        /// `results:` line).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Book the vector-summation accountant's working memory even when
        /// the figures the job needs are in the accountant's cache: for
        /// tasks that do not read this machine's cache directory
        /// (FEDBANDITS_CACHE_DIR, XDG_CACHE_HOME or HOME not shared with
        /// the compute nodes).
        #[arg(long)]
        cold_cache: bool,
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
        /// Read the job from this file instead of the YAML recorded in the
        /// parts (whose input files are read relative to the folder the job
        /// file was in): for a study whose job file and inputs moved. It
        /// must be the job the parts were written by.
        #[arg(long, value_name = "JOB")]
        job: Option<PathBuf>,
        /// Compute again every accountant figure the parts took from the
        /// accountant's cache (each part records them) and refuse the
        /// study if any differs: finds a forged or damaged cache after the
        /// fact (seconds per figure).
        #[arg(long)]
        recheck_figures: bool,
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
        /// Instead, the exact-bits test: can the neighbour produce exactly
        /// the bits of each release? Fails the floating-point samplers
        /// (the Laplace by an exact search, the Gaussian by a one-sided
        /// cancellation test), passes `sampler: discrete`; `--trials`
        /// releases per cell (prints the table, writes nothing).
        #[arg(long)]
        bits: bool,
    },
    /// List algorithms, environments and parameters.
    List {
        /// The parameter reference and each family's columns as Markdown
        /// (README's generated section).
        #[arg(long)]
        markdown: bool,
    },
    /// Run the canonical benchmark workloads and print agent-steps per second.
    Bench(BenchArgs),
    /// Measure every bench workload on every backend that works here (the
    /// CPU; CUDA when a device opens and agrees with the CPU bit for bit)
    /// at several batch sizes, print the table and record it as this
    /// machine's calibration, which `--backend auto` follows; with
    /// --shapes, time the time model's shapes and fit `plan`'s model.
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
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
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
    #[arg(long, value_delimiter = ',', default_values_t = vec![64u32, 1024, 4096],
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub federations: Vec<u32>,
    /// Seconds per measurement (at least one round each).
    #[arg(long, default_value_t = 2.0, value_parser = measurement_seconds)]
    pub seconds: f64,
    /// Only workloads whose name contains this text (measured, and in the
    /// report's kernels' table).
    #[arg(long)]
    pub only: Option<String>,
    /// Also write the table as a Markdown report.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Instead of the workloads, time every family's shapes on one thread
    /// (each for at least --seconds) and fit `plan`'s time model to them.
    #[arg(long)]
    pub shapes: bool,
    /// Instead of measuring, print the multi-round kernels' static
    /// occupancy table for sm_80 and sm_90 (ptxas by NVRTC, no device), or
    /// rewrite it in FILE between its markers (kernels/README.md).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub occupancy_table: Option<PathBuf>,
}

/// A command-line value out of its range (clap prints it after the flag).
#[derive(Debug, Error)]
pub enum ArgError {
    /// `--rate`: not a number of agent-steps per second in [1, 1e15].
    #[error("must be a number of agent-steps per second in [1, 1e15], e.g. 2e5")]
    NotPositive,
    /// Minutes out of [0, 1e6].
    #[error("expected minutes, a number in [0, 1e6] (0: at every check), got '{0}'")]
    Minutes(String),
    /// Seconds per measurement out of (0, 3600].
    #[error("expected seconds per measurement, a number in (0, 3600], got '{0}'")]
    MeasurementSeconds(String),
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

/// `--rate`: a number in [1, 1e15] (below one agent-step per second no
/// plan is meaningful, and its time would overflow Slurm's format).
fn positive_rate(s: &str) -> Result<f64, ArgError> {
    match s.parse::<f64>() {
        Ok(r) if (1.0..=1e15).contains(&r) => Ok(r),
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

/// Minutes between snapshots: finite, in [0, 1e6] (beyond it no run lasts;
/// a larger value once overflowed the duration and panicked).
fn minutes(s: &str) -> Result<f64, ArgError> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1e6).contains(&v) => Ok(v),
        _ => Err(ArgError::Minutes(s.to_owned())),
    }
}

/// Seconds per calibration measurement: in (0, 3600].
fn measurement_seconds(s: &str) -> Result<f64, ArgError> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(ArgError::MeasurementSeconds(s.to_owned())),
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

/// How `run` prints the privacy warnings at its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WarningsShown {
    /// Each warning in full.
    Full,
    /// Their count, with the command that prints them.
    Count,
}
