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
    /// The cell's algorithm, environment and horizon (whose defaults
    /// apply).
    cell: (&'a str, &'a str, u64),
    /// The parameter table whose defaults apply (the registry's union).
    table: &'static [super::params::ParamDef],
    /// The parameters that apply, resolved.
    pub out: BTreeMap<&'static str, Value>,
    /// Problems so far: (parameter, message).
    pub errs: ResolveErrors,
}

impl<'a> Params<'a> {
    /// Nothing resolved yet for a cell of `algo` on `env` over `horizon`
    /// rounds, whose defaults are `table`'s; input files' relative paths
    /// start at `dir` (the job file's folder).
    pub fn new(
        raw: &'a BTreeMap<String, Value>,
        dir: &'a Path,
        (algo, env, horizon): (&'a str, &'a str, u64),
        table: &'static [super::params::ParamDef],
    ) -> Self {
        Self {
            raw,
            dir,
            cell: (algo, env, horizon),
            table,
            out: BTreeMap::new(),
            errs: Vec::new(),
        }
    }

    /// The cell's algorithm, environment and horizon.
    pub fn cell(&self) -> (&'a str, &'a str, u64) {
        self.cell
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

    /// The parameter's value: as set, else its default for this cell
    /// (the parameter table's, [`super::params::ParamDef::defaults`]);
    /// None after recording that it is required here.
    fn value(&mut self, k: &'static str) -> Option<Value> {
        if let Some(v) = self.raw.get(k) {
            return Some(v.clone());
        }
        let (algorithm, environment, horizon) = self.cell;
        let def = self
            .table
            .iter()
            .find(|p| p.name == k)
            .and_then(|p| p.default_for(algorithm, environment));
        let cx = super::params::DefaultContext {
            algorithm,
            environment,
            horizon,
            resolved: &self.out,
        };
        let value = def.and_then(|d| d.value(&cx));
        if value.is_none() {
            let when = def.map_or_else(|| format!("for {algorithm}"), super::params::DefaultValue::describe);
            self.err(k, format!("missing; {k} is {when}"));
        }
        value
    }

    /// A number (integers widen): as set, or its default.
    pub fn f(&mut self, k: &'static str) -> f64 {
        self.value(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN)
    }

    /// An integer: as set, or its default.
    pub fn i(&mut self, k: &'static str) -> i64 {
        self.value(k).and_then(|v| v.as_i64()).unwrap_or(0)
    }

    /// A word: as set, or its default.
    pub fn s(&mut self, k: &'static str) -> String {
        self.value(k)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// A word that must be one of `allowed` for this cell (`who` names
    /// it): as set, or its default; another value is recorded as a problem
    /// naming the allowed ones, and the first allowed one returned.
    pub fn choice(&mut self, k: &'static str, allowed: &[&str], who: &str) -> String {
        let v = self.s(k);
        if allowed.contains(&v.as_str()) {
            return v;
        }
        self.err(
            k,
            format!("{k}: {v} does not apply to {who}; allowed: {}", allowed.join(", ")),
        );
        allowed.first().map_or_else(String::new, |a| (*a).to_owned())
    }

    /// The neighbouring relation of an algorithm whose accountant states
    /// only substitution (`who` says what it replaces): `substitute`, or a
    /// problem naming it; recorded.
    pub fn substitute_only(&mut self, who: &str) {
        let rel = self.choice("neighbours", &["substitute"], who);
        self.set("neighbours", Value::Str(rel));
    }

    /// A boolean: as set, or its default.
    pub fn b(&mut self, k: &'static str) -> bool {
        self.value(k).and_then(|v| v.as_bool()).unwrap_or(false)
    }

    /// Records a resolved value.
    pub fn set(&mut self, k: &'static str, v: Value) {
        self.out.insert(k, v);
    }

    /// The algorithm `name` of family enum `T`; a name it does not have
    /// (the registry and the enum disagree) is a problem recorded on
    /// `algorithm`, never another algorithm.
    pub fn algorithm<T: crate::algo::named::Named>(&mut self, name: &str) -> T {
        T::from_name(name).unwrap_or_else(|| {
            let known: Vec<&str> = T::ALL.iter().map(|a| a.name()).collect();
            self.err("algorithm", format!("{name:?} is not one of {}", known.join(", ")));
            T::ALL[0]
        })
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
        let kind = self.s("graph");
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
