//! One version of a job writing a results directory at a time.
//!
//! Two advisory locks (`flock`, released by the kernel when the process
//! dies, so a `kill -9` never leaves a stale lock):
//! - the **gate**, `<dir>/.lock`, held exclusively for a moment: while a run
//!   checks the directory and registers itself, and for the whole of a
//!   `merge`. A second process waits for it (saying who holds it after a
//!   2 s wait);
//! - one **writer file** per running `run`, `<dir>/.writers/<host>-<pid>-<n>`,
//!   held exclusively for the run's life and holding its job identity and
//!   shard. Under the gate, a writer file that can be locked belongs to a
//!   process that is gone and is removed; the others are the live writers
//!   ([`Gate::live_writers`]), which the caller compares with itself.
//!
//! So Slurm array tasks of one job (same identity, different shards) run in
//! parallel, while a second version of the job, a second run of the same
//! shard, or a merge during a run is refused at start with the holder's pid.
//! On a file system without `flock` (some Lustre mounts) the locks are
//! skipped with a warning.

use super::OutputError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The gate file in a job directory.
pub const GATE_FILE: &str = ".lock";
/// The folder of the live writers' files in a job directory.
pub const WRITERS_DIR: &str = ".writers";

/// A process writing (or about to write) a job directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writer {
    /// Process id.
    pub pid: u32,
    /// Host name (job directories may be shared between nodes).
    pub host: String,
    /// The job identity it writes.
    pub identity: String,
    /// Its shard, `I/N`.
    pub shard: String,
}

impl Writer {
    /// This process as a writer of `identity`, shard `shard`.
    pub fn me(identity: &str, shard: &str) -> Writer {
        Writer {
            pid: std::process::id(),
            host: host_name(),
            identity: identity.to_owned(),
            shard: shard.to_owned(),
        }
    }

    fn text(&self) -> String {
        format!(
            "pid: {}\nhost: {}\nidentity: {}\nshard: {}\n",
            self.pid, self.host, self.identity, self.shard
        )
    }

    fn parse(text: &str) -> Writer {
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix(": ")))
                .unwrap_or("?")
                .to_owned()
        };
        Writer {
            pid: get("pid").parse().unwrap_or(0),
            host: get("host"),
            identity: get("identity"),
            shard: get("shard"),
        }
    }
}

impl std::fmt::Display for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} on {} (shard {})", self.pid, self.host, self.shard)
    }
}

