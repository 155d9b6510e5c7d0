//! `noise: false` in every family's private algorithms: a noisy cell keeps
//! the identity it had before the parameter existed, the noise-free cell
//! shares its random numbers, states no privacy figure and says why, and
//! draws no noise (P-FCB, whose epsilon sets only its noise, runs at
//! `noise: false` exactly as at `epsilon: .inf`).

use crate::job::{Cell, Job};
use crate::privacy::accountant::NO_NOISE;
use crate::sim::run_rep;

/// (algorithm, environment, fixed parameters) of every private algorithm.
const PRIVATE: &[(&str, &str, &str)] = &[
    (
        "p_fcb",
        "procurement",
        "m: 3, producers: 6, delta: 0.01, t_low: 20, t_high: 180, epsilon: 1",
    ),
    (
        "fed_ucb_gossip",
        "mab_heterogeneous",
        "m: 4, arms: 3, epsilon: 1, graph: ring",
    ),
    (
        "private_fedlinucb",
        "linear_sphere",
        "m: 4, d: 3, k: 8, delta: 0.1, epsilon: 1, batch_size: 10",
    ),
    (
        "private_fedlinucb",
        "linear_sphere",
        "m: 4, d: 3, k: 8, delta: 0.1, epsilon: 1, batch_size: 10, protocol: sdp_vecsum",
    ),
    (
        "feducb_centralized",
        "linear_gap",
        "m: 4, d: 3, k: 9, delta: 0.1, epsilon: 1",
    ),
    (
        "feducb_decentralized",
        "linear_gap",
        "m: 4, d: 3, k: 9, delta: 0.1, epsilon: 1, graph: ring",
    ),
];

fn job(algo: &str, env: &str, params: &str, grid: &str) -> Job {
    let text = format!(
        "seed: 3\nrepetitions: 3\nhorizon: 200\ncheckpoints: {{every: 50}}\nalgorithm: {algo}\nenvironment: {env}\n\
         params: {{{params}}}\n{grid}"
    );
    Job::parse(std::path::Path::new("noise.yaml"), &text).unwrap_or_else(|e| panic!("{algo}: {e}"))
}

/// The job's cell whose `noise` is `noise`.
fn with_noise(j: &Job, noise: bool) -> &Cell {
    j.cells
        .iter()
        .find(|c| c.params.get("noise").and_then(crate::algo::params::Value::as_bool) == Some(noise))
        .unwrap_or_else(|| panic!("a cell with noise: {noise}"))
}

fn finals(j: &Job, cell: &Cell) -> Vec<f64> {
    let ck = j.checkpoint_rounds_of(cell);
    (0..j.repetitions)
        .map(|r| {
            run_rep(cell, j.seed, r, &ck, &|_| {})
                .points
                .last()
                .expect("a point")
                .agent_regret_mean
        })
        .collect()
}

#[test]
fn a_noisy_cell_is_keyed_as_before_noise_existed_and_its_twin_shares_its_random_numbers() {
    for &(algo, env, params) in PRIVATE {
        let before = job(algo, env, params, "");
        let both = job(algo, env, params, "grid: {noise: [true, false]}\n");
        assert_eq!((before.cells.len(), both.cells.len()), (1, 2), "{algo} {params}");
        let (noisy, free) = (with_noise(&both, true), with_noise(&both, false));
        assert_eq!(
            (&noisy.id, &noisy.key),
            (&before.cells[0].id, &before.cells[0].key),
            "{algo} {params}"
        );
        assert_ne!(free.id, noisy.id, "{algo}");
        // Common random numbers: the same environment and algorithm streams.
        assert_eq!(
            (free.env_scope, free.cell_scope),
            (noisy.env_scope, noisy.cell_scope),
            "{algo}"
        );
    }
}

#[test]
fn a_noise_free_cell_states_no_figure_and_says_why() {
    for &(algo, env, params) in PRIVATE {
        let both = job(algo, env, params, "grid: {noise: [true, false]}\n");
        let noisy = with_noise(&both, true)
            .config
            .accounting()
            .expect("a private cell is accounted");
        let free = with_noise(&both, false)
            .config
            .accounting()
            .expect("still listed as private");
        assert!(
            noisy.epsilon.is_some() && noisy.noise_multiplier.is_some_and(|m| m > 0.0),
            "{algo} {params}"
        );
        assert_eq!(
            (free.epsilon, free.mu, free.rho, free.paper_claimed),
            (None, None, None, None),
            "{algo}"
        );
        assert_eq!(free.epsilon_null.as_deref(), Some(NO_NOISE), "{algo}");
        assert_eq!(free.noise_multiplier, Some(0.0), "{algo}");
        assert_eq!(free.releases_per_observation, noisy.releases_per_observation, "{algo}");
    }
}

#[test]
fn a_noise_free_cell_draws_no_noise() {
    // P-FCB's epsilon sets only its messages' noise: without noise it runs
    // exactly as at epsilon .inf, repetition for repetition, bit for bit.
    let (algo, env, params) = PRIVATE[0];
    let free = job(algo, env, params, "grid: {noise: [false]}\n");
    let inf = job(algo, env, &params.replace("epsilon: 1", "epsilon: .inf"), "");
    let (a, b) = (finals(&free, &free.cells[0]), finals(&inf, &inf.cells[0]));
    assert_eq!(
        a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        b.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // Every other private algorithm's noise changes what it does: the twin
    // on the same random numbers runs otherwise.
    for &(algo, env, params) in &PRIVATE[1..] {
        let both = job(algo, env, params, "grid: {noise: [true, false]}\n");
        let (noisy, free) = (
            finals(&both, with_noise(&both, true)),
            finals(&both, with_noise(&both, false)),
        );
        assert_ne!(noisy, free, "{algo} {params}: the noise changed nothing");
    }
}
