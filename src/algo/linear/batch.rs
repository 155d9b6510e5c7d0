//! The batched path's contract: a batch of federations of one linear-family
//! configuration, described in the backend's own terms, so that a backend
//! never needs to know which algorithm or job produced it.
//!
//! The algorithm layer turns a configuration into a [`LinearBatch`]
//! (`algo::linear::linear_batch`: the confidence-width schedule, lambda, the
//! sync rule and the noise keys); the simulation layer gives it the
//! repetitions' keys and turns the [`BatchPoint`]s back into regret curves.
//!
//! The round loop (which operation runs when) is written once, in
//! `algo::linear::lockstep`; a backend implements the operations of
//! [`LinearOps`] over all federations and agents of the batch at once:
//! * [`LinearOps::rounds`]: rounds t0, t0 + 1, ... with the given widths,
//!   every agent of every federation: draw the decision set from the agent's
//!   environment streams, play the UCB argmax (or, for a random policy, a
//!   uniformly random action), observe (the reward clipped to
//!   [`LinearBatch::reward_bound`]), Sherman-Morrison update of V^{-1}
//!   and log det, add to the local sums and the regret. No agent reads
//!   another's state, so a backend may run a chunk of rounds in one go.
//! * [`LinearOps::refactor`]: rebuild every V^{-1} from base + local Gram.
//! * [`LinearOps::sync`]: the server's [`Release`] (exact sum, each agent's
//!   tree release with its node noise regenerated from its key, or the
//!   vector-summation protocol) becomes every agent's base and bias, and the
//!   local sums reset. Under an adaptive rule ([`SyncWhen::Adaptive`],
//!   FedUCB) the same happens per federation inside
//!   [`LinearOps::rounds`], when that federation's determinant test fires
//!   (or, on a [`Network`], as its agents' broadcasts arrive).
//! * [`LinearOps::observe`]: each federation's regret and failure counts.

use crate::backend::BatchError;
use crate::privacy::lattice::{DiscreteLaplace, STEP, STEP_BITS, to_lattice};
use crate::env::LinearEnvSpec;
use crate::privacy::vecsum::VecSum;

/// The dimension from which a linear batch is its own workload kind
/// (its `Placeable::kind`, `algo::linear`).
pub const LARGE_D: usize = 32;

/// The synchronization of a federated batch.
#[derive(Clone, Debug)]
pub struct SyncRule {
    /// When federations sync.
    pub when: SyncWhen,
    /// What the server releases.
    pub release: Release,
    /// The diagonal the released Gram sum is shifted by: each agent's base
    /// becomes `diag` I + released Gram (FedLinUCB: lambda; FedUCB: M x
    /// the PRIVATIZER's shift). [`Release::Exact`] ignores it (the base
    /// accumulates the local sums).
    pub diag: f64,
    /// Messages one sync sends (for the `messages` counter).
    pub messages_per_sync: u64,
}

impl SyncRule {
    /// The tree node noise's standard deviation (0 when the release has no
    /// Gaussian tree).
    pub fn tree_sigma(&self) -> f64 {
        match self.release {
            Release::Tree { sigma, .. } => sigma,
            _ => 0.0,
        }
    }

    /// Whether the release is a tree of noisy nodes (its noise may be 0:
    /// `noise: false`).
    pub fn tree(&self) -> bool {
        matches!(self.release, Release::Tree { .. })
    }

    /// The adaptive rule, if the schedule depends on the data.
    pub fn adaptive(&self) -> Option<&AdaptiveSync> {
        match &self.when {
            SyncWhen::Adaptive(a) => Some(a),
            SyncWhen::Every(_) => None,
        }
    }
}

/// When the federations of a batch sync.
#[derive(Clone, Debug)]
pub enum SyncWhen {
    /// After every `n`-th round, every federation together (the lockstep
    /// loop schedules it).
    Every(u64),
    /// When a federation's own determinant test fires (each federation on
    /// its own schedule; the backend decides inside its rounds).
    Adaptive(AdaptiveSync),
}

