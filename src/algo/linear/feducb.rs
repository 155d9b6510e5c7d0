//! `feducb_centralized`: Dubey & Pentland (NeurIPS 2020), Algorithm 1 with the
//! PRIVATIZER (Algorithm 2) of Dubey & Pentland (2020).
//!
//! Agent i plays with V = S + U_i, theta_hat = V^{-1} (s + u_i) and
//! beta_{i,t} = sigma sqrt(2 log(2/alpha) + log det V - d log(M rho_min)) +
//! S_bound sqrt(M rho_max) + kappa sqrt(M) (Proposition 2; a negative
//! argument is clamped at 0 and counted). After playing, it tests
//! log det(V + x x^T + M (rho_max - rho_min) I) - log det(S) > D / Delta t_i;
//! if any agent's test fires (or every round under `every_round`), all agents
//! sync after the round: each agent's privatizer inserts its local
//! sum Q = sum [x; y][x; y]^T since the last sync as the next leaf of its
//! tree and releases the noisy prefix sum; S = sum_i (Gram block + shift I),
//! s = sum_i (bias block); local sums reset. Before the first sync
//! S = M rho_min I, s = 0.
//!
//! Constants (private; n = T since the number of rounds is not fixed in
//! advance, Remark 4): m = 1 + ceil(log2 T) tree levels,
//! sigma_N^2 = 16 m (L^2+1)^2 log(2/delta)^2 / eps^2 per entry of a
//! (d+1)x(d+1) N_hat, node noise N = (N_hat + N_hat^T)/sqrt(2);
//! Lambda = sqrt(32 m) (L^2+1) log(4/delta) (4 sqrt(d) + 2 ln(2 n M / alpha)) / eps;
//! rho_min = Lambda, rho_max = 3 Lambda, shift = 2 Lambda;
//! kappa = sqrt(m (L^2+1)) (sqrt(d) + 2 log(2 n M / alpha)) / (sqrt(2) eps).
//! Non-private: no noise, rho_min = rho_max = shift = lambda, kappa = 0.
//! These are `calibration: paper`; `calibration: exact` (the default)
//! solves sigma_N from the target with the exact accountant
//! ([`exact_sigma_n`]: the sums' figure in [0.99, 1] x epsilon) and scales
//! Lambda, rho_min, rho_max, shift and kappa by the same factor as sigma_N,
//! keeping the paper's regularization relative to its noise.
//!
//! The shifted log det needs (V + c I)^{-1} with c = M (rho_max - rho_min): a
//! second inverse per agent, kept by Sherman-Morrison like the first (only
//! when c > 0). The adaptive schedule leaks information about the data (see
//! Zhou & Chowdhury's critique); it is reported as a property of the
//! algorithm, not fixed here.
//!
//! The algorithm runs on the batched core as a [`LinearBatch`] ([`batch`]):
//! its widths, test and release are data; the lockstep loop and each
//! backend's operations run it (on the CPU, `algo::linear::cpu`), the
//! determinant test deciding each federation's syncs on its own.

use crate::named::Named;
use super::{LinearAlgorithm, LinearConfig, SyncRegime};
use crate::algo::linear::batch::{AdaptiveSync, LinearBatch, Release, SyncRule, SyncWhen, Width};
use crate::privacy::accountant::{Mechanism, NoiseModel};
use crate::privacy::tree::{AgentTrees, NodeNoise};

/// FedUCB's constants for one configuration.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DubeyConstants {
    /// Tree levels m.
    pub levels: usize,
    /// Per-entry standard deviation of N_hat (0 if not private).
    pub sigma_n: f64,
    /// rho_min.
    pub rho_min: f64,
    /// rho_max.
    pub rho_max: f64,
    /// Regularizing shift added to each agent's released Gram block.
    pub shift: f64,
    /// kappa.
    pub kappa: f64,
    /// Sync threshold D (infinite for `every_round`, which ignores it).
    pub threshold: f64,
}

impl DubeyConstants {
    /// Constants of a configuration.
    pub fn new(cfg: &LinearConfig) -> Self {
        Self::with_levels(cfg, 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize)
    }

