//! What identifies a cell: the canonical text of its algorithm,
//! environment, horizon and resolved parameters (floats by their bits),
//! hashed into its resume key and, without the parameters that do not
//! change its random numbers, into its random scope; the environment's own
//! text keys the environment streams shared across cells.

use super::{Cell, CheckpointSpec, SEMANTICS_VERSION};
use crate::algo::CellConfig;
use crate::algo::params::Value;
use crate::rng::hash_str;
use std::collections::BTreeMap;

fn canonical(algo: &str, env: &str, params: &BTreeMap<&'static str, Value>, horizon: u64) -> String {
    let mut s = format!("{algo}|{env}|T={horizon}");
    // A value a cell is keyed without (`noise: true`) leaves the text as it
    // was before its parameter existed.
    for (k, v) in params
        .iter()
        .filter(|(k, v)| !crate::algo::family::param(k).is_some_and(|d| d.unkeyed_value(v)))
    {
        s += &format!("|{k}={}", value_bits(v));
    }
    s
}

/// The text a cell's algorithm keys are hashed from: [`canonical`] without
/// the parameters compared on common random numbers
/// ([`crate::algo::params::ParamDef::common_random_numbers`]: adding such a
/// parameter leaves every earlier cell's streams as they were).
fn random_scope(algo: &str, env: &str, params: &BTreeMap<&'static str, Value>, horizon: u64) -> String {
    let mut p = params.clone();
    p.retain(|k, _| !crate::algo::family::param(k).is_some_and(|d| d.common_random_numbers));
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
/// A cell's identifiers, from its resolved parameters.
pub struct CellIds {
    /// The canonical text (algorithm, environment, horizon, parameters).
    pub canonical: String,
    id: String,
    key: String,
    legacy_key: String,
    env_scope: u64,
    cell_scope: u64,
}

impl CellIds {
    /// The identifiers of a cell of a job with this seed, repetitions and
    /// checkpoints: its id (the canonical text's hash), its resume key (the
    /// id's text with the seed, checkpoints and engine semantics: not the
    /// repetitions, which a unit does not depend on, so a job that grows
    /// reuses its units), the key units were named by before unit format 2
    /// (with the repetitions), the environment's and the cell's random
    /// scopes. `inputs`: what the cell read from files
    /// ([`crate::algo::CellConfig::inputs`]), whose hash joins the
    /// canonical text, so that a changed file is another cell.
    pub fn new(
        algo: &str,
        env: &str,
        params: &BTreeMap<&'static str, Value>,
        (horizon, seed, reps, checkpoints): (u64, u64, u32, &CheckpointSpec),
        inputs: Option<&str>,
    ) -> Self {
        let mut canon = canonical(algo, env, params, horizon);
        if let Some(text) = inputs {
            canon += &format!("|inputs={:016x}", hash_str(text));
        }
        let key_text = format!("{canon}|seed={seed}|ck={}|v{SEMANTICS_VERSION}", checkpoints.describe());
        let legacy_text = format!(
            "{canon}|seed={seed}|reps={reps}|ck={}|v{SEMANTICS_VERSION}",
            checkpoints.describe()
        );
        Self {
            id: format!("{:016x}", hash_str(&canon)),
            key: format!("{:016x}", hash_str(&key_text)),
            legacy_key: format!("{:016x}", hash_str(&legacy_text)),
            env_scope: hash_str(&env_canonical(env, params)),
            cell_scope: hash_str(&random_scope(algo, env, params, horizon)),
            canonical: canon,
        }
    }

    /// The cell at `index`.
    pub fn cell(
        self,
        index: usize,
        algo: &str,
        env: &str,
        params: BTreeMap<&'static str, Value>,
        config: CellConfig,
    ) -> Cell {
        Cell {
            index,
            id: self.id,
            key: self.key,
            legacy_key: self.legacy_key,
            algorithm: algo.to_owned(),
            environment: env.to_owned(),
            params,
            config,
            env_scope: self.env_scope,
            cell_scope: self.cell_scope,
        }
    }
}