/// Dubey & Pentland's determinant test (FedUCB, line 12): after playing,
/// agent i of a federation requests a sync when
/// log det(V_i + c_i I) - log det(S) > D / Delta t_i, with Delta t_i the
/// rounds since the last sync (or, on a graph, [`Network`]: since its slot
/// last broadcast, plus one). log det V_i is kept by the matrix
/// determinant lemma in the UCB step, log det(V_i + c_i I) by a second
/// inverse updated by Sherman-Morrison (only when c_i > 0); both are rebuilt
/// at refactorizations. A federation where any agent requests syncs after
/// the round (centralized) or the requester's broadcast starts (graph).
#[derive(Clone, Debug)]
pub struct AdaptiveSync {
    /// D.
    pub threshold: f64,
    /// Every round, whatever the test says (`sync: every_round`).
    pub every_round: bool,
    /// c_i per agent, federation-major (`federations x m`); empty: no shift
    /// (the test uses log det V_i).
    pub shifts: Vec<f64>,
    /// The test answered through the sparse vector technique (private
    /// schedule; shifted tests only; keys per agent, on a graph per slot),
    /// or None: the test itself.
    pub svt: Option<Svt>,
}

/// The determinant test answered through the sparse vector technique (Lyu,
/// Su & Li 2017, "Understanding the Sparse Vector Technique for
/// Differential Privacy", Algorithm 1, the variant they prove
/// epsilon-DP; several earlier published variants are not private), one
/// instance per agent over all its rounds (on a graph one per slot: an
/// observation enters one slot's sums, so the slots compose in parallel):
/// - each agent draws its threshold noise rho ~ Lap(2 / eps) once, in units
///   of the query's sensitivity, and each round's query noise nu ~
///   Lap(4 c / eps) (c: `cap`), or Lap(2 c / eps) where the queries are
///   monotone (Lyu, Su & Li's monotone case): under add/remove, adding an
///   observation to U_i raises every query of its epoch (U_i grows by a
///   positive semidefinite term), removing one lowers every one;
/// - the query is the test's statistic q = log det(S + U_i + c I) - log det
///   S over its sensitivity Delta_e, which only the public S sets: one
///   observation of the epoch is one rank-1 term of U_i (earlier ones are
///   inside S, a release already accounted), so it moves log det by at most
///   ln(1 + L^2 lambda_max((S + c I)^{-1})) <= Delta_e = ln(1 + L^2 b), b
///   the smaller of the inverse's Frobenius norm and its largest absolute
///   row sum ([`Svt::sensitivity`]; U_i is positive semidefinite); the threshold D / Delta t is
///   scaled the same way;
/// - the agent requests a sync when q / Delta_e + nu >= (D / Delta t) /
///   Delta_e + rho; after `cap` requests (the algorithm's abort), or while
///   Delta_e is not finite (S + c I not factorized exactly), it requests
///   syncs on a data-independent schedule instead: at its own rounds that
///   are powers of two (on a graph a slot's own rounds, ceil(t / gamma),
///   not the global round, which some slots never play).
///
/// The schedule is then eps-DP per agent (post-processing of the agents'
/// instances and of released sums). Laplace draws are keyed
/// ([`crate::rng::laplace_at`]): rho from (agent key, 0),
/// nu of round t from (agent key, t), the same bits on every backend.
/// Under `sampler: discrete` ([`SvtLattice`]) the test runs on the lattice
/// with exact integer noise from the same keys.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Svt {
    /// Per agent (federation-major), the key of its draws.
    pub keys: Vec<u64>,
    /// Laplace scale of rho: 2 / eps_schedule.
    pub threshold_scale: f64,
    /// Laplace scale of nu: 4 cap / eps_schedule (2 cap / eps_schedule for
    /// monotone queries).
    pub query_scale: f64,
    /// Requests after which an agent follows the fallback schedule.
    pub cap: u32,
    /// L^2 of the sensitivity bound.
    pub l2: f64,
    /// `sampler: discrete`: the test on the lattice ([`SvtLattice`]);
    /// None: the float Laplace of the scales above.
    #[serde(default)]
    pub lattice: Option<SvtLattice>,
}