    /// The constants with `levels` tree levels (the decentralized variant uses
    /// 1 + ceil(log2(T / gamma))).
    pub fn with_levels(cfg: &LinearConfig, levels: usize) -> Self {
        let t = cfg.horizon as f64;
        let d = cfg.env.d as f64;
        let m_agents = cfg.m as f64;
        let l2p1 = cfg.l_bound * cfg.l_bound + 1.0;
        let mf = levels as f64;
        let (sigma_n, rho_min, rho_max, shift, kappa) = match cfg.privacy {
            Some((eps, delta)) => {
                let sigma_n = (16.0 * mf).sqrt() * l2p1 * (2.0 / delta).ln() / eps;
                let log_term = (2.0 * t * m_agents / cfg.alpha).ln();
                let lam = (32.0 * mf).sqrt() * l2p1 * (4.0 / delta).ln() * (4.0 * d.sqrt() + 2.0 * log_term) / eps;
                let kappa = (mf * l2p1).sqrt() * (d.sqrt() + 2.0 * log_term) / (std::f64::consts::SQRT_2 * eps);
                // calibration: exact scales the noise, and every constant
                // the paper sizes from it (Lambda, kappa), by r; the sums
                // and a private schedule compose to the target.
                let r = match cfg.calibration {
                    super::Calibration::Exact => exact_sigma_n(cfg, eps, delta) / sigma_n,
                    _ => 1.0,
                };
                (r * sigma_n, r * lam, 3.0 * r * lam, 2.0 * r * lam, r * kappa)
            }
            None => (0.0, cfg.lambda, cfg.lambda, cfg.lambda, 0.0),
        };
        let l2 = cfg.l_bound * cfg.l_bound;
        let threshold = match cfg.sync {
            SyncRegime::EveryRound => f64::INFINITY,
            SyncRegime::Log => 2.0 * t * d / ((rho_max / rho_min + t * l2 / (d * rho_min)).ln() + 1.0),
            SyncRegime::SqrtM => t * (m_agents * t).ln() / (d * m_agents),
            SyncRegime::Threshold(v) => v,
        };
        Self {
            levels,
            sigma_n,
            rho_min,
            rho_max,
            shift,
            kappa,
            threshold,
        }
    }

    /// Proposition 1's bound on the number of sync rounds (non-private).
    pub fn proposition1_bound(&self, cfg: &LinearConfig) -> f64 {
        let t = cfg.horizon as f64;
        let d = cfg.env.d as f64;
        let l2 = cfg.l_bound * cfg.l_bound;
        2.0 * ((d * t / self.threshold) * (self.rho_max / self.rho_min + t * l2 / (d * self.rho_min)).ln()).sqrt() + 4.0
    }
}

/// The PRIVATIZER's N_hat entry deviation under `calibration: exact`: the
/// node noise (N_hat + N_hat^T) / sqrt(2) is a Gaussian mechanism with
/// sigma = sqrt(2) sigma_N on a statistic of sensitivity
/// [`crate::privacy::accountant::dubey_sensitivity`] ([`mechanism`]),
/// entered by the [`charged_releases`] nodes an observation can reach, and
/// composed with the private schedule's pure epsilon by their privacy loss
/// distributions ([`crate::privacy::accountant::composed_mu`]): sigma_N =
/// sqrt(releases) Delta / (mu sqrt 2) puts `acct_epsilon` in [0.99, 1] x
/// the target.
fn exact_sigma_n(cfg: &LinearConfig, eps: f64, delta: f64) -> f64 {
    let sens = crate::privacy::accountant::dubey_sensitivity(cfg.l_bound, cfg.neighbours);
    let mu = crate::privacy::accountant::composed_mu(eps, delta, schedule_epsilon(cfg).unwrap_or(0.0));
    let releases = charged_releases(cfg) as f64;
    super::lattice::exact_sigma(cfg, NodeNoise::Dubey, tree_levels(cfg), sens, |s| {
        releases.sqrt() * s / mu / std::f64::consts::SQRT_2
    })
}

/// Levels of a PRIVATIZER tree, 1 + ceil(log2 T) (both forms: a slot may
/// broadcast every round), as the lattice's magnitude bound counts them.
pub fn tree_levels(cfg: &LinearConfig) -> usize {
    1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize
}

/// The lattice of a private FedUCB's node noise at sigma_N = `sigma_n`
/// under `sampler: discrete` (None otherwise).
pub fn node_lattice(cfg: &LinearConfig, sigma_n: f64) -> Option<crate::privacy::tree_lattice::LatticeNodeNoise> {
    super::lattice::node_lattice(cfg, sigma_n, NodeNoise::Dubey, tree_levels(cfg))
}

