//! A FedUCB federation on a graph (Dubey & Pentland, Section 4.2; the
//! algorithm's description is `algo::linear::feducb_decentralized`), as the
//! CPU runs it for a [`LinearBatch`] with a [`crate::algo::linear::batch::Network`]:
//! gamma estimator slots per agent (round t plays slot t mod gamma), the
//! determinant test per slot, requests and broadcasts that travel one hop
//! per round up to gamma hops, each slot's PRIVATIZER tree (a broadcast
//! sends the increment of the slot's noisy prefix sum, or its exact local
//! sums without privacy), and the per-slot refactorization (when the slot's
//! S changed or after `refactor_every` rank-1 updates).
//!
//! Messages are pulled, not queued: a broadcast of slot (j, g) in round s
//! is kept in a ring of gamma + 1 rounds, and in round t agent i reads the
//! broadcast of every sender j within gamma hops made in round
//! t - dist(i, j), senders in index order (itself first where it is the
//! lowest index, at distance 0: a broadcast it made at the start of this
//! round); requests likewise. Every receiver's sums are added in that
//! fixed order, so a GPU thread per receiver entry adds the same numbers in
//! the same order (`kernels/peer.cu`); no allocation per round.
//!
//! A round: (A) each agent broadcasts every slot that a request made
//! dist(i, j) rounds ago by a neighbour j asks for, then every slot takes
//! the deliveries due (with the first-heard shift); (B) each agent
//! refactorizes its slot if needed, plays, and runs the test; (C) each
//! requester records its request and broadcasts its slot (unless it did in
//! (A)), delivering to itself at once.
//!
//! Counters: `syncs` counts requests, `messages` counts deliveries
//! (requests and broadcasts, one per receiver other than the sender).

use crate::algo::linear::batch::{LinearBatch, Observation, Release, Svt, SvtAgent, Width, logdet_width};
use crate::algo::linear::step::{AgentState, AgentStep, Workspace};
use crate::env::{AgentStreams, LinearEnv};
use crate::graph::Reach;
use crate::linalg;
use crate::privacy::tree::{AgentTrees, NodeNoise};

/// No round (a ring entry never written).
const NEVER: u64 = u64::MAX;

/// A decentralized FedUCB federation.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PeerFed {
    m: usize,
    d: usize,
    env: LinearEnv,
    reach: Reach,
    gamma: usize,
    threshold: f64,
    every_round: bool,
    refactor_every: u32,
    reward_bound: f64,
    /// confidence_scale and sigma of Proposition 2's width; per agent its
    /// (offset, tail1, tail2).
    scale: f64,
    sigma: f64,
    widths: Vec<(f64, f64, f64)>,
    /// Added to a slot's S diagonal the first time it hears a sender.
    first_heard: f64,
    /// Node noise standard deviation and kind (private only).
    noise: (f64, NodeNoise),
    /// The lattice of `sampler: discrete` (private only).
    #[serde(default)]
    lattice: Option<crate::privacy::tree_lattice::LatticeNodeNoise>,
    streams: Vec<AgentStreams>,
    ws: Workspace,
    /// Per slot s = i * gamma + g.
    vinv: Vec<f64>,
    logdet: Vec<f64>,
    b: Vec<f64>,
    s_mat: Vec<f64>,
    s_vec: Vec<f64>,
    logdet_s: Vec<f64>,
    u_mat: Vec<f64>,
    u_vec: Vec<f64>,
    vinv_c: Vec<f64>,
    logdet_c: Vec<f64>,
    dt: Vec<u64>,
    dirty: Vec<bool>,
    last_broadcast: Vec<u64>,
    heard: Vec<bool>,
    prev_release: Vec<f64>,
    trees: Option<AgentTrees>,
    c_shift: Vec<f64>,
    /// Per slot and ring entry (round mod gamma + 1): the payload broadcast
    /// in that round (d^2 + d) and the round it was broadcast.
    payload: Vec<f64>,
    payload_round: Vec<u64>,
    /// Per agent and ring entry: the round of a request.
    request_round: Vec<u64>,
    /// Per slot: broadcast in this round's phase (A).
    asked: Vec<bool>,
    leaf: Vec<f64>,
    release: Vec<f64>,
    tmp: Vec<f64>,
    tmp2: Vec<f64>,
    since: Vec<u32>,
    requests: Vec<usize>,
    regret: Vec<f64>,
    group: f64,
    syncs: u64,
    messages: u64,
    cholesky_failures: u64,
    beta_clamps: u64,
    clipped: u64,
    /// The private schedule (None: the test itself): one instance per slot
    /// (an observation enters one slot's sums), its rule keyed per slot
    /// (i x gamma + g), and each slot's sensitivity, set at every
    /// refactorization from (S + c I)^{-1} (`sinv`, workspace).
    svt: Option<(Svt, Vec<SvtAgent>, Vec<f64>)>,
    sinv: Vec<f64>,
}

