//! The parity gate: what this engine's parity check (every family's parity
//! cells, bit for bit against the CPU; `sim::parity`) found on a
//! CUDA device, recorded per engine version and device in the user's
//! cache directory (beside the calibrations, [`super::calibration`]) as
//! `parity-<hash>.yaml`, written atomically.
//!
//! The check's runner (`fedbandits calibrate`, or `--backend cuda` on a
//! device with no recorded pass) writes a `running` record before the
//! first cell and the verdict after the last, so that a check the watchdog
//! ended ([`super::cuda::watchdog`]: the process exits when a kernel does
//! not return) or that crashed leaves a record that says so. `auto` uses a
//! device only with a recorded pass and otherwise says, in one line, which
//! record kept it on the CPU ([`ParityRecord::notice`]).

use super::calibration::{CalibrationError, engine_version, read_yaml, write_yaml};
use std::path::{Path, PathBuf};

/// What a parity check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Started and not finished: running now in process `pid`, or ended
    /// by the watchdog or a crash.
    Running,
    /// Every parity cell equal to the CPU bit for bit.
    Passed,
    /// A cell differed, or the device failed on one.
    Failed,
}

/// A parity check's record for one engine version and device.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ParityRecord {
    /// Engine version ([`engine_version`]).
    pub engine: String,
    /// Device description.
    pub device: String,
    /// What the check found.
    pub verdict: Verdict,
    /// When the check started (`running`) or ended, seconds since the Unix
    /// epoch.
    pub at: u64,
    /// The process that ran it.
    pub pid: u32,
    /// The cells that passed, or the first difference or failure.
    pub detail: String,
}

impl ParityRecord {
    /// A record of this engine and process for `device`.
    pub fn new(device: &str, verdict: Verdict, detail: String) -> Self {
        Self {
            engine: engine_version(),
            device: device.to_string(),
            verdict,
            at: now(),
            pid: std::process::id(),
            detail,
        }
    }

    /// The record's file for this engine and `device` in `dir`.
    pub fn path(dir: &Path, device: &str) -> PathBuf {
        let text = format!("{}|{device}", engine_version());
        dir.join(format!("parity-{:016x}.yaml", crate::rng::hash_str(&text)))
    }

    /// This engine's record for `device` in `dir`, if one was written (a
    /// file that cannot be read is an error naming it).
    pub fn load(dir: &Path, device: &str) -> Result<Option<Self>, CalibrationError> {
        let r = read_yaml::<Self>(&Self::path(dir, device), "a parity record")?;
        Ok(r.filter(|r| r.engine == engine_version() && r.device == device))
    }

    /// Every record of this engine in `dir` that is not a pass (a device
    /// `auto` must not use), with its file.
    pub fn not_passed(dir: &Path) -> Vec<(PathBuf, Self)> {
        let engine = engine_version();
        let mut out: Vec<(PathBuf, Self)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("parity-"))
            })
            .filter_map(|p| {
                let r: Self = serde_yaml::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
                (r.engine == engine && r.verdict != Verdict::Passed).then_some((p, r))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Writes the record to `dir` atomically; returns the path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, CalibrationError> {
        let path = Self::path(dir, &self.device);
        write_yaml(dir, &path, self)?;
        Ok(path)
    }

    /// Whether a device with this record may run cells.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Passed
    }

    /// What the record says, in words: a pass, a failure with its reason,
    /// a check running now, or one that never finished.
    pub fn describe(&self) -> String {
        match self.verdict {
            Verdict::Passed => format!("passed at {} (Unix seconds): {}", self.at, self.detail),
            Verdict::Failed => format!("failed at {} (Unix seconds): {}", self.at, self.detail),
            Verdict::Running if self.pid != std::process::id() && process_alive(self.pid) => {
                format!("is running now (process {}, started at {})", self.pid, self.at)
            }
            Verdict::Running => format!(
                "started at {} (Unix seconds, process {}) and never finished: the watchdog ended a kernel that did \
                 not return, or the process crashed",
                self.at, self.pid
            ),
        }
    }

    /// The line `auto` prints when the record keeps the device off.
    pub fn notice(&self, path: &Path) -> String {
        format!(
            "skips CUDA device {}: its parity check with this engine {} (record {}); `fedbandits calibrate` checks \
             it again",
            self.device,
            self.describe(),
            path.display()
        )
    }
}

/// Whether process `pid` is alive (Linux: its `/proc` entry exists).
fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record round-trips through its file; a running record of a
    /// process that is gone reads as never finished; records of failures
    /// are found, passes are not.
    #[test]
    fn records_round_trip_and_unfinished_checks_read_as_such() {
        let dir = std::env::temp_dir().join(format!("fedbandits-gate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ok = ParityRecord::new("GPU A", Verdict::Passed, "50 cells".into());
        ok.save(&dir).unwrap();
        assert_eq!(ParityRecord::load(&dir, "GPU A").unwrap(), Some(ok));
        assert_eq!(ParityRecord::load(&dir, "GPU B").unwrap(), None);
        assert!(ParityRecord::not_passed(&dir).is_empty());
        let mut hung = ParityRecord::new("GPU B", Verdict::Running, String::new());
        hung.pid = u32::MAX;
        let path = hung.save(&dir).unwrap();
        let found = ParityRecord::not_passed(&dir);
        assert_eq!(found.len(), 1);
        let notice = found[0].1.notice(&found[0].0);
        assert!(
            notice.contains("never finished") && notice.contains(&path.display().to_string()),
            "{notice}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