/// floor(log2 x) + 1 for x >= 1 (the levels of a tree of x leaves).
fn levels(x: u64) -> u64 {
    crate::privacy::tree_levels(x) as u64
}

/// The most leaves one PRIVATIZER tree can receive over the horizon: a
/// leaf is a sync (centralized: every agent's tree at once) or a broadcast
/// of one slot (decentralized), at most one per round, so at most T.
/// Under `schedule: private` (and a test that decides syncs) a sync round
/// is a sparse-vector request, at most `schedule_cap` per agent (per slot),
/// or a fallback round of the data-independent schedule, a power of two
/// of the round (of the slot's own rounds, ceil(t / gamma)):
/// - centralized: every agent's tree takes a leaf at each sync, and the
///   syncs are at most M cap requests plus floor(log2 T) + 1 powers of two
///   (the fallback rounds are the same for every agent);
/// - decentralized: slot (i, g) broadcasts when it requests or when a
///   request of slot (j, g) of an agent within gamma hops reaches it; each
///   of those n_i slots requests at most cap + floor(log2 ceil(T /
///   gamma)) + 1 times (arrivals at different distances are different
///   rounds), so n (cap + floor(log2 ceil(T / gamma)) + 1) with n the
///   largest n_i any graph of the cell can have
///   ([`crate::graph::GraphSpec::max_reach`]: a fixed graph's largest
///   gamma-hop ball, the Moore bound for `random_regular`, M for
///   `erdos_renyi`; before semantics 18, M for every graph).
///
/// Any other schedule (the paper's test, data-dependent) can sync every
/// round: T.
pub fn max_leaves(cfg: &LinearConfig) -> u64 {
    let t = cfg.horizon.max(1);
    let m = cfg.m as u64;
    match cfg.schedule {
        super::Schedule::Private { cap, .. } if schedule_epsilon(cfg).is_some() => {
            let cap = u64::from(cap);
            let n = if cfg.algorithm == LinearAlgorithm::FeducbDecentralized {
                let own = t.div_ceil(cfg.gamma.max(1) as u64);
                let reach = cfg.graph.max_reach(cfg.m, cfg.gamma.max(1)).unwrap_or(cfg.m) as u64;
                reach.saturating_mul(cap.saturating_add(levels(own)))
            } else {
                m.saturating_mul(cap).saturating_add(levels(t))
            };
            n.min(t)
        }
        _ => t,
    }
}

/// The tree nodes one observation enters, charged by the accountant and the
/// exact calibration: its leaf k is in the node of level j only once that
/// node closes, at leaf ceil(k / 2^j) 2^j <= N ([`crate::privacy::tree`]),
/// so with at most N = [`max_leaves`] leaves, 1 + floor(log2 N) nodes (8 at
/// M = 10, T = 10^4 and the default cap 14, where one leaf per round would
/// be 15).
pub fn charged_releases(cfg: &LinearConfig) -> u64 {
    levels(max_leaves(cfg))
}

/// The PRIVATIZER's constants as the releases use them: the centralized
/// form's, or the decentralized form's noise (calibrated for
/// 1 + ceil(log2(T / gamma)) levels) with the levels an observation's path
/// can reach (1 + ceil(log2 T): a slot may broadcast every round). None
/// for another algorithm.
pub fn privatizer(cfg: &LinearConfig) -> Option<DubeyConstants> {
    match cfg.algorithm {
        LinearAlgorithm::FeducbCentralized => Some(DubeyConstants::new(cfg)),
        LinearAlgorithm::FeducbDecentralized => {
            let t_eff = cfg.horizon.div_ceil(cfg.gamma.max(1) as u64).max(1);
            let mut c = DubeyConstants::with_levels(cfg, 1 + (t_eff as f64).log2().ceil() as usize);
            c.levels = 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize;
            Some(c)
        }
        _ => None,
    }
}

