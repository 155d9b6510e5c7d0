//! The reader a family resolves a cell's raw parameters with (checked one
//! by one against the parameter table, [`super::params`]) into its typed
//! configuration: each family's `params` module fills defaults, drops what
//! its algorithm and environment do not use and checks the rules between
//! parameters with [`Params`]; the dispatcher that finds the family is
//! [`super::family::resolve`] (kept apart so that the families, which use
//! this reader, and the registry, which names them, form no cycle). The
//! graph parameters, shared by two families, are read here.

use super::CellConfig;
use super::keys::{Key, ParamType};
use super::params::{GRAPH, GRAPH_DEGREE, GRAPH_EDGES, GRAPH_P, GRAPH_ROWS, M, NEIGHBOURS, Value};
use crate::graph::{GraphKind, GraphSpec};
use crate::named::Named;
use crate::privacy::sensitivity::Neighbours;
use std::collections::{BTreeMap, BTreeSet};
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
    /// Every parameter the resolver has read, set or not (what an axis
    /// that changes no cell is explained by, [`super::family::reads`]).
    pub read: BTreeSet<&'static str>,
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
            read: BTreeSet::new(),
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

    /// The value of `k` as set in the job file (no default), if set and
    /// of its type.
    pub fn given<T: ParamType>(&mut self, k: Key<T>) -> Option<T> {
        self.read.insert(k.name());
        self.raw.get(k.name()).and_then(T::from_value)
    }

    /// Whether the job file sets `k` for this cell.
    pub fn is_set<T>(&mut self, k: Key<T>) -> bool {
        self.read.insert(k.name());
        self.raw.contains_key(k.name())
    }

    /// The parameter's value: as set, else its default for this cell
    /// (the parameter table's, [`super::params::ParamDef::defaults`]);
    /// None after recording that it is required here.
    fn value(&mut self, k: &'static str) -> Option<Value> {
        self.read.insert(k);
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
            self.err_at(k, format!("missing; {k} is {when}"));
        }
        value
    }

    /// `k`'s value as its type: as set, or its default; a missing one is
    /// recorded (and a placeholder returned: the cell is refused).
    pub fn read<T: ParamType>(&mut self, k: Key<T>) -> T {
        match self.value(k.name()) {
            Some(v) => T::from_value(&v).unwrap_or_else(|| {
                self.err_at(k.name(), format!("{v} is not of the parameter's type"));
                T::fallback()
            }),
            None => T::fallback(),
        }
    }

    /// [`Params::read`], recording the value as one that applies.
    pub fn take<T: ParamType>(&mut self, k: Key<T>) -> T {
        let v = self.read(k);
        self.record(k, &v);
        v
    }

    /// A choice that must be one of `allowed` for this cell (`who` names
    /// it): as set, or its default, recorded; another value is recorded as
    /// a problem naming the allowed ones, and the first allowed one
    /// returned.
    pub fn take_in<T: Named>(&mut self, k: Key<T>, allowed: &[T], who: &str) -> T {
        let v = self.read(k);
        let chosen = if allowed.contains(&v) {
            v
        } else {
            let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
            self.err_at(
                k.name(),
                format!(
                    "{}: {} does not apply to {who}; allowed: {}",
                    k.name(),
                    v.name(),
                    names.join(", ")
                ),
            );
            allowed.first().copied().unwrap_or(v)
        };
        self.record(k, &chosen);
        chosen
    }

    /// The neighbouring relation of an algorithm whose accountant states
    /// only substitution (`who` says what it replaces): `substitute`, or a
    /// problem naming it; recorded.
    pub fn substitute_only(&mut self, who: &str) {
        self.take_in(NEIGHBOURS, &[Neighbours::Substitute], who);
    }

    /// Records `v` as `k`'s resolved value (one that applies to the cell).
    pub fn record<T: ParamType>(&mut self, k: Key<T>, v: &T) {
        self.out.insert(k.name(), v.to_value());
    }

    /// The cell's algorithm, of family enum `T`; a name it does not have
    /// (the registry and the enum disagree) is a problem recorded on
    /// `algorithm`, never another algorithm.
    pub fn algorithm<T: Named>(&mut self) -> T {
        let name = self.cell.0;
        self.member("algorithm", name)
    }

    /// The cell's environment, of family enum `T` (as [`Params::algorithm`]).
    pub fn environment<T: Named>(&mut self) -> T {
        let name = self.cell.1;
        self.member("environment", name)
    }

    /// The variant of `T` named `name`, or a problem recorded on `what`.
    fn member<T: Named>(&mut self, what: &'static str, name: &str) -> T {
        T::from_name(name).unwrap_or_else(|| {
            self.err_at(what, format!("{name:?} is not one of {}", T::NAMES.join(", ")));
            T::ALL[0]
        })
    }

    /// Records a problem with parameter `k`.
    pub fn err<T>(&mut self, k: Key<T>, message: impl Into<String>) {
        self.err_at(k.name(), message);
    }

    /// Records a problem with the parameter (or cell field) named `k`.
    fn err_at(&mut self, k: &'static str, message: impl Into<String>) {
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
        let spec = match self.take(GRAPH) {
            GraphKind::Complete => GraphSpec::Complete,
            GraphKind::Ring => GraphSpec::Ring,
            GraphKind::Line => GraphSpec::Line,
            GraphKind::Star => GraphSpec::Star,
            GraphKind::Grid => GraphSpec::Grid {
                rows: self.required(GRAPH_ROWS, "graph = grid needs graph_rows (integer dividing m)")? as usize,
            },
            GraphKind::ErdosRenyi => GraphSpec::ErdosRenyi {
                p: self.required(GRAPH_P, "graph = erdos_renyi needs graph_p (number in (0, 1])")?,
            },
            GraphKind::RandomRegular => GraphSpec::RandomRegular {
                degree: self.required(GRAPH_DEGREE, "graph = random_regular needs graph_degree")? as usize,
            },
            GraphKind::Edges => {
                let path = self.required(GRAPH_EDGES, "graph = edges needs graph_edges (an edge-list file)")?;
                if path.trim().is_empty() {
                    self.err(
                        GRAPH_EDGES,
                        "an empty path: name the edge-list file (a relative path starts at the job file's folder)",
                    );
                    return None;
                }
                match crate::graph::read_edge_file(&self.input_path(&path)) {
                    Ok(e) => GraphSpec::Edges(e),
                    Err(e) => {
                        let msg = self.input_problem(&path, &e.to_string());
                        self.err(GRAPH_EDGES, msg);
                        return None;
                    }
                }
            }
        };
        Some(spec)
    }

    /// A value a choice requires (set, never defaulted; recorded), or None
    /// after recording `missing; {why}`.
    fn required<T: ParamType>(&mut self, k: Key<T>, why: &str) -> Option<T> {
        match self.given(k) {
            Some(v) => {
                self.record(k, &v);
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
                M,
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
                    GRAPH_EDGES.name()
                } else {
                    GRAPH.name()
                };
                self.err_at(key, e.to_string());
                None
            }
        }
    }
}
