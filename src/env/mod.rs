//! Environments: the linear contextual family here,
//! the decentralized multi-armed family in [`mab`].
//!
//! An environment owns the federation's hidden parameter theta* and knows the
//! mean reward of every action it offers, so regret is exact pseudo-regret.
//! Each agent draws its decision sets and rewards from its own streams
//! ([`AgentStreams`]); the streams are keyed by the *environment* scope, not by
//! the algorithm, so every algorithm of a comparison sees the same theta*, the
//! same decision sets and the same reward noise (common random numbers):
//! decision sets consume a fixed number of draws per round whatever is played.

#[cfg(target_arch = "x86_64")]
mod gap_avx512;
pub mod linear_gap;
pub mod linear_sphere;
pub mod mab;
pub mod procurement;
#[cfg(target_arch = "x86_64")]
mod sphere_avx512;
pub mod uci;

use crate::rng::lanes::{LANES, Lanes};
use crate::rng::{Purpose, Stream};

/// Which linear environment, with its own parameters.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LinearEnvKind {
    /// Dubey & Pentland's synthetic: one optimal action with mean in
    /// [0.7, 0.8], K - 1 with means in [0.5, 0.6]; Bernoulli rewards.
    Gap,
    /// Zhou & Chowdhury's synthetic (after Vaswani et al. 2020).
    Sphere {
        /// Standard deviation of the Gaussian reward noise.
        noise_std: f64,
        /// Mean reward computed on the raw vector z (authors' code) rather
        /// than on the normalized x the agent observes.
        reward_on_raw: bool,
    },
}

/// Why an environment's means are not what its learners' model can
/// represent, the parameter that makes it so and how to fix it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Misspecification {
    /// The job key that selects the misspecified variant.
    pub key: &'static str,
    /// Why the model cannot represent the means.
    pub why: &'static str,
    /// What to set instead.
    pub fix: &'static str,
}

/// Shape and kind of a linear environment.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinearEnvSpec {
    /// The environment.
    pub kind: LinearEnvKind,
    /// Dimension d.
    pub d: usize,
    /// Actions per round K.
    pub k: usize,
}

impl LinearEnvSpec {
    /// The largest norm an action of this environment can have, and why:
    /// `linear_gap` builds x = v theta* + sqrt(1 - v^2) r u with unit theta*
    /// and u orthogonal, r <= 1, so ||x|| <= 1; `linear_sphere` plays the
    /// normalized vectors, ||x|| = 1.
    pub fn max_action_norm(&self) -> (f64, &'static str) {
        match self.kind {
            LinearEnvKind::Gap => (1.0, "its actions have norm at most 1"),
            LinearEnvKind::Sphere { .. } => (1.0, "its actions are unit vectors"),
        }
    }

    /// Why no theta' gives every action's mean as <x, theta'> (the model
    /// every linear learner assumes), or None when one does: `linear_gap`
    /// builds its actions so that <x, theta*> is the mean exactly;
    /// `linear_sphere` is exact with `reward_on: normalized` and, with
    /// `raw`, misspecified when K > d ([`linear_sphere::misspecified`]).
    pub fn misspecification(&self) -> Option<Misspecification> {
        match self.kind {
            LinearEnvKind::Sphere { reward_on_raw, .. }
                if linear_sphere::misspecified(reward_on_raw, self.d, self.k) =>
            {
                Some(Misspecification {
                    key: "reward_on",
                    why: "raw computes each mean on the raw z while the learner observes x = z / ||z|| (||z|| = \
                          1 for the action e_{d-1}, sqrt(2) for the others), so with K > d no theta' gives every \
                          mean as <x, theta'>: the learner's linear model is misspecified",
                    fix: "set reward_on: normalized (the default), or keep raw only to reproduce Zhou & \
                          Chowdhury's figures",
                })
            }
            LinearEnvKind::Gap | LinearEnvKind::Sphere { .. } => None,
        }
    }
}

/// One round's decision set of one agent, column-major: coordinate `j` of
/// action `a` is `x[j * kp + a]`, with `kp` = K rounded up to a multiple of 8
/// so that the scorer reads 8 actions per vector. Padding actions are zero.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct DecisionSet {
    /// Dimension.
    pub d: usize,
    /// Number of real actions.
    pub k: usize,
    /// Padded number of actions (multiple of [`LANES`]).
    pub kp: usize,
    /// Actions, column-major, on a cache-line boundary.
    pub x: crate::linalg::AlignedVec,
    /// True mean reward of each action (padding: -inf), on a cache-line
    /// boundary.
    pub mean: crate::linalg::AlignedVec,
    /// Largest mean of the round.
    pub best: f64,
    /// Normal draws of the round, as the generator makes them (f32).
    pub(crate) scratch32: Vec<f32>,
    /// Per-action workspace (inverse norms).
    pub(crate) norms: Vec<f64>,
    /// More per-action workspace (2K and K values).
    pub(crate) aux: Vec<f64>,
    pub(crate) aux2: Vec<f64>,
    /// Id of the environment whose round-invariant actions are already in
    /// place (0: none), and the best mean among them.
    pub(crate) prepared_for: u64,
    pub(crate) prepared_best: f64,
}

