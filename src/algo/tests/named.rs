//! Every family's algorithm enum and its registry name the same algorithms
//! (a name the registry lists but the enum lacks, or the reverse, fails
//! here; a variant without a name does not compile), every name round-trips,
//! and a name the enum does not know resolves to no algorithm: `validate`
//! reports it instead of running another algorithm under its name.

use crate::algo::combinatorial::{self, CombAlgorithm};
use crate::algo::gossip::{self, GossipAlgorithm, GossipEnvironment};
use crate::algo::keys::{KeyCheck, keys_mismatch};
use crate::algo::linear::{self, LinearAlgorithm, LinearEnvironment};
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
    assert_eq!(registry_mismatch::<LinearEnvironment>(linear::ENVIRONMENTS), None);
    assert_eq!(registry_mismatch::<GossipEnvironment>(gossip::ENVIRONMENTS), None);
    round_trips::<LinearEnvironment>();
    round_trips::<GossipEnvironment>();
}

/// Every family's keys (and the shared ones).
fn all_keys() -> Vec<KeyCheck> {
    [
        crate::algo::params::KEYS,
        linear::table::KEYS,
        gossip::table::KEYS,
        combinatorial::table::KEYS,
        crate::algo::toy::table::KEYS,
    ]
    .concat()
}

#[test]
fn every_parameter_has_one_typed_key_of_its_kind() {
    let table = crate::algo::family::params();
    let kinds: Vec<(&str, crate::algo::kind::Kind)> = table.iter().map(|p| (p.name, p.kind)).collect();
    let keys = all_keys();
    assert_eq!(keys_mismatch(&keys, &kinds), None);
    // Every parameter is read through a key (a choice through its enum,
    // whose names are the table's allowed words), and none twice.
    for p in table {
        let n = keys.iter().filter(|k| k.name == p.name).count();
        assert_eq!(n, 1, "parameter {} has {n} keys", p.name);
    }
    // The check sees a key read as another type than its row holds.
    let wrong = [
        KeyCheck::of::<f64>("m"),
        KeyCheck::of::<crate::graph::GraphKind>("calibration"),
    ];
    let msg = keys_mismatch(&wrong, &kinds).expect("two mismatches");
    assert!(msg.contains("\"m\"") && msg.contains("\"calibration\""), "{msg}");
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
    let _: LinearAlgorithm = p.algorithm();
    let errs = p.finish(()).expect_err("an unknown algorithm is an error");
    assert!(
        errs.iter()
            .any(|e| e.key == "algorithm" && e.message.contains("fedlinucb_v2")),
        "{errs:?}"
    );
}