/// The sparse vector test on the lattice (`sampler: discrete`,
/// [`crate::privacy::lattice`]): the query q / Delta_e and the threshold
/// (D / Delta t) / Delta_e, each rounded to the lattice 2^-20 (to nearest;
/// the threshold is public), rho and nu discrete Laplace draws in steps
/// from the keys of the float ones, and the comparison made exactly on the
/// integers. One unit of the normalized query is 2^20 steps and rounding
/// moves each end by at most half a step, so the rounded query's
/// sensitivity is [`SvtLattice::WIDTH`] = 2^20 + 1 steps: two rounded
/// queries differ by an integer below 2^20 |a - b| + 1, which is at most
/// 2^20 + 1 while |a - b| < 1 + 2^-20, so a floating-point excess of the
/// computed log-det difference below 2^-20 units is absorbed. Lyu, Su & Li's
/// proof shifts rho by the sensitivity and each answered query's nu by
/// `shift` times it (2; 1 for monotone queries): on the integers these
/// are bijections whose probability ratio is exp(rate x shift), so the
/// test is [`SvtLattice::epsilon`]-DP, the rates chosen (each rounded down
/// to a multiple of 2^-40, [`DiscreteLaplace::budget`]) so that it is at
/// most the schedule's share. Queries beyond 2^42 units saturate (the
/// log-det statistics are far below it).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SvtLattice {
    /// rho's noise: rate at most eps / (2 WIDTH).
    pub rho: DiscreteLaplace,
    /// nu's noise: rate at most eps / (2 cap shift WIDTH).
    pub nu: DiscreteLaplace,
    /// The proof's shift of nu, in sensitivities (2, or 1 for monotone queries).
    pub shift: u32,
    /// The answered queries (the algorithm's cap).
    pub cap: u32,
}

impl SvtLattice {
    /// The rounded query's L1 sensitivity in lattice steps.
    pub const WIDTH: u64 = (1 << STEP_BITS) + 1;

    /// The test for a schedule of pure `eps` with `cap` answered queries and
    /// nu's `shift`; None where a rate would round to 0 (eps below about
    /// 2^-19 cap shift).
    pub fn new(eps: f64, cap: u32, shift: u32) -> Option<Self> {
        let per = f64::from(cap) * f64::from(shift);
        Some(Self {
            rho: DiscreteLaplace::budget(eps / 2.0, Self::WIDTH)?,
            nu: DiscreteLaplace::budget(eps / (2.0 * per), Self::WIDTH)?,
            shift,
            cap,
        })
    }

    /// The test's exact epsilon: WIDTH (s_rho / t + cap shift s_nu / t),
    /// rounded up.
    pub fn epsilon(&self) -> f64 {
        let per = u128::from(self.cap) * u128::from(self.shift);
        let num = u128::from(Self::WIDTH) * (u128::from(self.rho.s) + per * u128::from(self.nu.s));
        (num as f64 / self.rho.t as f64).next_up()
    }
}

impl Svt {
    /// Delta_e of the epoch whose (S + c I)^{-1} is `inv` (row-major, d x
    /// d): ln(1 + L^2 b), b = min(||inv||_F, the largest absolute row sum),
    /// both above inv's largest eigenvalue (every induced norm is; the row
    /// sums are exactly it for a diagonal inverse, where the Frobenius norm
    /// is up to sqrt(d) above), each sum in
    /// row-major order (as the kernels' `fb_spectral_bound` sums them);
    /// +inf when `inv` is not an exact inverse (`exact` false: the
    /// factorization failed or needed jitter).
    pub fn sensitivity(&self, inv: &[f64], exact: bool) -> f64 {
        if !exact {
            return f64::INFINITY;
        }
        let d = (inv.len() as f64).sqrt().round() as usize;
        let mut s = 0.0;
        for v in inv {
            s += v * v;
        }
        let frob = s.sqrt();
        let mut rows = 0.0f64;
        for row in inv.chunks(d.max(1)) {
            let mut r = 0.0;
            for v in row {
                r += v.abs();
            }
            if r > rows {
                rows = r;
            }
        }
        crate::math::ln_1p(self.l2 * if rows < frob { rows } else { frob })
    }

