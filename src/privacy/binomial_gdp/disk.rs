//! The unit-shift figures on disk: each (s, eta) the accountant computed is
//! appended as one line to `unit-shift-r{REVISION}.txt` in the user's cache
//! directory (`$FEDBANDITS_CACHE_DIR`, else `$XDG_CACHE_HOME/fedbandits`,
//! else `$HOME/.cache/fedbandits`), and read back by every later process.
//!
//! A line is `eta s mu tail check`: eta, mu and tail as the hexadecimal bits
//! of their f64 (read back exactly), s in decimal, check the XXH64 of the
//! text before it. A line whose check fails (a torn append, a damaged
//! file), that does not parse, or whose (mu, tail) does not cover the unit
//! shift's total variation (delta_mu(0) + tail below the Binomial's mode
//! probability: more private than any Binomial unit shift is) is ignored,
//! and the figure is computed again. A line forged with a valid check and a
//! plausible figure is read: each part records the figures it took from
//! the cache, and `merge --recheck-figures` computes them again. [`REVISION`] is
//! part of the file name: a change to the computation that changes any
//! figure bumps it, so an older file is never read. Each new figure is one
//! `write` of one line to a file opened for appending, so processes sharing
//! the directory (a Slurm array) add to it without locks; a figure written
//! twice is the same figure. Without a writable cache directory nothing is
//! stored and every process computes its own (`FEDBANDITS_ACCOUNTANT_CACHE=0`
//! turns the cache off).

use super::UnitShift;
use crate::privacy::accountant::gdp_delta;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
pub(super) fn line((eta, s): (u64, u64), got: UnitShift) -> String {
    let body = format!("{eta:016x} {s} {:016x} {:016x}", got.mu.to_bits(), got.tail.to_bits());
    let check = twox_hash::XxHash64::oneshot(0, body.as_bytes());
    format!("{body} {check:016x}\n")
}

/// The entry of one line, None when it is not one this module wrote intact.
pub(super) fn parse(text: &str) -> Option<((u64, u64), UnitShift)> {
    let (body, check) = text.rsplit_once(' ')?;
    if format!("{:016x}", twox_hash::XxHash64::oneshot(0, body.as_bytes())) != check {
        return None;
    }
    let ((eta, s), UnitShift { mu, tail }) = parse_unchecked(text)?;
    // Never more private than a unit shift can be at epsilon = 0 (its total
    // variation, the Binomial's mode probability; 1e-6: rounding of both).
    // (The Gaussian limit mu >= 1/sigma holds only as the tail goes to 0:
    // the engine's own figures at s = 2^40 with tails 1e-6 and 1e-8 are
    // below it, and were refused by that check.)
    let tv = super::mode_pmf(s.max(1));
    let plausible = (mu.is_infinite() || gdp_delta(mu, 0.0) + tail >= tv * (1.0 - 1e-6)) && tail >= 0.0;
    plausible.then_some(((eta, s), UnitShift { mu, tail }))
}

/// A line's fields whatever its check and plausibility (what a part's
/// record claims): None when it has not the five fields of a line.
pub(super) fn parse_unchecked(text: &str) -> Option<((u64, u64), UnitShift)> {
    let mut f = text.split(' ');
    let eta = u64::from_str_radix(f.next()?, 16).ok()?;
    let s: u64 = f.next()?.parse().ok()?;
    let mu = f64::from_bits(u64::from_str_radix(f.next()?, 16).ok()?);
    let tail = f64::from_bits(u64::from_str_radix(f.next()?, 16).ok()?);
    let _check = f.next()?;
    f.next().is_none().then_some(((eta, s), UnitShift { mu, tail }))
}

/// Figures by (eta's bits, s), each with whether it was read from the file.
pub type Figures = BTreeMap<(u64, u64), (UnitShift, bool)>;

/// Reads the cache file into `cache`, once per process, line by line: a
/// damaged line (bytes that are not text included) is skipped, the rest of
/// the file still read.
pub fn load_once(cache: &Mutex<Figures>) {
    LOADED.call_once(|| {
        let Some(bytes) = path().and_then(|p| std::fs::read(p).ok()) else {
            return;
        };
        if let Ok(mut c) = cache.lock() {
            c.extend(entries(&bytes).map(|(k, v)| (k, (v, true))));
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
    if !store(key, got) {
        NOT_STORED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Figures this process computed and did not store (see [`append`]).
static NOT_STORED: AtomicUsize = AtomicUsize::new(0);

/// How many figures this process computed and did not store: another
/// process needs them computed again.
pub fn not_stored() -> usize {
    NOT_STORED.load(Ordering::Relaxed)
}

/// Appends one figure's line; false when it was not stored.
fn store(key: (u64, u64), got: UnitShift) -> bool {
    if READ_ONLY.load(Ordering::Relaxed) {
        return false;
    }
    let text = line(key, got);
    if parse(text.trim_end()).is_none() {
        return false;
    }
    let Some(p) = path() else { return false };
    if let Some(dir) = p.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .is_ok()
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

    /// Issue 73: the engine's own figures at s = 2^40 (the largest piece
    /// the vector-summation accountant computes) fell below the Gaussian
    /// limit the read-back check demanded (mu sigma 0.991 at tail 1e-8, mu
    /// 0 at 1e-6, both valid: the tail covers the rest), so every process
    /// computed them again; every tail level's figure now reads back.
    #[test]
    fn the_engines_figures_at_the_largest_size_read_back() {
        for eta in [1e-6, 1e-8, 1e-12, 1e-32] {
            let key = (f64::to_bits(eta), 1u64 << 40);
            let got = super::super::compute(1 << 40, eta);
            assert_eq!(parse(line(key, got).trim_end()), Some((key, got)), "eta {eta}");
        }
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