/// What FedUCB's PRIVATIZER releases about one observation: it enters
/// [`charged_releases`] nodes; a node adds N = (N_hat + N_hat^T)/sqrt(2)
/// to the leaf's Gram and bias blocks (off-diagonal variance sigma_N^2,
/// diagonal 2 sigma_N^2): a Gaussian mechanism with sigma = sqrt(2)
/// sigma_N and the sensitivity of
/// [`crate::privacy::accountant::dubey_sensitivity`]. The private schedule
/// is a pure-DP release composed with them ([`Mechanism::pure`]).
pub fn mechanism(cfg: &LinearConfig) -> Option<Mechanism> {
    let target = cfg.privacy?;
    let c = privatizer(cfg)?;
    let unbounded = super::unbounded_rewards(cfg);
    let lattice = node_lattice(cfg, c.sigma_n);
    let sensitivity = crate::privacy::accountant::dubey_sensitivity(cfg.l_bound, cfg.neighbours)
        + lattice.map_or(0.0, |l| l.rounding(cfg.env.d));
    Some(Mechanism {
        releases_per_observation: charged_releases(cfg),
        noise: NoiseModel::Gaussian {
            sigma: std::f64::consts::SQRT_2 * c.sigma_n,
            sensitivity,
        },
        target,
        paper: paper_claim(cfg, &c, target.0),
        basic: None,
        neighbours: cfg.neighbours,
        relation: format!(
            "one (x, y) observation of one agent {} ({}), {}; {}",
            super::fedlinucb::relation_verb(cfg.neighbours),
            cfg.neighbours.name(),
            crate::privacy::accountant::NON_ADAPTIVE,
            if schedule_private(cfg) {
                "the sync schedule is covered"
            } else {
                "the sync schedule is not covered"
            }
        ),
        unbounded,
        warnings: Vec::new(),
        // The determinant test decides when everyone syncs: the sync rounds
        // are released and depend on the data, unless the test is answered
        // privately or the schedule syncs every round.
        uncovered: (!schedule_private(cfg)).then(|| {
            "the sync schedule (FedUCB's determinant test on the agents' own data decides when everyone syncs) \
             is released too (schedule_private is false; schedule: private covers it)"
                .into()
        }),
        pure: schedule_epsilon(cfg).map(|epsilon| crate::privacy::accountant::PureRelease {
            epsilon,
            what: "the private sync schedule (sparse vector technique)".to_string(),
            on_lattice: svt_lattice(cfg).is_some(),
        }),
        lattice: lattice.map(|l| l.charge(cfg.env.d)),
    })
}

/// What the paper claims for the noise used: its PRIVATIZER formula gives
/// sigma_N proportional to 1 / epsilon, so noise sigma_N claims epsilon x
/// (the paper's sigma_N at the target) / sigma_N: the target under
/// `calibration: paper`.
fn paper_claim(cfg: &LinearConfig, c: &DubeyConstants, target: f64) -> crate::privacy::accountant::PaperClaim {
    use crate::privacy::accountant::PaperClaim;
    if cfg.calibration == super::Calibration::Paper {
        return PaperClaim::Target;
    }
    let paper = LinearConfig {
        calibration: super::Calibration::Paper,
        ..cfg.clone()
    };
    privatizer(&paper)
        .filter(|_| c.sigma_n > 0.0)
        .map_or(PaperClaim::Target, |p| PaperClaim::Value(target * p.sigma_n / c.sigma_n))
}

/// Proposition 2's width of an agent that hears n agents (M, or n_i on a
/// graph): (offset, tail1, tail2) with beta = scale ((sigma sqrt(max(0,
/// offset + log det V)) + tail1) + tail2), offset = 2 log(2/alpha) -
/// d log(n rho_min), tail1 = S sqrt(n rho_max), tail2 = kappa sqrt(n)
/// ([`crate::algo::linear::batch::logdet_width`]).
pub fn width(cfg: &LinearConfig, c: &DubeyConstants, n: f64) -> (f64, f64, f64) {
    let offset = 2.0 * (2.0 / cfg.alpha).ln() - cfg.env.d as f64 * (n * c.rho_min).ln();
    (offset, cfg.s_bound * (n * c.rho_max).sqrt(), c.kappa * n.sqrt())
}

