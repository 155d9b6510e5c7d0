//! The unit-shift figures on disk: each (s, eta) the accountant computed is
//! appended as one line to `unit-shift-r{REVISION}.txt` in the user's cache
//! directory (`$FEDBANDITS_CACHE_DIR`, else `$XDG_CACHE_HOME/fedbandits`,
//! else `$HOME/.cache/fedbandits`), and read back by every later process.
//!
//! A line is `eta s mu tail check`: eta, mu and tail as the hexadecimal bits
//! of their f64 (read back exactly), s in decimal, check the XXH64 of the
//! text before it. A line whose check fails (a torn append, a damaged
//! file), that does not parse, or whose mu is below the Gaussian limit
//! 1/sigma (no Binomial unit shift is more private than the Gaussian of its
//! variance) is ignored, and the figure is computed again. [`REVISION`] is
//! part of the file name: a change to the computation that changes any
//! figure bumps it, so an older file is never read. Each new figure is one
//! `write` of one line to a file opened for appending, so processes sharing
//! the directory (a Slurm array) add to it without locks; a figure written
//! twice is the same figure. Without a writable cache directory nothing is
//! stored and every process computes its own (`FEDBANDITS_ACCOUNTANT_CACHE=0`
//! turns the cache off).

use super::UnitShift;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

/// The computation's revision: bumped whenever [`super::compute`] would
/// give any (s, eta) another figure.
pub const REVISION: u32 = 1;

static LOADED: Once = Once::new();

/// The cache file, None when caching is off or no directory is known.
pub fn file() -> Option<PathBuf> {
    path()
}

fn path() -> Option<PathBuf> {
    if std::env::var("FEDBANDITS_ACCOUNTANT_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    let dir = crate::cache::dir().ok()?;
    Some(dir.join(format!("unit-shift-r{REVISION}.txt")))
}

/// The line that records `got` for `key` (with its check).
fn line((eta, s): (u64, u64), got: UnitShift) -> String {
    let body = format!("{eta:016x} {s} {:016x} {:016x}", got.mu.to_bits(), got.tail.to_bits());
    let check = twox_hash::XxHash64::oneshot(0, body.as_bytes());
    format!("{body} {check:016x}\n")
}

/// The entry of one line, None when it is not one this module wrote intact.
fn parse(text: &str) -> Option<((u64, u64), UnitShift)> {
    let (body, check) = text.rsplit_once(' ')?;
    if format!("{:016x}", twox_hash::XxHash64::oneshot(0, body.as_bytes())) != check {
        return None;
    }
    let mut f = body.split(' ');
    let eta = u64::from_str_radix(f.next()?, 16).ok()?;
    let s: u64 = f.next()?.parse().ok()?;
    let mu = f64::from_bits(u64::from_str_radix(f.next()?, 16).ok()?);
    let tail = f64::from_bits(u64::from_str_radix(f.next()?, 16).ok()?);
    let sigma = (s.max(1) as f64 * super::P * (1.0 - super::P)).sqrt().max(1e-3);
    // Never better than the Gaussian of the same variance (1e-9: rounding).
    let plausible = f.next().is_none() && (mu.is_infinite() || mu * sigma >= 1.0 - 1e-9) && tail >= 0.0;
    plausible.then_some(((eta, s), UnitShift { mu, tail }))
}

/// Reads the cache file into `cache`, once per process, line by line: a
/// damaged line (bytes that are not text included) is skipped, the rest of
/// the file still read.
pub fn load_once(cache: &Mutex<BTreeMap<(u64, u64), UnitShift>>) {
    LOADED.call_once(|| {
        let Some(bytes) = path().and_then(|p| std::fs::read(p).ok()) else {
            return;
        };
        if let Ok(mut c) = cache.lock() {
            c.extend(entries(&bytes));
        }
    });
}

/// The intact entries of a cache file's bytes, line by line.
fn entries(bytes: &[u8]) -> impl Iterator<Item = ((u64, u64), UnitShift)> + '_ {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .filter_map(parse)
}

/// Set by a command that promises to write nothing (`validate`): figures
/// are computed in memory, none appended.
static READ_ONLY: AtomicBool = AtomicBool::new(false);

/// From now on this process appends no figure to the cache file (it still
/// reads it).
pub fn read_only() {
    READ_ONLY.store(true, Ordering::Relaxed);
}

/// Appends the figure `got` of `key` (best effort: a cache that cannot be
/// written only costs time). A figure that would not pass the read-back
/// check (see the module doc) is not written: every later process would
/// skip it and append it again.
pub fn append(key: (u64, u64), got: UnitShift) {
    if READ_ONLY.load(Ordering::Relaxed) {
        return;
    }
    let text = line(key, got);
    if parse(text.trim_end()).is_none() {
        return;
    }
    let Some(p) = path() else { return };
    if let Some(dir) = p.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&p) {
        let _ = f.write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_exactly_and_damage_is_ignored() {
        let got = super::super::compute(5000, 1e-10);
        let key = (1e-10f64.to_bits(), 5000);
        let text = line(key, got);
        assert_eq!(parse(text.trim_end()), Some((key, got)));
        // Every one-character change of the line is rejected.
        for i in 0..text.trim_end().len() {
            let mut b = text.trim_end().as_bytes().to_vec();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(b).unwrap();
            assert_eq!(parse(&changed), None, "{changed}");
        }
        // A figure better than the Gaussian (a forged or corrupted mu with a
        // valid check) is refused.
        let forged = line(
            key,
            UnitShift {
                mu: got.mu / 2.0,
                tail: got.tail,
            },
        );
        assert_eq!(parse(forged.trim_end()), None);
        assert_eq!(parse(""), None);
    }

    /// Issue 73: one byte that is not UTF-8 made the whole file unreadable,
    /// so every process computed and appended every figure again; now only
    /// its line is skipped.
    #[test]
    fn a_line_that_is_not_text_is_skipped_and_the_rest_read() {
        let (a, b) = (super::super::compute(5000, 1e-10), super::super::compute(6000, 1e-10));
        let (ka, kb) = ((1e-10f64.to_bits(), 5000), (1e-10f64.to_bits(), 6000));
        let mut bytes = line(ka, a).into_bytes();
        bytes.extend_from_slice(b"\xff\xfe not text\n");
        bytes.extend_from_slice(line(kb, b).as_bytes());
        assert_eq!(entries(&bytes).collect::<Vec<_>>(), vec![(ka, a), (kb, b)]);
    }
}