impl DecisionSet {
    /// Buffers for decision sets of shape (d, k).
    pub fn new(d: usize, k: usize) -> Self {
        let kp = k.div_ceil(LANES) * LANES;
        Self {
            d,
            k,
            kp,
            x: crate::linalg::AlignedVec::filled(d * kp, 0.0),
            mean: crate::linalg::AlignedVec::filled(kp, f64::NEG_INFINITY),
            best: f64::NEG_INFINITY,
            scratch32: vec![0.0; k * d],
            norms: vec![0.0; kp],
            aux: vec![0.0; 2 * kp],
            aux2: vec![0.0; kp],
            prepared_for: 0,
            prepared_best: f64::NEG_INFINITY,
        }
    }

    /// Copies action `a` into `out` (length d).
    #[inline]
    pub fn action(&self, a: usize, out: &mut [f64]) {
        for (j, o) in out.iter_mut().enumerate().take(self.d) {
            *o = self.x[j * self.kp + a];
        }
    }
}

/// The random streams of one agent in one federation.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct AgentStreams {
    /// Eight lanes for the normal draws of decision sets.
    pub lanes: Lanes,
    /// Uniform draws of decision sets (scalar).
    pub uniforms: Stream,
    /// Reward noise.
    pub rewards: Stream,
}

/// A linear environment instance of one federation.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LinearEnv {
    /// Its specification.
    pub spec: LinearEnvSpec,
    /// theta*.
    pub theta: Vec<f64>,
    key: Vec<u64>,
    /// Non-zero identity of this instance (hash of its key).
    id: u64,
}

impl LinearEnv {
    /// Draws theta* for the federation whose environment key is `key`
    /// (job seed, environment scope, repetition).
    pub fn new(spec: &LinearEnvSpec, key: &[u64]) -> Self {
        let mut k = key.to_vec();
        k.push(Purpose::EnvParameter as u64);
        let mut s = Stream::new(&k);
        let theta = match spec.kind {
            LinearEnvKind::Gap => linear_gap::draw_theta(spec.d, &mut s),
            LinearEnvKind::Sphere { .. } => linear_sphere::draw_theta(spec.d, &mut s),
        };
        Self {
            spec: spec.clone(),
            theta,
            key: key.to_vec(),
            id: crate::rng::fold_key(key) | 1,
        }
    }

    /// The keys of agent `agent`'s streams: (decision-set lanes, scalar
    /// decision-set uniforms, rewards). Lane `l` of the first is keyed by the
    /// key extended by `l`; the uniforms use "lane" 8.
    pub fn agent_stream_keys(&self, agent: usize) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let with = |p: Purpose| {
            let mut k = self.key.clone();
            k.extend_from_slice(&[agent as u64, p as u64]);
            k
        };
        let ctx = with(Purpose::Contexts);
        let mut uni = ctx.clone();
        uni.push(LANES as u64);
        (ctx, uni, with(Purpose::Rewards))
    }

    /// The streams of agent `agent`.
    pub fn agent_streams(&self, agent: usize) -> AgentStreams {
        let (ctx, uni, rew) = self.agent_stream_keys(agent);
        AgentStreams {
            lanes: Lanes::new(&ctx),
            uniforms: Stream::new(&uni),
            rewards: Stream::new(&rew),
        }
    }

    /// Draws the next decision set of an agent into `ds`.
    pub fn draw(&self, s: &mut AgentStreams, ds: &mut DecisionSet) {
        match self.spec.kind {
            LinearEnvKind::Gap => linear_gap::draw(&self.theta, s, ds),
            LinearEnvKind::Sphere { reward_on_raw, .. } => {
                linear_sphere::draw(&self.theta, reward_on_raw, self.id, s, ds)
            }
        }
    }

    /// Draws the reward of an action with mean `mean`.
    #[inline]
    pub fn reward(&self, s: &mut AgentStreams, mean: f64) -> f64 {
        match self.spec.kind {
            LinearEnvKind::Gap => s.rewards.bernoulli(mean),
            LinearEnvKind::Sphere { noise_std, .. } => mean + noise_std * s.rewards.normal(),
        }
    }
}

/// 1 / sqrt(n2) for n2 > 0: an exactly rounded f32 estimate refined by one
/// Newton step in f64 (relative error about 2e-14). Every operation is an
/// IEEE basic operation, so the result is the same on every instruction set;
/// it is several times cheaper than an f64 square root and division.
#[inline(always)]
pub(crate) fn inv_norm(n2: f64) -> f64 {
    let y0 = f64::from(1.0f32 / (n2 as f32).sqrt());
    y0 * (1.5 - 0.5 * n2 * y0 * y0)
}

