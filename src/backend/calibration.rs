//! What `fedbandits calibrate` measured on this machine, and how `--backend
//! auto` reads it.
//!
//! A calibration is a table of agent-steps per second per workload, backend
//! and batch size (federations), measured on one machine: its key is the
//! engine version, the CPU model, the thread count and the CUDA device (or
//! none). It lives in the user's cache directory
//! (`$FEDBANDITS_CACHE_DIR`, else `$XDG_CACHE_HOME/fedbandits`, else
//! `$HOME/.cache/fedbandits`) as one YAML file per key, written atomically.
//! Nothing about speed is compiled into the binary: without a calibration of
//! this machine, `auto` runs every cell on the CPU and says so.
//!
//! **The choice** ([`Calibration::choose`]): a cell's batch has a workload
//! kind ([`super::Placeable::kind`]: `linear`, `linear_gap`, `feducb`,
//! `feducb_decentralized`, `sdp_vecsum`, `gossip`, `combinatorial`) and a
//! size (its federations). Each backend's rate is the geometric mean of its
//! rows of that kind at its largest measured batch size not above the
//! cell's; the fastest wins.
//! A cell smaller than every measured size, or of a kind never measured,
//! runs on the CPU.

use std::path::{Path, PathBuf};

/// One measurement.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Bench workload name.
    pub workload: String,
    /// Its kind ([`super::Placeable::kind`]).
    pub kind: String,
    /// `cpu` or `cuda`.
    pub backend: String,
    /// Federations in the batch.
    pub federations: u32,
    /// Measured rate.
    pub agent_steps_per_s: f64,
    /// Rate over the CPU's at the same workload and size, if both measured.
    #[serde(default)]
    pub speedup: Option<f64>,
    /// Achieved fraction of the device's FP64 peak (cost model), on a GPU.
    #[serde(default)]
    pub fp64_fraction: Option<f64>,
    /// Achieved fraction of the device's memory bandwidth (cost model).
    #[serde(default)]
    pub bandwidth_fraction: Option<f64>,
}

impl Row {
    /// A measurement without the derived columns (speed-up, fractions).
    pub fn measured(workload: &str, kind: &str, backend: &str, federations: u32, rate: f64) -> Self {
        Self {
            workload: workload.into(),
            kind: kind.into(),
            backend: backend.into(),
            federations,
            agent_steps_per_s: rate,
            speedup: None,
            fp64_fraction: None,
            bandwidth_fraction: None,
        }
    }
}

/// The machine a calibration belongs to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MachineKey {
    /// Engine version and semantics version.
    pub engine: String,
    /// CPU model (`/proc/cpuinfo`'s model name, else the architecture).
    pub cpu: String,
    /// Worker threads of the measurement (a run with another count is
    /// another machine for this purpose).
    pub threads: usize,
    /// CUDA device description, or None when no device opened.
    pub device: Option<String>,
}

/// A calibration file's content.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Calibration {
    /// Whose measurements.
    pub machine: MachineKey,
    /// When (seconds since the Unix epoch).
    pub measured_at: u64,
    /// The measurements.
    pub rows: Vec<Row>,
    /// Backends that failed the parity check (not measured), with why.
    #[serde(default)]
    pub rejected: Vec<String>,
    /// `calibrate --shapes`: each family's shapes timed on one thread,
    /// from which `plan` fits the family's time model on this machine.
    #[serde(default)]
    pub shapes: Vec<ShapeRow>,
}

/// One shape of `calibrate --shapes`: a family's job timed on one thread.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShapeRow {
    /// Family.
    pub family: String,
    /// Shape name (the family's `shapes`).
    pub shape: String,
    /// Horizon it ran at.
    pub horizon: u64,
    /// Units of each of the family's cost terms per agent-step, as
    /// (term, units).
    pub units: Vec<(String, f64)>,
    /// Measured seconds per agent-step on one thread.
    pub seconds_per_step: f64,
}

/// Reading or writing a calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    /// No cache directory could be found.
    #[error("no cache directory: set FEDBANDITS_CACHE_DIR or HOME")]
    NoCacheDir,
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// File.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

