//! The linear contextual family (Dubey & Pentland 2020; Zhou &
//! Chowdhury 2023).
//!
//! [`LinearConfig`] is a cell's fully resolved configuration (every default
//! filled in). Every algorithm describes itself as a
//! [`crate::algo::linear::batch::LinearBatch`] ([`linear_batch`]) and runs through the
//! one round loop of [`lockstep`] on every backend; FedUCB's data-dependent
//! schedule is part of the description (its determinant test, decided per
//! federation by the backend's operations).

pub mod audit;
pub mod batch;
pub mod cost;
pub mod cpu;
pub mod cuda;
pub mod fedlinucb;
pub mod lattice;
pub mod feducb;
pub mod feducb_decentralized;
pub mod lockstep;
pub mod oful;
pub mod micro;
pub mod params;
pub mod table;
pub mod random;
pub mod step;
pub mod workloads;

use crate::env::LinearEnvSpec;

/// Algorithms of the linear family.
pub const ALGORITHMS: &[(&str, &str)] = &[
    ("linucb", "OFUL, a single agent (Abbasi-Yadkori et al. 2011)"),
    (
        "independent",
        "M OFUL agents without communication (the no-federation baseline)",
    ),
    ("random", "uniformly random actions (sanity floor)"),
    (
        "fedlinucb",
        "FedLinUCB, fixed-batch sync, no privacy (Zhou & Chowdhury 2023)",
    ),
    (
        "private_fedlinucb",
        "Private-FedLinUCB with the tree mechanism (Zhou & Chowdhury 2023)",
    ),
    (
        "feducb_centralized",
        "FedUCB, adaptive sync + PRIVATIZER (Dubey & Pentland 2020, Alg. 1-2)",
    ),
    (
        "feducb_decentralized",
        "FedUCB on a peer-to-peer graph, gamma-hop delayed messages (Dubey & Pentland 2020, 4.2)",
    ),
];

/// Environments of the linear family.
pub const ENVIRONMENTS: &[(&str, &str)] = &[
    (
        "linear_gap",
        "Dubey & Pentland's synthetic: one optimal action in [0.7,0.8], others in [0.5,0.6]; Bernoulli rewards",
    ),
    (
        "linear_sphere",
        "Zhou & Chowdhury's synthetic (after Vaswani et al. 2020); Gaussian reward noise",
    ),
];

crate::named_enum! {
    /// Linear-family algorithms.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum LinearAlgorithm {
        /// OFUL, one agent.
        Linucb = "linucb",
        /// M OFUL agents without communication.
        Independent = "independent",
        /// Uniformly random actions (a sanity baseline).
        Random = "random",
        /// Zhou & Chowdhury's FedLinUCB without privacy.
        Fedlinucb = "fedlinucb",
        /// Zhou & Chowdhury's Private-FedLinUCB.
        PrivateFedlinucb = "private_fedlinucb",
        /// Dubey & Pentland's FedUCB, centralized (Algorithm 1 + PRIVATIZER).
        FeducbCentralized = "feducb_centralized",
        /// Dubey & Pentland's FedUCB on a peer-to-peer graph (Section 4.2).
        FeducbDecentralized = "feducb_decentralized",
    }
}

crate::named_enum! {
    /// Privacy protocol of (Private-)FedLinUCB.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum Protocol {
        /// Silo-level local DP with the tree mechanism.
        Ldp = "ldp",
        /// Shuffle DP by amplification: the tree mechanism with the amplified
        /// (smaller) noise.
        SdpAmp = "sdp_amp",
        /// Shuffle DP by the vector-summation protocol ([`crate::privacy::vecsum`]).
        SdpVecsum = "sdp_vecsum",
        /// The slides' P_alt: each agent privatizes its own prefix sums over time
        /// (its own tree), the server adds them. In the silo-level LDP model this
        /// releases exactly what `ldp` releases (same noise scale).
        Alt = "alt",
        /// No privacy (FedLinUCB).
        None = "none",
    }
}

crate::named_enum! {
    /// What linear_sphere's reward is computed on (`reward_on`): the raw
    /// action (the authors' code) or the normalized one (well-specified).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum RewardOn {
        /// The raw action (the authors' code).
        Raw = "raw",
        /// The normalized action (the well-specified variant, the default).
        Normalized = "normalized",
    }
}