/// What one round of `linear_sphere`'s random actions read (`linear_sphere`
/// and `sphere_avx512`): theta*, the normals `g` (`[coordinate][action]`,
/// d - 1 rows of nr), the number nr of random actions, the padded stride
/// kp, the column `fixed` of the first random action, and the means' scale.
#[derive(Clone, Copy)]
pub(crate) struct SphereRows<'a> {
    pub(crate) theta: &'a [f64],
    pub(crate) g: &'a [f32],
    pub(crate) nr: usize,
    pub(crate) kp: usize,
    pub(crate) fixed: usize,
    pub(crate) scale: f64,
}

/// What one round of `linear_gap`'s projection reads (`linear_gap` and
/// `gap_avx512`): theta*, the normals `g`
/// (`[coordinate][action]`, d - 1 rows of k: h's coordinates 1..d), K and
/// its padded stride kp, the optimal index and the 2K uniforms `u` (v's
/// offsets, then r).
#[derive(Clone, Copy)]
pub(crate) struct GapRound<'a> {
    pub(crate) theta: &'a [f64],
    pub(crate) g: &'a [f32],
    pub(crate) k: usize,
    pub(crate) kp: usize,
    pub(crate) opt: usize,
    pub(crate) u: &'a [f64],
}

/// `linear_gap`'s reflection (its module doc): the per-draw constants
/// theta*_0, sigma and beta, and the two per-action formulas every path (portable, AVX-512,
/// the CUDA kernel's `fb_gap_x`) computes with the same operations.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Householder {
    pub(crate) theta0: f64,
    /// theta*_0 < 0 (sigma = -1).
    pub(crate) negative: bool,
    pub(crate) beta: f64,
}

impl Householder {
    #[inline(always)]
    pub(crate) fn of(theta: &[f64]) -> Self {
        let theta0 = theta[0];
        Self {
            theta0,
            negative: theta0 < 0.0,
            beta: 1.0 / (1.0 + theta0.abs()),
        }
    }

    /// x_0 = v theta*_0 - c sigma s.
    #[inline(always)]
    pub(crate) fn x0(self, v: f64, c: f64, s: f64) -> f64 {
        let ss = if self.negative { -s } else { s };
        v.mul_add(self.theta0, -(c * ss))
    }

    /// alpha = v - c (beta s), the coefficient of theta*_j in x_j (j >= 1).
    #[inline(always)]
    pub(crate) fn alpha(self, v: f64, c: f64, s: f64) -> f64 {
        v - c * (self.beta * s)
    }
}

/// A uniformly random unit vector of dimension `d` from a scalar stream.
pub(crate) fn random_unit(d: usize, s: &mut Stream) -> Vec<f64> {
    loop {
        let v: Vec<f64> = (0..d).map(|_| s.normal()).collect();
        let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if n > 1e-12 {
            return v.into_iter().map(|x| x / n).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_env(kind: LinearEnvKind, d: usize, k: usize) {
        let spec = LinearEnvSpec { kind, d, k };
        let env = LinearEnv::new(&spec, &[1, 2, 3]);
        let mut s = env.agent_streams(0);
        let mut ds = DecisionSet::new(d, k);
        let mut x = vec![0.0; d];
        for _ in 0..200 {
            env.draw(&mut s, &mut ds);
            let mut best = f64::NEG_INFINITY;
            for a in 0..k {
                ds.action(a, &mut x);
                let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
                assert!(norm <= 1.0 + 1e-9, "action norm {norm}");
                best = best.max(ds.mean[a]);
                assert!((0.0..=1.0 + 1e-12).contains(&ds.mean[a]), "mean {}", ds.mean[a]);
            }
            assert_eq!(best, ds.best);
            for a in k..ds.kp {
                assert_eq!(ds.mean[a], f64::NEG_INFINITY);
            }
        }
    }

    #[test]
    fn gap_and_sphere_are_well_formed() {
        check_env(LinearEnvKind::Gap, 5, 25);
        check_env(LinearEnvKind::Gap, 10, 100);
        check_env(
            LinearEnvKind::Sphere {
                noise_std: 0.5,
                reward_on_raw: true,
            },
            10,
            100,
        );
        check_env(
            LinearEnvKind::Sphere {
                noise_std: 0.5,
                reward_on_raw: false,
            },
            4,
            13,
        );
    }

    #[test]
    fn same_key_same_sets_different_agents_differ() {
        let spec = LinearEnvSpec {
            kind: LinearEnvKind::Gap,
            d: 4,
            k: 8,
        };
        let e1 = LinearEnv::new(&spec, &[9, 9]);
        let e2 = LinearEnv::new(&spec, &[9, 9]);
        assert_eq!(e1.theta, e2.theta);
        let (mut a, mut b, mut c) = (e1.agent_streams(0), e2.agent_streams(0), e1.agent_streams(1));
        let (mut da, mut db, mut dc) = (DecisionSet::new(4, 8), DecisionSet::new(4, 8), DecisionSet::new(4, 8));
        e1.draw(&mut a, &mut da);
        e2.draw(&mut b, &mut db);
        e1.draw(&mut c, &mut dc);
        assert_eq!(da.x, db.x);
        assert_ne!(da.x, dc.x);
    }
}
