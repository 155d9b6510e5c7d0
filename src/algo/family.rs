//! The family registry: each family (linear contextual, gossip
//! multi-armed, combinatorial procurement) as data -- its algorithms and
//! environments (listed in its own folder), its output columns -- and
//! [`FAMILIES`], the one list the job loader, `fedbandits list`, the Parquet
//! schema and the analysis package read. Adding a family is a folder under
//! `src/algo/` with its `FAMILY` constant and one line here (README,
//! "Adding a family").

use super::params::Value;
use std::collections::BTreeMap;

pub use super::family_entry::{Family, Resolve};

/// Every family, one line each: a family's entry is the `FAMILY` constant
/// of its folder.
pub const FAMILIES: &[Family] = &[
    super::linear::FAMILY,
    super::gossip::FAMILY,
    super::combinatorial::FAMILY,
];

/// Every family's CUDA kernel sources, for the device to compile.
pub fn kernel_sources() -> Vec<crate::backend::cuda::nvrtc::KernelSource> {
    FAMILIES.iter().flat_map(|f| f.kernels.iter().copied()).collect()
}

/// Every algorithm of every family.
pub fn algorithms() -> Vec<(&'static str, &'static str)> {
    FAMILIES.iter().flat_map(|f| f.algorithms.iter().copied()).collect()
}

/// Every environment of every family.
pub fn environments() -> Vec<(&'static str, &'static str)> {
    FAMILIES.iter().flat_map(|f| f.environments.iter().copied()).collect()
}

/// The family of an algorithm or environment name.
pub fn family_of(name: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .find(|f| f.algorithms.iter().chain(f.environments).any(|(n, _)| *n == name))
}

/// Resolves a cell's raw parameters with its algorithm's family (the
/// loader checked that the algorithm and environment are one family's);
/// an input file's relative path starts at `dir`, the job file's folder.
pub fn resolve(
    algo: &str,
    env: &str,
    raw: &BTreeMap<String, Value>,
    horizon: u64,
    dir: &std::path::Path,
) -> Result<super::resolve::Resolved, super::resolve::ResolveErrors> {
    match family_of(algo) {
        Some(f) => {
            let mut p = super::resolve::Params::new(raw, dir, (algo, env, horizon));
            let cfg = (f.resolve)(&mut p);
            p.finish(cfg)
        }
        None => Err(vec![super::resolve::ParamProblem {
            key: "algorithm",
            message: format!("unknown algorithm {algo}"),
        }]),
    }
}
