//! The folder fedbandits keeps machine-local caches in (the backends'
//! calibrations, the accountant's figures): `FEDBANDITS_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/fedbandits`, else `~/.cache/fedbandits`. A lowest
//! layer, so that every layer that caches reads the same folder without
//! reaching into another's module.

use std::path::PathBuf;

/// No cache folder can be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no cache directory: set FEDBANDITS_CACHE_DIR or HOME")]
pub struct NoCacheDir;

/// The cache folder (not created).
pub fn dir() -> Result<PathBuf, NoCacheDir> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("FEDBANDITS_CACHE_DIR") {
        return Ok(d);
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return Ok(d.join("fedbandits"));
    }
    var("HOME")
        .map(|h| h.join(".cache").join("fedbandits"))
        .ok_or(NoCacheDir)
}