/// Federation `f`'s sparse-vector state: its slots' keys of the rule, each
/// slot's threshold noise and nothing used, no last value yet.
fn svt_state(rule: &Svt, f: usize, slots: usize) -> (Svt, Vec<SvtAgent>, Vec<f64>) {
    let rule = Svt {
        keys: rule.keys[f * slots..(f + 1) * slots].to_vec(),
        ..rule.clone()
    };
    let agents = (0..slots)
        .map(|sl| SvtAgent {
            rho: rule.rho(sl),
            used: 0,
        })
        .collect();
    (rule, agents, vec![f64::INFINITY; slots])
}

/// The slots' trees of federation `f` with their node noise and lattice
/// (none without privacy).
type SlotTrees = (Option<AgentTrees>, (f64, NodeNoise), Option<crate::privacy::tree_lattice::LatticeNodeNoise>);

/// [`SlotTrees`] of a batch's federation `f`.
fn slot_trees(batch: &LinearBatch, f: usize, slots: usize, width: usize) -> SlotTrees {
    match batch.sync.as_ref().map(|s| &s.release) {
        Some(Release::Tree {
            sigma,
            levels,
            noise,
            lattice,
        }) => (
            Some(AgentTrees::with_keys(
                batch.noise_keys[f * slots..(f + 1) * slots].to_vec(),
                width,
                *levels,
            )),
            (*sigma, *noise),
            *lattice,
        ),
        _ => (None, (0.0, NodeNoise::Dubey), None),
    }
}

