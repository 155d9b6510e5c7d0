//! The combinatorial procurement family's batched contract (Solanki et
//! al.): a batch of federations of one configuration and the
//! operations each device runs over all of them (the CPU's in
//! [`super::cpu`], the CUDA host code in [`super::cuda`]; [`super::ops`]
//! picks one for a backend).
//!
//! Round t of every agent j of every federation, in lockstep: while
//! t <= `explore_rounds` procure one unit from every producer; afterwards
//! procure the oracle's choice (greedy, or exact on small instances) for the upper confidence qualities
//! q+_{ij} = Y_{ij}/W_{ij} + sqrt(3 ln t / (2 W_{ij})); observe each unit's
//! quality (the u-th unit from producer i in round t is good iff
//! `uniform_at(fold_more(quality_key, t), i * 2^32 + u) < q_i`, so every
//! algorithm sees the same units); add the round to W, Y as the policy says
//! ([`CombPolicy`]); record regret against the same oracle on the true qualities.

use crate::env::procurement::{Instance, Oracle, revenue};

/// How agents share what they observe.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum CombPolicy {
    /// Own data only.
    NonFederated,
    /// Every round every agent's true (w, y) reaches every other agent.
    Fcb,
    /// Private, scheduled communication (P-FCB).
    PFcb(PFcb),
}

/// P-FCB's communication: in round `rounds[z]` (z = 0, 1, ...) every agent
/// sends its (w, y) per producer since its last communication with Gaussian
/// noise of standard deviation k_{ij} sqrt(2 ln(1.25 / delta)) / eps[z] on
/// each; a receiver drops a message with w~ <= 0 and accepts the others
/// whose y~/w~ lies within its estimate +- omega1 sqrt(3 ln(x) / (2 W)) (x =
/// n t and W its total units, Procedure 1; or x = t and W its own units, the
/// prose), adding omega2 (w~, y~).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PFcb {
    /// Communication rounds, increasing.
    pub rounds: Vec<u64>,
    /// epsilon of each communication round (its noise calibration).
    pub eps: Vec<f64>,
    /// The epsilon each communication round's message provides at `delta`
    /// (the accountant's exact figure; summed into `epsilon_spent`).
    pub spent: Vec<f64>,
    /// delta of each communication round.
    pub delta: f64,
    /// Whether the messages carry noise (false: P-FCB with `epsilon: .inf`,
    /// whose `eps` are infinite, or `noise: false`; its privacy columns
    /// stay null).
    pub private: bool,
    /// Acceptance window scale.
    pub omega1: f64,
    /// Weight of accepted messages.
    pub omega2: f64,
    /// The prose's acceptance window (own units, ln t) instead of
    /// Procedure 1's (total units, ln(n t)).
    pub prose_window: bool,
    /// `sampler: discrete`: the lattice step of the messages' discrete
    /// Gaussian noise ([`p_fcb_lattice_message`]); None: the float normals.
    pub lattice: Option<f64>,
    /// Folded noise key of every agent, federation-major.
    pub noise_keys: Vec<u64>,
}

/// P-FCB's noise scale of a communication round of budget `eps` at
/// `delta`: sqrt(2 ln(1.25 / delta)) / eps, which times a producer's
/// capacity k is the standard deviation of the noise on each of w~ and y~
/// (the classical Gaussian calibration for sensitivity k). Every backend
/// uses this expression.
pub fn p_fcb_noise_scale(delta: f64, eps: f64) -> f64 {
    (2.0 * crate::math::ln(1.25 / delta)).sqrt() / eps
}

impl PFcb {
    /// The noise scale of communication round `z` ([`p_fcb_noise_scale`]
    /// of its budget; 0 where the messages carry no noise): every backend
    /// reads it here.
    pub fn noise_scale(&self, z: usize) -> f64 {
        if self.private { p_fcb_noise_scale(self.delta, self.eps[z]) } else { 0.0 }
    }
}

