//! Cells are distinct exactly when what their algorithms receive is: two
//! grid points of one algorithm and environment are one cell when their
//! resolved parameters (the cell's identity, [`super::identity`]) are
//! equal, and that merge is checked against the typed configurations the
//! family built ([`crate::algo::CellConfig`], compared by their serialized
//! bytes). A merge of different configurations (the family read a
//! parameter it did not record) or two cells of one configuration (it
//! recorded one it does not read) is a fault of the family's resolver,
//! refused with the parameter named, never a silent merge or a cell run
//! twice. Points that differ only in parameters the algorithm does not use
//! (an axis for another algorithm of the job) are one cell, as they should
//! be: they resolve to equal parameters and equal configurations.

use crate::algo::CellConfig;
use crate::algo::params::Value;
use std::collections::HashMap;

/// The points of the grid seen so far: by identity and by configuration,
/// each with its combination's index.
#[derive(Default)]
pub(super) struct Distinct {
    by_identity: HashMap<u64, (u64, usize)>,
    by_config: HashMap<u64, (u64, usize)>,
}

/// What a new grid point is.
pub(super) enum Seen {
    /// A new cell.
    New,
    /// An earlier cell again (an axis its algorithm does not use).
    Same,
    /// A fault of the family's resolver: the earlier combination's index,
    /// and whether the two points merged (equal identities, different
    /// configurations) rather than stayed apart.
    Fault {
        /// The earlier combination.
        earlier: usize,
        /// Equal identities, different configurations.
        merged: bool,
    },
}

impl Distinct {
    /// Records combination `combo` of (`algo`, `env`, `horizon`), whose
    /// canonical identity is `canonical` and configuration `config`.
    pub(super) fn see(&mut self, key: (&str, &str, u64), canonical: &str, config: &CellConfig, combo: usize) -> Seen {
        let scope = format!("{}|{}|{}|", key.0, key.1, key.2);
        let identity = twox_hash::XxHash64::oneshot(0, format!("{scope}{canonical}").as_bytes());
        // A configuration that cannot be serialized is keyed by its
        // identity alone (never the case for the families' configurations).
        let bytes = config.bytes();
        let mut keyed = scope.into_bytes();
        keyed.extend_from_slice(&bytes);
        let config = twox_hash::XxHash64::oneshot(1, &keyed);
        match (self.by_identity.get(&identity), self.by_config.get(&config)) {
            (Some(&(c, _)), _) if c == config => Seen::Same,
            (Some(&(_, earlier)), _) => Seen::Fault { earlier, merged: true },
            (None, Some(&(_, earlier))) => Seen::Fault { earlier, merged: false },
            (None, None) => {
                self.by_identity.insert(identity, (config, combo));
                self.by_config.insert(config, (identity, combo));
                Seen::New
            }
        }
    }
}

/// The refusal of a resolver fault between combinations `a` (earlier) and
/// `b` of `axes`: the first axis they differ in (where it is reported) and
/// the message naming every parameter they differ in, with both values.
pub(super) fn fault_message(
    axes: &[(String, Vec<Value>)],
    a: usize,
    b: usize,
    algo: &str,
    merged: bool,
) -> (String, String) {
    let (va, vb) = (combination(axes, a), combination(axes, b));
    let differ: Vec<String> = axes
        .iter()
        .zip(va.iter().zip(&vb))
        .filter(|(_, (x, y))| x != y)
        .map(|((k, _), (x, y))| format!("{k} = {x} and {k} = {y}"))
        .collect();
    let what = differ.join(", ");
    let first = axes
        .iter()
        .zip(va.iter().zip(&vb))
        .find(|(_, (x, y))| x != y)
        .map_or_else(String::new, |((k, _), _)| k.clone());
    let msg = if merged {
        format!(
            "{what} resolve to the same {algo} cell, but {algo} receives different configurations from them: its \
             family's resolver reads a parameter without recording it, so the grid would merge two different runs \
             (a fault of the family: each parameter a resolver reads must be recorded: Params::take or Params::record)"
        )
    } else {
        format!(
            "{what} give {algo} the same configuration, but resolve to two cells: its family's resolver records a \
             parameter that {algo} does not read, so the same run would be computed twice under two names (a \
             fault of the family: record only what the configuration uses)"
        )
    };
    (first, msg)
}

/// The axis values of combination `combo` (the last axis fastest).
fn combination(axes: &[(String, Vec<Value>)], combo: usize) -> Vec<Value> {
    let mut rem = combo;
    let mut out: Vec<Value> = axes
        .iter()
        .rev()
        .map(|(_, vals)| {
            let v = vals[rem % vals.len()].clone();
            rem /= vals.len();
            v
        })
        .collect();
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::{Distinct, Seen, fault_message};
    use crate::algo::CellConfig;
    use crate::algo::params::Value;
    use std::collections::BTreeMap;

    /// The configuration `random` on `linear_gap` receives at dimension d.
    fn config(d: i64) -> CellConfig {
        let raw = BTreeMap::from([("d".to_string(), Value::Int(d))]);
        crate::algo::family::resolve("random", "linear_gap", &raw, 100, std::path::Path::new("."))
            .map(|r| r.1)
            .expect("resolves")
    }

    fn axes() -> Vec<(String, Vec<Value>)> {
        vec![
            ("explore".into(), vec![Value::Float(0.05), Value::Float(0.2)]),
            ("zeta".into(), vec![Value::Float(0.1)]),
        ]
    }

    /// Equal identities with equal configurations are one cell; equal
    /// identities with different configurations (a parameter read but not
    /// recorded) and different identities with one configuration (recorded
    /// but not read) are faults naming the earlier combination.
    #[test]
    fn merges_only_what_the_algorithm_cannot_tell_apart() {
        let key = ("random", "linear_gap", 100);
        let mut seen = Distinct::default();
        assert!(matches!(seen.see(key, "a", &config(2), 0), Seen::New));
        assert!(matches!(seen.see(key, "a", &config(2), 1), Seen::Same));
        assert!(matches!(
            seen.see(key, "a", &config(3), 1),
            Seen::Fault {
                earlier: 0,
                merged: true
            }
        ));
        assert!(matches!(
            seen.see(key, "b", &config(2), 1),
            Seen::Fault {
                earlier: 0,
                merged: false
            }
        ));
        assert!(matches!(seen.see(key, "b", &config(3), 1), Seen::New));
        // Another horizon (or algorithm, environment) is another cell.
        assert!(matches!(
            seen.see(("random", "linear_gap", 200), "a", &config(2), 0),
            Seen::New
        ));
    }

    /// The refusal names the axis the two combinations differ in, with
    /// both values, and says which fault it is.
    #[test]
    fn the_refusal_names_the_parameter_and_both_values() {
        let (key, msg) = fault_message(&axes(), 0, 1, "toy_greedy", true);
        assert_eq!(key, "explore");
        assert!(
            msg.starts_with("explore = 0.05 and explore = 0.2 resolve to the same toy_greedy cell"),
            "{msg}"
        );
        assert!(msg.contains("reads a parameter without recording it"), "{msg}");
        let (_, msg) = fault_message(&axes(), 0, 1, "toy_greedy", false);
        assert!(msg.contains("give toy_greedy the same configuration"), "{msg}");
    }
}
