//! Reading a job file: the YAML's top-level keys, each checked with its
//! file line and the allowed values ([`Parser`]), the scalar settings, the
//! algorithm and environment lists, the fixed parameters and checkpoints;
//! the grid and its expansion into cells are [`super::grid`]'s.

use super::{CheckpointSpec, HORIZON_AXIS, Job, MAX_CHECKPOINTS, MAX_UNITS, Problem, checked_total, locate, name};
use crate::algo::family::{self, family_of};
use crate::algo::family::{param, params};
use crate::algo::params::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    "compare",
];

/// A mapping key that is not a name, for a message: scalars as written,
/// collections as `[...]` / `{...}`.
pub(super) fn key_text(k: &serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::Sequence(_) => "[...]".into(),
        serde_yaml::Value::Mapping(_) => "{...}".into(),
        other => yaml_text(other),
    }
}

/// A YAML value as it would be written, for messages.
/// The integer serde_yaml could not hold (beyond 64 bits: it reports
/// "invalid type: integer `N` as u128/i128"), if that is the error.
fn big_integer(msg: &str) -> Option<&str> {
    let rest = msg.split("invalid type: integer `").nth(1)?;
    let (n, tail) = rest.split_once('`')?;
    (tail.starts_with(" as u128") || tail.starts_with(" as i128")).then_some(n)
}

pub(super) fn yaml_text(v: &serde_yaml::Value) -> String {
    serde_yaml::to_string(v).map_or_else(|_| "?".into(), |t| t.trim().to_owned())
}

/// Reads at most `limit` bytes of a UTF-8 text file; a named pipe, a
/// device or a directory named by mistake is refused by kind
/// ([`crate::input`]), never waited on or read without end.
pub(super) fn read_text_capped(path: &Path, limit: usize) -> Result<String, std::io::Error> {
    let bytes = crate::input::read_capped(path, limit)?;
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A job file being read: its text and the problems found so far.
pub(super) struct Parser<'a> {
    pub(super) text: &'a str,
    /// The job file's folder: where an input file's relative path starts.
    pub(super) dir: std::path::PathBuf,
    pub(super) problems: Vec<Problem>,
}

