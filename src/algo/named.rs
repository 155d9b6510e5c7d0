//! Algorithm names the compiler checks: each family's algorithm enum lists
//! its variants once ([`Named::ALL`]) and names each in an exhaustive match
//! ([`Named::name`]), so a variant without a name does not compile, and a
//! name resolves to its variant or to nothing ([`Named::from_name`]) --
//! never to another algorithm through a catch-all. The family's registry
//! (`ALGORITHMS`, what `list` prints and the loader reads) is checked
//! against the enum by [`registry_mismatch`] in each family's tests.

/// An enum of a family's algorithms (or of one of its options).
pub trait Named: Copy + PartialEq + 'static {
    /// Every variant, each once.
    const ALL: &'static [Self];

    /// The name job files use.
    fn name(self) -> &'static str;

    /// The variant named `name`, if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }
}

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
