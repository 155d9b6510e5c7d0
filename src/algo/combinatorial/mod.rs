//! The federated combinatorial family with quality constraints (Solanki
//! et al.): `non_federated`, `fcb` and `p_fcb` ([`p_fcb`]), all
//! with a pure-exploration phase and the greedy oracle on upper confidence
//! qualities. Each algorithm is a description of its batch
//! ([`comb_batch`]); the round loop ([`run`]) is the one of
//! [`crate::algo::rounds`] over a backend's [`crate::algo::rounds::RoundOps`].
//!
//! Choices where the spec leaves room:
//! * Instances: repetition r uses instance r mod `instances` (the paper's 5
//!   instances x 20 repetitions); units' qualities are drawn per repetition.
//! * Exploration: t <= ceil(3 ln(n T) / (2 n zeta^2)) (208 rounds at n = 10,
//!   T = 10^5, zeta = 0.1), one unit from every producer; it counts in regret,
//!   and the regret after it is recorded too.
//! * Regret is measured against the agents' own oracle on the true qualities
//!   (greedy by default, the paper's benchmark; `oracle: exact` for small
//!   instances, where greedy's own shortfall then counts as regret); a
//!   choice that violates the constraint under the true q costs L_j.

pub mod audit;
pub mod batch;
pub mod cpu;
pub mod cuda;
pub mod p_fcb;
pub mod params;
pub mod table;

use crate::algo::family_entry::CostTerm;
use crate::backend::BatchError;
use crate::env::procurement::{Instance, Oracle, ProcurementSpec};
use crate::rng::{Purpose, fold_key};
use batch::{CombBatch, CombObservation, CombPolicy};

/// Algorithms of the combinatorial procurement family.
pub const ALGORITHMS: &[(&str, &str)] = &[
    (
        "non_federated",
        "each agent learns producer qualities alone (Solanki et al.'s baseline)",
    ),
    (
        "fcb",
        "FCB: every round's observations shared with every agent (Solanki et al.)",
    ),
    (
        "p_fcb",
        "P-FCB: scheduled (epsilon, delta)-DP sharing with noisy messages and CheckandUpdate (Solanki et al.)",
    ),
];

/// Environments of the combinatorial procurement family.
pub const ENVIRONMENTS: &[(&str, &str)] = &[(
    "procurement",
    "Solanki et al.'s procurement: m producers of quality q_i, agents' costs and capacities U{1..50}; instance_kind uniform or normal",
)];

crate::named_enum! {
    /// Combinatorial-family algorithms.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum CombAlgorithm {
        /// Own data only.
        NonFederated = "non_federated",
        /// Every round's data shared with every agent.
        Fcb = "fcb",
        /// Private, scheduled sharing (P-FCB).
        PFcb = "p_fcb",
    }
}

/// A cell's resolved configuration for the combinatorial family.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CombConfig {
    /// Algorithm.
    pub algorithm: CombAlgorithm,
    /// Environment.
    pub env: ProcurementSpec,
    /// Rounds T.
    pub horizon: u64,
    /// Distinct instances (repetition r uses instance r mod instances).
    pub instances: u32,
    /// zeta of the exploration length.
    pub zeta: f64,
    /// P-FCB's settings.
    pub private: p_fcb::PFcbConfig,
    /// The oracle (greedy, the paper's; or exact for small instances).
    pub oracle: Oracle,
}

/// Rounds of pure exploration: ceil(3 ln(n T) / (2 n zeta^2)).
pub fn explore_rounds(agents: usize, horizon: u64, zeta: f64) -> u64 {
    let n = agents as f64;
    (3.0 * (n * horizon as f64).ln() / (2.0 * n * zeta * zeta)).ceil() as u64
}