crate::named_enum! {
    /// The family's environments, as its registry ([`ENVIRONMENTS`]) names them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LinearEnvironment {
        /// Dubey & Pentland's synthetic.
        LinearGap = "linear_gap",
        /// Zhou & Chowdhury's synthetic.
        LinearSphere = "linear_sphere",
    }
}

pub use crate::algo::options::Calibration;

/// Whether FedUCB's sync schedule is released as its determinant test
/// decides it (the paper; covered by no figure) or answered through the
/// sparse vector technique ([`crate::algo::linear::batch::Svt`]), `share` of the target
/// epsilon spent on it and `cap` requests per agent.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Schedule {
    /// The paper's determinant test.
    Paper,
    /// The test through the sparse vector technique.
    Private {
        /// Share of the target epsilon the schedule spends.
        share: f64,
        /// Requests per agent before the data-independent fallback.
        cap: u32,
    },
}

crate::named_enum! {
    /// The job-file names of FedUCB's sync regimes ([`SyncRegime`]; `threshold`
    /// takes its D from the parameter of that name).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SyncName {
        /// [`SyncRegime::Log`].
        Log = "log",
        /// [`SyncRegime::SqrtM`].
        SqrtM = "sqrt_m",
        /// [`SyncRegime::EveryRound`].
        EveryRound = "every_round",
        /// [`SyncRegime::Threshold`].
        Threshold = "threshold",
    }
}

crate::named_enum! {
    /// The job-file names of a private FedUCB's schedules ([`Schedule`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ScheduleName {
        /// [`Schedule::Private`].
        Private = "private",
        /// [`Schedule::Paper`].
        Paper = "paper",
    }
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
    /// Calibration of the private algorithms.
    pub calibration: Calibration,
    /// FedUCB's schedule.
    pub schedule: Schedule,
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
    /// Whether a private configuration draws its noise (`noise: false`:
    /// none, every other part of the private algorithm kept; no privacy
    /// figure holds).
    pub noise: bool,
    /// How the trees' node noise is drawn (`sampler: discrete`: on a
    /// lattice, exactly, [`crate::privacy::tree_lattice`]).
    pub sampler: crate::privacy::lattice::Sampler,
}

/// The reward bound |y| <= 1 of the papers' privacy analyses (Zhou &
/// Chowdhury; Dubey & Pentland), to which `clip_rewards` clips.
pub const REWARD_BOUND: f64 = 1.0;

impl LinearConfig {
    /// The standard deviation or scale a noise draw of nominal `scale`
    /// gets: `scale`, or 0 under `noise: false` (the widths, regularizers
    /// and schedules keep the nominal one).
    pub fn drawn(&self, scale: f64) -> f64 {
        if self.noise { scale } else { 0.0 }
    }

