//! Algorithm names the compiler checks: each family declares its
//! algorithms (and its options) as an enum through [`crate::named_enum!`]
//! ([`Named`]: every variant once, an exhaustive name match, a name that
//! resolves to its variant or to nothing), and its registry (`ALGORITHMS`,
//! what `list` prints and the loader reads) is checked against the enum by
//! [`registry_mismatch`] in each family's tests.

pub use crate::named::Named;

/// What disagrees between a family's registry (names and descriptions)
/// and its enum `T`: a registry name no variant has, a variant the
/// registry lacks, a variant listed twice in `ALL`; `None` when they agree.
pub fn registry_mismatch<T: Named>(registry: &[(&str, &str)]) -> Option<String> {
    let names: Vec<&str> = T::ALL.iter().map(|a| a.name()).collect();
    let mut problems = Vec::new();
    for (n, _) in registry {
        if !names.contains(n) {
            problems.push(format!("registry name {n:?} has no variant"));
        }
    }
    for (i, n) in names.iter().enumerate() {
        if !registry.iter().any(|(r, _)| r == n) {
            problems.push(format!("variant {n:?} is not in the registry"));
        }
        if names[..i].contains(n) {
            problems.push(format!("variant {n:?} is listed twice in ALL"));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}