/// P-FCB's message about one producer: the uncommunicated (w, y) with
/// Gaussian noise of standard deviation `sigma` on each, drawn from the
/// agent's round key `key` at indices 2 `producer` and 2 `producer` + 1.
pub fn p_fcb_message(w: f64, y: f64, sigma: f64, key: u64, producer: usize) -> (f64, f64) {
    (
        w + sigma * crate::rng::normal_at(key, 2 * producer as u64),
        y + sigma * crate::rng::normal_at(key, 2 * producer as u64 + 1),
    )
}

/// [`p_fcb_message`] on the lattice of step `step` (`sampler: discrete`,
/// [`super::p_fcb::MessageLattice`]): w and y (integers, lattice points)
/// plus `step` times a discrete Gaussian of deviation ceil(`sigma` / step)
/// steps each, the draws keyed by entries 2 `producer` and 2 `producer` + 1
/// of the agent's round key.
pub fn p_fcb_lattice_message(w: f64, y: f64, sigma: f64, step: f64, key: u64, producer: usize) -> (f64, f64) {
    use crate::rng::discrete_gauss::{Bits, discrete_gaussian};
    let steps = (sigma / step).ceil() as u64;
    let draw = |e: u64| discrete_gaussian(&mut Bits::new(crate::rng::fold_more(key, e)), steps) as f64 * step;
    (w + draw(2 * producer as u64), y + draw(2 * producer as u64 + 1))
}

/// A batch of federations.
pub struct CombBatch {
    /// Each federation's instance.
    pub instances: Vec<Instance>,
    /// Folded quality-draw key of every agent, federation-major.
    pub quality_keys: Vec<u64>,
    /// Rounds of pure exploration.
    pub explore_rounds: u64,
    /// The policy.
    pub policy: CombPolicy,
    /// The oracle of every agent's choice and of the benchmark s*.
    pub oracle: Oracle,
}

impl CombBatch {
    /// Federations in the batch.
    pub fn federations(&self) -> usize {
        self.instances.len()
    }
}

/// One federation's state as [`crate::algo::rounds::RoundOps::observe`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CombObservation {
    /// Cumulative group regret.
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Group regret of the rounds after exploration.
    pub regret_after_exploration: f64,
    /// Agent-rounds whose choice violated the constraint under the true q.
    pub violations: u64,
    /// Messages (sender, receiver, producer) accepted so far.
    pub accepted: u64,
    /// Messages rejected so far (w~ <= 0 or outside the window).
    pub rejected: u64,
    /// Communication rounds so far.
    pub communications: u64,
    /// Sum of epsilon_z spent so far (per agent; basic composition).
    pub epsilon_spent: f64,
    /// Sum of delta spent so far.
    pub delta_spent: f64,
}


/// What every agent's regret is measured against: the true per-unit
/// revenues r_{ij} (n x m), and per agent the revenue of s* (the oracle on
/// the true qualities) and the penalty L_j = s*'s revenue minus the worst
/// choice's (every unprofitable producer at full capacity).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Benchmarks {
    /// True revenues, agent-major.
    pub r_true: Vec<f64>,
    /// Revenue of s* per agent.
    pub best: Vec<f64>,
    /// L_j per agent.
    pub penalty: Vec<f64>,
}

impl Benchmarks {
    /// The benchmarks of `inst` under `oracle` (the same on every backend).
    pub fn new(inst: &Instance, oracle: Oracle) -> Self {
        let (n, m) = (inst.spec.agents, inst.spec.producers);
        let mut r_true = vec![0.0; n * m];
        let (mut best, mut penalty) = (vec![0.0; n], vec![0.0; n]);
        let (mut l, mut cur, mut order) = (vec![0u32; m], vec![0u32; m], Vec::with_capacity(m));
        for j in 0..n {
            let r = &mut r_true[j * m..(j + 1) * m];
            inst.revenues(j, &inst.quality, r);
            oracle.solve(
                &inst.quality,
                r,
                inst.capacities(j),
                inst.spec.alpha,
                &mut l,
                &mut order,
                &mut cur,
            );
            best[j] = revenue(&l, r);
            let worst: f64 = inst
                .capacities(j)
                .iter()
                .zip(r.iter())
                .map(|(&k, &ri)| f64::from(k) * ri.min(0.0))
                .sum();
            penalty[j] = best[j] - worst;
        }
        Self { r_true, best, penalty }
    }
}
