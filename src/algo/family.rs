//! The family registry: each family (linear contextual, gossip
//! multi-armed, combinatorial procurement) as data -- its algorithms and
//! environments (listed in its own folder), its output columns -- and
//! [`FAMILIES`], the one list the job loader, `fedbandits list`, the Parquet
//! schema and the analysis package read. Adding a family is a folder under
//! `src/algo/` with its `FAMILY` constant and one line in `families!`
//! (`algo/mod.rs`; `src/algo/README.md`; `algo/toy` is the example).

use super::params::{ParamDef, SHARED, Value};
use std::collections::BTreeMap;

pub use super::family_entry::{Family, Resolve};

/// Every family, in registry order (one line each, `families!` in
/// `algo/mod.rs`): a family's entry is the `FAMILY` constant of its folder.
pub const FAMILIES: &[Family] = super::REGISTERED;

/// Every parameter a job can set, in output-column order: the shared ones
/// ([`super::params::SHARED`]), each with the users and defaults the
/// families declare for it ([`super::params::Share`]) before its own, then
/// each family's own ([`Family::params`]) in registry order. Built once.
pub fn params() -> &'static [ParamDef] {
    static UNION: std::sync::OnceLock<Vec<ParamDef>> = std::sync::OnceLock::new();
    UNION.get_or_init(|| {
        let shared = SHARED.iter().map(|row| {
            let shares = || {
                FAMILIES
                    .iter()
                    .flat_map(|f| f.shares)
                    .filter(|s| s.params.contains(&row.name))
            };
            let used_by: Vec<&'static str> = row
                .used_by
                .iter()
                .copied()
                .chain(shares().flat_map(|s| s.by).copied())
                .collect();
            let defaults: Vec<_> = shares().flat_map(|s| s.defaults).chain(row.defaults).copied().collect();
            // Leaked once per process: the table is static for the
            // process's life, as a const table would be.
            ParamDef {
                used_by: Box::leak(used_by.into_boxed_slice()),
                defaults: Box::leak(defaults.into_boxed_slice()),
                ..*row
            }
        });
        shared
            .chain(FAMILIES.iter().flat_map(|f| f.params.iter().copied()))
            .collect()
    })
}

/// Looks a parameter up by name ([`params`]).
pub fn param(name: &str) -> Option<&'static ParamDef> {
    params().iter().find(|p| p.name == name)
}

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
            let mut p = super::resolve::Params::new(raw, dir, (algo, env, horizon), params());
            let cfg = (f.resolve)(&mut p);
            p.finish(super::CellConfig::new(f.name, cfg))
        }
        None => Err(vec![super::resolve::ParamProblem {
            key: "algorithm",
            message: format!("unknown algorithm {algo}"),
        }]),
    }
}

/// The parameters the family of `algo` reads for a cell of these raw
/// parameters, whether or not the cell resolves (the settings that decide
/// which parameters apply are found by changing one and seeing what is
/// read, `job`'s check of an axis that changes no cell).
pub fn reads(
    algo: &str,
    env: &str,
    raw: &BTreeMap<String, Value>,
    horizon: u64,
    dir: &std::path::Path,
) -> std::collections::BTreeSet<&'static str> {
    let Some(f) = family_of(algo) else {
        return Default::default();
    };
    let mut p = super::resolve::Params::new(raw, dir, (algo, env, horizon), params());
    let _config = (f.resolve)(&mut p);
    p.read
}

#[cfg(test)]
mod tests {
    use super::{FAMILIES, params};
    use crate::algo::params::SHARED;

    /// Each family declares only its own: its parameters and its shares
    /// name its members, a share names a shared parameter (at most once
    /// per family), every shared parameter is used, and no name is declared
    /// twice in the union.
    #[test]
    fn each_family_declares_its_own_parameters_once() {
        for f in FAMILIES {
            let members: Vec<&str> = f.algorithms.iter().chain(f.environments).map(|m| m.0).collect();
            for p in f.params {
                assert!(!p.used_by.is_empty(), "{}: {} has no user", f.name, p.name);
                for u in p.used_by {
                    assert!(members.contains(u), "{}: {} names {u}, not a member", f.name, p.name);
                }
            }
            let shared: Vec<&str> = f.shares.iter().flat_map(|s| s.params).copied().collect();
            for (i, p) in shared.iter().enumerate() {
                assert!(SHARED.iter().any(|d| d.name == *p), "{}: {p} is not shared", f.name);
                assert!(!shared[..i].contains(p), "{}: {p} shared twice", f.name);
            }
            for s in f.shares {
                assert!(
                    s.defaults.is_empty() || s.params.len() == 1,
                    "{}: defaults of {:?}",
                    f.name,
                    s.params
                );
                for u in s.by.iter().chain(s.defaults.iter().flat_map(|d| d.0)) {
                    assert!(members.contains(u), "{}: share of {:?} names {u}", f.name, s.params);
                }
            }
        }
        for p in SHARED {
            let users = FAMILIES
                .iter()
                .filter(|f| f.shares.iter().any(|s| s.params.contains(&p.name)))
                .count();
            assert!(
                users >= 2,
                "{} is shared by {users} families: declare it in the family's table",
                p.name
            );
            assert!(
                p.used_by.is_empty(),
                "{}: a shared row's users are the families' shares",
                p.name
            );
        }
        let names: Vec<&str> = params().iter().map(|p| p.name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} is declared twice");
        }
    }
}
