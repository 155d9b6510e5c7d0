//! Job files: YAML -> validated, expanded run plan.
//!
//! A job names algorithm(s), environment(s), fixed `params`, a `grid` of swept
//! parameters (cartesian product), repetitions, horizon, checkpoints, seed
//! and output directory. Everything is checked before any work: each problem
//! is reported once with file, line, key and the allowed values
//! ([`JobError::Invalid`]). See README.md for the format.

mod compare;
mod distinct;
mod grid;
mod identity;
pub mod model;
pub mod name;
mod nesting;
mod parse;
mod resolve;
pub mod shard;
mod unread;

use crate::algo::CellConfig;
use parse::{Parser, read_text_capped};

use crate::algo::params::{self, Value};
use crate::rng::hash_str;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Version of the simulation semantics; part of every cell's resume key so
/// that results of an older engine are never mixed with newer ones. Bumped
/// whenever the same job would compute other results;
/// `analysis/SEMANTICS.md` says what each version changed (the loader
/// reads files of every version).
pub const SEMANTICS_VERSION: u32 = 21;

/// One problem in a job file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted key path (`params.epsilon`).
    pub key: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// Errors loading a job.
#[derive(Debug, Error)]
pub enum JobError {
    /// The file could not be read.
    #[error("{path}: cannot read job file: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file has problems.
    #[error("{}", render_problems(path, problems))]
    Invalid {
        /// File.
        path: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

fn render_problems(path: &str, problems: &[Problem]) -> String {
    let mut s = format!("{path}: {} problem(s) in job file", problems.len());
    for p in problems {
        match p.line {
            Some(l) => s += &format!("\n  {path}:{l}: {}: {}", p.key, p.message),
            None => s += &format!("\n  {path}: {}: {}", p.key, p.message),
        }
    }
    s
}

/// When to record the regret curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CheckpointSpec {
    /// Every N rounds (and at T).
    Every(u64),
    /// N log-spaced rounds between 1 and T (duplicates merged; T included).
    LogPoints(u64),
}

impl CheckpointSpec {
    /// The sorted, distinct checkpoint rounds for horizon `t`.
    pub fn rounds(&self, horizon: u64) -> Vec<u64> {
        let mut v: Vec<u64> = match *self {
            CheckpointSpec::Every(n) => (1..=horizon / n).map(|i| i * n).collect(),
            CheckpointSpec::LogPoints(n) => {
                let n = n.max(1);
                (0..n)
                    .map(|i| {
                        let f = if n == 1 { 1.0 } else { i as f64 / (n - 1) as f64 };
                        ((horizon as f64).powf(f)).round() as u64
                    })
                    .collect()
            }
        };
        v.push(horizon);
        v.retain(|&t| t >= 1 && t <= horizon);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The spec as text ("every:50", "log_points:40"), as a cell's resume
    /// key and the directory's messages write it.
    pub fn describe(&self) -> String {
        match self {
            CheckpointSpec::Every(n) => format!("every:{n}"),
            CheckpointSpec::LogPoints(n) => format!("log_points:{n}"),
        }
    }
}

/// One parameter cell of the expanded grid.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Position in the expanded grid (after de-duplication).
    pub index: usize,
    /// Stable identifier: hash of algorithm, environment, horizon and every
    /// resolved parameter (16 hex digits).
    pub id: String,
    /// Resume key: the id plus seed, checkpoints and engine semantics
    /// version (a unit's file name; not the repetitions, so that a job that
    /// grows reuses its units).
    pub key: String,
    /// The key units of format 1 were named by (with the repetitions): such
    /// units resume a job with the same repetitions.
    pub legacy_key: String,
    /// Algorithm name.
    pub algorithm: String,
    /// Environment name.
    pub environment: String,
    /// Resolved parameters that apply to this cell.
    pub params: BTreeMap<&'static str, Value>,
    /// Typed configuration (of the cell's family).
    pub config: CellConfig,
    /// Scope of the environment streams (shared across algorithms).
    pub env_scope: u64,
    /// Scope of the algorithm's own streams.
    pub cell_scope: u64,
}

impl Cell {
    /// The cell's horizon T (the job's, or its value of a `horizon` axis).
    pub fn horizon(&self) -> u64 {
        self.config.family().horizon()
    }

    /// Agent-steps of one repetition.
    pub fn agent_steps_per_rep(&self) -> u64 {
        self.config.agents() as u64 * self.config.family().horizon()
    }