    /// Agent `g`'s threshold noise rho (on the lattice: its steps times
    /// the step, exact).
    pub fn rho(&self, g: usize) -> f64 {
        let key = crate::rng::fold_more(self.keys[g], 0);
        match &self.lattice {
            Some(l) => l.rho.draw(key) as f64 * STEP,
            None => crate::rng::laplace_at(key, self.threshold_scale),
        }
    }

    /// Agent `g`'s query noise of round `t` (t >= 1).
    pub fn nu(&self, g: usize, t: u64) -> f64 {
        crate::rng::laplace_at(crate::rng::fold_more(self.keys[g], t), self.query_scale)
    }

    /// Whether agent `g` requests a sync after round `t` (t >= 1): the noisy
    /// test of statistic `stat` against threshold `thr` at sensitivity
    /// `sens` while the agent has requests left and `sens` is finite (a
    /// request is counted in `a`), else the fallback: `own`, the agent's
    /// own round (t; on a graph the slot's, ceil(t / gamma), so that every
    /// slot falls back), a power of two.
    #[allow(clippy::too_many_arguments)]
    pub fn request(&self, g: usize, t: u64, own: u64, stat: f64, thr: f64, sens: f64, a: &mut SvtAgent) -> bool {
        if a.used >= self.cap || !sens.is_finite() {
            return own.is_power_of_two();
        }
        let fire = match &self.lattice {
            Some(l) => {
                // Integers throughout: rho is a lattice point, exact in steps.
                let nu = i128::from(l.nu.draw(crate::rng::fold_more(self.keys[g], t)));
                let rho = (a.rho / STEP) as i128;
                i128::from(to_lattice(stat / sens)) + nu >= i128::from(to_lattice(thr / sens)) + rho
            }
            None => stat / sens + self.nu(g, t) >= thr / sens + a.rho,
        };
        if fire {
            a.used += 1;
        }
        fire
    }
}

/// One agent's instance of [`Svt`]: its threshold noise and the requests
/// its test made so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SvtAgent {
    /// Threshold noise.
    pub rho: f64,
    /// Requests made through the test.
    pub used: u32,
}

/// The decentralized topology of Dubey & Pentland's Section 4.2: agents on
/// a graph, each with `gamma` slots of UCB state (round t plays slot
/// t mod gamma); a broadcast travels `gamma` hops, one hop per round.
#[derive(Clone, Debug)]
pub struct Network {
    /// Each federation's graph.
    pub graphs: Vec<crate::graph::Graph>,
    /// Hops a message travels.
    pub gamma: usize,
    /// Each agent's initial S diagonal n_i rho_min (federation-major).
    pub bases: Vec<f64>,
    /// Added to a slot's S diagonal the first time it hears from each
    /// sender (shift - rho_min).
    pub first_heard: f64,
}

/// The confidence width of an agent's round.
pub enum Width {
    /// beta_t, the same for every agent.
    Schedule(Box<dyn Fn(u64) -> f64 + Send + Sync>),
    /// Dubey & Pentland's Proposition 2, from the agent's own log det V:
    /// beta = scale ((sigma sqrt(max(0, offset + log det V)) + tail1) +
    /// tail2), per agent (federation-major); a negative argument is clamped
    /// and counted (`beta_clamps`).
    LogDet {
        /// confidence_scale.
        scale: f64,
        /// The reward noise's sub-Gaussian constant.
        sigma: f64,
        /// Per agent: (offset, tail1, tail2).
        agents: Vec<(f64, f64, f64)>,
    },
}

impl Width {
    /// The width of round t where it is the same for every agent.
    pub fn at(&self, t: u64) -> Option<f64> {
        match self {
            Width::Schedule(f) => Some(f(t)),
            Width::LogDet { .. } => None,
        }
    }
}

