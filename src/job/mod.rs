//! Job files: YAML -> validated, expanded run plan.
//!
//! A job names algorithm(s), environment(s), fixed `params`, a `grid` of swept
//! parameters (cartesian product), repetitions, horizon, checkpoints, seed
//! and output directory. Everything is checked before any work: each problem
//! is reported once with file, line, key and the allowed values
//! ([`JobError::Invalid`]). See README.md for the format.

pub mod name;

pub mod shard;

use crate::algo::CellConfig;
use crate::algo::family::{self, family_of};
use crate::algo::params::{self, Kind, PARAMS, Value, param};
use crate::rng::hash_str;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Version of the simulation semantics; part of every cell's resume key so
/// that results of an older engine are never mixed with newer ones.
///
/// History: 2 -- f64 normals (rewards, theta*, linear_gap) use the portable
/// Box-Muller of [`crate::math::box_muller`] (quadrant from the top bits)
/// instead of libm's sin/cos; log det uses [`crate::math::ln`]; tree node
/// noise is a pure function of (agent noise key, node), regenerated at each
/// release ([`crate::privacy::tree`]). Every stream's values changed.
/// 3 -- the output schema gained the gossip family's columns
/// (`consensus_error`, `forced_pulls`, `clipped_observations`,
/// `gossip_lambda2`, `acct_epsilon_pure`); linear streams and values are
/// those of 2, but units written by 2 lack the columns, so they are not
/// mixed with new ones.
/// 4 -- private linear-family runs clip rewards to [-1, 1] before they enter
/// any sum (`clip_rewards`, default true for private_fedlinucb and private
/// FedUCB; linear_sphere values change, linear_gap's rewards are in {0, 1}
/// and do not), counted in `clipped_observations`.
/// 5 -- tree node noise (private_fedlinucb's ldp/sdp_amp/alt, private
/// FedUCB) is generated two entries per Box-Muller pair
/// ([`crate::rng::keyed`]; FedUCB's node in the leaf's own layout) and each
/// agent keeps the running sum of its live nodes' noise
/// ([`crate::privacy::tree`]): every private tree cell's noise bits and
/// sums change (same distribution); non-private cells are unchanged.
/// 6 -- the accountant's figures (issue 27): `acct_epsilon` (exact) is new,
/// `acct_epsilon_paper` is `paper_claimed_epsilon` (null where the paper's
/// assumptions fail), `acct_noise_multiplier` is the noise's standard
/// deviation over the sensitivity (Laplace: sqrt(2) b; sdp_vecsum: its
/// Binomial noise), sdp_vecsum's basic figures are null, P-FCB's
/// `acct_epsilon_basic` sums what each message provides; the regret columns
/// are unchanged.
/// 7 -- `sdp_vecsum`'s randomness is keyed ([`crate::privacy::vecsum`]: a
/// point's rounding draws from the point's key, the shuffler's Binomial
/// noise from [`crate::rng::binomial`]) so a GPU thread per coordinate draws
/// the same bits: `sdp_vecsum` cells' values change (same distribution);
/// every other cell is unchanged.
/// 8 -- decentralized FedUCB's messages are pulled from rings
/// ([`crate::backend::cpu::peer`]): every receiver adds the round's
/// payloads in sender order (before: in the order of a queue), so a GPU
/// thread per entry adds the same numbers in the same order. Only the
/// rounding of `feducb_decentralized`'s sums can change (a 64-repetition
/// probe of 16 cells gave identical regret, syncs and messages); every
/// other cell is unchanged.
pub const SEMANTICS_VERSION: u32 = 8;

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

    fn describe(&self) -> String {
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
    /// Resume key: the id plus seed, repetitions, checkpoints and engine
    /// semantics version.
    pub key: String,
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
    /// Agent-steps of one repetition.
    pub fn agent_steps_per_rep(&self) -> u64 {
        self.config.agents() as u64 * self.config.horizon()
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
    /// Checkpoints of the regret curve.
    pub checkpoints: CheckpointSpec,
    /// Output root directory (results go to `<output>/<name>/`).
    pub output: PathBuf,
    /// The cells.
    pub cells: Vec<Cell>,
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
                         metadata of every result file)"
                    ),
                }],
            });
        }
        let mut p = Parser {
            text,
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
    /// keys (each covers the cell's parameters, the seed, repetitions,
    /// checkpoints and engine semantics), in order. Two jobs with the same
    /// identity write the same results; a results directory holds one.
    pub fn identity(&self) -> String {
        let keys: Vec<&str> = self.cells.iter().map(|c| c.key.as_str()).collect();
        format!("{:016x}", hash_str(&keys.join(",")))
    }

    /// Total agent-steps of the job (a parsed job's total fits in a u64:
    /// [`Job::parse`] refuses the others; saturating otherwise).
    pub fn total_agent_steps(&self) -> u64 {
        checked_total(&self.cells, self.repetitions).unwrap_or(u64::MAX)
    }
}

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "seed",
    "repetitions",
    "horizon",
    "checkpoints",
    "output",
    "algorithm",
    "environment",
    "params",
    "grid",
];

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
                .checked_mul(c.config.horizon())
                .and_then(|s| acc.checked_add(s))
        })?
        .checked_mul(u64::from(reps))
}