impl PeerFed {
    /// Federation `f` of `batch` (which has a network, FedUCB's test and
    /// widths: checked by [`super::CpuLinear::new`]) at round 0.
    pub fn new(batch: &LinearBatch, f: usize) -> Self {
        let (m, d) = (batch.m, batch.env.d);
        let Some(net) = batch.network.as_ref() else {
            unreachable!("a peer federation without a network")
        };
        let sync = batch.sync.as_ref();
        let adaptive = sync.and_then(|s| s.adaptive());
        let gamma = net.gamma.max(1);
        let ring = gamma + 1;
        let dd = d * d;
        let width = dd + d;
        let slots = m * gamma;
        let env = LinearEnv::new(&batch.env, &batch.env_keys[f]);
        let (trees, noise, lattice) = slot_trees(batch, f, slots, width);
        let private = trees.is_some();
        let (scale, sigma, widths) = match &batch.beta {
            Width::LogDet { scale, sigma, agents } => (*scale, *sigma, agents[f * m..(f + 1) * m].to_vec()),
            Width::Schedule(_) => (0.0, 0.0, vec![(0.0, 0.0, 0.0); m]),
        };
        let c_shift = match adaptive {
            Some(a) if !a.shifts.is_empty() => a.shifts[f * m..(f + 1) * m].to_vec(),
            _ => vec![0.0; m],
        };
        let mut s = Self {
            streams: (0..m).map(|i| env.agent_streams(i)).collect(),
            ws: Workspace::new(d, batch.env.k),
            vinv: vec![0.0; slots * dd],
            logdet: vec![0.0; slots],
            b: vec![0.0; slots * d],
            s_mat: vec![0.0; slots * dd],
            s_vec: vec![0.0; slots * d],
            logdet_s: vec![0.0; slots],
            u_mat: vec![0.0; slots * dd],
            u_vec: vec![0.0; slots * d],
            vinv_c: if private { vec![0.0; slots * dd] } else { Vec::new() },
            logdet_c: vec![0.0; slots],
            dt: vec![0; slots],
            dirty: vec![true; slots],
            last_broadcast: vec![NEVER; slots],
            heard: vec![false; slots * m],
            prev_release: if private { vec![0.0; slots * width] } else { Vec::new() },
            trees,
            noise,
            lattice,
            c_shift,
            payload: vec![0.0; slots * ring * width],
            payload_round: vec![NEVER; slots * ring],
            request_round: vec![NEVER; m * ring],
            asked: vec![false; slots],
            leaf: vec![0.0; width],
            release: vec![0.0; width],
            tmp: vec![0.0; dd],
            tmp2: vec![0.0; dd],
            since: vec![0; slots],
            requests: Vec::with_capacity(m),
            regret: vec![0.0; m],
            group: 0.0,
            syncs: 0,
            messages: 0,
            cholesky_failures: 0,
            beta_clamps: 0,
            clipped: 0,
            m,
            d,
            env,
            reach: Reach::new(&net.graphs[f], gamma),
            gamma,
            threshold: adaptive.map_or(f64::INFINITY, |a| a.threshold),
            every_round: adaptive.is_some_and(|a| a.every_round),
            refactor_every: batch.refactor_every,
            reward_bound: batch.reward_bound,
            scale,
            sigma,
            widths,
            first_heard: net.first_heard,
            svt: adaptive.and_then(|a| a.svt.as_ref()).map(|r| svt_state(r, f, slots)),
            sinv: vec![0.0; dd],
        };
        for i in 0..m {
            for g in 0..gamma {
                let sl = i * gamma + g;
                linalg::set_scaled_identity(&mut s.s_mat[sl * dd..(sl + 1) * dd], d, net.bases[f * m + i]);
            }
        }
        for sl in 0..slots {
            s.refactor(sl);
        }
        s
    }
    /// Rebuilds slot `sl`'s inverses and log dets from S and U.
    fn refactor(&mut self, sl: usize) {
        let d = self.d;
        let dd = d * d;
        let i = sl / self.gamma;
        for e in 0..dd {
            self.tmp[e] = self.s_mat[sl * dd + e] + self.u_mat[sl * dd + e];
        }
        let (mut ws_m1, mut ws_m2) = (std::mem::take(&mut self.ws.m1), std::mem::take(&mut self.ws.m2));
        match linalg::spd_inverse_with_jitter(
            &self.tmp,
            d,
            &mut self.vinv[sl * dd..(sl + 1) * dd],
            &mut ws_m1,
            &mut ws_m2,
        ) {
            Ok((ld, j)) => {
                self.logdet[sl] = ld;
                if j > 0.0 {
                    self.cholesky_failures += 1;
                }
            }
            Err(_) => self.cholesky_failures += 1,
        }
        self.tmp2.copy_from_slice(&self.s_mat[sl * dd..(sl + 1) * dd]);
        if let Ok(c) = linalg::cholesky_in_place(&mut self.tmp2, d) {
            self.logdet_s[sl] = c;
        }
        if !self.vinv_c.is_empty() {
            for k in 0..d {
                self.tmp[k * d + k] += self.c_shift[i];
            }
            if let Ok((ld, _)) = linalg::spd_inverse_with_jitter(
                &self.tmp,
                d,
                &mut self.vinv_c[sl * dd..(sl + 1) * dd],
                &mut ws_m1,
                &mut ws_m2,
            ) {
                self.logdet_c[sl] = ld;
            }
        }
        if let Some((rule, _, sens)) = self.svt.as_mut() {
            // The epoch's sensitivity: (S + c I)^{-1}, as the kernel builds it.
            for e in 0..dd {
                self.tmp[e] = self.s_mat[sl * dd + e];
            }
            for k in 0..d {
                self.tmp[k * d + k] += self.c_shift[i];
            }
            let exact = matches!(
                linalg::spd_inverse_with_jitter(&self.tmp, d, &mut self.sinv, &mut ws_m1, &mut ws_m2),
                Ok((_, j)) if j == 0.0
            );
            sens[sl] = rule.sensitivity(&self.sinv, exact);
        }
        self.ws.m1 = ws_m1;
        self.ws.m2 = ws_m2;
        for k in 0..d {
            self.b[sl * d + k] = self.s_vec[sl * d + k] + self.u_vec[sl * d + k];
        }
        self.dirty[sl] = false;
        self.since[sl] = 0;
    }

