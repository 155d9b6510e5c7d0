//! The CPU's [`LinearOps`]: each federation of a [`LinearBatch`] keeps its
//! agents in an [`AgentBank`] and steps them with the fused CPU step
//! ([`AgentStep::ucb_step`]); federations run on rayon's pool when the batch
//! has more than one (the runner's per-repetition tasks hold one each).
//!
//! A server federation ([`Fed`]) syncs when the lockstep loop says
//! ([`crate::algo::linear::batch::SyncWhen::Every`]) or, under FedUCB's determinant test
//! ([`crate::algo::linear::batch::SyncWhen::Adaptive`]), on its own schedule inside
//! [`LinearOps::rounds`]: each agent's test after its step, a
//! refactorization when due, and the sync after the round when any agent's
//! test fired. A federation on a graph ([`crate::algo::linear::batch::Network`]) is a
//! [`super::peer::PeerFed`].
//!
//! The state serializes whole (every random stream included), so a snapshot
//! of a running repetition resumes bit for bit.

pub mod bank;
pub mod peer;
pub mod score;

use self::bank::AgentBank;
use self::peer::PeerFed;
use super::step::AgentStep;
use crate::algo::linear::batch::{
    AdaptiveSync, LinearBatch, LinearOps, Observation, Release, Svt, SvtAgent, Width, logdet_width,
};
use crate::backend::BatchError;
use crate::backend::cpu::CpuBackend;
use crate::env::LinearEnv;
use crate::linalg;
use crate::privacy::tree::{AgentTrees, NodeNoise};
use crate::privacy::tree_lattice::LatticeNodeNoise;
use crate::privacy::vecsum::VecSum;
use crate::rng::Stream;
use rayon::prelude::*;

/// The CPU state of every federation of a batch.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CpuLinear {
    feds: Feds,
    rule: Rule,
}

/// The federations: with a server, or on a graph.
#[derive(serde::Serialize, serde::Deserialize)]
enum Feds {
    Server(Vec<Fed>),
    Graph(Vec<PeerFed>),
}

/// What every federation of the batch shares.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Rule {
    /// The released Gram's diagonal shift.
    diag: f64,
    /// `Some((scale, sigma))`: Proposition 2's per-agent widths.
    logdet_width: Option<(f64, f64)>,
    /// Rank-1 updates between factorizations (adaptive batches refactorize
    /// per federation).
    refactor_every: u32,
    /// Messages per sync.
    messages_per_sync: u64,
}

/// One federation with a server.
#[derive(serde::Serialize, serde::Deserialize)]
struct Fed {
    env: LinearEnv,
    bank: AgentBank,
    /// diag I + W_syn (lambda I before the first sync).
    base: Vec<f64>,
    /// U_syn.
    u_syn: Vec<f64>,
    privatizer: Privatizer,
    /// The random policy's per-agent pick streams (empty for UCB).
    picks: Vec<Stream>,
    /// A leaf and a release (workspace, d x d + d).
    leaf: Vec<f64>,
    release: Vec<f64>,
    group: f64,
    /// Per agent (offset, tail1, tail2) of Proposition 2's width (empty:
    /// the schedule's width).
    widths: Vec<(f64, f64, f64)>,
    /// The determinant test (None: the lockstep loop's schedule).
    test: Option<Box<DetTest>>,
    beta_clamps: u64,
}

/// A server federation's determinant-test state (FedUCB, line 12).
#[derive(serde::Serialize, serde::Deserialize)]
struct DetTest {
    threshold: f64,
    every_round: bool,
    /// c = M (rho_max - rho_min) (0: the test uses log det V_i).
    c: f64,
    /// (S + U_i + c I)^{-1} per agent (empty when c = 0) and its log det.
    vinv_c: Vec<f64>,
    logdet_c: Vec<f64>,
    /// log det S.
    logdet_s: f64,
    /// Rounds since the last sync.
    dt: u64,
    syncs: u64,
    messages: u64,
    /// Factorizations of the shifted matrix that failed or needed jitter.
    failures: u64,
    /// Workspace (d x d).
    mtmp: Vec<f64>,
    /// The test answered through the sparse vector technique (None: the
    /// test itself).
    svt: Option<SvtState>,
}

/// A federation's private schedule ([`Svt`]): the rule with its agents'
/// keys, each agent's instance, the epoch's sensitivity and the round.
#[derive(serde::Serialize, serde::Deserialize)]
struct SvtState {
    rule: Svt,
    agents: Vec<SvtAgent>,
    sens: f64,
    round: u64,
}