/// This machine's host name (from the kernel; `localhost` if unreadable),
/// reduced to characters safe in a file name.
pub fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let safe: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() { "localhost".into() } else { safe }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Whether a lock error means the file system has no `flock` (ENOLCK: an
/// NFS mount without a lock daemon; EOPNOTSUPP/ENOSYS: Unsupported).
fn unsupported(e: &std::io::Error) -> bool {
    const ENOLCK: i32 = 37; // Linux
    e.kind() == std::io::ErrorKind::Unsupported || e.raw_os_error() == Some(ENOLCK)
}

/// Tries to lock `file` for up to `patience` (the gate is normally held for
/// milliseconds: a short wait is not worth a message).
fn try_lock_for(file: &File, patience: std::time::Duration) -> Result<(), TryLockError> {
    let start = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if start.elapsed() < patience => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// The gate of a job directory, held until dropped.
#[derive(Debug)]
pub struct Gate {
    dir: PathBuf,
    /// None where the file system cannot lock (then nothing is checked).
    file: Option<File>,
}

impl Gate {
    /// Takes the gate of `dir` (created if missing), waiting while another
    /// process holds it; `command` (run, merge) is recorded for the message
    /// a waiting process prints.
    pub fn acquire(dir: &Path, command: &str) -> Result<Gate, OutputError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join(GATE_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        match try_lock_for(&file, std::time::Duration::from_secs(2)) {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                eprintln!(
                    "fedbandits: waiting for {} (held by {})",
                    path.display(),
                    if holder.is_empty() {
                        "another fedbandits"
                    } else {
                        holder
                    }
                );
                file.lock().map_err(io(&path))?;
            }
            Err(TryLockError::Error(e)) if unsupported(&e) => {
                eprintln!(
                    "warning: {}: the file system does not support file locks ({e}); a second writer of this \
                     directory will not be detected",
                    dir.display()
                );
                return Ok(Gate {
                    dir: dir.to_path_buf(),
                    file: None,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
        }
        // Who holds it, for a process that has to wait.
        let me = format!("{} pid {} on {}\n", command, std::process::id(), host_name());
        let _ = file.set_len(0).and_then(|()| std::io::Seek::rewind(&mut file));
        let _ = file.write_all(me.as_bytes());
        Ok(Gate {
            dir: dir.to_path_buf(),
            file: Some(file),
        })
    }

    /// The processes writing the directory now, by their writer files;
    /// files of processes that are gone are removed.
    pub fn live_writers(&self) -> Result<Vec<Writer>, OutputError> {
        let wdir = self.dir.join(WRITERS_DIR);
        if self.file.is_none() {
            return Ok(Vec::new());
        }
        let Ok(rd) = std::fs::read_dir(&wdir) else {
            return Ok(Vec::new());
        };
        let mut live = Vec::new();
        for e in rd.flatten() {
            let path = e.path();
            // Read-write: NFS emulates flock with fcntl locks, whose
            // exclusive form needs a writable descriptor.
            let Ok(mut f) = OpenOptions::new().read(true).write(true).open(&path) else {
                continue; // removed meanwhile by its writer
            };
            match f.try_lock() {
                Ok(()) => {
                    // Its process is gone (the kernel released the lock).
                    let _ = std::fs::remove_file(&path);
                }
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    f.read_to_string(&mut text).map_err(io(&path))?;
                    live.push(Writer::parse(&text));
                }
                Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
            }
        }
        live.sort_by(|a, b| (&a.host, a.pid, &a.shard).cmp(&(&b.host, b.pid, &b.shard)));
        Ok(live)
    }

    /// Registers `w` (this process) as a live writer until the returned
    /// lock is dropped.
    pub fn register(&self, w: &Writer) -> Result<WriterLock, OutputError> {
        if self.file.is_none() {
            return Ok(WriterLock { held: None });
        }
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let wdir = self.dir.join(WRITERS_DIR);
        std::fs::create_dir_all(&wdir).map_err(io(&wdir))?;
        let path = wdir.join(format!("{}-{}-{}", w.host, w.pid, N.fetch_add(1, Ordering::Relaxed)));
        let mut file = File::create(&path).map_err(io(&path))?;
        file.lock().map_err(io(&path))?;
        file.write_all(w.text().as_bytes()).map_err(io(&path))?;
        file.sync_all().map_err(io(&path))?;
        Ok(WriterLock {
            held: Some((file, path)),
        })
    }
}

/// The live writers of `dir` as seen without its gate, removing nothing
/// (`plan`, which writes nothing): a writer file whose lock is held belongs
/// to a running process. Empty when there are none, or the file system has
/// no locks.
pub fn peek_writers(dir: &Path) -> Vec<Writer> {
    let Ok(rd) = std::fs::read_dir(dir.join(WRITERS_DIR)) else {
        return Vec::new();
    };
    let mut live: Vec<Writer> = rd
        .flatten()
        .filter_map(|e| {
            // Read-write for NFS's fcntl emulation of flock (see live_writers).
            let mut f = OpenOptions::new().read(true).write(true).open(e.path()).ok()?;
            match f.try_lock() {
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    f.read_to_string(&mut text).ok()?;
                    Some(Writer::parse(&text))
                }
                // Lockable: its process is gone (the lock drops with `f`).
                _ => None,
            }
        })
        .collect();
    live.sort_by(|a, b| (&a.host, a.pid, &a.shard).cmp(&(&b.host, b.pid, &b.shard)));
    live
}

/// A live writer's registration; dropping it removes the writer file (a
/// killed process's file is removed by the next process under the gate).
#[derive(Debug)]
pub struct WriterLock {
    held: Option<(File, PathBuf)>,
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        if let Some((_file, path)) = self.held.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_are_live_while_registered_and_gone_after() {
        let d = std::env::temp_dir().join(format!("fedbandits-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let gate = Gate::acquire(&d, "run").unwrap();
        assert!(gate.live_writers().unwrap().is_empty());
        let a = gate.register(&Writer::me("id-a", "0/2")).unwrap();
        let b = gate.register(&Writer::me("id-a", "1/2")).unwrap();
        let live = gate.live_writers().unwrap();
        assert_eq!(live.len(), 2);
        assert_eq!(live[0], Writer::me("id-a", "0/2"));
        drop(a);
        assert_eq!(gate.live_writers().unwrap(), [Writer::me("id-a", "1/2")]);
        // A writer file nobody holds (its process was killed) is removed.
        std::fs::write(d.join(WRITERS_DIR).join("host-1-0"), Writer::me("x", "0/1").text()).unwrap();
        assert_eq!(gate.live_writers().unwrap().len(), 1);
        assert!(!d.join(WRITERS_DIR).join("host-1-0").exists());
        drop(b);
        assert!(gate.live_writers().unwrap().is_empty());
        drop(gate);
        // The gate can be taken again once released.
        drop(Gate::acquire(&d, "merge").unwrap());
        assert!(
            std::fs::read_to_string(d.join(GATE_FILE))
                .unwrap()
                .starts_with("merge pid")
        );
    }
}