    /// Slot `sl` broadcasts in round t: its local sums become the next
    /// leaf of its tree, the payload (the increment of its noisy prefix sum,
    /// or the exact sums) goes into the ring entry of round t, and the local
    /// sums and Delta restart.
    fn broadcast(&mut self, sl: usize, t: u64) {
        let d = self.d;
        let dd = d * d;
        let w = dd + d;
        self.last_broadcast[sl] = t;
        let r = sl * (self.gamma + 1) + (t % (self.gamma as u64 + 1)) as usize;
        let payload = &mut self.payload[r * w..(r + 1) * w];
        match self.trees.as_mut() {
            Some(trees) => {
                self.leaf[..dd].copy_from_slice(&self.u_mat[sl * dd..(sl + 1) * dd]);
                self.leaf[dd..].copy_from_slice(&self.u_vec[sl * d..(sl + 1) * d]);
                self.release.fill(0.0);
                let (sigma, noise) = self.noise;
                let _ = match &self.lattice {
                    Some(l) => {
                        l.round_leaf(&mut self.leaf, d);
                        trees.contribute(sl, &self.leaf, &mut self.release, |z, key| l.fill(z, d, key))
                    }
                    None => trees.contribute(sl, &self.leaf, &mut self.release, |z, key| noise.fill(z, d, sigma, key)),
                };
                let prev = &mut self.prev_release[sl * w..(sl + 1) * w];
                for ((p, r), o) in payload.iter_mut().zip(&self.release).zip(prev.iter_mut()) {
                    *p = r - *o;
                    *o = *r;
                }
            }
            None => {
                payload[..dd].copy_from_slice(&self.u_mat[sl * dd..(sl + 1) * dd]);
                payload[dd..].copy_from_slice(&self.u_vec[sl * d..(sl + 1) * d]);
            }
        }
        self.payload_round[r] = t;
        self.u_mat[sl * dd..(sl + 1) * dd].fill(0.0);
        self.u_vec[sl * d..(sl + 1) * d].fill(0.0);
        self.dt[sl] = 0;
        self.messages += self.reach.receivers(sl / self.gamma);
    }

    /// Adds the payload in ring entry `r` (of sender j's slot) to slot
    /// `sl`'s S and s; the first payload from j also adds the first-heard
    /// shift to the diagonal.
    fn deliver(&mut self, sl: usize, j: usize, r: usize) {
        let (m, d) = (self.m, self.d);
        let dd = d * d;
        let p = &self.payload[r * (dd + d)..(r + 1) * (dd + d)];
        for (s, v) in self.s_mat[sl * dd..(sl + 1) * dd].iter_mut().zip(&p[..dd]) {
            *s += v;
        }
        for (s, v) in self.s_vec[sl * d..(sl + 1) * d].iter_mut().zip(&p[dd..]) {
            *s += v;
        }
        if !self.heard[sl * m + j] {
            self.heard[sl * m + j] = true;
            for e in 0..d {
                self.s_mat[sl * dd + e * d + e] += self.first_heard;
            }
        }
        self.dirty[sl] = true;
    }