/// The configuration as a batch: `env_keys` and `algo_keys` are the
/// federations' keys (one pair per repetition; the last word of an
/// environment key is the repetition).
pub fn comb_batch(cfg: &CombConfig, env_keys: &[Vec<u64>], algo_keys: &[Vec<u64>]) -> CombBatch {
    let n = cfg.env.agents;
    let instances = env_keys
        .iter()
        .map(|k| {
            let mut ik = k.clone();
            if let Some(last) = ik.last_mut() {
                *last %= u64::from(cfg.instances.max(1));
            }
            Instance::new(&cfg.env, &ik)
        })
        .collect();
    let quality_keys = env_keys
        .iter()
        .flat_map(|k| {
            (0..n).map(move |j| {
                let mut q = k.clone();
                q.extend_from_slice(&[j as u64, Purpose::Rewards as u64]);
                fold_key(&q)
            })
        })
        .collect();
    let policy = match cfg.algorithm {
        CombAlgorithm::NonFederated => CombPolicy::NonFederated,
        CombAlgorithm::Fcb => CombPolicy::Fcb,
        CombAlgorithm::PFcb => CombPolicy::PFcb(p_fcb::policy(&cfg.private, cfg.horizon, n, algo_keys)),
    };
    CombBatch {
        instances,
        quality_keys,
        explore_rounds: explore_rounds(n, cfg.horizon, cfg.zeta),
        policy,
        oracle: cfg.oracle,
    }
}

/// One federation's curve at one checkpoint.
pub type CombPoint = crate::algo::rounds::Checkpoint<CombObservation>;


/// A checkpoint as an output curve point. Communication counters count
/// (sender, receiver, producer) messages: `fcb` sends every round
/// (n (n - 1) m per round), `p_fcb` in its communication rounds (accepted +
/// rejected), `non_federated` never. Metrics: regret after exploration,
/// constraint violations, and for P-FCB the messages accepted and rejected
/// and the privacy spent so far.
pub fn curve_point(p: &CombPoint, b: &CombBatch) -> crate::algo::curve::CurvePoint {
    use crate::algo::combinatorial::batch::CombPolicy;
    use crate::algo::curve::{CurvePoint, Metric};
    let (n, m) = b
        .instances
        .first()
        .map_or((1, 0), |i| (i.spec.agents as u64, i.spec.producers as u64));
    let (sync_rounds, messages) = match b.policy {
        CombPolicy::Fcb => (p.t, p.t * n * n.saturating_sub(1) * m),
        CombPolicy::PFcb(_) => (p.obs.communications, p.obs.accepted + p.obs.rejected),
        CombPolicy::NonFederated => (0, 0),
    };
    let mut c = CurvePoint::new(
        p.t,
        p.obs.group_regret,
        n,
        p.obs.agent_regret_max,
        sync_rounds,
        messages,
    );
    c.set("regret_after_exploration", Metric::F64(p.obs.regret_after_exploration));
    c.set("constraint_violations", Metric::U64(p.obs.violations));
    if let CombPolicy::PFcb(policy) = &b.policy {
        c.set("messages_accepted", Metric::U64(p.obs.accepted));
        c.set("messages_rejected", Metric::U64(p.obs.rejected));
        // P-FCB without noise (epsilon: .inf) spends no privacy budget it
        // could state: its privacy columns stay null.
        if policy.private {
            c.set("paper_epsilon_spent", Metric::F64(p.obs.epsilon_spent));
            c.set("paper_delta_spent", Metric::F64(p.obs.delta_spent));
        }
    }
    c
}

/// The family's time model: an agent-step and its producers (each
/// producer's quality bound, the greedy oracle's pass over them). Built-in
/// seconds: [`SHAPES`] timed on one thread of the 2-core development VM
/// (`fedbandits calibrate --shapes --seconds 0.5`), the fit rounded:
/// measured 0.86x to 1.11x of the model. A flat rate (the model before
/// these terms, fitted at 30 producers) read 9.3x low at 300.
pub const COST_TERMS: &[CostTerm] = &[
    CostTerm::new("step", "an agent-step", 5.0e-9),
    CostTerm::new(
        "producers",
        "a producer of an agent-step (its quality bound and the greedy oracle's pass)",
        8.2e-9,
    ),
];

/// The jobs `fedbandits calibrate --shapes` times to fit [`COST_TERMS`]:
/// each algorithm at 30 producers; 4 to 20 agents, 100 and 300 producers.
pub const SHAPES: &[(&str, &str, u64)] = &[
    (
        "p_fcb_n10_m30",
        "algorithm: p_fcb\nenvironment: procurement\nhorizon: {T}\nparams: {m: 10, producers: 30, epsilon: 1, delta: 0.01}\n",
        5_000,
    ),
    (
        "fcb_n10_m30",
        "algorithm: fcb\nenvironment: procurement\nhorizon: {T}\nparams: {m: 10, producers: 30}\n",
        5_000,
    ),
    (
        "non_federated_n4_m30",
        "algorithm: non_federated\nenvironment: procurement\nhorizon: {T}\nparams: {m: 4, producers: 30}\n",
        5_000,
    ),
    (
        "fcb_n20_m30",
        "algorithm: fcb\nenvironment: procurement\nhorizon: {T}\nparams: {m: 20, producers: 30}\n",
        2_000,
    ),
    (
        "p_fcb_n10_m100",
        "algorithm: p_fcb\nenvironment: procurement\nhorizon: {T}\nparams: {m: 10, producers: 100, epsilon: 1, delta: 0.01}\n",
        2_000,
    ),
    (
        "non_federated_n4_m300",
        "algorithm: non_federated\nenvironment: procurement\nhorizon: {T}\nparams: {m: 4, producers: 300}\n",
        2_000,
    ),
];

