//! What `fedbandits list` says a parameter defaults to is what `validate`
//! resolves: every algorithm is resolved on every environment of its
//! family with its parameters unset (and, to reach the parameters that
//! apply only under some setting, with each choice and boolean set in
//! turn); every parameter its family filled in must hold the default the
//! table gives for that cell, printed on its line of `list`; every
//! default in the table must be reached by some cell (a default no
//! resolver reads is a default `list` states for nothing); and every
//! parameter the table says an algorithm uses must be read by some
//! resolution of it (a parameter kept where nothing reads it would run the
//! algorithm once per value, bit-identical).

use crate::algo::family::{FAMILIES, resolve};
use crate::algo::family::{param, params};
use crate::algo::params::{DefaultContext, DefaultValue, Kind, ParamDef, Value};
use crate::cli::text::list_text;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The horizon of every resolved cell (at least every default batch).
const HORIZON: u64 = 1000;

/// A folder holding a `diabetic_data.csv` that `uci_diabetes` can split
/// among its default 3 agents (every record gives every arm).
fn uci_folder() -> PathBuf {
    use crate::env::uci::{HEADER, MEDICATIONS};
    let dir = std::env::temp_dir().join(format!("fedbandits-list-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cols: Vec<&str> = HEADER.split(',').collect();
    let mut text = format!("{HEADER}\n");
    for i in 0..12 {
        let fields: Vec<String> = cols
            .iter()
            .map(|c| match *c {
                "readmitted" => if i % 2 == 0 { ">30" } else { "NO" }.to_string(),
                "encounter_id" => i.to_string(),
                c if MEDICATIONS.iter().any(|(m, _)| *m == c) => "Steady".to_string(),
                _ => "?".to_string(),
            })
            .collect();
        text += &fields.join(",");
        text.push('\n');
    }
    std::fs::write(dir.join("diabetic_data.csv"), text).expect("csv");
    dir
}

/// Whether `p` applies to `algo` or `env` by the table.
fn used(p: &ParamDef, algo: &str, env: &str) -> bool {
    p.used_by.contains(&algo) || p.used_by.contains(&env)
}

/// The cell's raw parameters to try: the privacy target where the
/// algorithm needs one, then each choice and boolean it uses set in turn.
fn variants(algo: &str, env: &str) -> Vec<BTreeMap<String, Value>> {
    let mut base = BTreeMap::new();
    for (k, v) in [("epsilon", 1.0), ("delta", 1e-5)] {
        if param(k).is_some_and(|p| used(p, algo, env)) {
            base.insert(k.to_string(), Value::Float(v));
        }
    }
    let mut out = vec![base.clone()];
    for p in params()
        .iter()
        .filter(|p| used(p, algo, env) && !base.contains_key(p.name))
    {
        let values: Vec<Value> = match p.kind {
            Kind::Choice(words) => words.iter().map(|w| Value::Str((*w).to_string())).collect(),
            Kind::Bool => vec![Value::Bool(false), Value::Bool(true)],
            _ => Vec::new(),
        };
        for v in values {
            let mut raw = base.clone();
            raw.insert(p.name.to_string(), v);
            out.push(raw);
        }
    }
    out
}

/// Checks one resolved cell's defaulted parameters against the table and
/// `list`'s lines; records which default entries it reached.
fn check_cell(
    (algo, env): (&str, &str),
    raw: &BTreeMap<String, Value>,
    resolved: &BTreeMap<&'static str, Value>,
    list: &str,
    reached: &mut BTreeSet<(&'static str, usize)>,
) {
    for (k, v) in resolved.iter().filter(|(k, _)| !raw.contains_key(**k)) {
        let p = param(k).unwrap_or_else(|| panic!("{algo}: resolved {k}, no parameter"));
        if !used(p, algo, env) {
            // linucb is one agent by definition: m is fixed, not defaulted.
            assert_eq!(
                (algo, *k),
                ("linucb", "m"),
                "{algo} on {env} resolved {k}, which the table says it does not use"
            );
            continue;
        }
        let at = p
            .defaults
            .iter()
            .position(|(who, _)| who.is_empty() || who.contains(&algo) || who.contains(&env))
            .unwrap_or_else(|| {
                panic!("{algo} on {env}: {k} resolved to {v} unset, but the table has no default for it")
            });
        let def = &p.defaults[at].1;
        let cx = DefaultContext {
            algorithm: algo,
            environment: env,
            horizon: HORIZON,
            resolved,
        };
        let expected = def.value(&cx);
        assert!(
            !matches!(def, DefaultValue::Required(_)),
            "{algo}: {k} is required by the table, resolved to {v}"
        );
        assert_eq!(
            expected.as_ref(),
            Some(v),
            "{algo} on {env} with {raw:?}: {k} resolved to {v}, the table's default is {}",
            def.describe()
        );
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("  {k:<17} ")))
            .unwrap_or_else(|| panic!("list has no line for {k}"));
        assert!(
            line.contains(&def.describe()),
            "list's line for {k} does not state {}: {line}",
            def.describe()
        );
        reached.insert((p.name, at));
    }
}

#[test]
fn every_default_list_prints_is_what_validate_resolves() {
    let list = list_text();
    let dir = uci_folder();
    let mut reached = BTreeSet::new();
    let mut cells = 0;
    for f in FAMILIES {
        for (algo, _) in f.algorithms {
            for (env, _) in f.environments {
                for raw in variants(algo, env) {
                    if let Ok((resolved, _)) = resolve(algo, env, &raw, HORIZON, &dir) {
                        check_cell((algo, env), &raw, &resolved, &list, &mut reached);
                        cells += 1;
                    }
                }
            }
        }
    }
    assert!(cells > 100, "only {cells} cells resolved");
    let unread = unread(&dir);
    assert!(
        unread.is_empty(),
        "the table says these (algorithm, environment) use a parameter that no resolution of them reads: {unread:?}"
    );
    for p in params() {
        for (at, (who, def)) in p.defaults.iter().enumerate() {
            if !matches!(def, DefaultValue::Required(_)) {
                assert!(
                    reached.contains(&(p.name, at)),
                    "no cell resolved {} to its default {} for {who:?}: no resolver reads it there",
                    p.name,
                    def.describe()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}

/// The (algorithm, environment, parameter) triples where the table says
/// the algorithm or environment uses a parameter that has a default there,
/// yet no resolution of the cell (over [`variants`]) records it: a
/// parameter kept where nothing reads it. Parameters required there are
/// read only when set, and are not asked for.
fn unread(dir: &Path) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut out = Vec::new();
    for f in FAMILIES {
        for (algo, _) in f.algorithms {
            for (env, _) in f.environments {
                let mut recorded = BTreeSet::new();
                for raw in variants(algo, env) {
                    if let Ok((resolved, _)) = resolve(algo, env, &raw, HORIZON, dir) {
                        recorded.extend(resolved.into_keys());
                    }
                }
                for p in params().iter().filter(|p| used(p, algo, env)) {
                    let required = matches!(p.default_for(algo, env), Some(DefaultValue::Required(_)) | None);
                    if !required && !recorded.contains(p.name) {
                        out.push((*algo, *env, p.name));
                    }
                }
            }
        }
    }
    out
}

/// A required parameter left unset is a problem naming it and when it is
/// required, in the table's words.
#[test]
fn a_required_parameter_left_unset_is_named() {
    let raw = BTreeMap::from([("sync".to_string(), Value::Str("threshold".into()))]);
    let errs = resolve("feducb_centralized", "linear_gap", &raw, HORIZON, Path::new("."))
        .err()
        .unwrap_or_default();
    let keys: Vec<&str> = errs.iter().map(|e| e.key).collect();
    assert!(keys.contains(&"epsilon") && keys.contains(&"threshold"), "{errs:?}");
}
