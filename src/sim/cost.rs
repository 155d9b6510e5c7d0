//! Time model of the CPU engine, for `fedbandits plan`: seconds on one
//! thread for a cell's agent-steps, from its family's cost model
//! ([`crate::algo::Cost`]: a reference rate, a relative cost, and the tree
//! noise it regenerates) and the engine's cost per noise entry. Estimates,
//! not promises: a shared machine can be 2x slower.

use crate::algo::CellConfig;

/// Seconds per regenerated noise entry of a tree node: `fedbandits bench
/// --threads 2` on the 2-core VM (issue 43, three interleaved runs, the
/// keyed normals in AVX-512) gave feducb_private_every_d10 1.07e6 and
/// feducb_every_d10 1.57e6 agent-steps/s, 0.61 us more per agent-step and
/// thread for two nodes of 110 entries (2.8e-9 s an entry, the release's
/// own bookkeeping included; 4.1e-9 at issue 40, 1.0e-8 before).
pub const NOISE_ENTRY_SECONDS: f64 = 2.8e-9;

/// What the time model's error was when it was last fitted (issue 57), as
/// `plan` states it: measured CPU time (user + system, warm accountant
/// cache) over planned, on the 2-core development VM, over 48 one-thread
/// one-repetition runs of the linear family (six algorithms and protocols
/// at d 2-50, K 5-500, M 2-100) and seven study jobs of every family.
pub const FITTED_ERROR: &str = "measured CPU time was 0.67x to 1.45x of planned on 55 jobs and shapes of every family \
     (d 2-50, K 5-500, M 2-100) when the model was fitted, on the 2-core development VM; a loaded or shared machine \
     is slower, and the vector-summation accountant adds 2-10 s per task where its figures are not cached yet";

/// Estimated seconds on one thread for `agent_steps` of the cell, at
/// `rate` agent-steps/s per thread for the family's reference workload
/// (default: the family's own), plus its tree releases.
pub fn thread_seconds(cfg: &CellConfig, agent_steps: u64, rate: Option<f64>) -> f64 {
    let (cost, steps) = (cfg.cost(), agent_steps as f64);
    steps * cost.relative / rate.unwrap_or(cost.reference_rate)
        + steps * cost.noise_entries_per_step * NOISE_ENTRY_SECONDS
}

/// The rates `plan` turns agent-steps into seconds with: each family's
/// agent-steps per second per thread at its reference workload (the first
/// of its `fedbandits bench` workloads), and where they come from.
#[derive(Clone, Debug)]
pub struct Rates {
    /// (family, rate); a family not listed uses its built-in rate.
    per_family: Vec<(&'static str, f64)>,
    /// One rate for every family (`plan --rate`).
    uniform: Option<f64>,
    /// Where the rates come from, for the user.
    pub source: String,
}

impl Rates {
    /// The engine's built-in rates, measured on the 2-core development VM.
    pub fn model() -> Self {
        Rates {
            per_family: Vec::new(),
            uniform: None,
            source: "the built-in CPU time model (rates measured on the 2-core development VM; run `fedbandits \
                     calibrate` to measure this machine's)"
                .into(),
        }
    }

    /// One rate for every family's reference workload.
    pub fn uniform(rate: f64) -> Self {
        Rates {
            per_family: Vec::new(),
            uniform: Some(rate),
            source: format!("--rate {rate:.3e} agent-steps/s per thread at each family's reference workload"),
        }
    }

    /// The rates of a calibration: each family's reference workload on the
    /// CPU at the largest batch measured, divided by the calibration's
    /// threads; None when it measured no family's reference.
    pub fn calibrated(cal: &crate::backend::calibration::Calibration, path: &std::path::Path) -> Option<Self> {
        let threads = cal.machine.threads.max(1) as f64;
        let per_family: Vec<(&'static str, f64)> = crate::algo::family::FAMILIES
            .iter()
            .filter_map(|f| {
                let reference = f.workloads.first()?.0;
                let row = cal
                    .rows
                    .iter()
                    .filter(|r| r.backend == "cpu" && r.workload == reference && r.agent_steps_per_s > 0.0)
                    .max_by_key(|r| r.federations)?;
                Some((f.name, row.agent_steps_per_s / threads))
            })
            .collect();
        (!per_family.is_empty()).then(|| {
            let list: Vec<String> = per_family.iter().map(|(f, r)| format!("{f} {r:.2e}")).collect();
            Rates {
                per_family,
                uniform: None,
                source: format!(
                    "this machine's calibration {} ({} threads; per thread: {})",
                    path.display(),
                    cal.machine.threads,
                    list.join(", ")
                ),
            }
        })
    }

    /// This machine's calibration for `threads` worker threads (the CPU
    /// rows of any calibration of this engine, CPU model and thread count
    /// in the cache directory), else the built-in model.
    pub fn here(threads: usize) -> Self {
        use crate::backend::calibration::{Calibration, MachineKey, cache_dir};
        let key = MachineKey::here(threads, None);
        let Ok(dir) = cache_dir() else { return Self::model() };
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Self::model();
        };
        let mut files: Vec<std::path::PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("calibration-"))
            })
            .collect();
        files.sort();
        files
            .iter()
            .filter_map(|p| {
                let cal: Calibration = serde_yaml::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
                let m = &cal.machine;
                (m.engine == key.engine && m.cpu == key.cpu && m.threads == threads)
                    .then(|| Self::calibrated(&cal, p))
                    .flatten()
            })
            .next()
            .unwrap_or_else(Self::model)
    }

    /// The rate for a cell of `algorithm` (None: its family's built-in).
    pub fn rate(&self, algorithm: &str) -> Option<f64> {
        self.uniform.or_else(|| {
            let family = crate::algo::family::family_of(algorithm)?.name;
            self.per_family.iter().find(|(f, _)| *f == family).map(|r| r.1)
        })
    }
}
