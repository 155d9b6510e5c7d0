//! Files in a results directory: atomic writes, their temporary files,
//! the check that a directory can be written before any work starts, and
//! sealed (checksummed) binary files such as snapshots.
//!
//! An atomic write goes to `.<name>.tmp-<pid>` beside its target, is synced
//! and renamed; a reader never sees a partial file under a final name. A
//! write that fails removes its temporary file; one whose process died
//! (kill -9, a crash) leaves it, and [`remove_stale_tmp`] removes those of
//! writers no longer alive before a run starts.

use super::OutputError;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Test-only fault injection: with FEDBANDITS_FAULT_WRITE=N in the
/// environment the process aborts in the middle of its N-th atomic write
/// (after part of the temporary file is written), as a crash would. Used by
/// the kill tests to show that no partial file ever appears under a final
/// name. Without the variable this does nothing.
fn fault_point() -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
    std::env::var("FEDBANDITS_FAULT_WRITE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        == Some(n)
}

/// The temporary file of an atomic write of `path` by this process.
fn tmp_path(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let file_name = path.file_name().and_then(|s| s.to_str()).unwrap_or("out");
    dir.join(format!(".{file_name}.tmp-{}", std::process::id()))
}

/// The writer's pid of a temporary file name written by [`write_bytes_atomic`]
/// (`.<name>.tmp-<pid>`), or None for any other name.
pub fn tmp_pid(file_name: &str) -> Option<u32> {
    let (head, pid) = file_name.rsplit_once(".tmp-")?;
    (file_name.starts_with('.') && head.len() > 1).then_some(())?;
    pid.parse().ok()
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename). On
/// failure (a full disk, a rename refused) the temporary file is removed.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = tmp_path(path);
    let result = write_then_rename(&tmp, path, bytes);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_then_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut file = File::create(tmp).map_err(io(tmp))?;
    if fault_point() {
        let _ = file.write_all(&bytes[..bytes.len() / 2]);
        let _ = file.sync_all();
        std::process::abort();
    }
    file.write_all(bytes).map_err(io(tmp))?;
    file.sync_all().map_err(io(tmp))?;
    drop(file);
    std::fs::rename(tmp, path).map_err(io(path))
}

/// A file written atomically as a stream: bytes go to the temporary file
/// of `path` (hashed with XXH64 as they go, until [`AtomicFile::data_hash`]
/// is taken), and [`AtomicFile::commit`] syncs and renames it. Dropped
/// without a commit (an error on the way), the temporary file is removed.
pub struct AtomicFile {
    tmp: PathBuf,
    path: PathBuf,
    file: Option<std::io::BufWriter<File>>,
    hasher: Option<twox_hash::XxHash64>,
    hashed: u64,
    written: u64,
    tail: [u8; 8],
    /// The bytes written after [`AtomicFile::data_hash`] (the footer).
    after: Vec<u8>,
}