/// Proposition 2's width of one agent: `(beta, clamped)`.
#[inline]
pub fn logdet_width(scale: f64, sigma: f64, (offset, tail1, tail2): (f64, f64, f64), logdet: f64) -> (f64, bool) {
    let arg = offset + logdet;
    (scale * (sigma * arg.max(0.0).sqrt() + tail1 + tail2), arg < 0.0)
}

/// What the server releases at a sync; it becomes every agent's
/// `diag` I + W_syn and U_syn.
#[derive(Clone, Debug)]
pub enum Release {
    /// The exact sums: W_syn and U_syn accumulate every agent's local sums
    /// (FedLinUCB).
    Exact,
    /// The exact running total of every agent's local sums (FedUCB without
    /// privacy: S = diag I + total); on a graph, each broadcast sends the
    /// slot's local sums.
    Cumulative,
    /// The sum of the agents' binary-counter tree releases
    /// ([`crate::privacy::tree`]) with symmetric Gaussian node noise of
    /// standard deviation `sigma`, keyed by [`LinearBatch::noise_keys`]; on
    /// a graph, a slot's broadcast sends the increment of its release.
    Tree {
        /// Node noise standard deviation.
        sigma: f64,
        /// Levels of each agent's tree.
        levels: usize,
        /// How the node's Gram part is symmetrized.
        noise: crate::privacy::tree::NodeNoise,
        /// The lattice of `sampler: discrete` (leaves rounded to it, node
        /// noise drawn on it exactly); None: the float Gaussian.
        lattice: Option<crate::privacy::tree_lattice::LatticeNodeNoise>,
    },
    /// The shuffle vector-summation protocol ([`crate::privacy::vecsum`]):
    /// `proto` is a federation's initial protocol state; `keys` hold, per
    /// federation, the M agents' randomizer keys then the shuffler's (M + 1
    /// folded keys each, federation-major).
    VecSum {
        /// Initial protocol state.
        proto: Box<VecSum>,
        /// Folded keys.
        keys: Vec<u64>,
    },
}

/// A batch of federations running one linear-family configuration.
pub struct LinearBatch {
    /// The environment.
    pub env: LinearEnvSpec,
    /// Environment key of each federation (job seed, environment scope,
    /// repetition).
    pub env_keys: Vec<Vec<u64>>,
    /// Folded privacy-noise key of each agent (of each slot on a
    /// [`Network`]), federation-major (`federations x m` or `federations x
    /// m x gamma`; empty when there is no noise).
    pub noise_keys: Vec<u64>,
    /// Agents per federation.
    pub m: usize,
    /// V_0 = lambda I.
    pub lambda: f64,
    /// The confidence width.
    pub beta: Width,
    /// Synchronization, if federated.
    pub sync: Option<SyncRule>,
    /// The graph of a decentralized federation (None: a server).
    pub network: Option<Network>,
    /// Refactorize V^{-1} after this many rank-1 updates.
    pub refactor_every: u32,
    /// `Some(keys)`: the agents play uniformly random actions drawn from the
    /// streams of these keys (one per agent, federation-major) and learn
    /// nothing (the `random` baseline); `None`: UCB.
    pub random_policy: Option<Vec<Vec<u64>>>,
    /// Rewards enter the agents' sums clipped to [-reward_bound,
    /// reward_bound] ([`crate::algo::linear::step::clip_reward`]; infinity: not
    /// clipped).
    pub reward_bound: f64,
}

impl LinearBatch {
    /// A batch whose agents never communicate: UCB with width `beta(t)`
    /// and V_0 = lambda I, or, with `random_policy`, random actions.
    #[allow(clippy::too_many_arguments)]
    pub fn unsynced(
        env: LinearEnvSpec,
        env_keys: Vec<Vec<u64>>,
        m: usize,
        lambda: f64,
        beta: Box<dyn Fn(u64) -> f64 + Send + Sync>,
        refactor_every: u32,
        random_policy: Option<Vec<Vec<u64>>>,
        reward_bound: f64,
    ) -> Self {
        Self {
            env,
            env_keys,
            noise_keys: Vec::new(),
            m,
            lambda,
            beta: Width::Schedule(beta),
            sync: None,
            network: None,
            refactor_every,
            random_policy,
            reward_bound,
        }
    }

