//! What every file says of itself: the job, the engine (version, git
//! commit, semantics version), the family registry, the accountant's
//! figures, the cells whose environment is misspecified for their
//! algorithm (`fedbandits.model`), and the checksums of its data pages and
//! of its footer (together every byte of the file).

use crate::job::{Job, SEMANTICS_VERSION};
use parquet::file::metadata::KeyValue;

/// The key-value metadata entry holding the XXH64 checksum (hex) of a
/// Parquet file's bytes before its footer, i.e. of every data page.
pub const CHECKSUM_KEY: &str = "fedbandits.data_xxh64";

/// The key-value metadata entry holding the XXH64 checksum (hex) of the
/// file's footer and tail (every byte after the data pages), computed with
/// this entry's own 16-character value as [`FOOTER_PLACEHOLDER`]: together
/// with [`CHECKSUM_KEY`] every byte of the file is covered, and both are
/// checked on the raw bytes before any Parquet decoder sees them (a one-bit
/// flip in a footer can rename a column silently or panic the decoder).
pub const FOOTER_KEY: &str = "fedbandits.footer_xxh64";

/// The value [`FOOTER_KEY`] is written with and hashed as.
pub const FOOTER_PLACEHOLDER: &str = "0000000000000000";

/// Where the footer checksum's 16 characters lie in `tail` (the bytes after
/// the data pages): right after its key and Thrift's compact encoding of
/// the value's field header (0x18: field 2, binary) and length (0x10: 16).
/// None without the entry.
fn footer_value_at(tail: &[u8]) -> Option<usize> {
    let key = FOOTER_KEY.as_bytes();
    let pos = tail.windows(key.len()).position(|w| w == key)?;
    let at = pos + key.len();
    (tail.get(at..at + 2)? == [0x18, 0x10] && tail.len() >= at + 18).then_some(at + 2)
}

/// The XXH64 of `tail` with the footer checksum's value read as the
/// placeholder, and where that value lies; None without the entry.
fn footer_hash(tail: &[u8]) -> Option<(u64, usize)> {
    let at = footer_value_at(tail)?;
    let mut h = twox_hash::XxHash64::with_seed(0);
    std::hash::Hasher::write(&mut h, &tail[..at]);
    std::hash::Hasher::write(&mut h, FOOTER_PLACEHOLDER.as_bytes());
    std::hash::Hasher::write(&mut h, &tail[at + 16..]);
    Some((std::hash::Hasher::finish(&h), at))
}

/// Writes the footer checksum into `tail` (the bytes after the data pages,
/// written with [`FOOTER_PLACEHOLDER`] as the entry's value); false when
/// the entry is not found (the writer did not add it).
pub fn seal_footer(tail: &mut [u8]) -> bool {
    match footer_hash(tail) {
        Some((sum, at)) => {
            tail[at..at + 16].copy_from_slice(format!("{sum:016x}").as_bytes());
            true
        }
        None => false,
    }
}

/// Why a file's footer fails its check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FooterError {
    /// No Parquet magic at the end.
    #[error("not a Parquet file")]
    NotParquet,
    /// The stated footer length runs past the file's start.
    #[error("its footer length ({0}) exceeds the file")]
    FooterLength(usize),
    /// The checksum entry's key is there, its value is not.
    #[error("its {FOOTER_KEY} entry is damaged")]
    DamagedEntry,
    /// No checksum entry: every file this engine writes has one, so its
    /// footer was damaged (a changed byte of the key's name removes the
    /// entry) or another program wrote it. Such a file is never read
    /// unchecked: a footer can rename or swap columns and still decode.
    #[error(
        "it has no {FOOTER_KEY} entry, which every file of this engine carries (a changed byte of the key's name \
         removes it; a file of semantics 17 written before footer checksums has none either)"
    )]
    Missing,
    /// The footer does not hash to the stated checksum.
    #[error("checksum mismatch: its footer hashes to {actual:016x}, the file says {stated}")]
    Mismatch {
        /// The footer's XXH64.
        actual: u64,
        /// The checksum the file states, as written.
        stated: String,
    },
}

/// Checks the footer checksum of a whole file's `bytes`: Ok when it
/// matches, Err(why) when it does not, when the entry is missing or
/// damaged, or when the bytes are not a Parquet file.
pub fn check_footer(bytes: &[u8]) -> Result<(), FooterError> {
    let n = bytes.len();
    if n < 12 || &bytes[n - 4..] != b"PAR1" {
        return Err(FooterError::NotParquet);
    }
    let footer = u32::from_le_bytes([bytes[n - 8], bytes[n - 7], bytes[n - 6], bytes[n - 5]]) as usize;
    let Some(start) = n.checked_sub(8 + footer).filter(|&s| s >= 4) else {
        return Err(FooterError::FooterLength(footer));
    };
    check_tail(&bytes[start..])
}

/// [`check_footer`] on the bytes after the data pages alone (the footer,
/// its length and the magic), for a reader of the metadata only.
pub fn check_tail(tail: &[u8]) -> Result<(), FooterError> {
    match footer_hash(tail) {
        // The key without its value's encoding right after it: damaged.
        None if tail.windows(FOOTER_KEY.len()).any(|w| w == FOOTER_KEY.as_bytes()) => Err(FooterError::DamagedEntry),
        None => Err(FooterError::Missing),
        Some((sum, at)) => {
            // Exactly as written (lowercase): a flip of a letter's case is
            // damage too.
            let stated = std::str::from_utf8(&tail[at..at + 16]).unwrap_or("");
            if stated == format!("{sum:016x}") {
                Ok(())
            } else {
                Err(FooterError::Mismatch {
                    actual: sum,
                    stated: stated.to_owned(),
                })
            }
        }
    }
}