impl AtomicFile {
    /// Creates the temporary file of `path`.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let tmp = tmp_path(path);
        let file = File::create(&tmp).map_err(io(&tmp))?;
        Ok(AtomicFile {
            tmp,
            path: path.to_path_buf(),
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            hasher: Some(twox_hash::XxHash64::with_seed(0)),
            hashed: 0,
            written: 0,
            tail: [0; 8],
            after: Vec::new(),
        })
    }

    /// The XXH64 of every byte written so far and their number; the bytes
    /// written after are not hashed.
    pub fn data_hash(&mut self) -> (u64, u64) {
        use std::hash::Hasher;
        let h = self.hasher.take().map_or(0, |h| h.finish());
        (h, self.hashed)
    }

    /// Bytes written so far, and the last 8 of them.
    pub fn written(&self) -> (u64, [u8; 8]) {
        (self.written, self.tail)
    }

    /// Passes the bytes written after [`AtomicFile::data_hash`] (the
    /// footer) to `patch` and, where it changed them (returned true),
    /// writes them back in place; returns what `patch` returned.
    pub fn patch_tail(&mut self, patch: impl FnOnce(&mut [u8]) -> bool) -> Result<bool, OutputError> {
        use std::io::{Seek, SeekFrom};
        let mut tail = std::mem::take(&mut self.after);
        if !patch(&mut tail) {
            return Ok(false);
        }
        let at = self.hashed;
        let tmp = self.tmp.clone();
        let file = self.file.as_mut().ok_or_else(|| OutputError::Io {
            path: tmp.clone(),
            source: std::io::Error::other("committed"),
        })?;
        file.flush().map_err(io(&tmp))?;
        let inner = file.get_mut();
        inner.seek(SeekFrom::Start(at)).map_err(io(&tmp))?;
        inner.write_all(&tail).map_err(io(&tmp))?;
        Ok(true)
    }

    /// Syncs the temporary file and renames it to its final name.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let file = self.file.take().ok_or_else(|| OutputError::Io {
            path: self.tmp.clone(),
            source: std::io::Error::other("committed twice"),
        })?;
        let file = file.into_inner().map_err(|e| OutputError::Io {
            path: self.tmp.clone(),
            source: e.into_error(),
        })?;
        if fault_point() {
            let _ = file.set_len(self.written / 2);
            let _ = file.sync_all();
            std::process::abort();
        }
        file.sync_all().map_err(io(&self.tmp))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(io(&self.path))?;
        if let Some(d) = self.path.parent().and_then(|d| File::open(d).ok()) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::hash::Hasher;
        let file = self.file.as_mut().ok_or_else(|| std::io::Error::other("committed"))?;
        let n = file.write(buf)?;
        if let Some(h) = self.hasher.as_mut() {
            h.write(&buf[..n]);
            self.hashed += n as u64;
        } else {
            self.after.extend_from_slice(&buf[..n]);
        }
        self.written += n as u64;
        let keep = n.min(8);
        self.tail.rotate_left(keep);
        self.tail[8 - keep..].copy_from_slice(&buf[n - keep..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Removes the temporary files (`.<name>.tmp-<pid>`) directly in `dirs`
/// whose writer is not in `live` (the pids of the processes still writing
/// this directory, on any host: a pid seen there is kept, the safe side of
/// a pid reused across hosts). Returns the files removed. The caller holds
/// the directory's gate ([`super::lock::Gate`]), so no new writer starts
/// meanwhile.
pub fn remove_stale_tmp(dirs: &[PathBuf], live: &[u32]) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(tmp_pid) else {
                continue;
            };
            if !live.contains(&pid)
                && e.file_type().is_ok_and(|t| t.is_file())
                && std::fs::remove_file(e.path()).is_ok()
            {
                removed.push(e.path());
            }
        }
    }
    removed.sort();
    removed
}

/// Checks that files can be created in `dir` (created if missing) by
/// creating and removing a probe file: a read-only or full directory is
/// found before any work, not after the first result is computed.
pub fn probe_writable(dir: &Path) -> Result<(), OutputError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let probe = dir.join(format!(".probe.tmp-{}", std::process::id()));
    let written = File::create(&probe).and_then(|mut f| f.write_all(b"fedbandits write probe\n"));
    let _ = std::fs::remove_file(&probe);
    written.map_err(io(dir))
}

/// The magic bytes of a sealed (checksummed) binary file.
const SEAL_MAGIC: &[u8; 8] = b"FBSEAL01";

/// `payload` behind a header of magic bytes and its XXH64, for binary files
/// (snapshots) that [`unseal`] verifies.
pub fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + SEAL_HEADER);
    out.extend_from_slice(&[0; SEAL_HEADER]);
    out.extend_from_slice(payload);
    seal_in_place(&mut out);
    out
}