/// The determinant test of a configuration, with each agent's shift c_i =
/// n_i (rho_max - rho_min) (none without privacy, where it is 0), answered
/// through the sparse vector technique under `schedule: private`
/// ([`svt`]; `noise_keys`: the agents' privacy keys).
pub fn det_test(
    cfg: &LinearConfig,
    c: &DubeyConstants,
    reach: impl Iterator<Item = f64>,
    noise_keys: &[u64],
) -> AdaptiveSync {
    AdaptiveSync {
        threshold: c.threshold,
        every_round: matches!(cfg.sync, SyncRegime::EveryRound),
        shifts: if cfg.privacy.is_some() {
            reach.map(|n| n * (c.rho_max - c.rho_min)).collect()
        } else {
            Vec::new()
        },
        svt: svt(cfg, noise_keys),
    }
}

/// The private schedule's rule ([`crate::algo::linear::batch::Svt`]): eps_schedule =
/// share x the target epsilon; rho ~ Lap(2 / eps_schedule), nu ~ Lap(4 cap
/// / eps_schedule) in units of the query's sensitivity (Lap(2 cap /
/// eps_schedule) under add/remove, where the queries are monotone); each agent's draws
/// keyed by its privacy key folded with [`SVT_PURPOSE`]. None unless the
/// cell is private with `schedule: private` and a test that depends on the
/// data.
pub fn svt(cfg: &LinearConfig, noise_keys: &[u64]) -> Option<crate::algo::linear::batch::Svt> {
    let (eps, _) = cfg.privacy?;
    let super::Schedule::Private { share, cap } = cfg.schedule else {
        return None;
    };
    if cfg.sync == SyncRegime::EveryRound {
        return None;
    }
    let e = share * eps;
    Some(crate::algo::linear::batch::Svt {
        keys: noise_keys
            .iter()
            .map(|&k| crate::rng::fold_more(k, SVT_PURPOSE))
            .collect(),
        threshold_scale: cfg.drawn(2.0 / e),
        query_scale: cfg.drawn(2.0 * f64::from(svt_shift(cfg)) * f64::from(cap) / e),
        cap,
        l2: cfg.l_bound * cfg.l_bound,
        lattice: svt_lattice(cfg),
    })
}

/// `sampler: discrete`'s sparse vector test
/// ([`crate::algo::linear::batch::SvtLattice`]) of a private schedule with
/// noise drawn: the budget share x epsilon and nu's [`svt_shift`]. One
/// function for the batch and the accountant.
pub fn svt_lattice(cfg: &LinearConfig) -> Option<crate::algo::linear::batch::SvtLattice> {
    let (eps, _) = cfg.privacy?;
    let super::Schedule::Private { share, cap } = cfg.schedule else {
        return None;
    };
    if cfg.sampler != crate::privacy::lattice::Sampler::Discrete || !cfg.noise || cfg.sync == SyncRegime::EveryRound {
        return None;
    }
    crate::algo::linear::batch::SvtLattice::new(share * eps, cap, svt_shift(cfg))
}

/// How far the sparse vector test's proof shifts each answered query's
/// noise, in sensitivities: 1 under add/remove (adding an observation
/// raises every query of its epoch, removing one lowers every one: Lyu,
/// Su & Li's monotone case), 2 under substitute. nu's scale is 2 shift cap
/// / eps (float) and its lattice rate eps / (2 cap shift WIDTH).
fn svt_shift(cfg: &LinearConfig) -> u32 {
    match cfg.neighbours {
        crate::privacy::accountant::Neighbours::AddRemove => 1,
        crate::privacy::accountant::Neighbours::Substitute => 2,
    }
}

/// Folded into an agent's privacy key for its schedule's draws (apart from
/// its tree's node noise).
pub const SVT_PURPOSE: u64 = 0x5e7_5c4e;

/// Whether a cell's released schedule is covered by its figure: it syncs
/// every round (no data decides it) or through the private test.
pub fn schedule_private(cfg: &LinearConfig) -> bool {
    cfg.sync == SyncRegime::EveryRound || matches!(cfg.schedule, super::Schedule::Private { .. })
}

/// The epsilon a cell's private schedule spends (None: none).
pub fn schedule_epsilon(cfg: &LinearConfig) -> Option<f64> {
    if let Some(l) = svt_lattice(cfg) {
        return Some(l.epsilon());
    }
    match (cfg.privacy, cfg.schedule, cfg.sync) {
        (_, _, SyncRegime::EveryRound) => None,
        (Some((eps, _)), super::Schedule::Private { share, .. }, _) => Some(share * eps),
        _ => None,
    }
}

