//! The grid: each swept parameter's values (lists, `linspace`,
//! `logspace`), checked and sized before any value is built, and the
//! expansion of algorithms x environments x grid into cells, each resolved
//! by its family and keyed ([`super::resolve`]).

use super::distinct::{Distinct, Seen, fault_message};
use super::parse::{Parser, key_text};
use super::unread::Witness;
use super::{Cell, CheckpointSpec, HORIZON_AXIS, MAX_CELLS};
use crate::algo::family::family_of;
use crate::algo::family::param;
use crate::algo::params::{Kind, Value};
use std::collections::{BTreeMap, BTreeSet};

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

impl Parser<'_> {
    pub(super) fn grid(&mut self, v: Option<&serde_yaml::Value>) -> Option<Vec<(String, Vec<Value>)>> {
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
            if k == HORIZON_AXIS {
                match self.horizon_values(v) {
                    Some(vals) => out.push((k.to_owned(), vals)),
                    None => ok = false,
                }
                continue;
            }
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

    /// The values of the `horizon` axis: a non-empty list of whole numbers
    /// of rounds >= 1, or `{linspace|logspace: [from, to, n]}` whose values
    /// are whole numbers (numpy's values, each within 1e-9 of its own size
    /// of a whole number, taken as that number: `logspace: [1e4, 1e7, 4]`
    /// gives 10000 to 10000000; a value that is not whole is refused, not
    /// rounded).
    fn horizon_values(&mut self, v: &serde_yaml::Value) -> Option<Vec<Value>> {
        let path = ["grid", HORIZON_AXIS];
        let msg = "expected a non-empty list of horizons, whole numbers of rounds >= 1, e.g. [10000, 100000], \
                   or {linspace|logspace: [from, to, n]} giving whole numbers";
        if let Some(r) = v.as_mapping().filter(|r| r.len() == 1) {
            return self.horizon_range(&path, r);
        }
        let Some(list) = v.as_sequence().filter(|s| !s.is_empty()) else {
            self.problem(&path, msg);
            return None;
        };
        let vals: Option<Vec<Value>> = list
            .iter()
            .map(|x| {
                x.as_u64()
                    .filter(|&t| t >= 1 && t <= i64::MAX as u64)
                    .map(|t| Value::Int(t as i64))
            })
            .collect();
        if vals.is_none() {
            self.problem(&path, msg);
        }
        vals
    }

    /// `{linspace|logspace: [from, to, n]}` on the horizon axis: numpy's
    /// values, each a whole number of rounds >= 1 (see
    /// [`Self::horizon_values`]).
    fn horizon_range(&mut self, path: &[&str], r: &serde_yaml::Mapping) -> Option<Vec<Value>> {
        const ROUNDS: Kind = Kind::Float {
            min: 1.0,
            max: f64::INFINITY,
            min_inclusive: true,
            max_inclusive: false,
        };
        let mut out = Vec::new();
        for v in self.range(path, r, ROUNDS)? {
            let Value::Float(x) = v else { return None };
            let t = x.round();
            if (x - t).abs() > 1e-9 * t || t >= i64::MAX as f64 {
                self.problem(
                    path,
                    format!(
                        "{x} is not a whole number of rounds: choose endpoints and a count whose values are whole \
                         (logspace: [1e4, 1e7, 4] gives 10000 to 10000000), or list the horizons"
                    ),
                );
                return None;
            }
            out.push(Value::Int(t as i64));
        }
        Some(out)
    }

    fn range(&mut self, path: &[&str], r: &serde_yaml::Mapping, kind: Kind) -> Option<Vec<Value>> {
        let (k, v) = r.iter().next()?;
        let which = k.as_str().unwrap_or_default();
        let spec = v.as_sequence().filter(|s| s.len() == 3);
        let parts = spec.and_then(|s| Some((s[0].as_f64()?, s[1].as_f64()?, s[2].clone())));
        let Some((a, b, count)) = parts else {
            self.problem(
                path,
                "expected {linspace: [from, to, n]} or {logspace: [from, to, n]}: two numbers and a whole count n >= 1",
            );
            return None;
        };
        let Some(n) = count.as_u64().filter(|&n| n >= 1) else {
            self.problem(
                path,
                format!(
                    "{which}: the count n = {} must be a whole number >= 1 (the number of values)",
                    super::parse::yaml_text(&count)
                ),
            );
            return None;
        };
        if !(a.is_finite() && b.is_finite()) {
            self.problem(
                path,
                format!("{which}: from = {a} and to = {b} must be finite numbers (list .inf as a value instead)"),
            );
            return None;
        }
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
            "linspace" => linspace(a, b, n),
            "logspace" => {
                if a <= 0.0 || b <= 0.0 {
                    self.problem(
                        path,
                        "logspace endpoints must be > 0 (values, not exponents: like numpy.geomspace)",
                    );
                    return None;
                }
                geomspace(a, b, n)
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
                    self.problem(path, msg.to_string());
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
    pub(super) fn check_graph_settings(&mut self, fixed: &BTreeMap<String, Value>, axes: &[(String, Vec<Value>)]) {
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

    /// The job's cells: every algorithm with every environment of its
    /// family and every grid combination (the last axis fastest), each
    /// resolved by its family; a combination whose resolved parameters equal
    /// an earlier one's (an axis the algorithm does not use) is one cell,
    /// checked against the configurations the family built
    /// ([`super::distinct`]).
    /// Resolution problems are reported at the key's line.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn expand(
        &mut self,
        algorithms: &[String],
        environments: &[String],
        fixed: &BTreeMap<String, Value>,
        axes: &[(String, Vec<Value>)],
        horizons: &[u64],
        seed: u64,
        reps: u32,
        checkpoints: &CheckpointSpec,
    ) -> Vec<Cell> {
        let Some(total) = self.check_axes(algorithms, environments, fixed, axes, horizons.len()) else {
            return Vec::new();
        };
        let mut cells: Vec<Cell> = Vec::new();
        let mut seen = Distinct::default();
        let (mut applied, mut witnesses, mut unresolved) = (BTreeSet::new(), Vec::new(), false);
        for algo in algorithms {
            for envname in environments {
                // Algorithms run on the environments of their own family.
                if family_of(algo).map(|f| f.name) != family_of(envname).map(|f| f.name) {
                    continue;
                }
                for (horizon, combo) in horizons.iter().flat_map(|&h| (0..total).map(move |c| (h, c))) {
                    let mut raw = fixed.clone();
                    let mut rem = combo;
                    for (k, vals) in axes.iter().rev() {
                        raw.insert(k.clone(), vals[rem % vals.len()].clone());
                        rem /= vals.len();
                    }
                    let Some((ids, params, config)) =
                        self.resolve_cell(algo, envname, &raw, (fixed, axes), (horizon, seed, reps, checkpoints))
                    else {
                        unresolved = true;
                        continue;
                    };
                    applied.extend(params.keys().copied());
                    if !witnesses
                        .iter()
                        .any(|w: &Witness| w.cell.0 == *algo && w.cell.1 == *envname)
                    {
                        witnesses.push(Witness {
                            cell: (algo.clone(), envname.clone(), horizon),
                            raw: raw.clone(),
                            applied: params.clone(),
                        });
                    }
                    match seen.see((algo, envname, horizon), &ids.canonical, &config, combo) {
                        Seen::New => cells.push(ids.cell(cells.len(), algo, envname, params, config)),
                        // An axis this algorithm does not use.
                        Seen::Same => {}
                        Seen::Fault { earlier, merged } => {
                            let (key, msg) = fault_message(axes, earlier, combo, algo, merged);
                            self.problem(&["grid", &key], msg);
                            return Vec::new();
                        }
                    }
                }
            }
        }
        // Only a complete expansion says which parameters some cell reads.
        if !unresolved && !self.check_axes_change(axes, &applied, &witnesses) {
            return Vec::new();
        }
        cells
    }

    /// The grid's size (combinations), after checking that no axis is also
    /// a fixed parameter, that the cells stay within [`MAX_CELLS`] (counted
    /// before anything is built) and that no axis repeats a value.
    fn check_axes(
        &mut self,
        algorithms: &[String],
        environments: &[String],
        fixed: &BTreeMap<String, Value>,
        axes: &[(String, Vec<Value>)],
        horizons: usize,
    ) -> Option<usize> {
        for (k, _) in axes {
            if fixed.contains_key(k) {
                self.problem(&["grid", k], "also set in params; set it in one place");
            }
        }
        let total = axes.iter().try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()));
        let bound = total.and_then(|t| t.checked_mul(algorithms.len() * environments.len() * horizons.max(1)));
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
            return None;
        };
        for (k, vals) in axes {
            // Hashed: an axis may hold up to MAX_CELLS values.
            let mut seen = std::collections::HashSet::with_capacity(vals.len());
            if let Some(v) = vals.iter().find(|v| !seen.insert(dedup_key(v))) {
                self.problem(&["grid", k], format!("value {} appears twice; list each value once", v));
                return None;
            }
        }
        Some(total)
    }
}

