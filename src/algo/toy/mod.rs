//! A toy family, compiled into the library's tests only: the example a
//! contributor adding a family follows, and the proof that a family is its
//! folder plus one line of the registry (`families!` in `algo/mod.rs`).
//! It is an epsilon-greedy multi-armed bandit: M agents each play K
//! Bernoulli arms of means mu_k ~ U[0, 1] (one draw per federation),
//! every arm once first, then with probability `explore` a uniformly random
//! arm, else the arm of the best empirical mean (the lowest index among
//! ties). Agents do not communicate. CPU only: its batch says the CUDA
//! device cannot run it.
//!
//! What a family writes, and where the compiler asks for it: its
//! configuration ([`crate::algo::FamilyConfig`]: agents, horizon, cost,
//! memory, its batch), its batch ([`crate::algo::FamilyBatch`] and
//! [`crate::backend::Placeable`]: run, start or resume a repetition, kind,
//! federations, CUDA support), its CPU repetition ([`crate::algo::FamilyRep`],
//! serializable: snapshots), its parameters and shares ([`table`]), its
//! resolver and its registry entry ([`FAMILY`]).

pub mod table;

use table::{EXPLORE, TOY_ARMS};

use crate::algo::FamilyRep;
use crate::algo::curve::CurvePoint;
use crate::algo::params::M;
use crate::algo::resolve::Params;
use crate::backend::{Backend, BatchError, Unsupported};
use crate::rng::Stream;

/// A toy cell's configuration.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToyConfig {
    /// Agents M.
    pub m: usize,
    /// Arms K.
    pub arms: usize,
    /// Probability of a uniformly random arm.
    pub explore: f64,
    /// Rounds T.
    pub horizon: u64,
}

/// Resolves a toy cell: `m`, `toy_arms`, `explore`.
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (_, _, horizon) = p.cell();
    let (m, arms, explore) = (p.take(M), p.take(TOY_ARMS), p.take(EXPLORE));
    Box::new(ToyConfig {
        m: m.max(1) as usize,
        arms: arms.max(1) as usize,
        explore,
        horizon,
    })
}

impl crate::algo::FamilyConfig for ToyConfig {
    fn batch(
        &self,
        env_keys: Vec<Vec<u64>>,
        algo_keys: &[Vec<u64>],
    ) -> Result<Box<dyn crate::algo::FamilyBatch>, crate::graph::GraphError> {
        Ok(Box::new(ToyBatch {
            cfg: self.clone(),
            keys: env_keys.into_iter().zip(algo_keys.iter().cloned()).collect(),
        }))
    }

    fn agents(&self) -> usize {
        self.m
    }

    fn horizon(&self) -> u64 {
        self.horizon
    }

    fn cost(&self) -> crate::algo::Cost {
        crate::algo::Cost::flat(FAMILY.name)
    }

    fn memory_per_federation(&self) -> u64 {
        (self.m * (self.arms * 16 + 128)) as u64
    }
}

/// Repetitions of a toy cell: its configuration and each repetition's
/// (environment, algorithm) keys.
pub struct ToyBatch {
    cfg: ToyConfig,
    keys: Vec<(Vec<u64>, Vec<u64>)>,
}

impl crate::backend::Placeable for ToyBatch {
    fn kind(&self) -> &'static str {
        FAMILY.name
    }

    fn federations(&self) -> usize {
        self.keys.len()
    }

    fn cuda_supports(&self, _dev: &crate::backend::cuda::CudaBackend) -> Result<(), Unsupported> {
        Err(Unsupported("the toy family runs on the CPU only".into()))
    }
}

impl crate::algo::FamilyBatch for ToyBatch {
    /// Each federation as a CPU repetition (whatever the backend: the
    /// family has no device code).
    fn run(
        &self,
        checkpoints: &[u64],
        _backend: &dyn Backend,
        progress: &dyn Fn(u64),
    ) -> Result<Vec<Vec<CurvePoint>>, BatchError> {
        let horizon = checkpoints.last().copied().unwrap_or(0);
        (0..self.keys.len())
            .map(|f| {
                let mut rep = Rep::federation(self, f);
                rep.advance(self, horizon, checkpoints)?;
                progress(horizon * self.cfg.m as u64);
                Ok(rep.points)
            })
            .collect()
    }

    fn start_rep(&self) -> Result<Box<dyn crate::algo::cell::RepObject>, BatchError> {
        crate::algo::cell::start_rep::<Rep>(self)
    }

