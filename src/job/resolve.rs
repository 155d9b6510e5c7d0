//! Resolution dispatch: one grid combination's raw parameters handed to the
//! family of its algorithm ([`crate::algo::family::resolve`], which finds
//! the family in the registry), keyed ([`super::identity`]); the family's
//! problems reported at the line of the key that set each parameter. The
//! job layer knows no family: every family resolves its own parameters in
//! its folder under `src/algo/`.

use super::parse::Parser;
use super::{CheckpointSpec, Problem, identity, locate};
use crate::algo::CellConfig;
use crate::algo::params::Value;
use std::collections::BTreeMap;

/// The grid's axes: (parameter, values), in the job's order.
pub(super) type Axes = [(String, Vec<Value>)];

/// A resolved cell: its keys, the parameters that apply, its configuration.
pub(super) type ResolvedCell = (identity::CellIds, BTreeMap<&'static str, Value>, CellConfig);

impl Parser<'_> {
    /// Resolves one combination (`raw`: the fixed parameters and this
    /// combination's axis values) for `algo` on `envname`, with the job's
    /// `(horizon, seed, repetitions, checkpoints)`; None after recording the
    /// family's problems (`(fixed, axes)` place each at its key's line).
    pub(super) fn resolve_cell(
        &mut self,
        algo: &str,
        envname: &str,
        raw: &BTreeMap<String, Value>,
        (fixed, axes): (&BTreeMap<String, Value>, &Axes),
        (horizon, seed, reps, checkpoints): (u64, u64, u32, &CheckpointSpec),
    ) -> Option<ResolvedCell> {
        match crate::algo::family::resolve(algo, envname, raw, horizon, &self.dir) {
            Ok((params, config)) => {
                let ids = identity::CellIds::new(
                    algo,
                    envname,
                    &params,
                    (horizon, seed, reps, checkpoints),
                    config.inputs().as_deref(),
                );
                Some((ids, params, config))
            }
            Err(errs) => {
                self.resolution_problems(&errs, algo, envname, fixed, axes);
                None
            }
        }
    }

    /// A family's resolution problems, each at the line of the key that set
    /// it (in the grid, in params, or the key itself), once.
    fn resolution_problems(
        &mut self,
        errs: &[crate::algo::resolve::ParamProblem],
        algo: &str,
        envname: &str,
        fixed: &BTreeMap<String, Value>,
        axes: &[(String, Vec<Value>)],
    ) {
        for crate::algo::resolve::ParamProblem { key, message: msg } in errs {
            let path: Vec<&str> = if axes.iter().any(|(k, _)| k == key) {
                vec!["grid", key]
            } else if fixed.contains_key(*key) {
                vec!["params", key]
            } else {
                vec![key]
            };
            let p = Problem {
                line: locate(self.text, &path),
                key: path.join("."),
                message: format!("{msg} (algorithm {algo}, environment {envname})"),
            };
            if !self.problems.contains(&p) {
                self.problems.push(p);
            }
        }
    }
}
