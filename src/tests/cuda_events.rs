//! The CUDA backend's event-driven paths without a GPU: FedUCB and
//! decentralized FedUCB (their events inside the multi-round kernel) and
//! `sdp_vecsum` (its randomization inside it) decide on the device; under
//! the host emulation they must reproduce the CPU backend bit for bit, cost
//! a fixed number of launches per round and no copy until an observation. Also the parity check `fedbandits calibrate`
//! runs, and every bench workload's kernels: launches and copies per round,
//! shapes and theoretical occupancy.

use fedbandits::job::Job;
use fedbandits::sim::run_batch;
use std::path::Path;

use crate::support::emulated::{assert_parity, emulated, emulated_with_shared};
use crate::support::ptxas;

/// The parity check `fedbandits calibrate` runs before it measures a
/// device (every family's parity jobs: every algorithm on both linear
/// environments, the gossip and the combinatorial families, P-FCB at
/// epsilon .inf, every private cell also at `noise: false`, both FedUCB
/// forms with federations spanning three blocks: 38 cells and their 14
/// noise-free twins), under the host emulation: every cell equal
/// to the CPU bit for bit (every algorithm has kernels: none is skipped).
/// Run as `--backend cuda`'s gate runs it on a device without a recorded
/// pass: recorded as passed, after which the gate lets the device run
/// without checking again and `auto` uses it where a calibration names it.
#[test]
fn calibrate_parity_check_passes_under_emulation() {
    use fedbandits::backend::calibration::{Calibration, MachineKey};
    use fedbandits::backend::gate::ParityRecord;
    use fedbandits::backend::{BackendChoice, Selection, select_auto_in};
    let dir = std::env::temp_dir().join(format!("fedbandits-parity-pass-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sel = Selection::with_cuda(BackendChoice::Cuda, emulated(), None);
    fedbandits::cli::calibrate::gate_cuda(&sel, Some(&dir)).unwrap_or_else(|e| panic!("{e}"));
    let record = ParityRecord::load(&dir, "host emulation").unwrap().unwrap();
    println!("{record:?}");
    // Every cell equal, none skipped (every algorithm has kernels).
    assert!(
        record.passed()
            && record
                .detail
                .ends_with("bit for bit in 54 cells (0 without kernels, skipped)"),
        "{record:?}"
    );
    // Recorded: the gate does not check again (a device that would now
    // fail passes the gate: the record is per engine and device).
    fedbandits::cli::calibrate::gate_cuda(&sel, Some(&dir)).unwrap_or_else(|e| panic!("{e}"));
    Calibration::empty(MachineKey::here(2, Some("host emulation")))
        .save(&dir)
        .unwrap_or_else(|e| panic!("{e}"));
    let auto = select_auto_in(&dir, 2, || Ok(emulated()));
    assert!(auto.cuda_backend().is_some(), "{}", auto.note);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Launches and copies of the batched CUDA path (counted by the backend):
/// a round that neither syncs nor checkpoints costs no launch of its own
/// (the cooperative kernel runs up to 64 rounds per launch, so doubling a
/// no-sync run from 64 to 128 rounds adds one chunk: its rounds launch and
/// its reduction), uploads grow only by the chunk's widths, and a federated
/// run adds a bounded number of launches per sync. Under the emulation;
/// the same counts hold on a device (`bench --backend cuda` prints them).
#[test]
fn rounds_without_events_cost_no_launch_of_their_own() {
    use fedbandits::cli::bench::{On, measure};
    let dev = emulated();
    let traffic = |yaml: &str, t: u64| {
        measure("traffic", yaml, 4, t, On::Cuda(&dev))
            .unwrap_or_else(|e| panic!("{e}"))
            .traffic
            .unwrap()
    };
    let nosync = "algorithm: independent\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 4, k: 8, m: 3}\n";
    let (a, b) = (traffic(nosync, 64), traffic(nosync, 128));
    println!("no sync: 64 rounds {a:?}, 128 rounds {b:?}");
    assert!(b.0 - a.0 <= 2, "64 more rounds cost {} launches", b.0 - a.0);
    assert!(b.1 - a.1 <= 64 * 8, "64 more rounds uploaded {} bytes", b.1 - a.1);
    assert_eq!(b.2, a.2, "downloads do not grow with the rounds");
    // Federated, a sync every 16 rounds: 4 more syncs in 64 more rounds, each
    // at most 4 launches (tree insert, reduce, factor, broadcast) plus the
    // chunks the syncs cut.
    let sync = "algorithm: private_fedlinucb\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 4, k: 8, m: 3, epsilon: 1, delta: 0.1, batch_size: 16}\n";
    let (a, b) = (traffic(sync, 64), traffic(sync, 128));
    println!("sync every 16: 64 rounds {a:?}, 128 rounds {b:?}");
    assert!(b.0 - a.0 <= 4 * (4 + 2), "4 more syncs cost {} launches", b.0 - a.0);
    assert_eq!(b.2, a.2, "downloads do not grow with the rounds");
}

/// FedUCB (centralized) on the device path: every sync regime, private or
/// not, on both environments, with refactorizations every 7 updates; the
/// emulated kernel (fb_feducb_rounds: many rounds per launch, the
/// determinant test, the federations' decisions, the refactorizations and
/// syncs inside it) reproduces the CPU's curves and counters (syncs,
/// messages, clamped widths, failed factorizations) bit for bit. The
/// threshold regime syncs at different rounds in different repetitions of
/// one batch. With M = 9 a federation spans three blocks (the last with one
/// agent), which meet at group barriers.
#[test]
fn emulated_kernels_match_cpu_backend_for_feducb() {
    for env in ["linear_sphere", "linear_gap"] {
        assert_parity(&format!(
            "seed: 12\nrepetitions: 3\nhorizon: 200\ncheckpoints: {{every: 20}}\nalgorithm: feducb_centralized\n\
             environment: {env}\nparams: {{m: 4, d: 4, k: 12, epsilon: 1, delta: 0.1, threshold: 3, refactor_every: 7}}\n\
             grid: {{sync: [every_round, log, sqrt_m, threshold], private: [true, false]}}\n"
        ));
        assert_parity(&format!(
            "seed: 14\nrepetitions: 2\nhorizon: 90\ncheckpoints: {{every: 30}}\nalgorithm: feducb_centralized\n\
             environment: {env}\nparams: {{m: 9, d: 3, k: 10, epsilon: 1, delta: 0.1, threshold: 2, refactor_every: 5}}\n\
             grid: {{sync: [every_round, threshold], private: [true, false]}}\n"
        ));
    }
    // The syncs the regimes make (so that the parity above covered them).
    let job = Job::parse(
        Path::new("s.yaml"),
        "seed: 12\nrepetitions: 3\nhorizon: 200\ncheckpoints: {every: 200}\nalgorithm: feducb_centralized\n\
         environment: linear_gap\nparams: {m: 4, d: 4, k: 12, private: false, sync: threshold, threshold: 3}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = run_batch(&job.cells[0], job.seed, &[0, 1, 2], &[200], &emulated(), &|_| {}).unwrap();
    let syncs: Vec<u64> = r.iter().map(|x| x.points[0].counters.sync_rounds).collect();
    assert!(syncs.iter().all(|&s| s > 5), "{syncs:?}");
}

/// FedUCB's private schedule (the determinant test through the sparse
/// vector technique, `backend::Svt`): the emulated kernels reproduce the
/// CPU's curves and counters bit for bit, where agents request syncs
/// through the noisy test, reach their cap and fall back to syncs at
/// rounds 2^k (at most 3 agents x 3 requests + the 8 powers of two up to
/// 150 = 17 syncs, against about one per round under the paper's schedule
/// at the same threshold).
#[test]
fn emulated_kernels_match_cpu_backend_for_the_private_schedule() {
    let yaml = |schedule: &str| {
        format!(
            "seed: 13\nrepetitions: 3\nhorizon: 150\ncheckpoints: {{every: 25}}\nalgorithm: feducb_centralized\n\
             environment: [linear_gap, linear_sphere]\nparams: {{m: 3, d: 3, k: 9, delta: 0.1, sync: threshold, \
             threshold: 0.5, refactor_every: 11, schedule_cap: 3, schedule: {schedule}}}\ngrid: {{epsilon: [1, 8]}}\n"
        )
    };
    assert_parity(&yaml("private"));
    // The graph form: one instance per slot, each slot's sensitivity set at
    // its refactorizations (fb_peer_refactor_agent), the test in
    // fb_peer_test_agent.
    assert_parity(
        &yaml("private")
            .replace("feducb_centralized", "feducb_decentralized")
            .replace("schedule_cap: 3", "schedule_cap: 3, graph: ring, gamma: 2")
            .replace("m: 3", "m: 4"),
    );
    let syncs = |schedule: &str| -> Vec<u64> {
        let job = Job::parse(Path::new("s.yaml"), &yaml(schedule)).unwrap_or_else(|e| panic!("{e}"));
        let r = run_batch(
            &job.cells[0],
            job.seed,
            &[0, 1, 2],
            &job.checkpoint_rounds(),
            &emulated(),
            &|_| {},
        )
        .unwrap_or_else(|e| panic!("{e}"));
        r.iter()
            .map(|x| x.points.last().map_or(0, |p| p.counters.sync_rounds))
            .collect()
    };
    let (private, paper) = (syncs("private"), syncs("paper"));
    println!("syncs over 150 rounds: private {private:?}, paper {paper:?}");
    assert!(private.iter().all(|&s| (4..=17).contains(&s)), "{private:?}");
    assert!(paper.iter().all(|&s| s > 100), "{paper:?}");
}

/// FedUCB's device path, both forms (log sync, private; M = 10 and 5, so a
/// federation spans three blocks and two): the rounds of a chunk (up to
/// 64) in one launch of fb_feducb_rounds (fb_peer_rounds: on a ring,
/// gamma 2, private or not), the test, the decisions, the
/// refactorizations, the syncs or the exchange inside it, then one
/// reduction of the chunk's regrets: 2 launches per 64 rounds whether or
/// not a federation syncs, and no copy until an observation.
#[test]
fn feducb_device_rounds_cost_a_constant_number_of_launches() {
    use fedbandits::cli::bench::{On, measure};
    let dev = emulated();
    let central = "algorithm: feducb_centralized\nenvironment: linear_sphere\nhorizon: {T}\nparams: {d: 4, k: 8, m: 10, epsilon: 1, delta: 0.1, sync: log}\n".to_string();
    let peer = |private: bool| {
        format!(
            "algorithm: feducb_decentralized\nenvironment: linear_sphere\nhorizon: {{T}}\n\
             params: {{d: 4, k: 8, m: 5, epsilon: 1, delta: 0.1, sync: log, graph: ring, gamma: 2, private: {private}}}\n"
        )
    };
    for (name, yaml) in [
        ("feducb", central),
        ("decentralized", peer(false)),
        ("decentralized", peer(true)),
    ] {
        let traffic = |t: u64| {
            measure(name, &yaml, 4, t, On::Cuda(&dev))
                .unwrap_or_else(|e| panic!("{e}"))
                .traffic
                .unwrap()
        };
        let (a, b) = (traffic(64), traffic(192));
        println!("{name}: 64 rounds {a:?}, 192 rounds {b:?}\n{yaml}");
        assert_eq!(b.0 - a.0, 4, "launches per 128 rounds");
        assert_eq!(b.1, a.1, "no upload per round");
        assert_eq!(b.2, a.2, "no download per round");
    }
}

/// Decentralized FedUCB on the device path (fb_peer_rounds, the exchange
/// inside; M = 6 and 7, so a federation spans two blocks; per-slot state,
/// the payload rings, each slot's deliveries in sender order, the test and
/// the requests on the device): the emulated kernels reproduce the
/// CPU's curves and counters (syncs, messages, clamps, failures) bit for
/// bit on both environments, every sync regime, private or not, gamma 1 to
/// 3 on a ring and a line, and on complete, star and Erdos-Renyi graphs,
/// with refactorizations between syncs (refactor_every 7).
#[test]
fn emulated_kernels_match_cpu_backend_for_feducb_decentralized() {
    for env in ["linear_sphere", "linear_gap"] {
        assert_parity(&format!(
            "seed: 15\nrepetitions: 3\nhorizon: 90\ncheckpoints: {{every: 15}}\nalgorithm: feducb_decentralized\n\
             environment: {env}\nparams: {{m: 6, d: 3, k: 8, epsilon: 1, delta: 0.1, threshold: 2, refactor_every: 7, \
             graph: ring}}\ngrid: {{gamma: [1, 3], sync: [every_round, log, threshold], private: [true, false]}}\n"
        ));
    }
    assert_parity(
        "seed: 16\nrepetitions: 2\nhorizon: 60\ncheckpoints: {every: 20}\nalgorithm: feducb_decentralized\n\
         environment: linear_sphere\nparams: {m: 7, d: 3, k: 8, epsilon: 2, delta: 0.1, sync: sqrt_m, graph_p: 0.5}\n\
         grid: {graph: [complete, star, erdos_renyi, line], private: [true, false]}\n",
    );
    // The regimes above synced (so that the parity covered messages).
    let job = Job::parse(
        Path::new("s.yaml"),
        "seed: 15\nrepetitions: 2\nhorizon: 90\ncheckpoints: {every: 90}\nalgorithm: feducb_decentralized\n\
         environment: linear_gap\nparams: {m: 6, d: 3, k: 8, private: false, sync: threshold, threshold: 2, \
         graph: ring, gamma: 3}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = run_batch(&job.cells[0], job.seed, &[0, 1], &[90], &emulated(), &|_| {}).unwrap();
    for x in &r {
        let c = &x.points[0].counters;
        assert!(c.sync_rounds > 3 && c.messages > c.sync_rounds, "{c:?}");
    }
}

/// `sdp_vecsum` on the device path (each round's points randomized inside
/// the multi-round kernel, a lane per coordinate with keyed draws, integer
/// accumulators, the shuffler's keyed Binomial noise at each sync): the
/// emulated kernels reproduce the CPU's curves and counters bit for bit on
/// both environments, calibrations and with coordinates the protocol clips
/// (L = 1 on linear_sphere with rewards beyond 1 are clipped first).
#[test]
fn emulated_kernels_match_cpu_backend_for_sdp_vecsum() {
    for env in ["linear_sphere", "linear_gap"] {
        assert_parity(&format!(
            "seed: 14\nrepetitions: 3\nhorizon: 120\ncheckpoints: {{every: 20}}\nalgorithm: private_fedlinucb\n\
             environment: {env}\nparams: {{m: 4, d: 4, k: 12, epsilon: 1, delta: 0.1, protocol: sdp_vecsum, \
             batch_size: 8, refactor_every: 5}}\ngrid: {{calibration: [code, theorem]}}\n"
        ));
    }
}

/// Each bench workload's kernels as an H100 would launch them (the host
/// emulation with the H100's 227 KiB of shared memory per block, which
/// shapes the cooperative kernel; 2 federations, 128 rounds or more):
/// launches per round, threads and dynamic shared memory per block, with
/// ptxas' registers, spills and static shared memory at sm_90, and the
/// theoretical occupancy they give on an H100, and the bytes copied: the
/// table `fedbandits calibrate --report` writes. Printed for the record
/// (`--nocapture`); asserted: every workload runs there but FedUCB at d =
/// 128 (refused: its cooperative kernel does not fit shared memory), every
/// kernel launched has a ptxas report, spills nothing and holds 16 warps
/// per SM or more on an H100, FedUCB's workloads (both forms) cost at most
/// one launch per 32 rounds (their events inside the kernel), and the other
/// workloads of the linear family (`sdp_vecsum` included) less than one per
/// round.
#[test]
fn every_workloads_kernels_have_their_occupancy_and_launches_per_round() {
    use fedbandits::backend::cuda::occupancy::SM_90;
    use fedbandits::cli::kernels;
    let stats = ptxas::stats(&SM_90);
    let dev = emulated_with_shared(kernels::H100_SHARED_PER_BLOCK);
    let (tables, refused) = kernels::tables(&dev, &stats, &SM_90, None);
    let md = kernels::markdown(&tables, &refused);
    println!("{md}");
    // The linear family's main kernel as the calibration report tables it
    // (`fedbandits calibrate --report`): 32 warps per SM on sm_90, 50%
    // (linear_sphere; kernels/README.md's occupancy table).
    assert!(
        md.lines()
            .any(|l| l.starts_with("| `fb_linear_rounds_coop` |") && l.contains("| 32 | 50.0% |")),
        "{md}"
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with("feducb_d128: ") && refused[0].contains("shared memory"),
        "{refused:?}"
    );
    for t in &tables {
        assert!(!t.rows.is_empty(), "{} launched nothing", t.workload);
        let name = t.workload;
        if name.contains("feducb") || name.contains("decentralized") {
            // FedUCB's rounds on the device: at most one launch per 32.
            assert!(
                32 * t.traffic.0 <= t.rounds,
                "{name}: {:?} in {} rounds",
                t.traffic,
                t.rounds
            );
        } else if !name.contains("pfcb") && !name.contains("gossip") {
            assert!(t.traffic.0 < t.rounds, "{name}: {:?} in {} rounds", t.traffic, t.rounds);
        }
        for r in &t.rows {
            let o = r
                .occupancy
                .unwrap_or_else(|| panic!("{}: no ptxas report for {}", t.workload, r.kernel));
            assert!(o.blocks >= 1, "{}: {} does not fit an SM: {r:?}", t.workload, r.kernel);
            // The occupancy target at these shapes (d = 10, K = 100 and the
            // other families' workloads): 16 warps per SM or more.
            assert!(
                o.warps >= 16,
                "{}: {} holds {} warps per SM: {r:?}",
                t.workload,
                r.kernel,
                o.warps
            );
            assert_eq!(
                r.stats.as_ref().map(|k| k.spills),
                Some((0, 0)),
                "{}: {}",
                t.workload,
                r.kernel
            );
        }
    }
}
