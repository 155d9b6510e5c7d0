//! `feducb_decentralized`: Dubey & Pentland (NeurIPS 2020), Section 4.2,
//! FedUCB on a peer-to-peer graph with gamma-hop delayed messages.
//!
//! The paper's appendix (with the full pseudocode) is not in the seeds; this
//! is the project's reconstruction of Section 4.2, following ALGORITHMS.md 1.3:
//!
//! * Agents sit on a connected graph G; a message moves one hop per round and
//!   is dropped after gamma hops, so agent v hears v' with delay dist(v, v')
//!   when that is at most gamma. N_i = the agents within gamma hops of i
//!   (itself included), n_i = |N_i|.
//! * Each agent keeps gamma estimator slots; in round t it plays with slot
//!   g = t mod gamma (round-robin subsampling) and its observation enters
//!   that slot's local sums (U_{i,g}, u_{i,g}).
//! * Slot (i, g) plays with V = S_{i,g} + U_{i,g}, theta_hat = V^{-1}(s + u),
//!   and beta as in centralized FedUCB with M replaced by n_i; S starts at
//!   n_i rho_min I, s at 0.
//! * Sync request: after playing, log det(V + x x^T + n_i (rho_max - rho_min) I)
//!   minus log det(S_{i,g}) > D / (Delta_{i,g} + 1), with Delta the rounds since the
//!   slot last synced (D as in 1.2). The requester broadcasts its slot at once
//!   and the request travels to N_i; an agent receiving it (delay dist)
//!   broadcasts its own slot g (at most once per round and slot).
//! * A broadcast of slot (j, g) inserts (U_{j,g}, u_{j,g}) as the next leaf
//!   of that slot's PRIVATIZER tree (noise as in 1.2, levels
//!   m = 1 + ceil(log2(T / gamma))) and sends the increment of its noisy
//!   prefix sum (exact sums when not private) to every agent within gamma
//!   hops; the sender applies it at once, the others after dist(i, j) rounds.
//!   The first message a slot receives from a sender also adds
//!   (shift - rho_min) I, so that once every neighbour has spoken
//!   S = n_i shift I + sum of released sums, as in the centralized algorithm.
//!   The sender's U, u and Delta reset.
//! * Counters: `sync_rounds` counts requests, `messages` counts deliveries
//!   (requests and broadcasts, one per receiver).
//!
//! Trees are sized for one leaf per round (capacity 1 + ceil(log2 T) levels)
//! since a slot can be asked to broadcast in any round; the noise uses the
//! spec's m = 1 + ceil(log2(T / gamma)) levels.

use super::feducb::{DubeyConstants, dubey_noise};
use super::{LinearConfig, SyncRegime};
use crate::algo::{Counters, Federation};
use crate::backend::{AgentState, Backend, Workspace};
use crate::env::{AgentStreams, LinearEnv};
use crate::graph::Graph;
use crate::linalg;
use crate::privacy::tree::AgentTrees;

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
pub struct FedUcbDecentralized {
    cfg: LinearConfig,
    env: LinearEnv,
    graph: Graph,
    gamma: usize,
    consts: DubeyConstants,
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
    n_i: Vec<f64>,
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
    counters: Counters,
}