impl MachineKey {
    /// This machine with `threads` worker threads and the device `device`.
    pub fn here(threads: usize, device: Option<&str>) -> Self {
        Self {
            engine: engine_version(),
            cpu: cpu_model(),
            threads,
            device: device.map(str::to_owned),
        }
    }

    /// The calibration file's name for this key.
    pub fn file_name(&self) -> String {
        let text = format!(
            "{}|{}|{}|{}",
            self.engine,
            self.cpu,
            self.threads,
            self.device.as_deref().unwrap_or("-")
        );
        format!("calibration-{:016x}.yaml", crate::rng::hash_str(&text))
    }
}

/// The engine version a calibration is valid for: the crate version and
/// the commit it was built from (kernels and CPU code change with it).
pub fn engine_version() -> String {
    format!(
        "{} ({})",
        env!("CARGO_PKG_VERSION"),
        option_env!("FEDBANDITS_GIT_COMMIT").unwrap_or("unknown commit")
    )
}

/// The CPU's model name (Linux: `/proc/cpuinfo`), else the architecture.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The directory calibrations live in (not created; [`crate::cache::dir`]).
pub fn cache_dir() -> Result<PathBuf, CalibrationError> {
    crate::cache::dir().map_err(|_| CalibrationError::NoCacheDir)
}

impl Calibration {
    /// The file of `key` in `dir`.
    pub fn path(dir: &Path, key: &MachineKey) -> PathBuf {
        dir.join(key.file_name())
    }

    /// The calibration of `key` in `dir`, if one was written (a file that
    /// cannot be read or belongs to another key is an error, naming it).
    pub fn load(dir: &Path, key: &MachineKey) -> Result<Option<Self>, CalibrationError> {
        let path = Self::path(dir, key);
        let Some(c) = read_yaml::<Self>(&path, "a calibration")? else {
            return Ok(None);
        };
        if &c.machine != key {
            return Err(CalibrationError::Io {
                path,
                message: "written for another machine key; run `fedbandits calibrate` again".into(),
            });
        }
        Ok(Some(c))
    }

    /// A calibration of `machine` with nothing measured yet.
    pub fn empty(machine: MachineKey) -> Self {
        Self {
            machine,
            measured_at: 0,
            rows: Vec::new(),
            rejected: Vec::new(),
            shapes: Vec::new(),
        }
    }

    /// The device named by any calibration of this engine, CPU and thread
    /// count in `dir` (so that `auto` opens a device only where one was
    /// measured).
    pub fn device_calibrated(dir: &Path, threads: usize) -> Option<String> {
        let here = MachineKey::here(threads, None);
        let entries = std::fs::read_dir(dir).ok()?;
        entries
            .filter_map(Result::ok)
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_yaml::from_str::<Self>(&t).ok())
            .filter(|c| c.machine.engine == here.engine && c.machine.cpu == here.cpu && c.machine.threads == threads)
            .find_map(|c| c.machine.device)
    }

    /// Writes the calibration to `dir` atomically; returns the path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, CalibrationError> {
        let path = Self::path(dir, &self.machine);
        write_yaml(dir, &path, self)?;
        Ok(path)
    }

    /// The backend measured fastest for a batch of `kind` with
    /// `federations` federations, with why; None when no row covers it.
    /// Each backend is represented by the geometric mean of its rows of the
    /// kind at its largest measured batch size not above the cell's (a
    /// backend too slow to measure at a large size keeps the rate of a
    /// smaller one: the CPU's rate does not grow with the batch once every
    /// thread is busy).
    pub fn choose(&self, kind: &str, federations: usize) -> Option<(String, String)> {
        // (backend, size, geometric mean of the kind's workloads there).
        let mut at: Vec<(&str, u32, f64, usize)> = Vec::new();
        for r in self
            .rows
            .iter()
            .filter(|r| r.kind == kind && r.federations as usize <= federations)
        {
            let ln = r.agent_steps_per_s.max(f64::MIN_POSITIVE).ln();
            match at.iter_mut().find(|a| a.0 == r.backend && a.1 == r.federations) {
                Some(a) => {
                    a.2 += ln;
                    a.3 += 1;
                }
                None => at.push((r.backend.as_str(), r.federations, ln, 1)),
            }
        }
        let mut best: Vec<(&str, u32, f64)> = Vec::new();
        for (backend, size, sum, n) in at {
            let rate = (sum / n as f64).exp();
            match best.iter_mut().find(|b| b.0 == backend) {
                Some(b) if b.1 < size => *b = (backend, size, rate),
                Some(_) => {}
                None => best.push((backend, size, rate)),
            }
        }
        let win = best.iter().max_by(|a, b| a.2.total_cmp(&b.2))?;
        let rates: Vec<String> = best.iter().map(|b| format!("{} {:.3e} at {}", b.0, b.2, b.1)).collect();
        Some((
            win.0.to_string(),
            format!(
                "calibrated {kind} for {federations} federations: {} agent-steps/s",
                rates.join(" vs ")
            ),
        ))
    }
}