    /// Federations in the batch.
    pub fn federations(&self) -> usize {
        self.env_keys.len()
    }

    /// Whether each federation decides its own sync rounds (the backend
    /// counts them), rather than the lockstep loop.
    pub fn adaptive(&self) -> bool {
        self.sync.as_ref().is_some_and(|s| s.adaptive().is_some())
    }
}

/// One federation's state as [`LinearOps::observe`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observation {
    /// Cumulative group pseudo-regret (each round's agents summed in agent
    /// order, then added to the total).
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Factorizations that needed jitter or failed.
    pub cholesky_failures: u64,
    /// Rewards that clipping changed.
    pub clipped_rewards: u64,
    /// Confidence widths whose square-root argument was clamped
    /// ([`Width::LogDet`]).
    pub beta_clamps: u64,
    /// Syncs (sync requests on a [`Network`]) so far, where the federation
    /// decides them ([`SyncWhen::Adaptive`]; 0 otherwise).
    pub syncs: u64,
    /// Messages so far, where the federation decides its syncs (0
    /// otherwise).
    pub messages: u64,
}

/// The batched operations of the linear family on one backend, over every
/// federation and agent of a [`LinearBatch`] (see the module docs). The
/// algorithm layer's lockstep loop decides when each runs.
pub trait LinearOps {
    /// Most rounds one [`LinearOps::rounds`] call may run.
    fn max_rounds(&self) -> usize;
    /// Runs rounds `t0 .. t0 + count`: round `t0 + r` with width `betas[r]`
    /// ([`Width::Schedule`]) or, with `betas` empty, each agent's own
    /// ([`Width::LogDet`]). Under [`SyncWhen::Adaptive`] each federation
    /// ends each round with its own events: its refactorization when its
    /// agents have taken `refactor_every` rank-1 updates since their last
    /// factorization, then its sync when its test fired (on a
    /// [`Network`], the requests, broadcasts and deliveries of the round).
    fn rounds(&mut self, t0: u64, count: usize, betas: &[f64]) -> Result<(), BatchError>;
    /// Rebuilds every agent's V^{-1} and log det from base + local Gram.
    fn refactor(&mut self) -> Result<(), BatchError>;
    /// The `index`-th (1-based) synchronization of every federation.
    fn sync(&mut self, index: u64) -> Result<(), BatchError>;
    /// Each federation's state, in batch order, into `out` (cleared first).
    fn observe(&mut self, out: &mut Vec<Observation>) -> Result<(), BatchError>;
}

/// One federation's curve at one checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BatchPoint {
    /// Round.
    pub t: u64,
    /// Cumulative group pseudo-regret.
    pub group_regret: f64,
    /// Max over agents of cumulative regret.
    pub agent_regret_max: f64,
    /// Syncs so far.
    pub sync_rounds: u64,
    /// Messages so far.
    pub messages: u64,
    /// Factorizations that needed jitter or failed.
    pub cholesky_failures: u64,
    /// Rewards that clipping changed so far.
    #[serde(default)]
    pub clipped_rewards: u64,
    /// Confidence widths clamped so far.
    #[serde(default)]
    pub beta_clamps: u64,
}

#[cfg(test)]
mod tests {
    use super::{Svt, SvtAgent, SvtLattice};