impl FedUcbDecentralized {
    /// New federation on `graph`.
    pub fn new(cfg: &LinearConfig, env: LinearEnv, graph: Graph, algo_key: &[u64]) -> Self {
        let (m, d) = (cfg.m, cfg.env.d);
        let gamma = cfg.gamma.max(1);
        let dd = d * d;
        let width = dd + d;
        let slots = m * gamma;
        let t_eff = cfg.horizon.div_ceil(gamma as u64).max(1);
        let noise_levels = 1 + (t_eff as f64).log2().ceil() as usize;
        let consts = DubeyConstants::with_levels(cfg, noise_levels);
        let private = cfg.privacy.is_some();
        let cap_levels = 1 + (cfg.horizon.max(1) as f64).log2().ceil() as usize;
        let n_i: Vec<f64> = (0..m)
            .map(|i| (0..m).filter(|&j| graph.dist(i, j) as usize <= gamma).count() as f64)
            .collect();
        let c_shift: Vec<f64> = n_i.iter().map(|n| n * (consts.rho_max - consts.rho_min)).collect();
        let mut s = Self {
            streams: (0..m).map(|i| env.agent_streams(i)).collect(),
            ws: Workspace::new(d, cfg.env.k),
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
            trees: private.then(|| AgentTrees::new(slots, width, cap_levels, algo_key)),
            n_i,
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
            counters: Counters::default(),
            cfg: cfg.clone(),
            env,
            graph,
            gamma,
            consts,
        };
        for i in 0..m {
            for g in 0..gamma {
                let sl = i * gamma + g;
                linalg::set_scaled_identity(&mut s.s_mat[sl * dd..(sl + 1) * dd], d, s.n_i[i] * consts.rho_min);
            }
        }
        for sl in 0..slots {
            s.refactor(sl);
        }
        s
    }

    /// Rebuilds slot `sl`'s inverses and log dets from S and U.
    fn refactor(&mut self, sl: usize) {
        let d = self.cfg.env.d;
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
                    self.counters.cholesky_failures += 1;
                }
            }
            Err(_) => self.counters.cholesky_failures += 1,
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
        let (m, d) = (self.cfg.m, self.cfg.env.d);
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
                let sigma = self.consts.sigma_n;
                let _ = trees.contribute(sl, &self.leaf, &mut self.release, |z, key| {
                    dubey_noise(z, d, sigma, key)
                });
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
        self.counters.messages += receivers as u64;
    }

    /// Applies a payload from `from` to slot (i, g).
    fn deliver(&mut self, i: usize, g: usize, from: usize, k: usize) {
        let (m, d) = (self.cfg.m, self.cfg.env.d);
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
            let add = self.consts.shift - self.consts.rho_min;
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

impl Federation for FedUcbDecentralized {
    fn round(&mut self, t: u64, backend: &dyn Backend) -> f64 {
        let (m, d) = (self.cfg.m, self.cfg.env.d);
        let dd = d * d;
        let g = (t % self.gamma as u64) as usize;
        // Requests and messages due this round; deliveries in arrival order
        // of the queue are order-independent sums except for rounding, and the
        // queue order is deterministic.
        self.process_queue(t);
        let c = self.consts;
        let threshold = c.threshold;
        let every_round = matches!(self.cfg.sync, SyncRegime::EveryRound);
        let mut regret = 0.0;
        let mut requests = std::mem::take(&mut self.requests);
        requests.clear();
        for i in 0..m {
            let sl = i * self.gamma + g;
            if self.dirty[sl] || self.since[sl] >= self.cfg.refactor_every {
                self.refactor(sl);
            }
            let n = self.n_i[i];
            let arg = 2.0 * (2.0 / self.cfg.alpha).ln() - d as f64 * (n * c.rho_min).ln() + self.logdet[sl];
            if arg < 0.0 {
                self.counters.beta_clamps += 1;
            }
            let beta = self.cfg.confidence_scale
                * (self.cfg.subgaussian * arg.max(0.0).sqrt()
                    + self.cfg.s_bound * (n * c.rho_max).sqrt()
                    + c.kappa * n.sqrt());
            let st = backend.ucb_step(
                &self.env,
                &mut self.streams[i],
                &mut self.ws,
                AgentState {
                    vinv: &mut self.vinv[sl * dd..(sl + 1) * dd],
                    logdet: &mut self.logdet[sl],
                    b: &mut self.b[sl * d..(sl + 1) * d],
                },
                beta,
                self.cfg.reward_bound(),
            );
            self.counters.clipped_rewards += u64::from(st.clipped);
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
            self.counters.sync_rounds += 1;
            self.broadcast(i, g, t);
            for j in 0..m {
                let dist = self.graph.dist(i, j) as usize;
                if j != i && dist <= self.gamma {
                    self.counters.messages += 1;
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
        regret
    }

    fn counters(&self) -> Counters {
        self.counters
    }

    fn agent_regret(&self) -> &[f64] {
        &self.regret
    }
}