/// The cell's units of [`COST_TERMS`] per agent-step: one step and its
/// producers.
pub fn cost(c: &CombConfig) -> crate::algo::Cost {
    crate::algo::Cost::of("combinatorial", &[1.0, c.env.producers as f64])
}

/// Approximate peak memory of one running federation, in bytes: per agent
/// and producer cost, capacity, revenues, W, Y, own, pending and snapshot
/// counts, messages (about 12 words), and the good-unit draws' cached CDF
/// tables at their largest.
pub fn memory_per_federation(c: &CombConfig) -> u64 {
    let (n, m) = (c.env.agents as u64, c.env.producers as u64);
    let tables = crate::rng::small_binomial::CdfTables::max_bytes(c.env.producers, u64::from(c.env.max_capacity));
    n * m * 12 * 8 + m * 64 + n * 64 + tables
}

/// The family's `fedbandits bench` workload: (name, default federations,
/// job YAML with `{T}` for the rounds).
pub const WORKLOADS: &[(&str, u32, &str)] = &[(
    "pfcb_n10_m30",
    64,
    "algorithm: p_fcb\nenvironment: procurement\nhorizon: {T}\nparams: {m: 10, producers: 30, epsilon: 1, delta: 0.01}\n",
)];

/// A short job covering every algorithm of the family, for the parity
/// check of a batched backend with the CPU (`fedbandits calibrate`).
pub const PARITY: &[(&str, &str)] = &[(
    "combinatorial",
    "seed: 8\nrepetitions: 2\nhorizon: 300\ncheckpoints: {every: 100}\nalgorithm: [non_federated, fcb, p_fcb]\n\
         environment: procurement\nparams: {m: 3, producers: 6, delta: 0.01, t_low: 50, t_high: 250}\n\
         grid: {epsilon: [1, .inf], noise: [true, false]}\n",
)];

/// The combinatorial procurement family (Solanki et al.) in the registry
/// ([`crate::algo::family::FAMILIES`]).
pub const FAMILY: crate::algo::family_entry::Family = crate::algo::family_entry::Family {
    baseline: Some("non_federated"),
    // Exploration buys one unit from every producer for the first
    // ceil(3 ln(nT) / (2 n zeta^2)) rounds (about 208 at the paper's
    // settings) whatever the algorithm: an offset that dominates total
    // regret and would hide a stall at any horizon within reach.
    growth_regret: "regret_after_exploration",
    paper_claims: &[(
        "p_fcb",
        "the paper's argument with the pair (w, y)'s true sensitivity: sqrt(2) x the sum of its rounds' \
         epsilon_z (classical Gaussian theorem per round, basic composition over rounds); null where a round's \
         sqrt(2) epsilon_z >= 1",
    )],
    workloads: WORKLOADS,
    parity: PARITY,
    columns: &[
        "regret_after_exploration",
        "constraint_violations",
        "messages_accepted",
        "messages_rejected",
        "paper_epsilon_spent",
        "paper_delta_spent",
        "acct_rho_zcdp",
        "acct_epsilon_zcdp",
    ],
    non_private: &[("p_fcb", "fcb")],
    noiseless_at_inf: &["p_fcb"],
    metrics: &[
        (
            "regret_after_exploration",
            "cumulative group regret of the rounds after the exploration phase (which every algorithm pays alike); \
             the regret the analysis reads (per agent: / m); can be 0 or below, the greedy benchmark being beatable",
        ),
        (
            "constraint_violations",
            "agent-rounds whose procurement violated the quality constraint under the true qualities (charged the \
             round's penalty as regret); cumulative count per repetition; the report shows it as a share of the m x T \
             agent-rounds",
        ),
        (
            "messages_accepted",
            "P-FCB messages (sender, receiver, producer) a receiver accepted into its estimate; cumulative; the report \
             shows the accepted share of accepted + rejected; null for the other algorithms",
        ),
        (
            "messages_rejected",
            "P-FCB messages a receiver rejected (w~ <= 0, or y~/w~ outside its acceptance window); cumulative; null \
             for the other algorithms",
        ),
        (
            "paper_epsilon_spent",
            "P-FCB's per-agent \"privacy spent\" as the paper keeps it: the sum, over the messages sent so far, of \
             each message's exact epsilon at delta; a bookkeeping figure, not a bound (under the paper's relation one \
             round enters one message: acct_epsilon); null without noise and for the other algorithms",
        ),
        (
            "paper_delta_spent",
            "the delta beside paper_epsilon_spent (messages sent so far x delta)",
        ),
    ],
    widths: &[("p_fcb", &["epsilon", "omega1"])],
    kernels: cuda::KERNELS,
    cost_terms: COST_TERMS,
    shapes: SHAPES,
    ..crate::algo::family_entry::Family::new(
        ("combinatorial", "federated combinatorial bandits with quality constraints: n agents procure from m producers (Solanki et al.; definitions in src/algo/combinatorial/)"),
        ALGORITHMS,
        ENVIRONMENTS,
        (table::PARAMS, table::SHARES),
        params::resolve,
    )
};


