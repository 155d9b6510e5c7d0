//! A FedUCB federation on a graph (Dubey & Pentland, Section 4.2; the
//! algorithm's description is `algo::linear::feducb_decentralized`), as the
//! CPU runs it for a [`LinearBatch`] with a [`crate::backend::Network`]:
//! gamma estimator slots per agent (round t plays slot t mod gamma), the
//! determinant test per slot, requests and broadcasts that travel one hop
//! per round up to gamma hops, each slot's PRIVATIZER tree (a broadcast
//! sends the increment of the slot's noisy prefix sum, or its exact local
//! sums without privacy), and the per-slot refactorization (when the slot's
//! S changed or after `refactor_every` rank-1 updates).
//!
//! Counters: `syncs` counts requests, `messages` counts deliveries
//! (requests and broadcasts, one per receiver).

use crate::backend::{AgentState, Backend, LinearBatch, Observation, Release, Width, Workspace, logdet_width};
use crate::env::{AgentStreams, LinearEnv};
use crate::graph::Graph;
use crate::linalg;
use crate::privacy::tree::{AgentTrees, NodeNoise};

/// A pending delivery.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Delivery {
    arrive: u64,
    to: usize,
    slot: usize,
    from: usize,
    /// Index of the payload in the pool (None for a request).
    payload: Option<usize>,
}

/// A decentralized FedUCB federation.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PeerFed {
    m: usize,
    d: usize,
    env: LinearEnv,
    graph: Graph,
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
    queue: Vec<Delivery>,
    pool: Vec<Vec<f64>>,
    pool_refs: Vec<usize>,
    free: Vec<usize>,
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
}

impl PeerFed {
    /// Federation `f` of `batch` (which has a network, FedUCB's test and
    /// widths: checked by [`super::lockstep::CpuLinear::new`]) at round 0.
    pub fn new(batch: &LinearBatch, f: usize) -> Self {
        let (m, d) = (batch.m, batch.env.d);
        let Some(net) = batch.network.as_ref() else {
            unreachable!("a peer federation without a network")
        };
        let sync = batch.sync.as_ref();
        let adaptive = sync.and_then(|s| s.adaptive());
        let gamma = net.gamma.max(1);
        let dd = d * d;
        let width = dd + d;
        let slots = m * gamma;
        let env = LinearEnv::new(&batch.env, &batch.env_keys[f]);
        let (trees, noise) = match sync.map(|s| &s.release) {
            Some(Release::Tree { sigma, levels, noise }) => (
                Some(AgentTrees::with_keys(
                    batch.noise_keys[f * slots..(f + 1) * slots].to_vec(),
                    width,
                    *levels,
                )),
                (*sigma, *noise),
            ),
            _ => (None, (0.0, NodeNoise::Dubey)),
        };
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
            last_broadcast: vec![0; slots],
            heard: vec![false; slots * m],
            prev_release: if private { vec![0.0; slots * width] } else { Vec::new() },
            trees,
            noise,
            c_shift,
            queue: Vec::new(),
            pool: Vec::new(),
            pool_refs: Vec::new(),
            free: Vec::new(),
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
            graph: net.graphs[f].clone(),
            gamma,
            threshold: adaptive.map_or(f64::INFINITY, |a| a.threshold),
            every_round: adaptive.is_some_and(|a| a.every_round),
            refactor_every: batch.refactor_every,
            reward_bound: batch.reward_bound,
            scale,
            sigma,
            widths,
            first_heard: net.first_heard,
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
        self.ws.m1 = ws_m1;
        self.ws.m2 = ws_m2;
        for k in 0..d {
            self.b[sl * d + k] = self.s_vec[sl * d + k] + self.u_vec[sl * d + k];
        }
        self.dirty[sl] = false;
        self.since[sl] = 0;
    }

    fn alloc_payload(&mut self) -> usize {
        let w = self.leaf.len();
        match self.free.pop() {
            Some(k) => k,
            None => {
                self.pool.push(vec![0.0; w]);
                self.pool_refs.push(0);
                self.pool.len() - 1
            }
        }
    }