    /// The bound rewards are clipped to before they enter any sum
    /// (infinity: not clipped).
    pub fn reward_bound(&self) -> f64 {
        if self.clip_rewards { REWARD_BOUND } else { f64::INFINITY }
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
    let found = mechanism(cfg).map(|m| crate::privacy::accountant::account(&m));
    if cfg.noise { found } else { found.map(crate::privacy::accountant::Accounting::without_noise) }
}

/// The configuration as a lockstep batch ([`crate::algo::linear::batch::LinearBatch`],
/// run by [`lockstep::Lockstep`] on any backend): `linucb`, `independent`,
/// `random`, `fedlinucb`, `private_fedlinucb` (every protocol) and both
/// forms of FedUCB. `env_keys` and `algo_keys` are the federations' keys
/// (one pair per repetition). `Err(why)`: a graph that cannot be built.
pub fn linear_batch(
    cfg: &LinearConfig,
    env_keys: Vec<Vec<u64>>,
    algo_keys: &[Vec<u64>],
) -> Result<crate::algo::linear::batch::LinearBatch, crate::graph::GraphError> {
    match cfg.algorithm {
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent => Ok(oful::batch(cfg, env_keys)),
        LinearAlgorithm::Random => Ok(random::batch(cfg, env_keys, algo_keys)),
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb => {
            Ok(fedlinucb::batch(cfg, env_keys, algo_keys))
        }
        LinearAlgorithm::FeducbCentralized => Ok(feducb::batch(cfg, env_keys, algo_keys)),
        LinearAlgorithm::FeducbDecentralized => feducb_decentralized::batch(cfg, env_keys, algo_keys),
    }
}

/// A batch's checkpoint as an output curve point (M agents): the regret,
/// communication and factorization counters, and the rewards clipped to
/// the mechanism's bound (`clipped_observations`).
pub fn curve_point(p: crate::algo::linear::batch::BatchPoint, m: usize) -> crate::algo::curve::CurvePoint {
    use crate::algo::curve::{CurvePoint, Metric};
    let mut c = CurvePoint::new(
        p.t,
        p.group_regret,
        m as u64,
        p.agent_regret_max,
        p.sync_rounds,
        p.messages,
    );
    c.counters.cholesky_failures = p.cholesky_failures;
    c.counters.clipped_rewards = p.clipped_rewards;
    c.counters.beta_clamps = p.beta_clamps;
    c.set("clipped_observations", Metric::U64(p.clipped_rewards));
    c
}

/// What widens FedUCB's confidence (both forms): its privacy and its
/// confidence parameters.
const FEDUCB_WIDTHS: &[&str] = &[
    "epsilon",
    "delta",
    "confidence_scale",
    "alpha",
    "lambda",
    "schedule_share",
];

/// The linear contextual family (Zhou & Chowdhury; Dubey & Pentland) in the registry
/// ([`crate::algo::family::FAMILIES`]).
pub const FAMILY: crate::algo::family_entry::Family = crate::algo::family_entry::Family {
    baseline: Some("independent"),
    paper_claims: &[
        (
            "private_fedlinucb",
            "ldp, alt: the slides' Theorem 1 solved for epsilon at the sigma used; sdp_amp: the target where \
             amplification by shuffling's precondition holds, else null; sdp_vecsum: null (no theorem covers the \
             implementation)",
        ),
        (
            "feducb_*",
            "what the paper's PRIVATIZER formula (sigma_N proportional to 1/epsilon) claims for the noise used, \
             for the noisy sums (the target under calibration: paper; the released schedule is covered by no \
             figure)",
        ),
    ],
    workloads: workloads::WORKLOADS,
    parity: workloads::PARITY,
    columns: &[
        "cholesky_failures",
        "beta_clamps",
        "clipped_observations",
        "acct_rho_zcdp",
        "acct_epsilon_zcdp",
        "acct_epsilon_sums",
        "acct_epsilon_basic",
        "acct_delta_basic",
    ],
    non_private: &[("private_fedlinucb", "fedlinucb")],
    parts: &[
        ("private_fedlinucb", "clip_rewards", "false", "reward clipping"),
        ("feducb_centralized", "clip_rewards", "false", "reward clipping"),
        ("feducb_decentralized", "clip_rewards", "false", "reward clipping"),
    ],
    metrics: &[
        (
            "cholesky_failures",
            "Cholesky factorizations of a Gram matrix that failed (noise made it indefinite) and fell back to added \
             jitter; cumulative count per repetition, all agents; 0 for a healthy run",
        ),
        (
            "beta_clamps",
            "rounds an agent's FedUCB confidence radius had a negative argument (log det V below its offset) and was \
             clamped to 0; cumulative count per repetition, all agents; 0 for the other algorithms",
        ),
        (
            "clipped_observations",
            "rewards the private algorithms clipped to [-1, 1] (the bound their sensitivities assume; for sdp_vecsum \
             also points whose x x^T or x y coordinates the protocol clipped); cumulative count per repetition, all \
             agents; the report shows it as a share of the m x T observations; 0 without clipping",
        ),
    ],
    widths: &[
        (
            "linucb",
            &["confidence_scale", "alpha", "lambda", "s_bound", "subgaussian"],
        ),
        (
            "independent",
            &["confidence_scale", "alpha", "lambda", "s_bound", "subgaussian"],
        ),
        ("fedlinucb", &["confidence_scale", "alpha", "s_bound", "subgaussian"]),
        (
            "private_fedlinucb",
            &[
                "epsilon",
                "delta",
                "confidence_scale",
                "alpha",
                "s_bound",
                "subgaussian",
            ],
        ),
        ("feducb_centralized", FEDUCB_WIDTHS),
        ("feducb_decentralized", FEDUCB_WIDTHS),
    ],
    kernels: cuda::KERNELS,
    cost_terms: cost::COST_TERMS,
    shapes: cost::SHAPES,
    micro_benches: &[("kernels", micro::kernels), ("linalg", micro::linalg_crossover)],
    static_shapes: cuda::static_shapes,
    ..crate::algo::family_entry::Family::new(
        ("linear", "linear contextual bandits: M agents, d-dimensional actions (Dubey & Pentland; Zhou & Chowdhury; definitions in src/algo/linear/)"),
        ALGORITHMS,
        ENVIRONMENTS,
        (table::PARAMS, table::SHARES),
        params::resolve,
    )
};

/// The family's batched operations for `batch` on `backend`'s device, at
/// round 0: the CPU's ([`cpu::CpuLinear`]) or the CUDA device's
/// ([`cuda::CudaLinear`]).
pub fn ops<'a>(
    batch: &batch::LinearBatch,
    backend: &'a dyn crate::backend::Backend,
) -> Result<Box<dyn batch::LinearOps + 'a>, crate::backend::BatchError> {
    Ok(match backend.device() {
        crate::backend::Device::Cpu => Box::new(cpu::CpuLinear::new(batch)?),
        crate::backend::Device::Cuda(dev) => Box::new(cuda::CudaLinear::new(dev.launcher()?, batch)?),
    })
}