/// The XXH64 of a Parquet file's bytes before its footer (the footer's
/// length is in the 4 bytes before the trailing magic), or None when the
/// bytes are not a Parquet file. Accidental damage anywhere in the data
/// pages changes it (probability 1 - 2^-64); the footer is covered by
/// [`FOOTER_KEY`].
pub fn data_checksum(bytes: &[u8]) -> Option<u64> {
    let n = bytes.len();
    if n < 12 || &bytes[n - 4..] != b"PAR1" {
        return None;
    }
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().ok()?) as usize;
    let data_end = n.checked_sub(8 + footer)?;
    Some(twox_hash::XxHash64::oneshot(0, &bytes[..data_end]))
}

/// Git commit the binary was built from (or "unknown").
pub const GIT_COMMIT: &str = match option_env!("FEDBANDITS_GIT_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

/// What the accountant says of each private cell, as JSON written into
/// every file (`fedbandits.privacy`): `{"adaptive": false, "cells": [{"cell_id",
/// "label", "relation" (what a neighbour is and that the figures assume the
/// non-adaptive relation), "acct_epsilon", "acct_epsilon_zcdp",
/// "paper_claimed_epsilon", "notes" (why a figure is null, failed
/// preconditions)}, ...]}`.
pub fn privacy_json(job: &Job) -> String {
    let cells: Vec<serde_json::Value> = job
        .cells
        .iter()
        .filter_map(|c| {
            let a = c.config.accounting()?;
            Some(serde_json::json!({
                "cell_id": c.id,
                "label": c.label(),
                "relation": a.relation,
                "acct_epsilon": a.epsilon,
                "acct_epsilon_zcdp": a.epsilon_zcdp,
                "paper_claimed_epsilon": a.paper_claimed,
                "notes": a.warnings,
            }))
        })
        .collect();
    serde_json::json!({ "adaptive": false, "cells": cells }).to_string()
}

/// The family registry ([`crate::algo::family::FAMILIES`]) as JSON, written
/// into every file so that the analysis package reads the families (their
/// algorithms, environments, own columns and the baseline of their
/// federated regret ratio, the regret `regret_exponent` measures) from the
/// engine that wrote the data: `{"linear": {"algorithms": [...],
/// "environments": [...], "columns": [...], "baseline": null,
/// "growth_regret": "group_regret", "variant_params": ["private"],
/// "non_private": {}, "widths": {"fedlinucb": [...], ...}}, ...}`.
pub fn families_json() -> String {
    let fams: serde_json::Map<String, serde_json::Value> = crate::algo::family::FAMILIES
        .iter()
        .map(|f| {
            let names = |list: &[(&'static str, &'static str)]| list.iter().map(|m| m.0).collect::<Vec<_>>();
            let entry = serde_json::json!({
                "algorithms": names(f.algorithms),
                "environments": names(f.environments),
                "columns": f.columns,
                "baseline": f.baseline,
                "growth_regret": f.growth_regret,
                "variant_params": f.variant_params(),
                "non_private": f.non_private.iter().map(|(p, n)| (p.to_string(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
                "parts": f.parts.iter().map(|(a, p, v, w)| serde_json::json!({"algorithm": a, "param": p, "off": v, "what": w})).collect::<Vec<_>>(),
                "noiseless_at_inf": f.noiseless_at_inf,
                "metrics": f.metrics.iter().map(|(c, d)| (c.to_string(), serde_json::json!(d))).collect::<serde_json::Map<_, _>>(),
                "widths": f.widths.iter().map(|(a, w)| (a.to_string(), serde_json::json!(w))).collect::<serde_json::Map<_, _>>(),
            });
            (f.name.to_owned(), entry)
        })
        .collect();
    serde_json::Value::Object(fams).to_string()
}

/// Key-value metadata written into every file.
pub fn metadata(job: &Job, extra: &[(&str, String)]) -> Vec<KeyValue> {
    let mut kv = vec![
        KeyValue::new("fedbandits.job_yaml".into(), job.yaml.clone()),
        KeyValue::new("fedbandits.job_name".into(), job.name.clone()),
        KeyValue::new("fedbandits.job_path".into(), job.path.display().to_string()),
        KeyValue::new(
            "fedbandits.job_dir".into(),
            crate::job::job_folder(&job.path).display().to_string(),
        ),
        KeyValue::new("fedbandits.version".into(), env!("CARGO_PKG_VERSION").to_string()),
        KeyValue::new("fedbandits.git_commit".into(), GIT_COMMIT.to_string()),
        KeyValue::new("fedbandits.semantics_version".into(), SEMANTICS_VERSION.to_string()),
        KeyValue::new("fedbandits.job_identity".into(), job.identity()),
        KeyValue::new("fedbandits.families".into(), families_json()),
        KeyValue::new("fedbandits.privacy".into(), privacy_json(job)),
        KeyValue::new("fedbandits.model".into(), job.model_json()),
        KeyValue::new("fedbandits.facts".into(), job.facts_json()),
        KeyValue::new(
            "fedbandits.compare".into(),
            serde_json::to_string(&job.compare).unwrap_or_else(|_| "[]".into()),
        ),
    ];
    for (k, v) in extra {
        kv.push(KeyValue::new(format!("fedbandits.{k}"), v.clone()));
    }
    kv
}