/// A mapping key that is not a name, for a message: scalars as written,
/// collections as `[...]` / `{...}`.
fn key_text(k: &serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::Sequence(_) => "[...]".into(),
        serde_yaml::Value::Mapping(_) => "{...}".into(),
        other => yaml_text(other),
    }
}

/// A YAML value as it would be written, for messages.
fn yaml_text(v: &serde_yaml::Value) -> String {
    serde_yaml::to_string(v).map_or_else(|_| "?".into(), |t| t.trim().to_owned())
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

/// A key equal for two grid values exactly when `==` says they are equal
/// (0.0 and -0.0 included), for finding a repeated value by hashing.
fn dedup_key(v: &Value) -> (u8, u64, &str) {
    match v {
        Value::Int(i) => (0, *i as u64, ""),
        Value::Float(f) => (1, if *f == 0.0 { 0 } else { f.to_bits() }, ""),
        Value::Str(s) => (2, 0, s.as_str()),
        Value::Bool(b) => (3, u64::from(*b), ""),
    }
}

/// Reads at most `limit` bytes of a UTF-8 text file: a device or a huge
/// file named by mistake gives a short read, never an unbounded one.
fn read_text_capped(path: &Path, limit: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(limit as u64).read_to_end(&mut bytes)?;
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

struct Parser<'a> {
    text: &'a str,
    problems: Vec<Problem>,
}

impl Parser<'_> {
    fn problem(&mut self, path: &[&str], message: impl Into<String>) {
        let line = locate(self.text, path);
        // An empty key (`'': 1`) is shown as YAML writes it.
        let shown: Vec<&str> = path.iter().map(|p| if p.is_empty() { "''" } else { p }).collect();
        self.problems.push(Problem {
            line,
            key: shown.join("."),
            message: message.into(),
        });
    }

    fn job(&mut self, path: &Path) -> Option<Job> {
        let root: serde_yaml::Value = match serde_yaml::from_str(self.text) {
            Ok(v) => v,
            Err(e) => {
                let msg = e.to_string();
                // serde_yaml places a duplicate key at its mapping's start;
                // point at the repeated key's second occurrence instead.
                let dup = msg
                    .split("duplicate entry with key \"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .and_then(|key| {
                        let prefix = format!("{key}:");
                        self.text
                            .lines()
                            .enumerate()
                            .filter(|(_, l)| l.starts_with(&prefix))
                            .nth(1)
                            .map(|(n, _)| (n + 1, key.to_owned()))
                    });
                self.problems.push(match dup {
                    Some((line, key)) => Problem {
                        line: Some(line),
                        key,
                        message: "appears twice at the top level; keep one".into(),
                    },
                    None => Problem {
                        line: e.location().map(|l| l.line()),
                        key: "(syntax)".into(),
                        message: format!("not valid YAML: {e}"),
                    },
                });
                return None;
            }
        };
        let serde_yaml::Value::Mapping(map) = root else {
            self.problems.push(Problem {
                line: Some(1),
                key: "(root)".into(),
                message: "a job file must be a mapping of keys (name, horizon, algorithm, ...)".into(),
            });
            return None;
        };
        let mut top: BTreeMap<String, serde_yaml::Value> = BTreeMap::new();
        for (k, v) in map {
            let Some(k) = k.as_str().map(str::to_owned) else {
                let shown = key_text(&k);
                self.problem(
                    &[&shown],
                    format!("a key must be a name; allowed: {}", TOP_KEYS.join(", ")),
                );
                continue;
            };
            if !TOP_KEYS.contains(&k.as_str()) {
                self.problem(&[&k], format!("unknown key; allowed: {}", TOP_KEYS.join(", ")));
                continue;
            }
            top.insert(k, v);
        }
        let name = self.name(top.get("name"), path);
        if top.get("description").is_some_and(|v| !v.is_string()) {
            self.problem(&["description"], "expected a string");
        }
        let seed = match top.get("seed") {
            None => Some(0),
            Some(v) => v.as_u64().or_else(|| {
                self.problem(&["seed"], "expected an integer >= 0");
                None
            }),
        };
        let repetitions = match top.get("repetitions") {
            None => Some(1),
            Some(v) => match v.as_u64() {
                Some(r) if (1..=1_000_000).contains(&r) => Some(r as u32),
                _ => {
                    self.problem(&["repetitions"], "expected an integer in [1, 1000000]");
                    None
                }
            },
        };
        let horizon = match top.get("horizon") {
            None => {
                self.problems.push(Problem {
                    line: None,
                    key: "horizon".into(),
                    message: "missing; the number of rounds T is required (integer >= 1)".into(),
                });
                None
            }
            Some(v) => match v.as_u64() {
                Some(t) if t >= 1 => Some(t),
                Some(_) => {
                    self.problem(&["horizon"], "expected an integer >= 1 (T < 1 is impossible)");
                    None
                }
                None => {
                    self.problem(
                        &["horizon"],
                        format!("expected a whole number of rounds (integer >= 1), got {}", yaml_text(v)),
                    );
                    None
                }
            },
        };
        let checkpoints = self.checkpoints(top.get("checkpoints"), horizon);
        let output = match top.get("output") {
            None => Some(PathBuf::from("results")),
            Some(v) => v
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    self.problem(&["output"], "expected a non-empty directory path (default: results)");
                    None
                }),
        };
        let algorithms = self.word_list(&top, "algorithm", &family::algorithms());
        let environments = self.word_list(&top, "environment", &family::environments());
        if let (Some(a), Some(e)) = (&algorithms, &environments) {
            self.check_families(a, e);
        }
        let fixed = self.fixed_params(top.get("params"));
        let axes = self.grid(top.get("grid"));
        if let (Some(fixed), Some(axes)) = (&fixed, &axes) {
            self.check_graph_settings(fixed, axes);
        }
        let (name, seed, repetitions, horizon, checkpoints, output, algorithms, environments, fixed, axes) = (
            name?,
            seed?,
            repetitions?,
            horizon?,
            checkpoints?,
            output?,
            algorithms?,
            environments?,
            fixed?,
            axes?,
        );
        let cells = self.expand(
            &algorithms,
            &environments,
            &fixed,
            &axes,
            horizon,
            seed,
            repetitions,
            &checkpoints,
        );
        if checked_total(&cells, repetitions).is_none() {
            self.problem(
                &["horizon"],
                "the job's agent-steps (agents x horizon x repetitions over all cells) exceed 2^64; reduce the \
                 horizon, agents or repetitions",
            );
            return None;
        }
        let units = cells.len() as u64 * u64::from(repetitions);
        if units > MAX_UNITS {
            self.problem(
                &["repetitions"],
                format!(
                    "{} cell(s) x {repetitions} repetitions = {units} units (one result file each), above the limit \
                     of {MAX_UNITS}; split the sweep into several jobs or use fewer repetitions",
                    cells.len()
                ),
            );
            return None;
        }
        Some(Job {
            path: path.to_path_buf(),
            yaml: self.text.to_owned(),
            name,
            seed,
            repetitions,
            horizon,
            checkpoints,
            output,
            cells,
        })
    }

    fn checkpoints(&mut self, v: Option<&serde_yaml::Value>, horizon: Option<u64>) -> Option<CheckpointSpec> {
        let Some(v) = v else {
            return Some(CheckpointSpec::LogPoints(100));
        };
        let msg = "expected {every: N} or {log_points: N} with N an integer >= 1";
        let Some(m) = v.as_mapping() else {
            self.problem(&["checkpoints"], msg);
            return None;
        };
        if m.len() != 1 {
            self.problem(&["checkpoints"], msg);
            return None;
        }
        let (k, n) = m.iter().next()?;
        let n = n.as_u64().filter(|&n| n >= 1);
        match (k.as_str(), n) {
            (Some("every"), Some(n)) => {
                if let Some(t) = horizon.filter(|&t| n > t) {
                    self.problem(&["checkpoints", "every"], format!("{n} exceeds the horizon {t}"));
                    return None;
                }
                if let Some(t) = horizon.filter(|&t| t / n > MAX_CHECKPOINTS) {
                    self.problem(
                        &["checkpoints", "every"],
                        format!(
                            "{n} gives {} checkpoints over the horizon {t}, above the limit of {MAX_CHECKPOINTS} \
                             (each is an output row per repetition); use every: {} or more, or log_points",
                            t / n,
                            t.div_ceil(MAX_CHECKPOINTS)
                        ),
                    );
                    return None;
                }
                Some(CheckpointSpec::Every(n))
            }
            (Some("log_points"), Some(n)) if n > MAX_CHECKPOINTS => {
                self.problem(
                    &["checkpoints", "log_points"],
                    format!(
                        "{n} is above the limit of {MAX_CHECKPOINTS} checkpoints (each is an output row per repetition)"
                    ),
                );
                None
            }
            (Some("log_points"), Some(n)) => Some(CheckpointSpec::LogPoints(n)),
            (Some(other @ ("every" | "log_points")), None) => {
                self.problem(&["checkpoints", other], "expected an integer >= 1");
                None
            }
            _ => {
                self.problem(&["checkpoints"], msg);
                None
            }
        }
    }

    /// A job may list algorithms and environments of several families: each
    /// algorithm runs on the listed environments of its own family. An
    /// algorithm or environment with no partner of its family is an error.
    fn check_families(&mut self, algorithms: &[String], environments: &[String]) {
        for (key, names, partners) in [
            ("algorithm", algorithms, environments),
            ("environment", environments, algorithms),
        ] {
            for n in names {
                let Some(f) = family_of(n) else { continue };
                if partners.iter().any(|p| family_of(p).is_some_and(|g| g.id == f.id)) {
                    continue;
                }
                let (other, allowed) = if key == "algorithm" {
                    ("environment", f.environments)
                } else {
                    ("algorithm", f.algorithms)
                };
                let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
                self.problem(
                    &[key],
                    format!(
                        "{n} belongs to the {} family, and the job lists no {other} of that family; add one of: {}",
                        f.name,
                        names.join(", ")
                    ),
                );
            }
        }
    }

    fn word_list(
        &mut self,
        top: &BTreeMap<String, serde_yaml::Value>,
        key: &str,
        allowed: &[(&str, &str)],
    ) -> Option<Vec<String>> {
        let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
        let Some(v) = top.get(key) else {
            self.problems.push(Problem {
                line: None,
                key: key.into(),
                message: format!("missing; allowed: {}", names.join(", ")),
            });
            return None;
        };
        let items: Vec<&serde_yaml::Value> = match v {
            serde_yaml::Value::Sequence(s) if !s.is_empty() => s.iter().collect(),
            serde_yaml::Value::String(_) => vec![v],
            _ => {
                self.problem(
                    &[key],
                    format!("expected a name or a list of names; allowed: {}", names.join(", ")),
                );
                return None;
            }
        };
        let mut out = Vec::new();
        let mut ok = true;
        for it in items {
            match it.as_str() {
                Some(s) if names.contains(&s) => {
                    if !out.iter().any(|o| o == s) {
                        out.push(s.to_owned());
                    }
                }
                Some(s) => {
                    self.problem(&[key], format!("unknown {key} '{s}'; allowed: {}", names.join(", ")));
                    ok = false;
                }
                None => {
                    self.problem(&[key], format!("expected names; allowed: {}", names.join(", ")));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn scalar(&mut self, path: &[&str], v: &serde_yaml::Value) -> Option<Value> {
        let raw = match v {
            serde_yaml::Value::Bool(b) => Value::Bool(*b),
            serde_yaml::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_yaml::Value::String(s) => Value::Str(s.clone()),
            _ => {
                self.problem(path, "expected a single value");
                return None;
            }
        };
        let name = path.last().copied().unwrap_or_default();
        let def = param(name)?;
        match def.kind.check(&raw) {
            Ok(v) => Some(v),
            Err(msg) => {
                self.problem(path, msg);
                None
            }
        }
    }

    fn unknown_param(&mut self, path: &[&str]) {
        let names: Vec<&str> = PARAMS.iter().map(|p| p.name).collect();
        self.problem(
            path,
            format!(
                "unknown parameter; allowed: {} (see `fedbandits list`)",
                names.join(", ")
            ),
        );
    }

    fn fixed_params(&mut self, v: Option<&serde_yaml::Value>) -> Option<BTreeMap<String, Value>> {
        let mut out = BTreeMap::new();
        let Some(v) = v else {
            return Some(out);
        };
        let Some(m) = v.as_mapping() else {
            self.problem(&["params"], "expected a mapping of parameter: value");
            return None;
        };
        let mut ok = true;
        for (k, v) in m {
            let Some(k) = k.as_str() else {
                self.problem(
                    &["params", &key_text(k)],
                    "a parameter name must be a name (`fedbandits list` shows them)",
                );
                ok = false;
                continue;
            };
            if param(k).is_none() {
                self.unknown_param(&["params", k]);
                ok = false;
                continue;
            }
            match self.scalar(&["params", k], v) {
                Some(val) => {
                    out.insert(k.to_owned(), val);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// The job name: `name:`, or else the file name without its extension,
    /// either checked against [`name::NAME_RULE`].
    fn name(&mut self, v: Option<&serde_yaml::Value>, path: &Path) -> Option<String> {
        let Some(v) = v else {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            return match name::check_name(&stem) {
                Ok(()) => Some(stem),
                Err(why) => {
                    self.problem(
                        &["name"],
                        format!(
                            "missing, and the file name gives {stem:?}, which is not a valid job name ({why}): set \
                             `name:` or rename the file; {}",
                            name::NAME_RULE
                        ),
                    );
                    None
                }
            };
        };
        let Some(s) = v.as_str() else {
            self.problem(&["name"], format!("expected a string; {}", name::NAME_RULE));
            return None;
        };
        match name::check_name(s) {
            Ok(()) => Some(s.to_owned()),
            Err(why) => {
                self.problem(
                    &["name"],
                    format!("{s:?} is not a valid job name ({why}); {}", name::NAME_RULE),
                );
                None
            }
        }
    }

    fn grid(&mut self, v: Option<&serde_yaml::Value>) -> Option<Vec<(String, Vec<Value>)>> {
        let mut out = Vec::new();
        let Some(v) = v else {
            return Some(out);
        };
        let Some(m) = v.as_mapping() else {
            self.problem(
                &["grid"],
                "expected a mapping of parameter: [values] or {linspace|logspace: [from, to, n]}",
            );
            return None;
        };
        let mut ok = true;
        for (k, v) in m {
            let Some(k) = k.as_str() else {
                self.problem(
                    &["grid", &key_text(k)],
                    "a parameter name must be a name (`fedbandits list` shows them)",
                );
                ok = false;
                continue;
            };
            let Some(def) = param(k) else {
                self.unknown_param(&["grid", k]);
                ok = false;
                continue;
            };
            let path = ["grid", k];
            let raw: Vec<serde_yaml::Value> = match v {
                serde_yaml::Value::Sequence(s) if !s.is_empty() => s.clone(),
                serde_yaml::Value::Mapping(r) if r.len() == 1 => {
                    match self.range(&path, r, def.kind) {
                        Some(vals) => {
                            out.push((k.to_owned(), vals));
                        }
                        None => ok = false,
                    }
                    continue;
                }
                _ => {
                    self.problem(
                        &path,
                        "expected a non-empty list of values or {linspace|logspace: [from, to, n]}",
                    );
                    ok = false;
                    continue;
                }
            };
            let mut vals = Vec::new();
            for r in &raw {
                match self.scalar(&path, r) {
                    Some(val) => vals.push(val),
                    None => ok = false,
                }
            }
            out.push((k.to_owned(), vals));
        }
        ok.then_some(out)
    }

    fn range(&mut self, path: &[&str], r: &serde_yaml::Mapping, kind: Kind) -> Option<Vec<Value>> {
        let (k, v) = r.iter().next()?;
        let which = k.as_str().unwrap_or_default();
        let spec = v.as_sequence().filter(|s| s.len() == 3);
        let parts = spec.and_then(|s| Some((s[0].as_f64()?, s[1].as_f64()?, s[2].as_u64()?)));
        let Some((a, b, n)) = parts.filter(|p| p.2 >= 1) else {
            self.problem(
                path,
                "expected {linspace: [from, to, n]} or {logspace: [from, to, n]} with n >= 1",
            );
            return None;
        };
        if !matches!(kind, Kind::Float { .. }) {
            self.problem(
                path,
                "linspace/logspace apply to real-valued parameters only; list the values",
            );
            return None;
        }
        // Checked before a value is built: the count alone may be 10^12.
        if n > MAX_CELLS as u64 {
            self.problem(
                path,
                format!(
                    "{which} of {n} values: the grid would expand to at least {n} cells, above the limit of \
                     {MAX_CELLS} cells; split the sweep into several jobs (each `grid:` axis multiplies)"
                ),
            );
            return None;
        }
        let vals: Vec<f64> = match which {
            "linspace" => (0..n)
                .map(|i| {
                    if n == 1 {
                        a
                    } else {
                        a + (b - a) * i as f64 / (n - 1) as f64
                    }
                })
                .collect(),
            "logspace" => {
                if a <= 0.0 || b <= 0.0 {
                    self.problem(
                        path,
                        "logspace endpoints must be > 0 (values, not exponents: like numpy.geomspace)",
                    );
                    return None;
                }
                (0..n)
                    .map(|i| {
                        if n == 1 {
                            a
                        } else {
                            (a.ln() + (b.ln() - a.ln()) * i as f64 / (n - 1) as f64).exp()
                        }
                    })
                    .collect()
            }
            _ => {
                self.problem(path, "expected linspace or logspace");
                return None;
            }
        };
        let mut out = Vec::new();
        for v in vals {
            match kind.check(&Value::Float(v)) {
                Ok(v) => out.push(v),
                Err(msg) => {
                    self.problem(path, msg);
                    return None;
                }
            }
        }
        Some(out)
    }

    /// A graph's own settings (`graph_rows`, `graph_p`, `graph_degree`,
    /// `graph_edges`) set while `graph` is fixed to another kind: a mistake,
    /// not something to ignore. (With `graph` swept in the grid they apply
    /// to their own kind's cells.)
    fn check_graph_settings(&mut self, fixed: &BTreeMap<String, Value>, axes: &[(String, Vec<Value>)]) {
        let Some(kind) = fixed.get("graph").and_then(Value::as_str).map(str::to_owned) else {
            return;
        };
        for (key, owner) in [
            ("graph_rows", "grid"),
            ("graph_p", "erdos_renyi"),
            ("graph_degree", "random_regular"),
            ("graph_edges", "edges"),
        ] {
            let set_in = if fixed.contains_key(key) {
                Some("params")
            } else {
                axes.iter().any(|(k, _)| k == key).then_some("grid")
            };
            if let Some(section) = set_in
                && kind != owner
            {
                self.problem(
                    &[section, key],
                    format!("applies to graph: {owner} only, but graph is {kind}; remove it or set graph: {owner}"),
                );
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn expand(
        &mut self,
        algorithms: &[String],
        environments: &[String],
        fixed: &BTreeMap<String, Value>,
        axes: &[(String, Vec<Value>)],
        horizon: u64,
        seed: u64,
        reps: u32,
        checkpoints: &CheckpointSpec,
    ) -> Vec<Cell> {
        for (k, _) in axes {
            if fixed.contains_key(k) {
                self.problem(&["grid", k], "also set in params; set it in one place");
            }
        }
        let total = axes.iter().try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()));
        let bound = total.and_then(|t| t.checked_mul(algorithms.len() * environments.len()));
        let Some(total) = total.filter(|_| bound.is_some_and(|b| b <= MAX_CELLS)) else {
            let sizes: Vec<String> = axes.iter().map(|(k, v)| format!("{k}: {}", v.len())).collect();
            self.problem(
                &["grid"],
                format!(
                    "the grid expands to {} combinations ({}) x {} algorithm(s) x {} environment(s), above the \
                     limit of {MAX_CELLS} cells; split the sweep into several jobs (each `grid:` axis multiplies)",
                    total.map_or("more than 2^64".to_string(), |t| t.to_string()),
                    sizes.join(" x "),
                    algorithms.len(),
                    environments.len()
                ),
            );
            return Vec::new();
        };
        for (k, vals) in axes {
            // Hashed: an axis may hold up to MAX_CELLS values.
            let mut seen = std::collections::HashSet::with_capacity(vals.len());
            if let Some(v) = vals.iter().find(|v| !seen.insert(dedup_key(v))) {
                self.problem(&["grid", k], format!("value {} appears twice; list each value once", v));
                return Vec::new();
            }
        }
        let mut cells: Vec<Cell> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for algo in algorithms {
            for envname in environments {
                // Algorithms run on the environments of their own family.
                if family_of(algo).map(|f| f.id) != family_of(envname).map(|f| f.id) {
                    continue;
                }
                for combo in 0..total {
                    let mut raw = fixed.clone();
                    let mut rem = combo;
                    for (k, vals) in axes.iter().rev() {
                        raw.insert(k.clone(), vals[rem % vals.len()].clone());
                        rem /= vals.len();
                    }
                    match crate::algo::resolve::resolve(algo, envname, &raw, horizon) {
                        Ok((params, config)) => {
                            let canon = canonical(algo, envname, &params, horizon);
                            if !seen.insert(canon.clone()) {
                                continue; // an irrelevant axis duplicated this cell
                            }
                            let id = format!("{:016x}", hash_str(&canon));
                            let key_text = format!(
                                "{canon}|seed={seed}|reps={reps}|ck={}|v{SEMANTICS_VERSION}",
                                checkpoints.describe()
                            );
                            let env_text = env_canonical(envname, &params);
                            let cell_scope = hash_str(&random_scope(algo, envname, &params, horizon));
                            cells.push(Cell {
                                index: cells.len(),
                                id,
                                key: format!("{:016x}", hash_str(&key_text)),
                                algorithm: algo.clone(),
                                environment: envname.clone(),
                                params,
                                config,
                                env_scope: hash_str(&env_text),
                                cell_scope,
                            });
                        }
                        Err(errs) => {
                            for (key, msg) in errs {
                                let path: Vec<&str> = if axes.iter().any(|(k, _)| k == key) {
                                    vec!["grid", key]
                                } else if fixed.contains_key(key) {
                                    vec!["params", key]
                                } else {
                                    vec![key]
                                };
                                let line = locate(self.text, &path);
                                let p = Problem {
                                    line,
                                    key: path.join("."),
                                    message: format!("{msg} (algorithm {algo}, environment {envname})"),
                                };
                                if !self.problems.contains(&p) {
                                    self.problems.push(p);
                                }
                            }
                        }
                    }
                }
            }
        }
        cells
    }
}

fn canonical(algo: &str, env: &str, params: &BTreeMap<&'static str, Value>, horizon: u64) -> String {
    let mut s = format!("{algo}|{env}|T={horizon}");
    for (k, v) in params {
        s += &format!("|{k}={}", value_bits(v));
    }
    s
}

/// Parameters that do not enter a cell's random scope: `neighbours` changes
/// only the accountant's figures, and `oracle` and `clip_rewards` are
/// compared on common random numbers (the same units, rewards and noise
/// with and without).
const NOT_IN_RANDOM_SCOPE: &[&str] = &["neighbours", "oracle", "clip_rewards"];

/// The text a cell's algorithm keys are hashed from: [`canonical`] without
/// [`NOT_IN_RANDOM_SCOPE`] (so adding such a parameter leaves every earlier
/// cell's streams as they were).
fn random_scope(algo: &str, env: &str, params: &BTreeMap<&'static str, Value>, horizon: u64) -> String {
    let mut p = params.clone();
    p.retain(|k, _| !NOT_IN_RANDOM_SCOPE.contains(k));
    canonical(algo, env, &p, horizon)
}

fn env_canonical(env: &str, params: &BTreeMap<&'static str, Value>) -> String {
    let mut s = format!("env={env}");
    for k in ["d", "k", "noise_std", "reward_on"] {
        if let Some(v) = params.get(k) {
            s += &format!("|{k}={}", value_bits(v));
        }
    }
    s
}

/// Exact text of a value (floats by their bits, so 0.1 and 0.1000001 differ).
fn value_bits(v: &Value) -> String {
    match v {
        Value::Float(f) => format!("f{:016x}", f.to_bits()),
        other => other.to_string(),
    }
}

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
        writeln!(
            f,
            "  horizon {}  repetitions {}  seed {}  checkpoints {} ({} rounds)",
            self.horizon,
            self.repetitions,
            self.seed,
            self.checkpoints.describe(),
            self.checkpoint_rounds().len()
        )?;
        writeln!(f, "  {} cell(s):", self.cells.len())?;
        for c in &self.cells {
            writeln!(f, "  [{:>3}] {} {}", c.index, c.id, c.label())?;
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