impl crate::algo::FamilyConfig for LinearConfig {
    fn auditor(&self) -> Option<&dyn crate::algo::audit::Audit> {
        Some(self)
    }

    /// Scoring's 2 K (d^2 + 2d) flops per agent-step; bytes: V^{-1} read
    /// twice and written once, the Gram sums read and written, the decision
    /// set written and read back (f64), the normals written and read (f32).
    fn roofline(&self) -> Option<(f64, f64)> {
        let (d, k) = (self.env.d as f64, self.env.k as f64);
        let kp = (k / 8.0).ceil() * 8.0;
        let bytes = 8.0 * (5.0 * d * d + 2.0 * d * kp + kp) + 8.0 * (k - d) * (d - 1.0);
        Some((2.0 * k * (d * d + 2.0 * d), bytes))
    }

    fn batch(
        &self,
        env_keys: Vec<Vec<u64>>,
        algo_keys: &[Vec<u64>],
    ) -> Result<Box<dyn crate::algo::FamilyBatch>, crate::graph::GraphError> {
        Ok(Box::new(linear_batch(self, env_keys, algo_keys)?))
    }

    fn agents(&self) -> usize {
        self.m
    }

    fn inputs(&self) -> Option<String> {
        match &self.graph {
            crate::graph::GraphSpec::Edges(e) => Some(format!("edges={e:?}")),
            _ => None,
        }
    }

    fn horizon(&self) -> u64 {
        self.horizon
    }

    fn accounting(&self) -> Option<crate::privacy::accountant::Accounting> {
        accounting(self)
    }

    /// The environment's misspecification for the linear model, except for
    /// `random` (which assumes no model).
    fn misspecification(&self) -> Option<crate::env::Misspecification> {
        (self.algorithm != LinearAlgorithm::Random)
            .then(|| self.env.misspecification())
            .flatten()
    }

    fn target(&self) -> (Option<f64>, Option<f64>) {
        self.privacy.map_or((None, None), |(e, d)| (Some(e), Some(d)))
    }

    fn schedule_private(&self) -> bool {
        match self.algorithm {
            LinearAlgorithm::FeducbCentralized | LinearAlgorithm::FeducbDecentralized => feducb::schedule_private(self),
            _ => true,
        }
    }

    fn cost(&self) -> crate::algo::Cost {
        cost::cost(self)
    }

    fn memory_per_federation(&self) -> u64 {
        cost::memory_per_federation(self)
    }

    fn snapshot_bytes(&self) -> u64 {
        cost::memory_per_federation(self).saturating_sub(cost::workspace_bytes(self))
    }