    /// Phase (A) of round t: the broadcasts that requests ask for, then
    /// every slot's deliveries (senders in index order).
    fn exchange(&mut self, t: u64) {
        let (m, gamma) = (self.m, self.gamma);
        let ring = gamma as u64 + 1;
        self.asked.fill(false);
        for i in 0..m {
            for &(j, dist) in self.reach.of(i) {
                let dist = u64::from(dist);
                if dist == 0 || dist > t {
                    continue;
                }
                let s = t - dist;
                if self.request_round[j as usize * (gamma + 1) + (s % ring) as usize] == s {
                    self.asked[i * gamma + (s % gamma as u64) as usize] = true;
                }
            }
        }
        for sl in 0..m * gamma {
            if self.asked[sl] {
                self.broadcast(sl, t);
            }
        }
        for i in 0..m {
            for k in self.reach.start[i]..self.reach.start[i + 1] {
                let (j, dist) = self.reach.list[k];
                let (j, dist) = (j as usize, u64::from(dist));
                if dist > t {
                    continue;
                }
                let s = t - dist;
                for g in 0..gamma {
                    let r = (j * gamma + g) * (gamma + 1) + (s % ring) as usize;
                    if self.payload_round[r] == s {
                        self.deliver(i * gamma + g, j, r);
                    }
                }
            }
        }
    }
}

impl PeerFed {
    /// Round t of every agent (`step` runs each UCB step).
    pub fn round<B: AgentStep + ?Sized>(&mut self, t: u64, step: &B) {
        let (m, d) = (self.m, self.d);
        let dd = d * d;
        let g = (t % self.gamma as u64) as usize;
        self.exchange(t);
        let threshold = self.threshold;
        let every_round = self.every_round;
        let mut regret = 0.0;
        let mut requests = std::mem::take(&mut self.requests);
        requests.clear();
        for i in 0..m {
            let sl = i * self.gamma + g;
            if self.dirty[sl] || self.since[sl] >= self.refactor_every {
                self.refactor(sl);
            }
            let (beta, clamped) = logdet_width(self.scale, self.sigma, self.widths[i], self.logdet[sl]);
            self.beta_clamps += u64::from(clamped);
            let st = step.ucb_step(
                &self.env,
                &mut self.streams[i],
                &mut self.ws,
                AgentState {
                    vinv: &mut self.vinv[sl * dd..(sl + 1) * dd],
                    logdet: Some(&mut self.logdet[sl]),
                    b: &mut self.b[sl * d..(sl + 1) * d],
                },
                beta,
                self.reward_bound,
            );
            self.clipped += u64::from(st.clipped);
            regret += st.regret();
            self.regret[i] += st.regret();
            linalg::add_outer(&mut self.u_mat[sl * dd..(sl + 1) * dd], &self.ws.x, d);
            for (u, x) in self.u_vec[sl * d..(sl + 1) * d].iter_mut().zip(&self.ws.x) {
                *u += st.y * x;
            }
            self.dt[sl] += 1;
            self.since[sl] += 1;
            let stat = if self.vinv_c.is_empty() {
                self.logdet[sl] - self.logdet_s[sl]
            } else {
                let q =
                    linalg::sherman_morrison(&mut self.vinv_c[sl * dd..(sl + 1) * dd], &self.ws.x, &mut self.ws.w, d);
                self.logdet_c[sl] += crate::math::ln_1p(q);
                self.logdet_c[sl] - self.logdet_s[sl]
            };
            let thr = threshold / (self.dt[sl] + 1) as f64;
            let fire = match self.svt.as_mut() {
                Some((rule, agents, sens)) => {
                    let own = t.div_ceil(self.gamma as u64);
                    rule.request(sl, t, own, stat, thr, sens[sl], &mut agents[sl])
                }
                None => every_round || stat > thr,
            };
            if fire {
                requests.push(i);
            }
        }
        let ring = self.gamma + 1;
        let entry = (t % ring as u64) as usize;
        for &i in &requests {
            self.syncs += 1;
            self.messages += self.reach.receivers(i);
            self.request_round[i * ring + entry] = t;
            let sl = i * self.gamma + g;
            if self.last_broadcast[sl] != t {
                self.broadcast(sl, t);
                self.deliver(sl, i, sl * ring + entry);
            }
        }
        self.requests = requests;
        self.group += regret;
    }

    /// The federation's state.
    pub fn observe(&self) -> Observation {
        Observation {
            group_regret: self.group,
            agent_regret_max: self.regret.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            cholesky_failures: self.cholesky_failures,
            clipped_rewards: self.clipped,
            beta_clamps: self.beta_clamps,
            syncs: self.syncs,
            messages: self.messages,
        }
    }
}
