//! The linear contextual family (ALGORITHMS.md section 1).
//!
//! [`LinearConfig`] is a cell's fully resolved configuration (every default
//! filled in); [`build`] turns it into a running [`Federation`].

pub mod fedlinucb;
pub mod feducb;
pub mod feducb_decentralized;
pub mod oful;
pub mod random;

use super::{Counters, Federation};
use crate::backend::{AgentState, Backend, StepResult, Workspace};
use crate::env::{AgentStreams, LinearEnv, LinearEnvSpec};
use crate::linalg;
use crate::privacy::tree::AgentTrees;

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

/// Any linear-family federation, as one serializable type (snapshots).
#[derive(serde::Serialize, serde::Deserialize)]
pub enum AnyFederation {
    /// `linucb`, `independent`.
    Oful(Box<oful::Oful>),
    /// `random`.
    Random(Box<random::RandomPolicy>),
    /// `fedlinucb`, `private_fedlinucb`.
    FedLinUcb(Box<fedlinucb::FedLinUcb>),
    /// `feducb_centralized`.
    FedUcb(Box<feducb::FedUcb>),
    /// `feducb_decentralized`.
    Decentralized(Box<feducb_decentralized::FedUcbDecentralized>),
}

impl AnyFederation {
    fn inner(&self) -> &dyn Federation {
        match self {
            AnyFederation::Oful(f) => f.as_ref(),
            AnyFederation::Random(f) => f.as_ref(),
            AnyFederation::FedLinUcb(f) => f.as_ref(),
            AnyFederation::FedUcb(f) => f.as_ref(),
            AnyFederation::Decentralized(f) => f.as_ref(),
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Federation {
        match self {
            AnyFederation::Oful(f) => f.as_mut(),
            AnyFederation::Random(f) => f.as_mut(),
            AnyFederation::FedLinUcb(f) => f.as_mut(),
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

/// Builds a federation. `env_key` keys the environment streams (shared by
/// every algorithm of a comparison); `algo_key` keys the algorithm's own
/// streams (privacy noise, random policy, random graphs).
pub fn build(cfg: &LinearConfig, env_key: &[u64], algo_key: &[u64]) -> AnyFederation {
    let env = LinearEnv::new(&cfg.env, env_key);
    match cfg.algorithm {
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent => {
            AnyFederation::Oful(Box::new(oful::Oful::new(cfg, env)))
        }
        LinearAlgorithm::Random => AnyFederation::Random(Box::new(random::RandomPolicy::new(cfg, env, algo_key))),
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb => {
            AnyFederation::FedLinUcb(Box::new(fedlinucb::FedLinUcb::new(cfg, env, algo_key)))
        }
        LinearAlgorithm::FeducbCentralized => AnyFederation::FedUcb(Box::new(feducb::FedUcb::new(cfg, env, algo_key))),
        LinearAlgorithm::FeducbDecentralized => {
            let mut key = algo_key.to_vec();
            key.push(crate::rng::Purpose::Graph as u64);
            let mut rng = crate::rng::Stream::new(&key);
            // Deterministic graphs were validated when the job was loaded and
            // random ones are redrawn until connected, so this cannot fail for
            // a loaded job; a hand-built config with a bad graph gets a line.
            let graph = crate::graph::Graph::build(&cfg.graph, cfg.m, &mut rng)
                .or_else(|_| crate::graph::Graph::build(&crate::graph::GraphSpec::Line, cfg.m, &mut rng));
            match graph {
                Ok(g) => AnyFederation::Decentralized(Box::new(feducb_decentralized::FedUcbDecentralized::new(
                    cfg, env, g, algo_key,
                ))),
                Err(_) => AnyFederation::Random(Box::new(random::RandomPolicy::new(cfg, env, algo_key))),
            }
        }
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

/// The accountant's figures for a configuration (None when not private).
pub fn accounting(cfg: &LinearConfig) -> Option<crate::privacy::accountant::Accounting> {
    mechanism(cfg).map(|m| crate::privacy::accountant::account(&m))
}

/// The configuration as a lockstep batch for a backend's batched path
/// ([`crate::backend::LinearBatch`]): `linucb`, `independent` (no sync),
/// `fedlinucb`, `private_fedlinucb` with a tree protocol (sync every B, node
/// noise sigma) and `random`. `env_keys` and `algo_keys` are the federations' keys (one
/// pair per repetition). Other algorithms: `Err(why)`.
pub fn linear_batch(
    cfg: &LinearConfig,
    env_keys: Vec<Vec<u64>>,
    algo_keys: &[Vec<u64>],
) -> Result<crate::backend::LinearBatch, String> {
    use crate::backend::{LinearBatch, SyncRule};
    let (lambda, beta, sync): (f64, Box<dyn Fn(u64) -> f64 + Send + Sync>, _) = match cfg.algorithm {
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent => {
            let c = cfg.clone();
            (cfg.lambda, Box::new(move |t| oful::Oful::beta(&c, t - 1)), None)
        }
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb if cfg.protocol != Protocol::SdpVecsum => {
            let consts = fedlinucb::ZhouConstants::new(cfg);
            let c = cfg.clone();
            let sync = SyncRule {
                every: cfg.batch_size,
                sigma: consts.sigma,
                messages_per_sync: 2 * cfg.m as u64,
            };
            (
                consts.lambda,
                Box::new(move |t| fedlinucb::zhou_beta(&c, &consts, t)),
                Some(sync),
            )
        }
        LinearAlgorithm::Random => {
            let keys = algo_keys
                .iter()
                .flat_map(|k| (0..cfg.m).map(move |i| random::RandomPolicy::pick_key(k, i)))
                .collect();
            return Ok(LinearBatch {
                env: cfg.env.clone(),
                env_keys,
                noise_keys: Vec::new(),
                m: cfg.m,
                horizon: cfg.horizon,
                lambda: 1.0,
                beta: Box::new(|_| 0.0),
                sync: None,
                refactor_every: u32::MAX,
                random_policy: Some(keys),
            });
        }
        a => {
            return Err(format!(
                "{a:?}{} has no batched form yet",
                if cfg.protocol == Protocol::SdpVecsum {
                    " with sdp_vecsum"
                } else {
                    ""
                }
            ));
        }
    };
    let private = sync.is_some_and(|s: SyncRule| s.sigma > 0.0);
    let noise_keys = if private {
        algo_keys
            .iter()
            .flat_map(|k| (0..cfg.m).map(move |i| crate::rng::fold_key(&AgentTrees::noise_key(k, i))))
            .collect()
    } else {
        Vec::new()
    };
    Ok(LinearBatch {
        env: cfg.env.clone(),
        env_keys,
        noise_keys,
        m: cfg.m,
        horizon: cfg.horizon,
        lambda,
        beta,
        sync,
        refactor_every: cfg.refactor_every,
        random_policy: None,
    })
}

/// Struct-of-arrays UCB state of the M agents of one federation.
///
/// `vinv`, `logdet`, `b` describe V_i^{-1}, log det V_i and b_i
/// (theta_hat_i = V_i^{-1} b_i); `gram` and `bias` are the agent's exact
/// local sums (all history for OFUL, since the last sync for federated
/// algorithms) so that V_i can be rebuilt exactly at a refactorization.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct AgentBank {
    /// Dimension.
    pub d: usize,
    /// Agents.
    pub m: usize,
    /// V_i^{-1}, m blocks of d x d.
    pub vinv: Vec<f64>,
    /// log det V_i.
    pub logdet: Vec<f64>,
    /// b_i.
    pub b: Vec<f64>,
    /// Exact local Gram sums.
    pub gram: Vec<f64>,
    /// Exact local reward-weighted sums.
    pub bias: Vec<f64>,
    /// Rank-1 updates since the last factorization.
    pub since_factor: Vec<u32>,
    /// Cumulative regret per agent.
    pub regret: Vec<f64>,
    /// Environment streams per agent.
    pub streams: Vec<AgentStreams>,
    /// Workspace.
    pub ws: Workspace,
    /// Spare d x d matrix for refactorizations.
    vtmp: Vec<f64>,
    /// Counters.
    pub counters: Counters,
}

impl AgentBank {
    /// Agents with V_i = c I (c > 0), b_i = 0.
    pub fn new(env: &LinearEnv, m: usize, c: f64) -> Self {
        let d = env.spec.d;
        let ws = Workspace::new(d, env.spec.k);
        let mut vinv = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut vinv, d, 1.0 / c);
        let logdet = d as f64 * c.ln();
        Self {
            d,
            m,
            vinv: vinv.repeat(m),
            logdet: vec![logdet; m],
            b: vec![0.0; m * d],
            gram: vec![0.0; m * d * d],
            bias: vec![0.0; m * d],
            since_factor: vec![0; m],
            regret: vec![0.0; m],
            streams: (0..m).map(|i| env.agent_streams(i)).collect(),
            ws,
            vtmp: vec![0.0; d * d],
            counters: Counters::default(),
        }
    }

    /// One UCB step of agent `i`; also adds the observation to the agent's
    /// exact local sums and its regret.
    #[inline]
    pub fn step(&mut self, i: usize, env: &LinearEnv, backend: &dyn Backend, beta: f64) -> StepResult {
        let (d, dd) = (self.d, self.d * self.d);
        let st = backend.ucb_step(
            env,
            &mut self.streams[i],
            &mut self.ws,
            AgentState {
                vinv: &mut self.vinv[i * dd..(i + 1) * dd],
                logdet: &mut self.logdet[i],
                b: &mut self.b[i * d..(i + 1) * d],
            },
            beta,
        );
        linalg::add_outer(&mut self.gram[i * dd..(i + 1) * dd], &self.ws.x, d);
        for (u, x) in self.bias[i * d..(i + 1) * d].iter_mut().zip(&self.ws.x) {
            *u += st.y * x;
        }
        self.regret[i] += st.regret();
        self.since_factor[i] += 1;
        st
    }

    /// Agent `i`'s exact local sums as a tree leaf: Gram (d x d) then bias (d).
    pub fn local_leaf(&self, i: usize, leaf: &mut [f64]) {
        let (d, dd) = (self.d, self.d * self.d);
        leaf[..dd].copy_from_slice(&self.gram[i * dd..(i + 1) * dd]);
        leaf[dd..dd + d].copy_from_slice(&self.bias[i * d..(i + 1) * d]);
    }

    /// Rebuilds V_i^{-1} and log det V_i from V_i = base + gram_i.
    pub fn refactor(&mut self, i: usize, base: &[f64], backend: &dyn Backend) {
        let dd = self.d * self.d;
        let mut v = std::mem::take(&mut self.vtmp);
        for ((t, b), g) in v.iter_mut().zip(base).zip(&self.gram[i * dd..(i + 1) * dd]) {
            *t = b + g;
        }
        self.factor_into(i, &v, backend);
        self.vtmp = v;
    }

    /// After a sync: every agent gets V_i = `v` (factorized once), b_i = `b`,
    /// and empty local sums.
    pub fn reset_all(&mut self, v: &[f64], b: &[f64], backend: &dyn Backend) {
        let (d, dd) = (self.d, self.d * self.d);
        self.factor_into(0, v, backend);
        let (first, rest) = self.vinv.split_at_mut(dd);
        for chunk in rest.chunks_exact_mut(dd) {
            chunk.copy_from_slice(first);
        }
        let ld = self.logdet[0];
        self.logdet.fill(ld);
        for chunk in self.b.chunks_exact_mut(d) {
            chunk.copy_from_slice(b);
        }
        self.gram.fill(0.0);
        self.bias.fill(0.0);
        self.since_factor.fill(0);
    }

    /// Sets agent `i`'s V^{-1} and log det from the full matrix `v`.
    pub fn factor_into(&mut self, i: usize, v: &[f64], backend: &dyn Backend) {
        let (d, dd) = (self.d, self.d * self.d);
        match backend.spd_inverse(v, d, &mut self.vinv[i * dd..(i + 1) * dd], &mut self.ws) {
            Ok((ld, jitter)) => {
                self.logdet[i] = ld;
                if jitter > 0.0 {
                    self.counters.cholesky_failures += 1;
                }
            }
            Err(_) => self.counters.cholesky_failures += 1,
        }
        self.since_factor[i] = 0;
    }
}
