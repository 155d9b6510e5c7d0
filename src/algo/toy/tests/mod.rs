//! The toy family end to end through the engine's generic layers: the job
//! loader expands its parameters, the runner runs and resumes it, and its
//! regret is what epsilon-greedy's is.

use crate::job::Job;
use crate::sim::{RepOutcome, Resumed, Snapshots, run_rep, run_rep_resumable};

fn job(text: &str) -> Job {
    Job::parse(std::path::Path::new("toy.yaml"), text).expect("a toy job parses")
}

/// An `explore` axis is two cells (its parameter is the family's own), and
/// the agent count defaults to the family's 4.
#[test]
fn the_loader_expands_the_toys_own_parameters() {
    let j = job("horizon: 100\nalgorithm: egreedy\nenvironment: toy_bernoulli\ngrid: {explore: [0.05, 0.3]}\n");
    assert_eq!(j.cells.len(), 2);
    for c in &j.cells {
        assert_eq!(c.config.agents(), 4);
        assert_eq!(c.config.family_name(), "toy");
    }
}

/// With explore = 1 every round after the first K is a uniform arm, so
/// the regret per agent-step is the mean gap, best - mean(mu), exactly in
/// expectation: 20 repetitions of 4 agents over 20,000 rounds put the
/// measured mean within 2% of it (its standard error here is below 0.5%).
#[test]
fn uniform_play_pays_the_mean_gap() {
    let j = job("seed: 5\nrepetitions: 20\nhorizon: 20000\nalgorithm: egreedy\nenvironment: toy_bernoulli\nparams: {explore: 1}\n");
    let cell = &j.cells[0];
    let ck = j.checkpoint_rounds();
    let (mut measured, mut expected) = (0.0, 0.0);
    for rep in 0..20 {
        let r = run_rep(cell, j.seed, rep, &ck, &|_| {});
        measured += r.points.last().expect("a point").agent_regret_mean;
        let batch = crate::sim::cell_batch(cell, j.seed, &[rep]).expect("builds");
        let state = crate::algo::run::RepState::start(&batch).expect("starts");
        let means = state_means(&state);
        let best = means.iter().copied().fold(f64::MIN, f64::max);
        let gap = best - means.iter().sum::<f64>() / means.len() as f64;
        // The first K rounds play each arm once: the same mean gap.
        expected += gap * 20000.0;
    }
    let ratio = measured / expected;
    assert!((ratio - 1.0).abs() < 0.02, "measured / expected regret = {ratio}");
}

/// The arms' means of a toy repetition, read back from its snapshot bytes.
fn state_means(state: &crate::algo::run::RepState) -> Vec<f64> {
    let mut bytes = Vec::new();
    state.write(&mut bytes).expect("serializes");
    let rep: super::Rep = bincode::deserialize(&bytes).expect("a toy state");
    rep.means
}

/// A stopped toy repetition resumes from its snapshot bit for bit, and
/// more exploration costs more regret here (paired over 12 repetitions).
#[test]
fn the_toy_resumes_bit_identically_and_exploration_costs_regret() {
    let j = job("seed: 2\nrepetitions: 12\nhorizon: 3000\nalgorithm: egreedy\nenvironment: toy_bernoulli\ngrid: {explore: [0.02, 0.5]}\n");
    let ck = j.checkpoint_rounds();
    let dir = std::env::temp_dir().join(format!("fedbandits-toy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let mut finals = Vec::new();
    for cell in &j.cells {
        let whole = run_rep(cell, j.seed, 1, &ck, &|_| {});
        let stop = std::sync::atomic::AtomicBool::new(true);
        let tally = Resumed::default();
        let snap = Snapshots {
            path: dir.join(format!("{}.snap", cell.id)),
            every: std::time::Duration::ZERO,
            stop: &stop,
            resumed: &tally,
        };
        let first = run_rep_resumable(cell, j.seed, 1, &ck, &|_| {}, Some(&snap)).expect("runs");
        assert!(matches!(first, RepOutcome::Stopped), "stops at the first check");
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let Ok(RepOutcome::Done(resumed)) = run_rep_resumable(cell, j.seed, 1, &ck, &|_| {}, Some(&snap)) else {
            panic!("did not finish");
        };
        assert_eq!(resumed.points, whole.points);
        assert_eq!(tally.totals().0, 1);
        let regret: Vec<f64> = (0..12)
            .map(|r| run_rep(cell, j.seed, r, &ck, &|_| {}).points.last().expect("a point").group_regret)
            .collect();
        finals.push(regret);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let worse = finals[0].iter().zip(&finals[1]).filter(|(low, high)| high > low).count();
    assert!(worse >= 10, "explore 0.5 cost more regret than 0.02 in {worse} of 12 repetitions");
}
