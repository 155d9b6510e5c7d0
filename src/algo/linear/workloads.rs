//! The linear family's canonical workloads: what `fedbandits bench` and
//! `fedbandits calibrate` measure, and the jobs of the parity check of a
//! batched backend with the CPU.

/// The linear family's `fedbandits bench` workloads: (name, default
/// federations, job YAML with `{T}` for the rounds). `feducb_d128` is
/// FedUCB at the dimension of Dubey & Pentland's Fig. 1C (d = 128, K = 100,
/// M = 100), where the d^2 work per action dominates;
/// `feducb_private_every_d10` syncs (and privatizes a tree release) every
/// round, `feducb_every_d10` is the same without privacy, its reference.
/// `independent_gap_d10_k100_m100` is FedUCB's reference on its own
/// environment: `linear_gap`'s decision sets cost more to draw than
/// `linear_sphere`'s, so FedUCB's rate is compared with it, not with
/// `linear_d10_k100_m100` (which runs on `linear_sphere`).
pub const WORKLOADS: &[(&str, u32, &str)] = &[
    (
        "linear_d10_k100_m100",
        64,
        "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, epsilon: 1.0, delta: 0.1, protocol: ldp}\n",
    ),
    (
        "feducb_d10_k100_m100",
        64,
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, epsilon: 1.0, delta: 0.1, sync: log}\n",
    ),
    (
        "feducb_private_every_d10",
        64,
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, epsilon: 1.0, delta: 0.1, sync: every_round}\n",
    ),
    (
        "feducb_every_d10",
        64,
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, private: false, sync: every_round}\n",
    ),
    (
        "decentralized_ring_m16_d10",
        64,
        "algorithm: feducb_decentralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 16, epsilon: 1.0, delta: 0.1, graph: ring, gamma: 2}\n",
    ),
    (
        "sdp_vecsum_d10_m100",
        64,
        "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100, epsilon: 0.2, delta: 0.1, protocol: sdp_vecsum}\n",
    ),
    (
        "independent_d10_k100_m100",
        64,
        "algorithm: independent\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100}\n",
    ),
    (
        "independent_gap_d10_k100_m100",
        64,
        "algorithm: independent\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 10, k: 100, m: 100}\n",
    ),
    (
        "feducb_d128",
        2,
        "algorithm: feducb_centralized\nenvironment: linear_gap\nhorizon: {T}\nparams: {d: 128, k: 100, m: 100, epsilon: 1.0, delta: 0.1, sync: log}\n",
    ),
];

/// Short jobs covering every algorithm of the family on both
/// environments (FedUCB and `sdp_vecsum` included), for the parity check of
/// a batched backend with the CPU (`fedbandits calibrate`).
pub const PARITY: &[(&str, &str)] = &[
    (
        // First, so that a device that hangs or differs there fails at
        // once. Federations that span blocks: with M = 9 both FedUCB kernels put
        // a federation in three blocks (the last with one agent), which meet
        // at group barriers every round, the spin the watchdog guards
        // (src/backend/cuda/watchdog.rs): a device that never schedules a
        // block fails the check here instead of hanging a study later.
        "feducb_spanning",
        "seed: 8\nrepetitions: 2\nhorizon: 60\ncheckpoints: {every: 20}\nalgorithm: [feducb_centralized, \
         feducb_decentralized]\nenvironment: linear_gap\nparams: {m: 9, d: 3, k: 8, delta: 0.1, epsilon: 1, \
         refactor_every: 7, graph: ring, gamma: 1}\n",
    ),
    (
        "linear_sphere",
        "seed: 5\nrepetitions: 3\nhorizon: 120\ncheckpoints: {every: 20}\nalgorithm: [random, linucb, independent, \
         fedlinucb, private_fedlinucb, feducb_centralized, feducb_decentralized]\nenvironment: linear_sphere\n\
         params: {m: 4, d: 5, k: 20, delta: 0.1, epsilon: 1, batch_size: 12, refactor_every: 9, graph: ring, \
         gamma: 1}\ngrid: {protocol: [ldp, sdp_amp, alt, sdp_vecsum], noise: [true, false]}\n",
    ),
    (
        "linear_gap",
        "seed: 6\nrepetitions: 3\nhorizon: 120\ncheckpoints: {every: 20}\nalgorithm: [random, linucb, independent, \
         fedlinucb, private_fedlinucb, feducb_centralized, feducb_decentralized]\nenvironment: linear_gap\n\
         params: {m: 4, d: 4, k: 16, delta: 0.1, epsilon: 1, batch_size: 10, refactor_every: 13, graph: ring, \
         gamma: 1}\ngrid: {protocol: [ldp, sdp_amp, alt, sdp_vecsum], noise: [true, false]}\n",
    ),
    (
        // FedUCB's private schedule: a threshold low enough that agents
        // request syncs through the test, reach the cap and fall back.
        "feducb_schedule",
        "seed: 7\nrepetitions: 3\nhorizon: 150\ncheckpoints: {every: 25}\nalgorithm: feducb_centralized\n\
         environment: [linear_gap, linear_sphere]\nparams: {m: 3, d: 3, k: 9, delta: 0.1, epsilon: 4, sync: threshold, \
         refactor_every: 11, schedule_cap: 3}\ngrid: {threshold: [0.5, 40], schedule: [private, paper]}\n",
    ),
];
