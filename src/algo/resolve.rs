//! The reader a family resolves a cell's raw parameters with (checked one
//! by one against the parameter table, [`super::params`]) into its typed
//! configuration: each family's `params` module fills defaults, drops what
//! its algorithm and environment do not use and checks the rules between
//! parameters with [`Params`]; the dispatcher that finds the family is
//! [`super::family::resolve`] (kept apart so that the families, which use
//! this reader, and the registry, which names them, form no cycle). The
//! graph parameters, shared by two families, are read here.

use super::CellConfig;
use super::params::Value;
use crate::graph::GraphSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A cell's resolved parameters (only those that apply) and typed config.
pub type Resolved = (BTreeMap<&'static str, Value>, CellConfig);

/// A parameter a family cannot resolve for a cell, and why (the loader
/// places it at the line of the key that set it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ParamProblem {
    /// The parameter.
    pub key: &'static str,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// Resolution problems, in the order found.
pub type ResolveErrors = Vec<ParamProblem>;

/// A cell's raw parameters being resolved: typed reads with defaults, the
/// resolved values that apply and the problems found, in order.
pub struct Params<'a> {
    raw: &'a BTreeMap<String, Value>,
    /// The job file's folder.
    dir: &'a Path,
    /// The parameters that apply, resolved.
    pub out: BTreeMap<&'static str, Value>,
    /// Problems so far: (parameter, message).
    pub errs: ResolveErrors,
}

impl<'a> Params<'a> {
    /// Nothing resolved yet; input files' relative paths start at `dir`
    /// (the job file's folder).
    pub fn new(raw: &'a BTreeMap<String, Value>, dir: &'a Path) -> Self {
        Self {
            raw,
            dir,
            out: BTreeMap::new(),
            errs: Vec::new(),
        }
    }

    /// Where the input file `written` (a parameter's value) is: as written
    /// when absolute, else in the job file's folder.
    pub fn input_path(&self, written: &str) -> PathBuf {
        self.dir.join(written)
    }

    /// Why the input file `written` of parameter `k` cannot be read
    /// (`why`), naming where it was looked for and, when the working
    /// directory holds a file of that relative path, that it is not used.
    pub fn input_problem(&self, written: &str, why: &str) -> String {
        let at = self.input_path(written);
        let mut msg = format!("{written}: {why} (looked for {}", at.display());
        if Path::new(written).is_relative() {
            msg += ": a relative path starts at the job file's folder";
            if Path::new(written).exists() && !at.exists() {
                msg += &format!(
                    "; {written} in the working directory is not used: write its path relative to the job file, or \
                     an absolute one"
                );
            }
        }
        msg + ")"
    }

