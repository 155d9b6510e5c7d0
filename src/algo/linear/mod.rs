//! The linear contextual family (ALGORITHMS.md section 1).
//!
//! [`LinearConfig`] is a cell's fully resolved configuration (every default
//! filled in). Algorithms with a fixed schedule describe themselves as a
//! [`crate::backend::LinearBatch`] ([`linear_batch`]) and run through the one
//! round loop of [`lockstep`] on every backend; FedUCB, whose schedule
//! depends on the data, is still a [`Federation`] object ([`build`]).

pub mod fedlinucb;
pub mod feducb;
pub mod feducb_decentralized;
pub mod lockstep;
pub mod oful;
pub mod random;

use super::{Counters, Federation};
use crate::backend::Backend;
use crate::env::{LinearEnv, LinearEnvSpec};

/// Linear-family algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LinearAlgorithm {
    /// OFUL, one agent.
    Linucb,
    /// M OFUL agents without communication.
    Independent,
    /// Uniformly random actions (a sanity baseline).
    Random,
    /// Zhou & Chowdhury's FedLinUCB without privacy.
    Fedlinucb,
    /// Zhou & Chowdhury's Private-FedLinUCB.
    PrivateFedlinucb,
    /// Dubey & Pentland's FedUCB, centralized (Algorithm 1 + PRIVATIZER).
    FeducbCentralized,
    /// Dubey & Pentland's FedUCB on a peer-to-peer graph (Section 4.2).
    FeducbDecentralized,
}

/// Privacy protocol of (Private-)FedLinUCB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    /// No privacy (FedLinUCB).
    None,
    /// Silo-level local DP with the tree mechanism.
    Ldp,
    /// Shuffle DP by amplification: the tree mechanism with the amplified
    /// (smaller) noise.
    SdpAmp,
    /// Shuffle DP by the vector-summation protocol ([`crate::privacy::vecsum`]).
    SdpVecsum,
    /// The slides' P_alt: each agent privatizes its own prefix sums over time
    /// (its own tree), the server adds them. In the silo-level LDP model this
    /// releases exactly what `ldp` releases (same noise scale).
    Alt,
}

/// Noise calibration of Private-FedLinUCB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Calibration {
    /// The authors' public code (which produced their plots).
    Code,
    /// The slides' theorem: sigma^2 = 8 kappa (log(2/delta) + eps) / eps^2.
    Theorem,
}

/// FedUCB synchronization regime.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SyncRegime {
    /// Every round.
    EveryRound,
    /// Theorem 1's threshold (O(M log T) rounds).
    Log,
    /// DisLinUCB's threshold D = T log(MT) / (d M).
    SqrtM,
    /// A user-given threshold D.
    Threshold(f64),
}

/// A cell's resolved configuration for the linear family.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinearConfig {
    /// Algorithm.
    pub algorithm: LinearAlgorithm,
    /// Environment.
    pub env: LinearEnvSpec,
    /// Number of agents M.
    pub m: usize,
    /// Horizon T.
    pub horizon: u64,
    /// Regularization lambda (OFUL, non-private FedUCB).
    pub lambda: f64,
    /// Failure probability alpha.
    pub alpha: f64,
    /// Multiplier of the confidence width.
    pub confidence_scale: f64,
    /// Bound S on ||theta*||.
    pub s_bound: f64,
    /// Bound L on ||x||.
    pub l_bound: f64,
    /// Sub-Gaussian constant of the reward noise (R, sigma).
    pub subgaussian: f64,
    /// Privacy target (epsilon, delta), if private.
    pub privacy: Option<(f64, f64)>,
    /// Protocol of (Private-)FedLinUCB.
    pub protocol: Protocol,
    /// Batch size B of (Private-)FedLinUCB.
    pub batch_size: u64,
    /// Calibration of Private-FedLinUCB.
    pub calibration: Calibration,
    /// Neighbouring relation of the accountant's figures.
    pub neighbours: crate::privacy::accountant::Neighbours,
    /// Whether rewards enter the agents' sums clipped to [-1, 1] (the bound
    /// the private mechanisms' sensitivities assume; [`REWARD_BOUND`]).
    pub clip_rewards: bool,
    /// Sync regime of FedUCB.
    pub sync: SyncRegime,
    /// Refactorize V^{-1} from the exact V after this many rank-1 updates.
    pub refactor_every: u32,
    /// Noise scale of the vector-summation protocol (b's constant).
    pub vecsum_scale: f64,
    /// Communication graph (decentralized FedUCB).
    pub graph: crate::graph::GraphSpec,
    /// Hops a message travels (decentralized FedUCB).
    pub gamma: usize,
}

/// The reward bound |y| <= 1 of the papers' privacy analyses (Zhou &
/// Chowdhury; Dubey & Pentland), to which `clip_rewards` clips.
pub const REWARD_BOUND: f64 = 1.0;

impl LinearConfig {
    /// The bound rewards are clipped to before they enter any sum
    /// (infinity: not clipped).
    pub fn reward_bound(&self) -> f64 {
        if self.clip_rewards { REWARD_BOUND } else { f64::INFINITY }
    }
}