    fn accountant_bytes(&self) -> u64 {
        fedlinucb::vecsum_accountant_bytes(self)
    }
}

impl crate::backend::Placeable for batch::LinearBatch {
    /// Large d changes where the time goes (the d^2 and d^3 work), so it
    /// is its own kind.
    fn kind(&self) -> &'static str {
        use batch::{LARGE_D, Release};
        let large = self.env.d >= LARGE_D;
        let vecsum = matches!(self.sync.as_ref().map(|s| &s.release), Some(Release::VecSum { .. }));
        match (self.network.is_some(), self.adaptive(), vecsum, large) {
            (true, _, _, false) => "feducb_decentralized",
            (true, _, _, true) => "feducb_decentralized_large_d",
            (false, true, _, false) => "feducb",
            (false, true, _, true) => "feducb_large_d",
            (false, false, true, false) => "sdp_vecsum",
            (false, false, true, true) => "sdp_vecsum_large_d",
            _ if large => "linear_large_d",
            _ if matches!(self.env.kind, crate::env::LinearEnvKind::Gap) => "linear_gap",
            _ => "linear",
        }
    }

    fn federations(&self) -> usize {
        batch::LinearBatch::federations(self)
    }

    fn cuda_supports(&self, dev: &crate::backend::cuda::CudaBackend) -> Result<(), crate::backend::Unsupported> {
        // Its shared-memory footprint among the checks.
        let limit = dev.max_shared_per_block()?;
        cuda::supports(self, limit).map_err(|e| crate::backend::Unsupported(e.to_string()))
    }
}

impl crate::algo::FamilyBatch for batch::LinearBatch {
    /// The lockstep loop over the backend's operations, in steps of
    /// [`crate::algo::cell::PROGRESS_EVERY`] rounds.
    fn run(
        &self,
        checkpoints: &[u64],
        backend: &dyn crate::backend::Backend,
        progress: &dyn Fn(u64),
    ) -> Result<Vec<Vec<crate::algo::curve::CurvePoint>>, crate::backend::BatchError> {
        let mut ops = ops(self, backend)?;
        let mut step = lockstep::Lockstep::new();
        let curves = crate::algo::cell::in_progress_steps(
            self.federations(),
            self.m,
            checkpoints,
            progress,
            |_, until, curves| step.advance(self, ops.as_mut(), until, checkpoints, curves),
        )?;
        Ok(curves
            .into_iter()
            .map(|c| c.into_iter().map(|p| curve_point(p, self.m)).collect())
            .collect())
    }

    fn start_rep(&self) -> Result<Box<dyn crate::algo::cell::RepObject>, crate::backend::BatchError> {
        crate::algo::cell::start_rep::<Rep>(self)
    }

    fn resume_rep(&self, bytes: &[u8]) -> Result<Box<dyn crate::algo::cell::RepObject>, bincode::Error> {
        crate::algo::cell::resume_rep::<Rep>(bytes)
    }
}

/// A repetition in flight on the CPU: the lockstep loop's position, the
/// CPU's batch state and the checkpoints so far.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Rep {
    step: lockstep::Lockstep,
    ops: cpu::CpuLinear,
    points: Vec<Vec<batch::BatchPoint>>,
}

impl crate::algo::FamilyRep for Rep {
    type Batch = batch::LinearBatch;

    fn start(b: &batch::LinearBatch) -> Result<Self, crate::backend::BatchError> {
        Ok(Self {
            step: lockstep::Lockstep::new(),
            ops: cpu::CpuLinear::new(b)?,
            points: vec![Vec::new()],
        })
    }

    fn t(&self) -> u64 {
        self.step.t
    }

    fn advance(
        &mut self,
        b: &batch::LinearBatch,
        until: u64,
        checkpoints: &[u64],
    ) -> Result<(), crate::backend::BatchError> {
        self.step
            .advance(b, &mut self.ops, until, checkpoints, &mut self.points)
    }

    fn into_points(self, b: &batch::LinearBatch) -> Vec<crate::algo::curve::CurvePoint> {
        crate::algo::cell::first(self.points)
            .into_iter()
            .map(|p| curve_point(p, b.m))
            .collect()
    }
}