    /// The lattice test's exact epsilon is at most its budget and within
    /// 1e-4 of it (budgets 0.05 and 2, cap 3 and 20, both shifts); a budget
    /// whose rate rounds to 0 has no lattice test. On 20 000 agents the
    /// lattice test fires as often as the float one of the same scales at
    /// query margins 0, -1 and 1.5 threshold-noise scales (within 4.5
    /// standard errors of the difference), every rho a lattice point.
    #[test]
    fn the_lattice_sparse_vector_test_is_charged_and_fires_as_the_float_one() {
        for (eps, cap, shift) in [(0.05, 3u32, 2u32), (2.0, 20, 1), (2.0, 20, 2)] {
            let l = SvtLattice::new(eps, cap, shift).unwrap();
            let e = l.epsilon();
            assert!(e <= eps && e >= eps * (1.0 - 1e-4), "{eps} {cap} {shift}: {e}");
        }
        assert_eq!(SvtLattice::new(1e-5, 20, 2), None);
        let (eps, cap, agents) = (1.0, 4u32, 20_000usize);
        let float = Svt {
            keys: (0..agents as u64).map(|g| crate::rng::fold_key(&[0x5A7, g])).collect(),
            threshold_scale: 2.0 / eps,
            query_scale: 4.0 * f64::from(cap) / eps,
            cap,
            l2: 1.0,
            lattice: None,
        };
        let lattice = Svt {
            lattice: SvtLattice::new(eps, cap, 2),
            ..float.clone()
        };
        for margin in [0.0, -1.0, 1.5] {
            let mut fires = [0f64; 2];
            for (i, rule) in [&float, &lattice].into_iter().enumerate() {
                for g in 0..agents {
                    let mut a = SvtAgent { rho: rule.rho(g), used: 0 };
                    if i == 1 {
                        assert!(crate::privacy::bits::on_lattice(a.rho, crate::privacy::lattice::STEP));
                    }
                    let stat = 3.0 + margin * 2.0 / eps;
                    fires[i] += f64::from(u8::from(rule.request(g, 5, 5, stat * 0.7, 3.0 * 0.7, 0.7, &mut a)));
                }
            }
            let p = (fires[0] + fires[1]) / (2.0 * agents as f64);
            let se = (2.0 * p * (1.0 - p) / agents as f64).sqrt();
            let diff = (fires[1] - fires[0]) / agents as f64;
            assert!(diff.abs() < 4.5 * se, "margin {margin}: {fires:?}");
        }
    }

    /// The schedule's sensitivity bound lies between the inverse's largest
    /// eigenvalue (the quantity a query moves by) and its Frobenius norm,
    /// and is the eigenvalue itself for a diagonal inverse: on random
    /// symmetric positive definite matrices A = B B^T + 0.1 I (d = 2..6),
    /// the largest eigenvalue by 500 power iterations.
    #[test]
    fn the_schedule_sensitivity_bounds_the_largest_eigenvalue() {
        let svt = Svt {
            keys: Vec::new(),
            threshold_scale: 1.0,
            query_scale: 1.0,
            cap: 1,
            l2: 1.0,
            lattice: None,
        };
        let bound = |a: &[f64]| svt.sensitivity(a, true).exp_m1();
        let mut s = crate::rng::Stream::new(&[55]);
        for d in 2..=6usize {
            for _ in 0..20 {
                let b: Vec<f64> = (0..d * d).map(|_| s.normal()).collect();
                let mut a = vec![0.0; d * d];
                for i in 0..d {
                    for j in 0..d {
                        a[i * d + j] = (0..d).map(|k| b[i * d + k] * b[j * d + k]).sum::<f64>();
                    }
                    a[i * d + i] += 0.1;
                }
                let mut v = vec![1.0; d];
                let mut lam = 0.0;
                for _ in 0..500 {
                    let w: Vec<f64> = (0..d).map(|i| (0..d).map(|j| a[i * d + j] * v[j]).sum()).collect();
                    lam = w.iter().map(|x| x * x).sum::<f64>().sqrt();
                    v = w.iter().map(|x| x / lam).collect();
                }
                let frob = a.iter().map(|x| x * x).sum::<f64>().sqrt();
                let got = bound(&a);
                assert!(
                    got >= lam * (1.0 - 1e-9) && got <= frob * (1.0 + 1e-12),
                    "{got} vs {lam}, {frob}"
                );
            }
            let mut diag = vec![0.0; d * d];
            for i in 0..d {
                diag[i * d + i] = 0.5 + i as f64;
            }
            let top = 0.5 + (d - 1) as f64;
            assert!((bound(&diag) - top).abs() < 1e-12 * top, "diagonal: {}", bound(&diag));
        }
        assert!(svt.sensitivity(&[1.0], false).is_infinite());
    }
}