/// How a federation's sync releases the agents' sums.
#[derive(serde::Serialize, serde::Deserialize)]
enum Privatizer {
    /// Exact sums, accumulated into the base.
    Exact,
    /// The exact running total of every leaf.
    Cumulative { total: Vec<f64> },
    /// Per-agent trees with symmetric Gaussian node noise (on a lattice
    /// under `sampler: discrete`).
    Trees {
        trees: AgentTrees,
        sigma: f64,
        noise: NodeNoise,
        #[serde(default)]
        lattice: Option<LatticeNodeNoise>,
    },
    /// The shuffle vector-summation protocol.
    VecSum {
        vs: Box<VecSum>,
        /// The agents' randomizer keys (point t of agent i: fold_more(key, t)).
        agents: Vec<u64>,
        /// The shuffler's key.
        shuffler: u64,
        /// Rounds so far (every agent adds one point per round).
        round: u64,
    },
}

impl CpuLinear {
    /// The initial state of every federation of `batch` (V = lambda I,
    /// b = 0, every stream at its start).
    pub fn new(batch: &LinearBatch) -> Result<Self, BatchError> {
        let (nf, m) = (batch.federations(), batch.m);
        let bad = |what: &str| BatchError::unsupported(format!("{what} for {nf} federations of {m} agents"));
        let sync = batch.sync.as_ref();
        let slots = m * batch.network.as_ref().map_or(1, |n| n.gamma.max(1));
        if matches!(sync.map(|s| &s.release), Some(Release::Tree { .. })) && batch.noise_keys.len() != nf * slots {
            return Err(bad("a tree release needs one noise key per agent"));
        }
        if let Some(Release::VecSum { keys, .. }) = sync.map(|s| &s.release)
            && keys.len() != nf * (m + 1)
        {
            return Err(bad("sdp_vecsum needs M + 1 stream keys per federation"));
        }
        if batch.random_policy.as_ref().is_some_and(|k| k.len() != nf * m) {
            return Err(bad("a random policy needs one key per agent"));
        }
        let logdet_width = match &batch.beta {
            Width::Schedule(_) => None,
            Width::LogDet { scale, sigma, agents } => {
                if agents.len() != nf * m {
                    return Err(bad("per-agent widths need one entry per agent"));
                }
                Some((*scale, *sigma))
            }
        };
        let adaptive = sync.and_then(|s| s.adaptive());
        if adaptive.is_some_and(|a| !a.shifts.is_empty() && a.shifts.len() != nf * m) {
            return Err(bad("the determinant test needs one shift per agent"));
        }
        if let Some(svt) = adaptive.and_then(|a| a.svt.as_ref()) {
            let shifted = adaptive.is_some_and(|a| a.shifts.iter().all(|&c| c > 0.0));
            // One instance per agent (server) or per slot (graph).
            let slots = nf * m * batch.network.as_ref().map_or(1, |n| n.gamma.max(1));
            if svt.keys.len() != slots || !shifted {
                return Err(bad(
                    "a private schedule needs one key per agent (per slot on a graph) and a shifted test",
                ));
            }
        }
        let rule = Rule {
            diag: sync.map_or(batch.lambda, |s| s.diag),
            logdet_width,
            refactor_every: batch.refactor_every.max(1),
            messages_per_sync: sync.map_or(0, |s| s.messages_per_sync),
        };
        let feds = match &batch.network {
            Some(net) => {
                if net.graphs.len() != nf || net.bases.len() != nf * m || adaptive.is_none() || logdet_width.is_none() {
                    return Err(bad("a network needs a graph per federation, FedUCB's test and widths"));
                }
                Feds::Graph((0..nf).map(|f| PeerFed::new(batch, f)).collect())
            }
            None => Feds::Server((0..nf).map(|f| Fed::new(batch, f, adaptive)).collect()),
        };
        Ok(Self { feds, rule })
    }

    /// Runs `f` on every server federation (on rayon's pool when there are
    /// several).
    fn each(&mut self, f: impl Fn(&mut Fed) + Send + Sync) {
        let Feds::Server(feds) = &mut self.feds else { return };
        if feds.len() == 1 {
            f(&mut feds[0]);
        } else {
            feds.par_iter_mut().for_each(f);
        }
    }