    fn resume_rep(&self, bytes: &[u8]) -> Result<Box<dyn crate::algo::cell::RepObject>, bincode::Error> {
        crate::algo::cell::resume_rep::<Rep>(bytes)
    }
}

/// One agent: its pulls and reward sums per arm, and its streams.
#[derive(serde::Serialize, serde::Deserialize)]
struct Agent {
    pulls: Vec<u64>,
    sums: Vec<f64>,
    rewards: Stream,
    choices: Stream,
    regret: f64,
}

/// A federation in flight (snapshotted): the arms' means, the agents, the
/// rounds done and the checkpoints so far.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Rep {
    means: Vec<f64>,
    agents: Vec<Agent>,
    t: u64,
    points: Vec<CurvePoint>,
}

/// Purposes of the toy's keyed streams.
const MEANS: u64 = 1;
const REWARDS: u64 = 2;
const CHOICES: u64 = 3;

impl Rep {
    /// Federation `f` of `b` at round 0.
    fn federation(b: &ToyBatch, f: usize) -> Self {
        let (env, algo) = &b.keys[f];
        let key = |base: &[u64], more: &[u64]| [base, more].concat();
        let mut means = Stream::new(&key(env, &[MEANS]));
        Rep {
            means: (0..b.cfg.arms).map(|_| means.uniform()).collect(),
            agents: (0..b.cfg.m as u64)
                .map(|i| Agent {
                    pulls: vec![0; b.cfg.arms],
                    sums: vec![0.0; b.cfg.arms],
                    rewards: Stream::new(&key(env, &[REWARDS, i])),
                    choices: Stream::new(&key(algo, &[CHOICES, i])),
                    regret: 0.0,
                })
                .collect(),
            t: 0,
            points: Vec::new(),
        }
    }

    /// One round of every agent.
    fn round(&mut self, explore: f64) {
        let best = self.means.iter().copied().fold(f64::MIN, f64::max);
        let k = self.means.len();
        for a in &mut self.agents {
            let arm = if self.t < k as u64 {
                self.t as usize
            } else if a.choices.uniform() < explore {
                a.choices.below(k as u64) as usize
            } else {
                let mean = |j: usize| a.sums[j] / a.pulls[j] as f64;
                (1..k).fold(0, |b, j| if mean(j) > mean(b) { j } else { b })
            };
            a.pulls[arm] += 1;
            a.sums[arm] += a.rewards.bernoulli(self.means[arm]);
            a.regret += best - self.means[arm];
        }
        self.t += 1;
    }
}

impl FamilyRep for Rep {
    type Batch = ToyBatch;

    fn start(b: &ToyBatch) -> Result<Self, BatchError> {
        Ok(Rep::federation(b, 0))
    }

    fn t(&self) -> u64 {
        self.t
    }

    fn advance(&mut self, b: &ToyBatch, until: u64, checkpoints: &[u64]) -> Result<(), BatchError> {
        while self.t < until {
            self.round(b.cfg.explore);
            if checkpoints.binary_search(&self.t).is_ok() {
                let group: f64 = self.agents.iter().map(|a| a.regret).sum();
                let max = self.agents.iter().map(|a| a.regret).fold(0.0, f64::max);
                let m = self.agents.len() as u64;
                self.points.push(CurvePoint::new(self.t, group, m, max, 0, 0));
            }
        }
        Ok(())
    }

    fn into_points(self, _b: &ToyBatch) -> Vec<CurvePoint> {
        self.points
    }
}

/// The toy family's registry entry.
pub const FAMILY: crate::algo::family_entry::Family = crate::algo::family_entry::Family {
    workloads: &[(
        "toy_m4_k5",
        64,
        "horizon: {T}\nalgorithm: egreedy\nenvironment: toy_bernoulli\nparams: {m: 4, toy_arms: 5}\n",
    )],
    cost_terms: &[crate::algo::family_entry::CostTerm::new("step", "one agent-step", 2e-8)],
    shapes: &[(
        "egreedy_m4_k5",
        "horizon: {T}\nalgorithm: egreedy\nenvironment: toy_bernoulli\nparams: {m: 4, toy_arms: 5}\n",
        100_000,
    )],
    ..crate::algo::family_entry::Family::new(
        (
            "toy",
            "a toy epsilon-greedy multi-armed family (tests only: the example of a family)",
        ),
        &[("egreedy", "epsilon-greedy agents without communication")],
        &[("toy_bernoulli", "K Bernoulli arms, means U[0, 1] per federation")],
        (table::PARAMS, table::SHARES),
        resolve,
    )
};

#[cfg(test)]
mod tests;