/// A linear-family federation with its own control flow (FedUCB, whose
/// data-dependent schedule has no batched form yet), as one serializable
/// type (snapshots). Every other algorithm runs as a [`LinearBatch`]
/// through [`lockstep`].
///
/// [`LinearBatch`]: crate::backend::LinearBatch
#[derive(serde::Serialize, serde::Deserialize)]
pub enum AnyFederation {
    /// `feducb_centralized`.
    FedUcb(Box<feducb::FedUcb>),
    /// `feducb_decentralized`.
    Decentralized(Box<feducb_decentralized::FedUcbDecentralized>),
}

impl AnyFederation {
    fn inner(&self) -> &dyn Federation {
        match self {
            AnyFederation::FedUcb(f) => f.as_ref(),
            AnyFederation::Decentralized(f) => f.as_ref(),
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Federation {
        match self {
            AnyFederation::FedUcb(f) => f.as_mut(),
            AnyFederation::Decentralized(f) => f.as_mut(),
        }
    }
}

impl Federation for AnyFederation {
    fn round(&mut self, t: u64, backend: &dyn Backend) -> f64 {
        self.inner_mut().round(t, backend)
    }

    fn counters(&self) -> Counters {
        self.inner().counters()
    }

    fn agent_regret(&self) -> &[f64] {
        self.inner().agent_regret()
    }
}

/// Builds a federation of an algorithm with its own control flow (FedUCB);
/// `Err(why)` for the others (they run as batches, [`linear_batch`]) and for
/// a graph that cannot be built. `env_key` keys the environment streams
/// (shared by every algorithm of a comparison); `algo_key` keys the
/// algorithm's own streams (privacy noise, random graphs).
pub fn build(cfg: &LinearConfig, env_key: &[u64], algo_key: &[u64]) -> Result<AnyFederation, String> {
    let env = LinearEnv::new(&cfg.env, env_key);
    match cfg.algorithm {
        LinearAlgorithm::FeducbCentralized => {
            Ok(AnyFederation::FedUcb(Box::new(feducb::FedUcb::new(cfg, env, algo_key))))
        }
        LinearAlgorithm::FeducbDecentralized => {
            let mut key = algo_key.to_vec();
            key.push(crate::rng::Purpose::Graph as u64);
            let mut rng = crate::rng::Stream::new(&key);
            // Deterministic graphs were validated when the job was loaded and
            // random ones are redrawn until connected, so this cannot fail for
            // a loaded job; a hand-built config with a bad graph gets a line.
            let g = crate::graph::Graph::build(&cfg.graph, cfg.m, &mut rng).map_err(|e| e.to_string())?;
            Ok(AnyFederation::Decentralized(Box::new(
                feducb_decentralized::FedUcbDecentralized::new(cfg, env, g, algo_key),
            )))
        }
        a => Err(format!("{a:?} runs as a lockstep batch")),
    }
}

/// What a configuration's private mechanism releases, as the accountant
/// needs it ([`crate::privacy::accountant`]); None when not private.
pub fn mechanism(cfg: &LinearConfig) -> Option<crate::privacy::accountant::Mechanism> {
    match cfg.algorithm {
        LinearAlgorithm::PrivateFedlinucb => fedlinucb::mechanism(cfg),
        LinearAlgorithm::FeducbCentralized | LinearAlgorithm::FeducbDecentralized => feducb::mechanism(cfg),
        _ => None,
    }
}

/// Why the rewards entering a configuration's sums have no bound the
/// accountant's sensitivities can use (None: |y| <= 1 holds, because the
/// environment's rewards are in {0, 1} or because they are clipped).
pub fn unbounded_rewards(cfg: &LinearConfig) -> Option<String> {
    match cfg.env.kind {
        crate::env::LinearEnvKind::Sphere { .. } if !cfg.clip_rewards => Some(
            "linear_sphere's rewards are Gaussian and clip_rewards is false, so |y| <= 1 fails and one \
             observation has no finite sensitivity"
                .to_string(),
        ),
        _ => None,
    }
}

/// The accountant's figures for a configuration (None when not private).
pub fn accounting(cfg: &LinearConfig) -> Option<crate::privacy::accountant::Accounting> {
    mechanism(cfg).map(|m| crate::privacy::accountant::account(&m))
}

/// The configuration as a lockstep batch ([`crate::backend::LinearBatch`],
/// run by [`lockstep::Lockstep`] on any backend): `linucb`, `independent`,
/// `random`, `fedlinucb` and `private_fedlinucb` (every protocol).
/// `env_keys` and `algo_keys` are the federations' keys (one pair per
/// repetition). FedUCB: `Err(why)` (it runs federation by federation).
pub fn linear_batch(
    cfg: &LinearConfig,
    env_keys: Vec<Vec<u64>>,
    algo_keys: &[Vec<u64>],
) -> Result<crate::backend::LinearBatch, String> {
    match cfg.algorithm {
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent => Ok(oful::batch(cfg, env_keys)),
        LinearAlgorithm::Random => Ok(random::batch(cfg, env_keys, algo_keys)),
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb => {
            Ok(fedlinucb::batch(cfg, env_keys, algo_keys))
        }
        a => Err(format!(
            "{a:?} has no batched form yet (its sync schedule depends on each federation's data)"
        )),
    }
}