    /// [`LinearOps::rounds`] with every agent step (and factorization) done
    /// by `step` (the CPU backend, or a wrapper that alters the data fed to
    /// it: the schedule attack of `fedbandits audit`).
    pub fn rounds_on<B: AgentStep + ?Sized>(&mut self, step: &B, t0: u64, count: usize, betas: &[f64]) {
        let rule = self.rule;
        match &mut self.feds {
            Feds::Graph(feds) => {
                let run = |f: &mut PeerFed| {
                    for t in t0..t0 + count as u64 {
                        f.round(t, step);
                    }
                };
                if feds.len() == 1 {
                    run(&mut feds[0]);
                } else {
                    feds.par_iter_mut().for_each(run);
                }
            }
            Feds::Server(_) => self.each(|f| {
                for r in 0..count {
                    f.round(step, &rule, betas.get(r).copied().unwrap_or(f64::NAN));
                }
            }),
        }
    }
}

impl Fed {
    /// Federation `f` of `batch` at round 0.
    fn new(batch: &LinearBatch, f: usize, adaptive: Option<&AdaptiveSync>) -> Self {
        let (m, d) = (batch.m, batch.env.d);
        let width = d * d + d;
        let env = LinearEnv::new(&batch.env, &batch.env_keys[f]);
        let sync = batch.sync.as_ref();
        let privatizer = match sync.map(|s| &s.release) {
            Some(Release::Tree {
                sigma,
                levels,
                noise,
                lattice,
            }) => Privatizer::Trees {
                trees: AgentTrees::with_keys(batch.noise_keys[f * m..(f + 1) * m].to_vec(), width, *levels),
                sigma: *sigma,
                noise: *noise,
                lattice: *lattice,
            },
            Some(Release::VecSum { proto, keys }) => {
                let k = &keys[f * (m + 1)..(f + 1) * (m + 1)];
                Privatizer::VecSum {
                    vs: proto.clone(),
                    agents: k[..m].to_vec(),
                    shuffler: k[m],
                    round: 0,
                }
            }
            Some(Release::Cumulative) => Privatizer::Cumulative {
                total: vec![0.0; width],
            },
            Some(Release::Exact) | None => Privatizer::Exact,
        };
        let picks = batch
            .random_policy
            .as_ref()
            .map(|k| k[f * m..(f + 1) * m].iter().map(|k| Stream::new(k)).collect())
            .unwrap_or_default();
        let mut base = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut base, d, batch.lambda);
        let widths = match &batch.beta {
            Width::LogDet { agents, .. } => agents[f * m..(f + 1) * m].to_vec(),
            Width::Schedule(_) => Vec::new(),
        };
        let mut bank = AgentBank::new(&env, m, batch.lambda, batch.reward_bound);
        bank.track_logdet = !widths.is_empty() || adaptive.is_some();
        Fed {
            bank,
            env,
            base,
            u_syn: vec![0.0; d],
            privatizer,
            picks,
            leaf: vec![0.0; width],
            release: vec![0.0; width],
            group: 0.0,
            widths,
            test: adaptive.map(|a| Box::new(DetTest::new(a, f * m, m, d, batch.lambda))),
            beta_clamps: 0,
        }
    }

    /// One round of every agent: the random policy, or a UCB step with width
    /// `beta` (or each agent's own) (randomized into the vector-summation
    /// windows when private); under the determinant test, each agent's
    /// test, the refactorization when due and the sync when fired.
    fn round<B: AgentStep + ?Sized>(&mut self, step: &B, rule: &Rule, beta: f64) {
        let mut total = 0.0;
        if !self.picks.is_empty() {
            let bank = &mut self.bank;
            for (i, pick) in self.picks.iter_mut().enumerate() {
                let s = &mut bank.streams[i];
                self.env.draw(s, &mut bank.ws.ds);
                let arm = pick.below(bank.ws.ds.k as u64) as usize;
                let mean = bank.ws.ds.mean[arm];
                let _ = self.env.reward(s, mean); // keeps reward streams aligned with learners
                let r = bank.ws.ds.best - mean;
                bank.regret[i] += r;
                total += r;
            }
            self.group += total;
            return;
        }
        if let Privatizer::VecSum { round, .. } = &mut self.privatizer {
            *round += 1;
        }
        let mut fire = false;
        if let Some(test) = self.test.as_mut() {
            test.dt += 1;
            fire = test.every_round;
            if let Some(s) = test.svt.as_mut() {
                s.round += 1;
            }
        }
        for i in 0..self.bank.m {
            let beta = match rule.logdet_width {
                Some((scale, sigma)) => {
                    let (b, clamped) = logdet_width(scale, sigma, self.widths[i], self.bank.logdet[i]);
                    self.beta_clamps += u64::from(clamped);
                    b
                }
                None => beta,
            };
            let st = self.bank.step(i, &self.env, step, beta);
            if let Privatizer::VecSum { vs, agents, round, .. } = &mut self.privatizer {
                // An observation the protocol's coordinate clipping
                // changed counts once, like one whose reward was clipped.
                let key = crate::rng::fold_more(agents[i], *round);
                if vs.add_point(&self.bank.ws.x, st.y, key) && !st.clipped {
                    self.bank.clipped += 1;
                }
            }
            total += st.regret();
            if let Some(test) = self.test.as_mut() {
                fire |= test.after_step(i, &mut self.bank);
                if self.bank.since_factor[i] >= rule.refactor_every {
                    self.bank.refactor(i, &self.base, step);
                    test.refactor(i, &self.base, &mut self.bank, step);
                }
            }
        }
        self.group += total;
        if fire {
            self.sync(rule, step);
        }
    }

    /// The server's release becomes every agent's base and bias.
    fn sync<B: AgentStep + ?Sized>(&mut self, rule: &Rule, step: &B) {
        let (d, dd, m) = (self.bank.d, self.bank.d * self.bank.d, self.bank.m);
        let released = match &mut self.privatizer {
            Privatizer::Trees {
                trees,
                sigma,
                noise,
                lattice,
            } => {
                // Server output: sum over agents of their noisy prefix sums.
                self.release.fill(0.0);
                let (sigma, noise) = (*sigma, *noise);
                for i in 0..m {
                    self.bank.local_leaf(i, &mut self.leaf);
                    // The tree is sized for every sync the schedule can
                    // make, so it cannot be full.
                    let _ = match lattice {
                        Some(l) => {
                            l.round_leaf(&mut self.leaf, d);
                            trees.contribute(i, &self.leaf, &mut self.release, |z, key| l.fill(z, d, key))
                        }
                        None => {
                            trees.contribute(i, &self.leaf, &mut self.release, |z, key| noise.fill(z, d, sigma, key))
                        }
                    };
                }
                true
            }
            Privatizer::Cumulative { total } => {
                for i in 0..m {
                    self.bank.local_leaf(i, &mut self.leaf);
                    for (t, l) in total.iter_mut().zip(&self.leaf) {
                        *t += l;
                    }
                }
                self.release.copy_from_slice(total);
                true
            }
            Privatizer::VecSum { vs, shuffler, .. } => {
                vs.close_batch(*shuffler, &mut self.release);
                true
            }
            Privatizer::Exact => false,
        };
        if released {
            linalg::set_scaled_identity(&mut self.base, d, rule.diag);
            for (b, r) in self.base.iter_mut().zip(&self.release[..dd]) {
                *b += r;
            }
            self.u_syn.copy_from_slice(&self.release[dd..]);
        } else {
            for i in 0..m {
                for (b, g) in self.base.iter_mut().zip(&self.bank.gram[i * dd..(i + 1) * dd]) {
                    *b += g;
                }
                for (u, g) in self.u_syn.iter_mut().zip(&self.bank.bias[i * d..(i + 1) * d]) {
                    *u += g;
                }
            }
        }
        self.bank.reset_all(&self.base, &self.u_syn, step);
        if let Some(test) = self.test.as_mut() {
            test.after_sync(&self.base, &mut self.bank, step, rule.messages_per_sync);
        }
    }

    fn observe(&self) -> Observation {
        let (syncs, messages, failures) = self
            .test
            .as_ref()
            .map_or((0, 0, 0), |t| (t.syncs, t.messages, t.failures));
        Observation {
            group_regret: self.group,
            agent_regret_max: self.bank.regret.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            cholesky_failures: self.bank.cholesky_failures + failures,
            clipped_rewards: self.bank.clipped,
            beta_clamps: self.beta_clamps,
            syncs,
            messages,
        }
    }
}