    /// Short description of the parameters that distinguish the cell.
    pub fn label(&self) -> String {
        let mut s = format!("{} on {}", self.algorithm, self.environment);
        for (k, v) in &self.params {
            s += &format!(" {k}={v}");
        }
        s
    }
}

/// A validated, expanded job.
#[derive(Clone, Debug)]
pub struct Job {
    /// The job file.
    pub path: PathBuf,
    /// Its text (written to the output's metadata).
    pub yaml: String,
    /// Job name (default: file stem).
    pub name: String,
    /// Root seed.
    pub seed: u64,
    /// Repetitions per cell.
    pub repetitions: u32,
    /// Horizon T.
    pub horizon: u64,
    /// Every horizon of the job: `horizon` alone, or the values of a
    /// `horizon` grid axis (`horizon` is then the longest).
    pub horizons: Vec<u64>,
    /// Checkpoints of the regret curve.
    pub checkpoints: CheckpointSpec,
    /// Output root directory (results go to `<output>/<name>/`).
    pub output: PathBuf,
    /// The cells.
    pub cells: Vec<Cell>,
    /// The comparisons the report leads with (`compare:`), [numerator,
    /// denominator] algorithms of one family; not part of the identity.
    pub compare: Vec<[String; 2]>,
}

/// The grid key that sweeps the horizon T (a job-level number, not a
/// family parameter): each value is a cell of its own, with its own
/// checkpoints, the same repetition keys.
pub const HORIZON_AXIS: &str = "horizon";

/// The folder of the job file `path`, absolute (where its input files'
/// relative paths start; the working directory for a bare file name).
pub fn job_folder(path: &Path) -> PathBuf {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

impl Job {
    /// Reads and validates a job file.
    pub fn load(path: &Path) -> Result<Job, JobError> {
        // One byte beyond the limit, so that `parse` reports the size of an
        // oversized file instead of this reading /dev/zero forever.
        let text = read_text_capped(path, MAX_JOB_BYTES + 1).map_err(|source| JobError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Validates job text (`path` is used for messages and the default name).
    pub fn parse(path: &Path, text: &str) -> Result<Job, JobError> {
        // A UTF-8 byte-order mark (some Windows editors write one) is not
        // part of the YAML.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if text.len() > MAX_JOB_BYTES {
            return Err(JobError::Invalid {
                path: path.display().to_string(),
                problems: vec![Problem {
                    line: None,
                    key: "(file)".into(),
                    message: format!(
                        "larger than the limit of {MAX_JOB_BYTES} bytes for a job file (it is copied into the \
                         metadata of every part file)"
                    ),
                }],
            });
        }
        let mut p = Parser {
            text,
            dir: job_folder(path),
            problems: Vec::new(),
        };
        let job = p.job(path);
        if let (true, Some(job)) = (p.problems.is_empty(), job) {
            return Ok(job);
        }
        let mut problems = p.problems;
        problems.dedup();
        Err(JobError::Invalid {
            path: path.display().to_string(),
            problems,
        })
    }

    /// Directory of this job's results.
    pub fn results_dir(&self) -> PathBuf {
        self.output.join(&self.name)
    }

    /// Checkpoint rounds.
    pub fn checkpoint_rounds(&self) -> Vec<u64> {
        self.checkpoints.rounds(self.horizon)
    }

    /// The sorted, distinct checkpoint rounds of `cell` (its own horizon's:
    /// with a `horizon` axis each horizon has its own).
    pub fn checkpoint_rounds_of(&self, cell: &Cell) -> Vec<u64> {
        self.checkpoints.rounds(cell.horizon())
    }

    /// A cell's description naming only the parameters that differ between
    /// the job's cells (plus algorithm and, if several, environment).
    pub fn short_label(&self, cell: &Cell) -> String {
        let mut s = cell.algorithm.clone();
        if self.cells.iter().any(|c| c.environment != cell.environment) {
            s += &format!(" on {}", cell.environment);
        }
        // Parameters that tell this cell from others of its algorithm and
        // environment: a default that differs between algorithms (alpha,
        // s_bound) says nothing the algorithm's name does not.
        let peers: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| c.algorithm == cell.algorithm && c.environment == cell.environment)
            .collect();
        if self.horizons.len() > 1 {
            s += &format!(" horizon={}", cell.horizon());
        }
        for (k, v) in &cell.params {
            let others: Vec<&params::Value> = peers
                .iter()
                .filter_map(|c| c.params.get(k))
                .filter(|o| *o != v)
                .collect();
            if others.is_empty() {
                continue;
            }
            // Six significant digits, unless that merges two values.
            let short = compact(v);
            if others.iter().any(|o| compact(o) == short) {
                s += &format!(" {k}={v}");
            } else {
                s += &format!(" {k}={short}");
            }
        }
        s
    }

    /// The identity of what the job computes: a hash of its cells' resume
    /// keys (each covers the cell's parameters, the seed, checkpoints and
    /// engine semantics), in order, and the repetitions. Two jobs with the
    /// same identity write the same results; a results directory holds one
    /// (and the units of the jobs it grew from).
    pub fn identity(&self) -> String {
        let keys: Vec<&str> = self.cells.iter().map(|c| c.key.as_str()).collect();
        format!(
            "{:016x}",
            hash_str(&format!("{}|reps={}", keys.join(","), self.repetitions))
        )
    }

    /// Total agent-steps of the job (a parsed job's total fits in a u64:
    /// [`Job::parse`] refuses the others; saturating otherwise).
    pub fn total_agent_steps(&self) -> u64 {
        checked_total(&self.cells, self.repetitions).unwrap_or(u64::MAX)
    }
}

/// A parameter value for a label: floats to six significant digits
/// (`3.16228` for sqrt(10)), everything else as is.
fn compact(v: &params::Value) -> String {
    match v {
        params::Value::Float(x) if x.is_finite() => {
            let r: f64 = format!("{x:.5e}").parse().unwrap_or(*x);
            format!("{r}")
        }
        other => other.to_string(),
    }
}

/// Agent-steps of `cells` x `reps`, None on overflow.
fn checked_total(cells: &[Cell], reps: u32) -> Option<u64> {
    cells
        .iter()
        .try_fold(0u64, |acc, c| {
            (c.config.agents() as u64)
                .checked_mul(c.config.family().horizon())
                .and_then(|s| acc.checked_add(s))
        })?
        .checked_mul(u64::from(reps))
}

/// The largest job file accepted (bytes): the file is copied into every
/// result file's metadata, which Parquet readers limit.
pub const MAX_JOB_BYTES: usize = 1 << 20;

/// The most cells a job may expand to (split larger sweeps into several
/// jobs): checked before any cell is built.
pub const MAX_CELLS: usize = 100_000;

/// The most (cell, repetition) units a job may have: each is a file in
/// `.units/` and an entry of the shard assignment.
pub const MAX_UNITS: u64 = 1_000_000;

/// The most checkpoint rounds per repetition: each is a row of output per
/// repetition (about 400 bytes), held in memory until the repetition ends.
pub const MAX_CHECKPOINTS: u64 = 100_000;

/// 1-based line of a dotted key path in YAML text (block style), if found.
pub fn locate(text: &str, path: &[&str]) -> Option<usize> {
    let mut depth = 0;
    let mut min_indent: Option<usize> = None;
    let mut found = None;
    for (n, line) in text.lines().enumerate() {
        if depth == path.len() {
            break;
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if min_indent.is_some_and(|mi| indent < mi) {
            break; // left the parent block
        }
        let key = path[depth];
        let bare = trimmed.trim_start_matches("- ");
        if bare.starts_with(&format!("{key}:")) || bare.starts_with(&format!("\"{key}\":")) {
            found = Some(n + 1);
            depth += 1;
            min_indent = Some(indent + 1);
        }
    }
    found
}

impl fmt::Display for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "job {} ({})", self.name, self.path.display())?;
        let horizons: Vec<String> = self.horizons.iter().map(u64::to_string).collect();
        writeln!(
            f,
            "  horizon {}  repetitions {}  seed {}  checkpoints {} ({} rounds{})",
            horizons.join(", "),
            self.repetitions,
            self.seed,
            self.checkpoints.describe(),
            self.checkpoint_rounds().len(),
            if self.horizons.len() > 1 { " at the longest" } else { "" }
        )?;
        writeln!(f, "  {} cell(s):", self.cells.len())?;
        for c in &self.cells {
            let horizon = if self.horizons.len() > 1 {
                format!(" horizon={}", c.horizon())
            } else {
                String::new()
            };
            writeln!(f, "  [{:>3}] {} {}{horizon}", c.index, c.id, c.label())?;
        }
        for [a, b] in &self.compare {
            writeln!(
                f,
                "  compare: {a} / {b} (the report's first section: their paired ratio per stratum of the other axes)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_nested_keys() {
        let t = "name: x\nparams:\n  m: 3\n  epsilon: 1\ngrid:\n  epsilon: [1, 2]\n";
        assert_eq!(locate(t, &["params", "epsilon"]), Some(4));
        assert_eq!(locate(t, &["grid", "epsilon"]), Some(6));
        assert_eq!(locate(t, &["name"]), Some(1));
        assert_eq!(locate(t, &["horizon"]), None);
    }

    #[test]
    fn checkpoints_are_sorted_distinct_and_end_at_t() {
        let r = CheckpointSpec::LogPoints(50).rounds(2000);
        assert_eq!(r[0], 1);
        assert_eq!(*r.last().unwrap(), 2000);
        assert!(r.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(CheckpointSpec::Every(300).rounds(1000), vec![300, 600, 900, 1000]);
    }
}