/// The value of YAML file `path` (`what` names its kind in errors), or
/// None where there is no such file; a file that cannot be read or parsed
/// is an error naming it.
pub(crate) fn read_yaml<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
) -> Result<Option<T>, CalibrationError> {
    let io = |message: String| CalibrationError::Io {
        path: path.to_path_buf(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e.to_string())),
    };
    serde_yaml::from_str(&text).map(Some).map_err(|e| {
        io(format!(
            "not {what} ({e}); run `fedbandits calibrate` again or delete it"
        ))
    })
}

/// Writes `value` as YAML to `path` in `dir` (created) atomically: a
/// temporary file in the same directory, renamed.
pub(crate) fn write_yaml<T: serde::Serialize>(dir: &Path, path: &Path, value: &T) -> Result<(), CalibrationError> {
    let io = |message: String| CalibrationError::Io {
        path: path.to_path_buf(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(e.to_string()))?;
    let text = serde_yaml::to_string(value).map_err(|e| io(e.to_string()))?;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(device: Option<&str>, rows: Vec<Row>) -> Calibration {
        Calibration {
            machine: MachineKey::here(3, device),
            measured_at: 0,
            rows,
            rejected: Vec::new(),
            shapes: Vec::new(),
        }
    }

    fn row(kind: &str, backend: &str, federations: u32, rate: f64) -> Row {
        Row::measured(&format!("{kind}_w"), kind, backend, federations, rate)
    }

    /// A CPU-only calibration beside a device's: `auto` finds the device
    /// whichever file it reads first; a file of another thread count is
    /// another machine.
    #[test]
    fn the_calibrated_device_is_found_beside_a_cpu_only_calibration() {
        let dir = std::env::temp_dir().join(format!("fedbandits-calibration-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        cal(None, Vec::new()).save(&dir).unwrap();
        assert_eq!(Calibration::device_calibrated(&dir, 3), None);
        cal(Some("GPU X"), Vec::new()).save(&dir).unwrap();
        assert_eq!(Calibration::device_calibrated(&dir, 3).as_deref(), Some("GPU X"));
        assert_eq!(Calibration::device_calibrated(&dir, 4), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The geometric mean of a kind's workloads at each backend's largest
    /// size not above the cell's; the CPU's smaller size stands where it was
    /// not measured at the larger one.
    #[test]
    fn choice_by_kind_and_size() {
        let c = cal(
            Some("GPU X"),
            vec![
                row("feducb", "cpu", 64, 1e6),
                row("feducb", "cpu", 64, 4e6),
                row("feducb", "cuda", 64, 1e6),
                row("feducb", "cuda", 4096, 1e8),
                row("feducb", "cuda", 4096, 1e6),
            ],
        );
        // cpu: sqrt(1e6 * 4e6) = 2e6 at 64; cuda at 64: 1e6; at 4096: 1e7.
        assert_eq!(c.choose("feducb", 100).unwrap().0, "cpu");
        let (b, why) = c.choose("feducb", 5000).unwrap();
        assert_eq!(b, "cuda", "{why}");
        assert!(
            why.contains("cpu 2.000e6 at 64") && why.contains("cuda 1.000e7 at 4096"),
            "{why}"
        );
        assert_eq!(c.choose("feducb", 10), None);
        assert_eq!(c.choose("gossip", 5000), None);
    }
}