/// `numpy.linspace(a, b, n)` to the bit: i x step + a with step = (b - a)
/// / (n - 1), the last value exactly b.
pub(crate) fn linspace(a: f64, b: f64, n: u64) -> Vec<f64> {
    if n == 1 {
        return vec![a];
    }
    let step = (b - a) / (n - 1) as f64;
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 * step + a).collect();
    if let Some(last) = v.last_mut() {
        *last = b;
    }
    v
}

/// `numpy.geomspace(a, b, n)` for a, b > 0: 10^x over `linspace(log10 a,
/// log10 b, n)`, the end values exactly a and b (interior values to the
/// bit where the platform's pow and log10 are numpy's, glibc's here).
pub(crate) fn geomspace(a: f64, b: f64, n: u64) -> Vec<f64> {
    let mut v: Vec<f64> = linspace(a.log10(), b.log10(), n)
        .into_iter()
        .map(|x| 10f64.powf(x))
        .collect();
    if let Some(first) = v.first_mut() {
        *first = a;
    }
    if let Some(last) = v.last_mut()
        && n > 1
    {
        *last = b;
    }
    v
}

#[cfg(test)]
mod spacing_tests {
    use super::{geomspace, linspace};

    /// The values numpy 2 gives (`float(x).hex()` of np.geomspace and
    /// np.linspace), bit for bit.
    #[test]
    fn spacings_are_numpys() {
        let bits = |v: Vec<f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let hex = |s: &[&str]| -> Vec<u64> {
            s.iter()
                .map(|h| {
                    let (m, e) = h.trim_start_matches("0x1.").split_once('p').unwrap_or(("0", "0"));
                    let mant = u64::from_str_radix(m, 16).unwrap_or(0);
                    let exp: i64 = e.parse().unwrap_or(0);
                    (((exp + 1023) as u64) << 52) | mant
                })
                .collect()
        };
        assert_eq!(geomspace(0.25, 16.0, 4), vec![0.25, 1.0, 4.0, 16.0]);
        assert_eq!(
            bits(geomspace(0.1, 10.0, 5)),
            hex(&[
                "0x1.999999999999ap-4",
                "0x1.43d136248490fp-2",
                "0x1.0000000000000p+0",
                "0x1.94c583ada5b53p+1",
                "0x1.4000000000000p+3"
            ])
        );
        assert_eq!(
            bits(geomspace(1e-4, 1e-3, 7)),
            hex(&[
                "0x1.a36e2eb1c432dp-14",
                "0x1.33d1df865f7ccp-13",
                "0x1.c3d154e984554p-13",
                "0x1.4b96be9c2da2cp-12",
                "0x1.e6b4b396428e5p-12",
                "0x1.6531793eb9f41p-11",
                "0x1.0624dd2f1a9fcp-10"
            ])
        );
        assert_eq!(linspace(0.1, 1.0, 4), vec![0.1, 0.4, 0.7, 1.0]);
        assert_eq!(
            bits(linspace(1.0, 2.0, 7)),
            hex(&[
                "0x1.0000000000000p+0",
                "0x1.2aaaaaaaaaaabp+0",
                "0x1.5555555555555p+0",
                "0x1.8000000000000p+0",
                "0x1.aaaaaaaaaaaaap+0",
                "0x1.d555555555555p+0",
                "0x1.0000000000000p+1"
            ])
        );
        assert_eq!(
            bits(linspace(0.01, 0.1, 3)),
            hex(&["0x1.47ae147ae147bp-7", "0x1.c28f5c28f5c2ap-5", "0x1.999999999999ap-4"])
        );
    }
}