    /// Agent j broadcasts slot g in round t.
    fn broadcast(&mut self, j: usize, g: usize, t: u64) {
        let (m, d) = (self.m, self.d);
        let dd = d * d;
        let sl = j * self.gamma + g;
        if self.last_broadcast[sl] == t {
            return;
        }
        self.last_broadcast[sl] = t;
        self.leaf[..dd].copy_from_slice(&self.u_mat[sl * dd..(sl + 1) * dd]);
        self.leaf[dd..].copy_from_slice(&self.u_vec[sl * d..(sl + 1) * d]);
        let k = self.alloc_payload();
        let mut payload = std::mem::take(&mut self.pool[k]);
        match self.trees.as_mut() {
            Some(trees) => {
                self.release.fill(0.0);
                let (sigma, noise) = self.noise;
                let _ = trees.contribute(sl, &self.leaf, &mut self.release, |z, key| noise.fill(z, d, sigma, key));
                let w = self.release.len();
                let prev = &mut self.prev_release[sl * w..(sl + 1) * w];
                for ((p, r), o) in payload.iter_mut().zip(&self.release).zip(prev.iter_mut()) {
                    *p = r - *o;
                    *o = *r;
                }
            }
            None => payload.copy_from_slice(&self.leaf),
        }
        self.pool[k] = payload;
        self.u_mat[sl * dd..(sl + 1) * dd].fill(0.0);
        self.u_vec[sl * d..(sl + 1) * d].fill(0.0);
        self.dt[sl] = 0;
        let mut receivers = 0;
        for i in 0..m {
            let dist = self.graph.dist(i, j) as usize;
            if dist > self.gamma {
                continue;
            }
            if i == j {
                self.deliver(i, g, j, k);
            } else {
                receivers += 1;
                self.queue.push(Delivery {
                    arrive: t + dist as u64,
                    to: i,
                    slot: g,
                    from: j,
                    payload: Some(k),
                });
            }
        }
        self.pool_refs[k] += receivers;
        if self.pool_refs[k] == 0 {
            self.free.push(k);
        }
        self.messages += receivers as u64;
    }

    /// Applies a payload from `from` to slot (i, g).
    fn deliver(&mut self, i: usize, g: usize, from: usize, k: usize) {
        let (m, d) = (self.m, self.d);
        let dd = d * d;
        let sl = i * self.gamma + g;
        let p = &self.pool[k];
        for (s, v) in self.s_mat[sl * dd..(sl + 1) * dd].iter_mut().zip(&p[..dd]) {
            *s += v;
        }
        for (s, v) in self.s_vec[sl * d..(sl + 1) * d].iter_mut().zip(&p[dd..]) {
            *s += v;
        }
        if !self.heard[sl * m + from] {
            self.heard[sl * m + from] = true;
            let add = self.first_heard;
            for e in 0..d {
                self.s_mat[sl * dd + e * d + e] += add;
            }
        }
        self.dirty[sl] = true;
    }

    fn process_queue(&mut self, t: u64) {
        let mut idx = 0;
        while idx < self.queue.len() {
            let q = self.queue[idx];
            if q.arrive > t {
                idx += 1;
                continue;
            }
            self.queue.swap_remove(idx);
            match q.payload {
                Some(k) => {
                    self.deliver(q.to, q.slot, q.from, k);
                    self.pool_refs[k] -= 1;
                    if self.pool_refs[k] == 0 {
                        self.free.push(k);
                    }
                }
                None => self.broadcast(q.to, q.slot, t),
            }
        }
    }
}

impl PeerFed {
    /// Round t of every agent (`step` runs each UCB step).
    pub fn round<B: Backend + ?Sized>(&mut self, t: u64, step: &B) {
        let (m, d) = (self.m, self.d);
        let dd = d * d;
        let g = (t % self.gamma as u64) as usize;
        // Requests and messages due this round; deliveries in arrival order
        // of the queue are order-independent sums except for rounding, and the
        // queue order is deterministic.
        self.process_queue(t);
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
                    logdet: &mut self.logdet[sl],
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
            if every_round || stat > threshold / (self.dt[sl] + 1) as f64 {
                requests.push(i);
            }
        }
        for &i in &requests {
            self.syncs += 1;
            self.broadcast(i, g, t);
            for j in 0..m {
                let dist = self.graph.dist(i, j) as usize;
                if j != i && dist <= self.gamma {
                    self.messages += 1;
                    self.queue.push(Delivery {
                        arrive: t + dist as u64,
                        to: j,
                        slot: g,
                        from: i,
                        payload: None,
                    });
                }
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