impl crate::algo::FamilyConfig for CombConfig {
    fn auditor(&self) -> Option<&dyn crate::algo::audit::Audit> {
        Some(self)
    }

    fn batch(
        &self,
        env_keys: Vec<Vec<u64>>,
        algo_keys: &[Vec<u64>],
    ) -> Result<Box<dyn crate::algo::FamilyBatch>, crate::graph::GraphError> {
        Ok(Box::new(comb_batch(self, &env_keys, algo_keys)))
    }

    fn agents(&self) -> usize {
        self.env.agents
    }

    fn horizon(&self) -> u64 {
        self.horizon
    }

    fn accounting(&self) -> Option<crate::privacy::accountant::Accounting> {
        (self.algorithm == CombAlgorithm::PFcb && self.private.is_private())
            .then(|| p_fcb::accounting(&self.private, self.horizon))
    }

    /// Its exploration phase's length ([`explore_rounds`]), which every
    /// algorithm pays alike: the report shows it and its cost per cell.
    fn facts(&self) -> Vec<(&'static str, f64)> {
        vec![(
            "exploration_rounds",
            explore_rounds(self.env.agents, self.horizon, self.zeta) as f64,
        )]
    }

    fn target(&self) -> (Option<f64>, Option<f64>) {
        if self.algorithm == CombAlgorithm::PFcb && self.private.is_private() {
            (Some(self.private.epsilon), Some(self.private.delta))
        } else {
            (None, None)
        }
    }

    fn cost(&self) -> crate::algo::Cost {
        cost(self)
    }

    fn memory_per_federation(&self) -> u64 {
        memory_per_federation(self)
    }
}

impl crate::algo::rounds::RoundsFamily for CombBatch {
    type Obs = CombObservation;
    type Cpu = cpu::CpuComb;
    const KIND: &'static str = "combinatorial";

    fn federations(&self) -> usize {
        CombBatch::federations(self)
    }

    fn agents(&self) -> usize {
        self.instances.first().map_or(0, |i| i.spec.agents)
    }

    fn cuda_ops<'a>(
        &self,
        launcher: crate::backend::cuda::LauncherGuard<'a>,
    ) -> Result<Box<dyn crate::algo::rounds::RoundOps<Obs = CombObservation> + 'a>, BatchError> {
        Ok(Box::new(cuda::CudaComb::new(launcher, self)?))
    }

    fn cpu(&self) -> Result<cpu::CpuComb, BatchError> {
        cpu::CpuComb::new(self)
    }



    fn cuda_supports(&self) -> Result<(), crate::backend::Unsupported> {
        cuda::supports(self).map_err(|e| crate::backend::Unsupported(e.to_string()))
    }

    fn curve(&self, _federation: usize, points: &[CombPoint]) -> Vec<crate::algo::curve::CurvePoint> {
        points.iter().map(|p| curve_point(p, self)).collect()
    }
}

/// A repetition in flight on the CPU.
pub type Rep = crate::algo::rounds::RoundsRep<CombBatch>;
