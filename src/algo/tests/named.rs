//! Every family's algorithm enum and its registry name the same algorithms
//! (a name the registry lists but the enum lacks, or the reverse, fails
//! here; a variant without a name does not compile), every name round-trips,
//! and a name the enum does not know resolves to no algorithm: `validate`
//! reports it instead of running another algorithm under its name.

use crate::algo::combinatorial::{self, CombAlgorithm};
use crate::algo::gossip::{self, GossipAlgorithm};
use crate::algo::linear::{self, LinearAlgorithm};
use crate::algo::named::{Named, registry_mismatch};

fn round_trips<T: Named + std::fmt::Debug>() {
    for a in T::ALL {
        assert_eq!(T::from_name(a.name()), Some(*a), "{a:?}");
    }
    assert_eq!(T::from_name("no_such_algorithm"), None);
}

#[test]
fn each_familys_enum_matches_its_registry() {
    assert_eq!(registry_mismatch::<LinearAlgorithm>(linear::ALGORITHMS), None);
    assert_eq!(registry_mismatch::<GossipAlgorithm>(gossip::ALGORITHMS), None);
    assert_eq!(registry_mismatch::<CombAlgorithm>(combinatorial::ALGORITHMS), None);
    round_trips::<LinearAlgorithm>();
    round_trips::<GossipAlgorithm>();
    round_trips::<CombAlgorithm>();
}

#[test]
fn a_registry_that_drifts_from_its_enum_is_named() {
    // fedlinucb dropped from the registry, a name added that no variant has.
    let drifted: Vec<(&str, &str)> = linear::ALGORITHMS
        .iter()
        .copied()
        .filter(|(n, _)| *n != "fedlinucb")
        .chain([("fedlinucb_v2", "")])
        .collect();
    let msg = registry_mismatch::<LinearAlgorithm>(&drifted).expect("a mismatch");
    assert!(msg.contains("\"fedlinucb_v2\" has no variant"), "{msg}");
    assert!(msg.contains("variant \"fedlinucb\" is not in the registry"), "{msg}");
}

#[test]
fn a_name_the_enum_lacks_is_a_resolve_error_not_another_algorithm() {
    let raw = std::collections::BTreeMap::new();
    let cell = ("fedlinucb_v2", "linear_sphere", 100);
    let mut p = crate::algo::resolve::Params::new(&raw, std::path::Path::new("."), cell, crate::algo::family::params());
    let _: LinearAlgorithm = p.algorithm("fedlinucb_v2");
    let errs = p.finish(()).expect_err("an unknown algorithm is an error");
    assert!(
        errs.iter()
            .any(|e| e.key == "algorithm" && e.message.contains("fedlinucb_v2")),
        "{errs:?}"
    );
}