    /// The raw value, if set.
    pub fn get(&self, k: &str) -> Option<&'a Value> {
        self.raw.get(k)
    }

    /// A number (integers widen), or `default`.
    pub fn f(&self, k: &str, default: f64) -> f64 {
        self.raw.get(k).and_then(Value::as_f64).unwrap_or(default)
    }

    /// An integer, or `default`.
    pub fn i(&self, k: &str, default: i64) -> i64 {
        self.raw.get(k).and_then(Value::as_i64).unwrap_or(default)
    }

    /// A word, or `default`.
    pub fn s(&self, k: &str, default: &str) -> String {
        self.raw.get(k).and_then(Value::as_str).unwrap_or(default).to_owned()
    }

    /// A word that must be one of `allowed` for this cell (`who` names
    /// it), or `default`; another value is recorded as a problem naming
    /// the allowed ones, and `default` returned.
    pub fn choice(&mut self, k: &'static str, default: &str, allowed: &[&str], who: &str) -> String {
        let v = self.s(k, default);
        if allowed.contains(&v.as_str()) {
            return v;
        }
        self.err(
            k,
            format!("{k}: {v} does not apply to {who}; allowed: {}", allowed.join(", ")),
        );
        default.to_owned()
    }

    /// The neighbouring relation of an algorithm whose accountant states
    /// only substitution (`who` says what it replaces): `substitute`, or a
    /// problem naming it; recorded.
    pub fn substitute_only(&mut self, who: &str) {
        let rel = self.choice("neighbours", "substitute", &["substitute"], who);
        self.set("neighbours", Value::Str(rel));
    }

    /// A boolean, or `default`.
    pub fn b(&self, k: &str, default: bool) -> bool {
        self.raw.get(k).and_then(Value::as_bool).unwrap_or(default)
    }

    /// Records a resolved value.
    pub fn set(&mut self, k: &'static str, v: Value) {
        self.out.insert(k, v);
    }

    /// Records a problem with parameter `k`.
    pub fn err(&mut self, k: &'static str, message: impl Into<String>) {
        self.errs.push(ParamProblem {
            key: k,
            message: message.into(),
        });
    }

    /// The resolved parameters and `cfg`, or the problems.
    pub fn finish<C>(self, cfg: C) -> Result<(BTreeMap<&'static str, Value>, C), ResolveErrors> {
        if self.errs.is_empty() {
            Ok((self.out, cfg))
        } else {
            Err(self.errs)
        }
    }

    /// The graph a cell names (`graph` and its `graph_*` parameters; an
    /// edge file is read now), or None after recording why not.
    pub fn graph_spec(&mut self) -> Option<GraphSpec> {
        let kind = self.s("graph", "complete");
        self.set("graph", Value::Str(kind.clone()));
        let spec = match kind.as_str() {
            "ring" => GraphSpec::Ring,
            "line" => GraphSpec::Line,
            "star" => GraphSpec::Star,
            "grid" => GraphSpec::Grid {
                rows: self.required_int("graph_rows", "graph = grid needs graph_rows (integer dividing m)")? as usize,
            },
            "erdos_renyi" => match self.get("graph_p").and_then(Value::as_f64) {
                Some(p) => {
                    self.set("graph_p", Value::Float(p));
                    GraphSpec::ErdosRenyi { p }
                }
                None => {
                    self.err(
                        "graph_p",
                        "missing; graph = erdos_renyi needs graph_p (number in (0, 1])",
                    );
                    return None;
                }
            },
            "random_regular" => GraphSpec::RandomRegular {
                degree: self.required_int("graph_degree", "graph = random_regular needs graph_degree")? as usize,
            },
            "edges" => {
                let Some(path) = self.get("graph_edges").and_then(Value::as_str) else {
                    self.err(
                        "graph_edges",
                        "missing; graph = edges needs graph_edges (an edge-list file)",
                    );
                    return None;
                };
                self.set("graph_edges", Value::Str(path.to_owned()));
                match crate::graph::read_edge_file(&self.input_path(path)) {
                    Ok(e) => GraphSpec::Edges(e),
                    Err(e) => {
                        let msg = self.input_problem(path, &e);
                        self.err("graph_edges", msg);
                        return None;
                    }
                }
            }
            _ => GraphSpec::Complete,
        };
        Some(spec)
    }

    /// An integer a choice requires (recorded), or None after recording
    /// `missing; {why}`.
    fn required_int(&mut self, k: &'static str, why: &str) -> Option<i64> {
        match self.get(k).and_then(Value::as_i64) {
            Some(v) => {
                self.set(k, Value::Int(v));
                Some(v)
            }
            None => {
                self.err(k, format!("missing; {why}"));
                None
            }
        }
    }

    /// Builds a graph on `m` agents to check it (a random one with a fixed
    /// stream: its shape, not its draw); its diameter, or None after
    /// recording why it cannot be built (too many agents, disconnected, bad
    /// parameters).
    pub fn check_graph(&mut self, spec: &GraphSpec, m: usize) -> Option<u32> {
        use crate::graph::MAX_GRAPH_AGENTS;
        if m > MAX_GRAPH_AGENTS {
            self.err(
                "m",
                format!(
                    "{m} agents on a communication graph; at most {MAX_GRAPH_AGENTS} (a graph holds all-pairs hop \
                     distances, m^2 entries built with m^3 work, per federation)"
                ),
            );
            return None;
        }
        match crate::graph::Graph::build(spec, m, &mut crate::rng::Stream::new(&[0])) {
            Ok(g) => Some(g.diameter().max(1)),
            Err(e) => {
                let key = if matches!(spec, GraphSpec::Edges(_)) {
                    "graph_edges"
                } else {
                    "graph"
                };
                self.err(key, e.to_string());
                None
            }
        }
    }
}