/// The bytes of [`seal`]'s header: a payload written after this many
/// placeholder bytes is sealed where it lies by [`seal_in_place`], without
/// a copy (a snapshot of a large federation is held once, not twice).
pub const SEAL_HEADER: usize = 16;

/// Fills the header of `buf` (its first [`SEAL_HEADER`] bytes, a
/// placeholder) for the payload after it: `buf` becomes what [`seal`]
/// returns for that payload. A buffer shorter than the header is left as
/// it is.
pub fn seal_in_place(buf: &mut [u8]) {
    if buf.len() < SEAL_HEADER {
        return;
    }
    let (header, payload) = buf.split_at_mut(SEAL_HEADER);
    header[..8].copy_from_slice(SEAL_MAGIC);
    header[8..].copy_from_slice(&twox_hash::XxHash64::oneshot(0, payload).to_le_bytes());
}

/// What is wrong with a file that should be [`seal`]ed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// No header (another format, or an older fedbandits).
    #[error("no fedbandits checksum header (written by an older fedbandits, or not a snapshot)")]
    NoHeader,
    /// The content does not hash to the header's checksum.
    #[error("checksum mismatch (content {actual:016x}, header {stated:016x}): the file is damaged")]
    Mismatch {
        /// The content's XXH64.
        actual: u64,
        /// The header's.
        stated: u64,
    },
}

/// The payload of a [`seal`]ed file, or what is wrong with it.
pub fn unseal(bytes: &[u8]) -> Result<&[u8], SealError> {
    let (Some(magic), Some(sum)) = (bytes.get(..8), bytes.get(8..16)) else {
        return Err(SealError::NoHeader);
    };
    if magic != SEAL_MAGIC {
        return Err(SealError::NoHeader);
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(sum);
    let stated = u64::from_le_bytes(word);
    let payload = &bytes[16..];
    let actual = twox_hash::XxHash64::oneshot(0, payload);
    if actual != stated {
        return Err(SealError::Mismatch { actual, stated });
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fedbandits-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let d = scratch("fail");
        // The target is a non-empty directory: the data is written to the
        // temporary file, then the rename fails.
        std::fs::create_dir_all(d.join("part.parquet").join("x")).unwrap();
        let err = write_bytes_atomic(&d.join("part.parquet"), b"data").unwrap_err();
        assert!(err.to_string().contains("part.parquet"), "{err}");
        assert_eq!(names(&d), ["part.parquet"]);
        write_bytes_atomic(&d.join("ok.bin"), b"data").unwrap();
        assert_eq!(names(&d), ["ok.bin", "part.parquet"]);
    }

    #[test]
    fn stale_temporary_files_of_dead_writers_are_removed_live_ones_kept() {
        let d = scratch("stale");
        for n in [
            ".a.parquet.tmp-11",
            ".b.bin.tmp-22",
            "c.tmp-33",
            ".d.tmp-x",
            "part.parquet",
        ] {
            std::fs::write(d.join(n), b"x").unwrap();
        }
        let removed = remove_stale_tmp(&[d.clone(), d.join("missing")], &[22]);
        assert_eq!(removed, [d.join(".a.parquet.tmp-11")]);
        assert_eq!(names(&d), [".b.bin.tmp-22", ".d.tmp-x", "c.tmp-33", "part.parquet"]);
        assert_eq!(tmp_pid(".x.tmp-42"), Some(42));
        assert_eq!(tmp_pid("._manifest.yaml.tmp-7"), Some(7));
        assert_eq!(tmp_pid(".tmp-42"), None);
    }

    #[test]
    fn probe_finds_an_unwritable_directory() {
        let d = scratch("probe");
        probe_writable(&d.join("new")).unwrap();
        assert!(names(&d.join("new")).is_empty(), "the probe is removed");
        // A path under a regular file cannot be written (root ignores
        // permission bits; this fails for every user).
        std::fs::write(d.join("file"), b"x").unwrap();
        assert!(probe_writable(&d.join("file").join("sub")).is_err());
    }
}