impl Parser<'_> {
    pub(super) fn problem(&mut self, path: &[&str], message: impl Into<String>) {
        let line = locate(self.text, path);
        // An empty key (`'': 1`) is shown as YAML writes it.
        let shown: Vec<&str> = path.iter().map(|p| if p.is_empty() { "''" } else { p }).collect();
        self.problems.push(Problem {
            line,
            key: shown.join("."),
            message: message.into(),
        });
    }

    /// The whole job, or None with the problems recorded.
    pub(super) fn job(&mut self, path: &Path) -> Option<Job> {
        let top = self.top_keys()?;
        let name = self.name(top.get("name"), path);
        if top.get("description").is_some_and(|v| !v.is_string()) {
            self.problem(&["description"], "expected a string");
        }
        let seed = self.seed(top.get("seed"));
        let repetitions = self.repetitions(top.get("repetitions"));
        let output = self.output(top.get("output"));
        let algorithms = self.word_list(&top, "algorithm", &family::algorithms());
        let environments = self.word_list(&top, "environment", &family::environments());
        if let (Some(a), Some(e)) = (&algorithms, &environments) {
            self.check_families(a, e);
        }
        let compare = self.compare(top.get("compare"), algorithms.as_deref());
        let fixed = self.fixed_params(top.get("params"));
        let axes = self.grid(top.get("grid"));
        let swept = top
            .get("grid")
            .and_then(serde_yaml::Value::as_mapping)
            .is_some_and(|m| m.contains_key(HORIZON_AXIS));
        // A grid with problems (already reported) that sweeps the horizon
        // leaves it unknown, not missing.
        let horizons = if swept && axes.is_none() {
            None
        } else {
            self.horizons(top.get("horizon"), axes.as_deref())
        };
        let axes = axes.map(|a| a.into_iter().filter(|(k, _)| k != HORIZON_AXIS).collect::<Vec<_>>());
        let (short, long) = match &horizons {
            Some(h) => (h.iter().min().copied(), h.iter().max().copied()),
            None => (None, None),
        };
        // `every` must fit the shortest horizon and stay within the limit at
        // the longest.
        let checkpoints = self.checkpoints(top.get("checkpoints"), short).and_then(|c| {
            (long == short)
                .then_some(c)
                .or_else(|| self.checkpoints(top.get("checkpoints"), long))
        });
        if let (Some(fixed), Some(axes)) = (&fixed, &axes) {
            self.check_graph_settings(fixed, axes);
            if let (Some(a), Some(e)) = (&algorithms, &environments) {
                self.check_used(a, e, fixed.keys().map(|k| ("params", k.as_str())));
                self.check_used(a, e, axes.iter().map(|(k, _)| ("grid", k.as_str())));
            }
        }
        let compare = compare?;
        let (name, seed, repetitions, horizons, checkpoints, output, algorithms, environments, fixed, axes) = (
            name?,
            seed?,
            repetitions?,
            horizons?,
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
            &horizons,
            seed,
            repetitions,
            &checkpoints,
        );
        self.check_size(&cells, repetitions)?;
        let horizon = horizons.iter().copied().max()?;
        Some(Job {
            path: path.to_path_buf(),
            yaml: self.text.to_owned(),
            name,
            seed,
            repetitions,
            horizon,
            horizons,
            checkpoints,
            output,
            cells,
            compare,
        })
    }

    /// The job's horizons: the top-level `horizon`, or the values of a
    /// `horizon` grid axis (one of the two; each value once).
    fn horizons(&mut self, top: Option<&serde_yaml::Value>, axes: Option<&[(String, Vec<Value>)]>) -> Option<Vec<u64>> {
        let axis = axes.and_then(|a| a.iter().find(|(k, _)| k == HORIZON_AXIS));
        match (top, axis) {
            (Some(_), Some(_)) => {
                self.problem(
                    &["grid", HORIZON_AXIS],
                    "the horizon is also set at the top level; give it once: `horizon: T`, or a `horizon:` grid axis \
                     to sweep it",
                );
                None
            }
            (None, Some((_, vals))) => {
                let hs: Vec<u64> = vals.iter().filter_map(Value::as_i64).map(|t| t as u64).collect();
                let mut seen = std::collections::HashSet::new();
                if let Some(t) = hs.iter().find(|t| !seen.insert(**t)) {
                    self.problem(
                        &["grid", HORIZON_AXIS],
                        format!("value {t} appears twice; list each value once"),
                    );
                    return None;
                }
                Some(hs)
            }
            (top, None) => self.horizon(top).map(|t| vec![t]),
        }
    }

    /// The file's top-level mapping, its keys checked against
    /// [`TOP_KEYS`]; None when it is not YAML or not a mapping (a key
    /// repeated at the top level is reported at its second occurrence).
    fn top_keys(&mut self) -> Option<BTreeMap<String, serde_yaml::Value>> {
        if let Some((line, depth)) = super::nesting::too_deep(self.text) {
            self.problems.push(Problem {
                line: Some(line),
                key: "(root)".into(),
                message: format!(
                    "nested {depth} levels deep here; allowed: at most {} (a job is at most three levels deep, e.g. \
                     grid: {{epsilon: {{logspace: [0.1, 10, 5]}}}})",
                    super::nesting::MAX_DEPTH
                ),
            });
            return None;
        }
        let root: serde_yaml::Value = match serde_yaml::from_str(self.text) {
            Ok(v) => v,
            Err(e) => {
                let problem = self.syntax_problem(&e);
                self.problems.push(problem);
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
                self.problem(
                    &[&k],
                    format!(
                        "unknown key{}; allowed: {}",
                        crate::algo::params::did_you_mean(&k, TOP_KEYS),
                        TOP_KEYS.join(", ")
                    ),
                );
                continue;
            }
            top.insert(k, v);
        }
        Some(top)
    }

    /// A YAML error as a problem: serde_yaml places a duplicate key at its
    /// mapping's start, so point at the repeated key's second occurrence.
    fn syntax_problem(&self, e: &serde_yaml::Error) -> Problem {
        let msg = e.to_string();
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
        match dup {
            Some((line, key)) => Problem {
                line: Some(line),
                key,
                message: "appears twice at the top level; keep one".into(),
            },
            None => Problem {
                line: e.location().map(|l| l.line()),
                key: "(syntax)".into(),
                message: match big_integer(&msg) {
                    Some(n) => format!(
                        "the integer {n} is beyond what a job file may hold (integers from -2^63 to 2^64 - 1 = \
                         18446744073709551615; every count and seed is far smaller)"
                    ),
                    None => format!("not valid YAML: {e}"),
                },
            },
        }
    }

    /// `seed`: an integer >= 0, default 0.
    fn seed(&mut self, v: Option<&serde_yaml::Value>) -> Option<u64> {
        match v {
            None => Some(0),
            Some(v) => v.as_u64().or_else(|| {
                self.problem(&["seed"], "expected an integer >= 0");
                None
            }),
        }
    }

    /// `repetitions`: 1 to 1e6, default 1.
    fn repetitions(&mut self, v: Option<&serde_yaml::Value>) -> Option<u32> {
        match v {
            None => Some(1),
            Some(v) => match v.as_u64() {
                Some(r) if (1..=1_000_000).contains(&r) => Some(r as u32),
                _ => {
                    self.problem(&["repetitions"], "expected an integer in [1, 1000000]");
                    None
                }
            },
        }
    }

    /// `horizon`: required, an integer >= 1.
    fn horizon(&mut self, v: Option<&serde_yaml::Value>) -> Option<u64> {
        match v {
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
        }
    }

    /// `output`: a non-empty directory path, default `results`.
    fn output(&mut self, v: Option<&serde_yaml::Value>) -> Option<PathBuf> {
        match v {
            None => Some(PathBuf::from("results")),
            Some(v) => v
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    self.problem(&["output"], "expected a non-empty directory path (default: results)");
                    None
                }),
        }
    }

    /// The job's size: its agent-steps fit in a u64 and its units are at
    /// most [`MAX_UNITS`].
    fn check_size(&mut self, cells: &[super::Cell], repetitions: u32) -> Option<()> {
        if checked_total(cells, repetitions).is_none() {
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
        Some(())
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
                if partners.iter().any(|p| family_of(p).is_some_and(|g| g.name == f.name)) {
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
                    self.problem(
                        &[key],
                        format!(
                            "unknown {key} '{s}'{}; allowed: {}",
                            crate::algo::params::did_you_mean(s, &names),
                            names.join(", ")
                        ),
                    );
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

    pub(super) fn scalar(&mut self, path: &[&str], v: &serde_yaml::Value) -> Option<Value> {
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
                self.problem(path, msg.to_string());
                None
            }
        }
    }

    /// A parameter no algorithm or environment of the job uses would be
    /// dropped silently (`params: {sync: log}` in a job of
    /// `private_fedlinucb` only): a problem naming what uses it.
    fn check_used<'k>(&mut self, algos: &[String], envs: &[String], keys: impl Iterator<Item = (&'k str, &'k str)>) {
        for (section, k) in keys {
            let Some(def) = param(k) else { continue };
            let used = def.used_by.iter().any(|u| algos.iter().chain(envs).any(|n| n == u));
            if !used {
                self.problem(
                    &[section, k],
                    format!(
                        "no algorithm or environment of this job uses it; it applies to: {} (remove it, or add one \
                         of those)",
                        def.used_by.join(", ")
                    ),
                );
            }
        }
    }

    pub(super) fn unknown_param(&mut self, path: &[&str]) {
        let names: Vec<&str> = params().iter().map(|p| p.name).collect();
        let hint = crate::algo::params::did_you_mean(path.last().copied().unwrap_or_default(), &names);
        self.problem(
            path,
            format!(
                "unknown parameter{hint}; allowed: {} (see `fedbandits list`)",
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
}