impl DetTest {
    /// The test of agents `first .. first + m` of a batch at round 0, with
    /// S = s0 I.
    fn new(a: &AdaptiveSync, first: usize, m: usize, d: usize, s0: f64) -> Self {
        // A server federation's agents share one S, so one shift.
        let c = a.shifts.get(first).copied().unwrap_or(0.0);
        let mut vinv_c1 = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut vinv_c1, d, 1.0 / (s0 + c));
        let svt = a.svt.as_ref().map(|r| {
            let rule = Svt {
                keys: r.keys[first..first + m].to_vec(),
                ..r.clone()
            };
            SvtState {
                agents: (0..m)
                    .map(|i| SvtAgent {
                        rho: rule.rho(i),
                        used: 0,
                    })
                    .collect(),
                sens: rule.sensitivity(&vinv_c1, true),
                round: 0,
                rule,
            }
        });
        Self {
            threshold: a.threshold,
            every_round: a.every_round,
            c,
            vinv_c: if c > 0.0 { vinv_c1.repeat(m) } else { Vec::new() },
            logdet_c: vec![d as f64 * (s0 + c).ln(); m],
            logdet_s: d as f64 * s0.ln(),
            dt: 0,
            syncs: 0,
            messages: 0,
            failures: 0,
            mtmp: vec![0.0; d * d],
            svt,
        }
    }

    /// Agent i's test after its step (its action in `bank.ws.x`): the
    /// shifted log det by the determinant lemma, against D / Delta t.
    fn after_step(&mut self, i: usize, bank: &mut AgentBank) -> bool {
        let (d, dd) = (bank.d, bank.d * bank.d);
        let stat = if self.c > 0.0 {
            let q = linalg::sherman_morrison(&mut self.vinv_c[i * dd..(i + 1) * dd], &bank.ws.x, &mut bank.ws.w, d);
            self.logdet_c[i] += crate::math::ln_1p(q);
            self.logdet_c[i] - self.logdet_s
        } else {
            bank.logdet[i] - self.logdet_s
        };
        let thr = self.threshold / self.dt as f64;
        match self.svt.as_mut() {
            Some(s) => s.rule.request(i, s.round, s.round, stat, thr, s.sens, &mut s.agents[i]),
            None => stat > thr,
        }
    }

    /// Rebuilds agent i's shifted inverse from S + U_i + c I.
    fn refactor<B: AgentStep + ?Sized>(&mut self, i: usize, base: &[f64], bank: &mut AgentBank, step: &B) {
        if self.c <= 0.0 {
            return;
        }
        let (d, dd) = (bank.d, bank.d * bank.d);
        for (t, (s, g)) in self
            .mtmp
            .iter_mut()
            .zip(base.iter().zip(&bank.gram[i * dd..(i + 1) * dd]))
        {
            *t = s + g;
        }
        for j in 0..d {
            self.mtmp[j * d + j] += self.c;
        }
        match step.spd_inverse(&self.mtmp, d, &mut self.vinv_c[i * dd..(i + 1) * dd], &mut bank.ws) {
            Ok((ld, _)) => self.logdet_c[i] = ld,
            Err(_) => self.failures += 1,
        }
    }

    /// After a sync to S = `base`: log det S, every agent's shifted inverse
    /// (S + c I)^{-1}, the counters.
    fn after_sync<B: AgentStep + ?Sized>(&mut self, base: &[f64], bank: &mut AgentBank, step: &B, messages: u64) {
        let (d, dd) = (bank.d, bank.d * bank.d);
        self.logdet_s = bank.logdet[0];
        if self.c > 0.0 {
            self.mtmp.copy_from_slice(base);
            for j in 0..d {
                self.mtmp[j * d + j] += self.c;
            }
            let (first, rest) = self.vinv_c.split_at_mut(dd);
            let exact = match step.spd_inverse(&self.mtmp, d, first, &mut bank.ws) {
                Ok((ld, jitter)) => {
                    self.logdet_c.fill(ld);
                    if jitter > 0.0 {
                        self.failures += 1;
                    }
                    jitter == 0.0
                }
                Err(_) => {
                    self.failures += 1;
                    false
                }
            };
            if let Some(s) = self.svt.as_mut() {
                s.sens = s.rule.sensitivity(first, exact);
            }
            for chunk in rest.chunks_exact_mut(dd) {
                chunk.copy_from_slice(first);
            }
        }
        self.dt = 0;
        self.syncs += 1;
        self.messages += messages;
    }
}

impl LinearOps for CpuLinear {
    fn max_rounds(&self) -> usize {
        usize::MAX
    }

    fn rounds(&mut self, t0: u64, count: usize, betas: &[f64]) -> Result<(), BatchError> {
        self.rounds_on(&CpuBackend, t0, count, betas);
        Ok(())
    }

    fn refactor(&mut self) -> Result<(), BatchError> {
        self.each(|f| {
            for i in 0..f.bank.m {
                f.bank.refactor(i, &f.base, &CpuBackend);
            }
        });
        Ok(())
    }

    fn sync(&mut self, _index: u64) -> Result<(), BatchError> {
        let rule = self.rule;
        self.each(|f| f.sync(&rule, &CpuBackend));
        Ok(())
    }

    fn observe(&mut self, out: &mut Vec<Observation>) -> Result<(), BatchError> {
        out.clear();
        match &self.feds {
            Feds::Server(feds) => out.extend(feds.iter().map(Fed::observe)),
            Feds::Graph(feds) => out.extend(feds.iter().map(PeerFed::observe)),
        }
        Ok(())
    }
}
