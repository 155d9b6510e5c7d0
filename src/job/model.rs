//! Is the model right? The cells of a job whose environment its algorithm's
//! model cannot represent ([`crate::algo::CellConfig::misspecification`]),
//! as the warnings `validate` and `run` print (once per cell, from a
//! horizon of [`WARN_HORIZON`] rounds) and the JSON every file carries
//! (`fedbandits.model`).

use super::Job;
use crate::env::Misspecification;

/// The horizon from which a misspecified cell is warned about: below it
/// the bias hides in the noise (the papers' horizons are at most 2.5e4);
/// from it on, a learner that settled on a wrong action shows regret
/// growing linearly in T.
pub const WARN_HORIZON: u64 = 100_000;

/// One misspecified cell.
#[derive(Clone, Debug)]
pub struct ModelWarning {
    /// The cell's index.
    pub cell: usize,
    /// What is wrong, the key and the fix.
    pub what: Misspecification,
    /// Whether its horizon reaches [`WARN_HORIZON`] (then it is printed).
    pub warned: bool,
}

impl Job {
    /// Every cell whose environment is misspecified for its algorithm, in
    /// cell order.
    pub fn model_warnings(&self) -> Vec<ModelWarning> {
        self.cells
            .iter()
            .filter_map(|c| {
                c.config.misspecification().map(|what| ModelWarning {
                    cell: c.index,
                    what,
                    warned: self.horizon >= WARN_HORIZON,
                })
            })
            .collect()
    }

    /// The warnings to print: one line per misspecified cell whose horizon
    /// reaches [`WARN_HORIZON`], naming the cell, the key, the consequence
    /// and the fix.
    pub fn model_warning_lines(&self) -> Vec<String> {
        self.model_warnings()
            .iter()
            .filter(|w| w.warned)
            .map(|w| {
                let cell = &self.cells[w.cell];
                format!(
                    "model (cell [{}] {}): {}: {}; at horizon {} regret can grow linearly in T (the learner can \
                     settle on a wrong action for good); fix: {}",
                    w.cell,
                    self.short_label(cell),
                    w.what.key,
                    w.what.why,
                    self.horizon,
                    w.what.fix
                )
            })
            .collect()
    }

    /// The misspecified cells as JSON (`fedbandits.model`): `{"cells":
    /// [{"cell_id", "label", "key", "why", "fix", "warned"}, ...]}`, empty
    /// when the model is right for every cell.
    pub fn model_json(&self) -> String {
        let cells: Vec<serde_json::Value> = self
            .model_warnings()
            .iter()
            .map(|w| {
                let c = &self.cells[w.cell];
                serde_json::json!({
                    "cell_id": c.id,
                    "label": c.label(),
                    "key": w.what.key,
                    "why": w.what.why,
                    "fix": w.what.fix,
                    "warned": w.warned,
                })
            })
            .collect();
        serde_json::json!({ "warn_horizon": WARN_HORIZON, "cells": cells }).to_string()
    }

    /// Every cell's facts as JSON (`fedbandits.facts`): `{"cell id":
    /// {"name": value, ...}, ...}` over the cells that have any
    /// ([`crate::algo::FamilyConfig::facts`]).
    pub fn facts_json(&self) -> String {
        let cells: serde_json::Map<String, serde_json::Value> = self
            .cells
            .iter()
            .filter_map(|c| {
                let facts = c.config.facts();
                (!facts.is_empty()).then(|| {
                    let map = facts
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                        .collect();
                    (c.id.clone(), serde_json::Value::Object(map))
                })
            })
            .collect();
        serde_json::Value::Object(cells).to_string()
    }
}
