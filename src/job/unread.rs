//! An axis that changes no cell: a grid axis with several values none of
//! which any cell of the job reads is refused (it multiplies nothing and
//! says nothing), naming the setting that leaves it unread. Cells that
//! collapse because *some* of them do not read an axis are fine (an axis
//! for one algorithm of several). The setting is found without knowing any
//! family: one of the cell's choices, flags or infinite numbers changed to
//! another value, after which the family reads the axis
//! ([`crate::algo::family::reads`]).

use super::parse::Parser;
use crate::algo::family::{param, params};
use crate::algo::params::{Kind, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A resolved cell the check may explain an axis with: its algorithm,
/// environment, horizon, raw parameters and the parameters that applied.
pub(super) struct Witness {
    /// (algorithm, environment, horizon).
    pub cell: (String, String, u64),
    /// The combination's raw parameters.
    pub raw: BTreeMap<String, Value>,
    /// What applied to it.
    pub applied: BTreeMap<&'static str, Value>,
}

impl Parser<'_> {
    /// Refuses each axis of several values that no cell records (`applied`:
    /// every parameter any cell of the job applied), explained by the
    /// first witness whose algorithm or environment uses it; whether all
    /// axes change some cell.
    pub(super) fn check_axes_change(
        &mut self,
        axes: &[(String, Vec<Value>)],
        applied: &BTreeSet<&'static str>,
        witnesses: &[Witness],
    ) -> bool {
        let mut ok = true;
        for (k, vals) in axes {
            if vals.len() < 2 || applied.contains(k.as_str()) {
                continue;
            }
            let Some(def) = param(k) else { continue };
            let users = |w: &&Witness| def.used_by.iter().any(|u| *u == w.cell.0 || *u == w.cell.1);
            let why = match witnesses.iter().find(users) {
                Some(w) => self.disabler(k, w),
                None => "no cell of this job reads it".to_owned(),
            };
            self.problem(
                &["grid", k],
                format!(
                    "none of its {} values changes any cell: {why}; remove the axis, or change that setting",
                    vals.len()
                ),
            );
            ok = false;
        }
        ok
    }

    /// Why witness `w` does not read `axis`: the settings that, changed
    /// alone, make its family read it (`private = false (params); with
    /// private: true feducb_centralized reads schedule`).
    fn disabler(&self, axis: &str, w: &Witness) -> String {
        let (algo, env, horizon) = (&w.cell.0, &w.cell.1, w.cell.2);
        let mut found = Vec::new();
        for def in params().iter().filter(|d| d.name != axis) {
            let current = w.raw.get(def.name).or_else(|| w.applied.get(def.name));
            let Some(current) = current else { continue };
            for alt in alternatives(&def.kind, current) {
                let mut raw = w.raw.clone();
                raw.insert(def.name.to_owned(), alt.clone());
                if crate::algo::family::reads(algo, env, &raw, horizon, &self.dir).contains(axis) {
                    let whence = if w.raw.contains_key(def.name) {
                        "as set"
                    } else {
                        "its default"
                    };
                    found.push(format!(
                        "{} = {current} ({whence}) disables it; with {}: {alt} {algo} reads {axis}",
                        def.name, def.name
                    ));
                    break;
                }
            }
        }
        if found.is_empty() {
            format!("{algo} on {env} does not read {axis} with this job's other settings")
        } else {
            found.join("; ")
        }
    }
}

/// The other values a setting may take that can change what a family
/// reads: a flag's opposite, a choice's other words, a finite stand-in for
/// an infinite number (`epsilon: .inf`, no privacy).
fn alternatives(kind: &Kind, current: &Value) -> Vec<Value> {
    match (kind, current) {
        (Kind::Bool, Value::Bool(b)) => vec![Value::Bool(!b)],
        (Kind::Choice(words), Value::Str(w)) => words
            .iter()
            .filter(|x| **x != w.as_str())
            .map(|x| Value::Str((*x).to_owned()))
            .collect(),
        (Kind::Float { .. }, Value::Float(x)) if x.is_infinite() => vec![Value::Float(1.0)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::job::{Job, JobError};
    use std::path::Path;

    /// The problems of job text `text` (empty: it validates).
    fn problems(text: &str) -> Vec<String> {
        match Job::parse(Path::new("axis.yaml"), text) {
            Ok(_) => Vec::new(),
            Err(JobError::Invalid { problems, .. }) => {
                problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect()
            }
            Err(e) => vec![e.to_string()],
        }
    }

    fn job(algorithm: &str, environment: &str, params: &str, grid: &str) -> String {
        format!(
            "name: axis\nseed: 1\nhorizon: 200\nrepetitions: 2\nalgorithm: {algorithm}\nenvironment: \
             {environment}\nparams: {{{params}}}\ngrid:\n  {grid}\n"
        )
    }

    #[test]
    fn an_axis_no_cell_reads_is_refused_naming_what_disables_it() {
        // The case: a non-private FedUCB reads no schedule.
        let p = problems(&job(
            "feducb_centralized",
            "linear_gap",
            "private: false, d: 3",
            "schedule: [paper, private]",
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("grid.schedule: none of its 2 values changes any cell"),
            "{p:?}"
        );
        assert!(
            p[0].contains("private = false (as set) disables it; with private: true"),
            "{p:?}"
        );
        // A schedule that syncs every round depends on no data.
        let p = problems(&job(
            "feducb_centralized",
            "linear_gap",
            "epsilon: 1, delta: 0.01, sync: every_round, d: 3",
            "schedule: [paper, private]",
        ));
        assert!(
            p.len() == 1 && p[0].contains("sync = every_round (as set) disables it"),
            "{p:?}"
        );
        // No privacy: Fed_UCB's budget split is not read.
        let p = problems(&job(
            "fed_ucb_gossip",
            "mab_heterogeneous",
            "epsilon: .inf",
            "budget_split: [exact, paper]",
        ));
        assert!(
            p.len() == 1 && p[0].contains("epsilon = inf (as set) disables it; with epsilon: 1"),
            "{p:?}"
        );
    }

    #[test]
    fn an_axis_some_cell_reads_is_kept() {
        // Read by the private cells only (epsilon = .inf collapses them).
        let text = job(
            "[fed_ucb_gossip, gossip_ucb]",
            "mab_heterogeneous",
            "",
            "epsilon: [1, .inf]\n  budget_split: [exact, paper]",
        );
        assert_eq!(problems(&text), Vec::<String>::new());
        // With private: true the schedule applies.
        let text = job(
            "feducb_centralized",
            "linear_gap",
            "epsilon: 1, delta: 0.01, d: 3",
            "schedule: [paper, private]",
        );
        assert_eq!(problems(&text), Vec::<String>::new());
    }
}