/// Centralized FedUCB as a batch: V_0 = S_0 = M rho_min I, Proposition 2's
/// width per agent, the determinant test (every round under
/// `every_round`), and at a sync S = M shift I + the sum of the agents'
/// PRIVATIZER releases (the trees of [`crate::privacy::tree`] with Dubey &
/// Pentland's node noise, sized for one leaf per round) or, without
/// privacy, of their exact sums; 2M messages per sync.
pub fn batch(cfg: &LinearConfig, env_keys: Vec<Vec<u64>>, algo_keys: &[Vec<u64>]) -> LinearBatch {
    let c = DubeyConstants::new(cfg);
    let (m, nf) = (cfg.m, env_keys.len());
    let mf = m as f64;
    let private = cfg.privacy.is_some();
    let release = if private {
        Release::Tree {
            sigma: cfg.drawn(c.sigma_n),
            levels: c.levels,
            noise: NodeNoise::Dubey,
            lattice: node_lattice(cfg, cfg.drawn(c.sigma_n)),
        }
    } else {
        Release::Cumulative
    };
    let noise_keys = if private {
        AgentTrees::folded_keys(algo_keys, m)
    } else {
        Vec::new()
    };
    let test = det_test(cfg, &c, std::iter::repeat_n(mf, nf * m), &noise_keys);
    LinearBatch {
        env: cfg.env.clone(),
        env_keys,
        noise_keys,
        m,
        lambda: mf * c.rho_min,
        beta: Width::LogDet {
            scale: cfg.confidence_scale,
            sigma: cfg.subgaussian,
            // The centralized form adds the two tails first.
            agents: vec![
                {
                    let (offset, tail1, tail2) = width(cfg, &c, mf);
                    (offset, tail1 + tail2, 0.0)
                };
                nf * m
            ],
        },
        sync: Some(SyncRule {
            when: SyncWhen::Adaptive(test),
            release,
            diag: mf * c.shift,
            messages_per_sync: 2 * m as u64,
        }),
        network: None,
        refactor_every: cfg.refactor_every,
        random_policy: None,
        reward_bound: cfg.reward_bound(),
    }
}

#[cfg(test)]
mod tests {
    use crate::job::Job;

    fn accounting(params: &str) -> crate::privacy::accountant::Accounting {
        let j = Job::parse(
            std::path::Path::new("a.yaml"),
            &format!("algorithm: feducb_decentralized\nenvironment: linear_gap\nhorizon: 50000\nparams: {{{params}}}\n"),
        )
        .unwrap();
        j.cells[0].config.accounting().unwrap()
    }

    /// Decentralized FedUCB is charged by the slot's reach: on a ring of 12
    /// within 3 hops only n_i = 7 slots can make a slot's tree take a leaf,
    /// 7 (14 + 15) = 203 leaves at the default cap 14 and T = 5e4 (15
    /// levels of ceil(T / 3) = 16667 own rounds): 8 nodes; M = 12 slots
    /// would give 348 leaves, 9 nodes. A random graph can be any graph, so
    /// `erdos_renyi` is charged for M. Under `calibration: paper` the
    /// noise is the same either way, so the figure is the tighter one: at
    /// sqrt(8/9) of the earlier mu (the schedule's pure part unchanged).
    #[test]
    fn decentralized_feducb_is_charged_by_the_slots_reach() {
        let p = "m: 12, gamma: 3, epsilon: 0.3, delta: 0.0001, calibration: paper, schedule: private";
        let ring = accounting(&format!("{p}, graph: ring"));
        let random = accounting(&format!("{p}, graph: erdos_renyi, graph_p: 0.5"));
        assert_eq!(ring.releases_per_observation, 8);
        assert_eq!(random.releases_per_observation, 9);
        let (er, ea) = (ring.epsilon_sums.unwrap(), random.epsilon_sums.unwrap());
        assert!(er < ea, "ring {er} vs erdos_renyi {ea}");
        // Exact calibration meets the target with the ring's 8 nodes.
        let exact = accounting("m: 12, gamma: 3, epsilon: 0.3, delta: 0.0001, graph: ring");
        assert_eq!(exact.releases_per_observation, 8);
        let e = exact.epsilon.unwrap();
        assert!((0.99 * 0.3..=0.3).contains(&e), "{e}");
    }
}
