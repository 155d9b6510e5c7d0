//! The linear family's batched operations ([`LinearOps`]) on a
//! [`Launcher`]: all repetitions of a cell step in lockstep, a warp per
//! agent in the cooperative kernel (one thread per agent in the
//! fallback); the algorithm layer's lockstep loop sequences the operations,
//! and each is one or a few kernel launches.
//!
//! [`CudaLinear`] holds a [`LinearBatch`]'s state on the device and
//! reproduces the CPU's operations ([`crate::algo::linear::cpu`])
//! exactly (same streams, same operation order, portable transcendental
//! functions), so under the host emulation its output equals the CPU
//! backend's bit for bit. Supported: every batch the algorithm layer
//! builds (`random`, `linucb`, `independent`, `fedlinucb`,
//! `private_fedlinucb` with every protocol, FedUCB centralized and
//! decentralized) on `linear_sphere`, and on `linear_gap` where the
//! cooperative kernel fits ([`supports`]). FedUCB's rounds, both forms,
//! run with their events inside one launch per chunk (`adaptive`, `peer`;
//! decentralized FedUCB's per-slot buffers are this driver's, gamma rows
//! per agent); the other events are in `events`.

mod adaptive;
mod events;
mod peer;
mod score;
mod supports;
mod vecsum;

use crate::backend::cuda::CudaError;
use crate::backend::cuda::nvrtc::KernelSource;

use self::adaptive::AdaptiveState;
use self::peer::PeerState;
use self::vecsum::VecSumState;
pub use score::score_batch;
pub use supports::supports;
use crate::algo::linear::batch::{LinearBatch, LinearOps, Observation, Release, SyncRule};
use crate::backend::BatchError;
use crate::backend::cuda::launcher::{Arg, DevPtr, Launcher, bytemuck_like, download_slice, upload_slice};
use crate::env::{LinearEnv, LinearEnvKind};
use crate::rng::state_words;

struct Bufs {
    theta: DevPtr,
    lanes: DevPtr,
    rstate: DevPtr,
    rspare: DevPtr,
    rhas: DevPtr,
    vinv: DevPtr,
    logdet: DevPtr,
    b: DevPtr,
    gram: DevPtr,
    bias: DevPtr,
    regret: DevPtr,
    clipped: DevPtr,
    round_regret: DevPtr,
    group: DevPtr,
    failures: DevPtr,
    gbuf: DevPtr,
    work: DevPtr,
    base: DevPtr,
    usyn: DevPtr,
    scratch: DevPtr,
    tsum: DevPtr,
    /// Per agent, the running sum of its tree's live nodes' noise.
    nsum: DevPtr,
    akey: DevPtr,
    ustate: DevPtr,
    pstate: DevPtr,
}

/// The device state of every federation of a batch and the kernels that
/// implement the batched operations on it ([`LinearOps`]). Holds the
/// launcher for its lifetime and frees the device memory when dropped.
pub struct CudaLinear<'a> {
    l: crate::backend::cuda::Lease<'a>,
    bufs: Bufs,
    nf: usize,
    m: usize,
    d: usize,
    /// Agents per block and shared bytes of the cooperative kernel; `None`:
    /// the one-thread-per-agent fallback.
    coop: Option<(usize, usize)>,
    gap: bool,
    random: bool,
    sigma: f64,
    /// The released Gram's diagonal shift ([`crate::algo::linear::batch::SyncRule::diag`]).
    diag: f64,
    /// `fb_sync_reduce`'s mode: 0 exact, 1 tree, 2 cumulative.
    mode: i32,
    /// Dubey & Pentland's node noise (else Zhou & Chowdhury's).
    dubey: bool,
    /// Messages one sync sends.
    messages_per_sync: u64,
    /// FedUCB's data-dependent sync (its events inside `fb_feducb_rounds`).
    adaptive: Option<AdaptiveState>,
    /// The vector-summation protocol (one round per launch).
    vecsum: Option<VecSumState>,
    /// Decentralized FedUCB (per-slot state; its exchange inside
    /// `fb_peer_rounds`).
    peer: Option<PeerState>,
    gstride: usize,
    wstride: usize,
    chunk_max: usize,
    rr: DevPtr,
    betas_dev: DevPtr,
    shape: [Arg; 8],
    group: Vec<f64>,
    regret: Vec<f64>,
    failures: Vec<i32>,
    clipped: Vec<u64>,
    syncs: Vec<u64>,
    clamps: Vec<u64>,
}

/// The sizes [`Bufs::upload`] needs beyond the batch's: slots, the tree
/// width, privacy, and the step kernels' scratch (the one-thread-per-agent
/// kernel's decision-set and work buffers; 8 bytes where the cooperative
/// kernel keeps them in shared memory).
struct BufLayout {
    ns: usize,
    width: usize,
    private: bool,
    gbuf: usize,
    work: usize,
}

/// The host-side initial streams, exactly as the CPU federations build
/// them: theta* per federation, and per agent the 8-lane context
/// generator, the reward stream and the uniform stream.
struct HostStreams {
    theta: Vec<f64>,
    lanes: Vec<u64>,
    rstate: Vec<u64>,
    ustate: Vec<u64>,
}

impl HostStreams {
    fn new(batch: &LinearBatch) -> Self {
        let (nf, m, d) = (batch.federations(), batch.m, batch.env.d);
        let n = nf * m;
        let mut h = HostStreams {
            theta: Vec::with_capacity(nf * d),
            lanes: Vec::with_capacity(n * 32),
            rstate: Vec::with_capacity(n * 4),
            ustate: Vec::with_capacity(n * 4),
        };
        for key in &batch.env_keys {
            let env = LinearEnv::new(&batch.env, key);
            h.theta.extend_from_slice(&env.theta);
            for i in 0..m {
                let (ctx, uni, rew) = env.agent_stream_keys(i);
                h.ustate.extend_from_slice(&state_words(&uni));
                let mut words = [0u64; 32];
                let mut key = ctx.clone();
                key.push(0);
                for lane in 0..8 {
                    *key.last_mut().unwrap_or(&mut 0) = lane as u64;
                    let w = state_words(&key);
                    for (wi, v) in w.iter().enumerate() {
                        words[wi * 8 + lane] = *v;
                    }
                }
                h.lanes.extend_from_slice(&words);
                h.rstate.extend_from_slice(&state_words(&rew));
            }
        }
        h
    }
}

/// Each slot's noise key on the device (zeros when not private). The CPU
/// orders a federation's slots agent-major (i x gamma + g); the device
/// g-major over all agents (g x n + f x m + i).
fn slot_noise_keys(batch: &LinearBatch, ns: usize, private: bool) -> Vec<u64> {
    let (m, n) = (batch.m, batch.federations() * batch.m);
    match (&batch.network, private) {
        (_, false) => vec![0; ns],
        (Some(net), true) => {
            let gamma = net.gamma.max(1);
            (0..ns)
                .map(|s| {
                    let (g, a) = (s / n, s % n);
                    batch.noise_keys[(a / m) * m * gamma + (a % m) * gamma + g]
                })
                .collect()
        }
        (None, true) => batch.noise_keys.clone(),
    }
}

impl Bufs {
    /// Uploads every federation's initial state: the streams, V^{-1} =
    /// I / lambda and log det V = d ln lambda per slot, the server's base
    /// lambda I, zeros elsewhere.
    fn upload(lr: &mut dyn Launcher, batch: &LinearBatch, s: &BufLayout) -> Result<Self, CudaError> {
        let (nf, m, d, lambda) = (batch.federations(), batch.m, batch.env.d, batch.lambda);
        let (n, ns, dd) = (nf * m, s.ns, d * d);
        let host = HostStreams::new(batch);
        let mut vinv0 = vec![0.0f64; dd];
        for i in 0..d {
            vinv0[i * d + i] = 1.0 / lambda;
        }
        let mut base0 = vec![0.0f64; nf * dd];
        for f in 0..nf {
            for i in 0..d {
                base0[f * dd + i * d + i] = lambda;
            }
        }
        let z = |len: usize| vec![0.0f64; len];
        let tree = if s.private { ns * s.width * 8 } else { 8 };
        Ok(Bufs {
            theta: upload_slice(lr, &host.theta)?,
            lanes: upload_slice(lr, &host.lanes)?,
            rstate: upload_slice(lr, &host.rstate)?,
            rspare: upload_slice(lr, &z(n))?,
            rhas: upload_slice(lr, &vec![0i32; n])?,
            vinv: upload_slice(lr, &vinv0.repeat(ns))?,
            logdet: upload_slice(lr, &vec![d as f64 * lambda.ln(); ns])?,
            b: upload_slice(lr, &z(ns * d))?,
            gram: upload_slice(lr, &z(ns * dd))?,
            bias: upload_slice(lr, &z(ns * d))?,
            regret: upload_slice(lr, &z(n))?,
            clipped: upload_slice(lr, &vec![0u64; n])?,
            round_regret: upload_slice(lr, &z(n))?,
            group: upload_slice(lr, &z(nf))?,
            failures: upload_slice(lr, &vec![0i32; nf])?,
            gbuf: lr.alloc_zeroed(s.gbuf)?,
            work: lr.alloc_zeroed(s.work)?,
            base: upload_slice(lr, &base0)?,
            usyn: upload_slice(lr, &z(nf * d))?,
            scratch: lr.alloc_zeroed(n.max(nf) * 3 * dd * 8)?,
            tsum: lr.alloc_zeroed(tree)?,
            nsum: lr.alloc_zeroed(tree)?,
            akey: upload_slice(lr, &slot_noise_keys(batch, ns, s.private))?,
            ustate: upload_slice(lr, &host.ustate)?,
            pstate: match &batch.random_policy {
                Some(keys) => upload_slice(lr, &keys.iter().flat_map(|k| state_words(k)).collect::<Vec<u64>>())?,
                None => lr.alloc_zeroed(8)?,
            },
        })
    }
}

/// The sync release as `fb_sync_reduce`'s mode (0 exact, 1 tree, 2 cumulative,
/// 3 vector summation) and whether the tree's node noise is Dubey's.
fn release_mode(batch: &LinearBatch) -> (i32, bool) {
    match batch.sync.as_ref().map(|s| &s.release) {
        Some(Release::Tree { noise, .. }) => (1, *noise == crate::privacy::tree::NodeNoise::Dubey),
        Some(Release::Cumulative) => (2, false),
        Some(Release::VecSum { .. }) => (3, false),
        _ => (0, false),
    }
}

/// The step kernels' shape arguments: agents, M, d, K, K padded to 8, and
/// the environment's reward rule (raw or clipped reward, noise, bound).
fn shape_args(batch: &LinearBatch) -> Result<[Arg; 8], CudaError> {
    let (n, m, d, k) = (batch.federations() * batch.m, batch.m, batch.env.d, batch.env.k);
    let (reward_raw, noise_std) = match batch.env.kind {
        LinearEnvKind::Sphere {
            reward_on_raw,
            noise_std,
        } => (reward_on_raw, noise_std),
        LinearEnvKind::Gap => (true, 0.0),
    };
    Ok([
        int_arg(n)?,
        int_arg(m)?,
        int_arg(d)?,
        int_arg(k)?,
        int_arg(k.div_ceil(8) * 8)?,
        Arg::I32(i32::from(reward_raw)),
        Arg::F64(noise_std),
        Arg::F64(batch.reward_bound),
    ])
}

impl<'a> CudaLinear<'a> {
    /// Uploads the initial state of every federation of `batch` (exactly as
    /// the CPU builds it: same streams, V = lambda I, b = 0).
    pub fn new(
        l: crate::backend::cuda::LauncherGuard<'a>,
        batch: &LinearBatch,
    ) -> Result<Self, CudaError> {
        // Frees what was allocated if building fails part-way.
        let mut l = crate::backend::cuda::Lease::new(l);
        let shared_limit = l.max_shared_per_block();
        supports(batch, shared_limit)?;
        let (nf, m, d, k) = (batch.federations(), batch.m, batch.env.d, batch.env.k);
        let n = nf * m;
        // Per-slot buffers: gamma slots per agent on a network, else one.
        let ns = n * slots_per_agent(batch);
        let (dd, kp) = (d * d, k.div_ceil(8) * 8);
        let lambda = batch.lambda;
        let sigma = batch.sync.as_ref().map_or(0.0, |s| s.tree_sigma());
        // A tree of noisy nodes, whose noise `noise: false` sets to 0.
        let private = batch.sync.as_ref().is_some_and(SyncRule::tree);
        let width = dd + d;
        let (mode, dubey) = release_mode(batch);
        let gap = matches!(batch.env.kind, LinearEnvKind::Gap);
        let coop = coop_step_shape(gap, d, k, shared_limit);
        let gstride = ((k - d.min(k)) * (d - 1)).max(1);
        let wstride = d * kp + 2 * kp + 3 * d;
        let lr: &mut dyn Launcher = &mut **l;
        let layout = BufLayout {
            ns,
            width,
            private,
            gbuf: if coop.is_some() { 8 } else { n * gstride * 4 },
            work: if coop.is_some() { 8 } else { n * wstride * 8 },
        };
        let bufs = Bufs::upload(lr, batch, &layout)?;
        // A launch of the cooperative kernel runs a chunk of rounds (the
        // lockstep loop ends chunks at every event needing other kernels);
        // the fallback kernel runs one round per launch.
        // FedUCB's events (both forms) run inside its multi-round kernel,
        // with the driver's buffers they share.
        let fed = adaptive::Shared {
            akey: bufs.akey,
            tsum: bufs.tsum,
            nsum: bufs.nsum,
            base: bufs.base,
            usyn: bufs.usyn,
            failures: bufs.failures,
            scratch: bufs.scratch,
            mode,
            dubey,
            sigma,
            diag: batch.sync.as_ref().map_or(lambda, |r| r.diag),
        };
        let mut peer = PeerState::new(lr, batch)?;
        let adaptive = match coop {
            Some((agents, shared)) if batch.adaptive() && peer.is_none() => {
                let a = AdaptiveState::new(lr, batch, agents, &fed)?;
                check_resident(lr, "fb_feducb_rounds", a.blocks, shared)?;
                Some(a)
            }
            _ => None,
        };
        if let (Some(ps), Some((agents, shared))) = (peer.as_mut(), coop) {
            let (blocks, args) = ps.args(lr, nf, m, d, agents, &fed)?;
            check_resident(lr, "fb_peer_rounds", blocks, shared)?;
            ps.fused = Some((blocks, args));
        }
        // Every event of a round (FedUCB's, the vector-summation protocol's
        // randomization) runs inside the cooperative kernel's launch.
        let vecsum = VecSumState::new(lr, batch)?;
        let chunk_max = if coop.is_some() {
            (RR_BUDGET / (n * 8).max(1)).clamp(1, CHUNK_MAX)
        } else {
            1
        };
        let rr = lr.alloc_zeroed(if coop.is_some() { chunk_max * n * 8 } else { 8 })?;
        let betas_dev = lr.alloc_zeroed(chunk_max * 8)?;
        let shape = shape_args(batch)?;
        let linear = Self {
            l,
            bufs,
            nf,
            m,
            d,
            coop,
            gap,
            random: batch.random_policy.is_some(),
            sigma,
            diag: batch.sync.as_ref().map_or(lambda, |r| r.diag),
            mode,
            dubey,
            messages_per_sync: batch.sync.as_ref().map_or(0, |r| r.messages_per_sync),
            adaptive,
            vecsum,
            peer,
            gstride,
            wstride,
            chunk_max,
            rr,
            betas_dev,
            shape,
            group: vec![0.0; nf],
            regret: vec![0.0; n],
            failures: vec![0; nf],
            clipped: vec![0; n],
            syncs: vec![0; nf],
            clamps: vec![0; n],
        };
        Ok(linear)
    }

    /// The step kernels' per-agent state arguments (decentralized FedUCB:
    /// every slot's, slot g's rows from g x n).
    fn agent_state(&self) -> [Arg; 12] {
        let (b, p) = (&self.bufs, Arg::Ptr);
        [
            p(b.theta),
            p(b.lanes),
            p(b.rstate),
            p(b.rspare),
            p(b.rhas),
            p(b.vinv),
            p(b.logdet),
            p(b.b),
            p(b.gram),
            p(b.bias),
            p(b.regret),
            p(b.clipped),
        ]
    }

    fn ops(&mut self, f: impl FnOnce(&mut Self) -> Result<(), CudaError>) -> Result<(), BatchError> {
        Ok(f(self)?)
    }
}

impl CudaLinear<'_> {
    /// One launch of the cooperative kernel: `rounds` rounds from round
    /// `t0` with the widths in `betas_dev` or, adaptive, each agent's own
    /// (FedUCB: `fb_feducb_rounds`, the events inside).
    fn launch_coop(&mut self, t0: u64, agents: usize, shared: usize, rounds: usize) -> Result<(), CudaError> {
        let (n, p) = (self.nf * self.m, Arg::Ptr);
        let ri = i32::try_from(rounds).map_err(|_| CudaError::Unsupported("chunk too long".into()))?;
        let (widths, wscale, wsigma, clamps) = match (&self.adaptive, &self.peer) {
            (Some(a), _) => (a.widths, a.wscale, a.wsigma, a.clamps),
            (None, Some(a)) => (a.widths, a.wscale, a.wsigma, a.clamps),
            (None, None) => (DevPtr(0), 0.0, 0.0, DevPtr(0)),
        };
        let vs = self.vecsum.as_ref().map_or(DevPtr(0), |v| v.args);
        let args = [
            &self.shape[..],
            &[
                Arg::I32(i32::from(self.gap)),
                p(self.bufs.ustate),
                Arg::I32(i32::from(self.random)),
                p(self.bufs.pstate),
                Arg::I32(ri),
                p(self.betas_dev),
                p(widths),
                Arg::F64(wscale),
                Arg::F64(wsigma),
                p(clamps),
                p(vs),
            ],
            &self.agent_state()[..],
            &[p(self.rr)],
        ]
        .concat();
        // FedUCB (both forms): every federation's blocks (by ticket), its
        // events inside, from round t0.
        let fused = match (&self.adaptive, &self.peer) {
            (Some(a), _) => Some(("fb_feducb_rounds", a.blocks, a.args)),
            (None, Some(ps)) => ps.fused.map(|(blocks, at)| ("fb_peer_rounds", blocks, at)),
            (None, None) => None,
        };
        match fused {
            Some((kernel, blocks, at)) => {
                let fed = [int_arg(blocks)?];
                let tail = [p(at), Arg::U64(t0)];
                self.l.launch_grid(
                    kernel,
                    self.nf * blocks,
                    agents * COOP_LANES,
                    shared,
                    &[&fed[..], &args[..], &tail[..]].concat(),
                )?;
            }
            None => self.l.launch_grid(
                "fb_linear_rounds_coop",
                n.div_ceil(agents),
                agents * COOP_LANES,
                shared,
                &[&args[..], &[Arg::U64(t0)]].concat(),
            )?,
        }
        self.l.launch(
            "fb_rounds_reduce",
            self.nf,
            &[
                int_arg(self.nf)?,
                int_arg(self.m)?,
                Arg::I32(ri),
                p(self.rr),
                p(self.bufs.group),
            ],
        )
    }
}

impl LinearOps for CudaLinear<'_> {
    fn max_rounds(&self) -> usize {
        self.chunk_max
    }

    fn rounds(&mut self, t0: u64, count: usize, betas: &[f64]) -> Result<(), BatchError> {
        self.ops(|s| {
            let (n, nf, p) = (s.nf * s.m, s.nf as i32, Arg::Ptr);
            let mi = s.m as i32;
            let state = s.agent_state();
            if s.adaptive.is_none() && s.peer.is_none() && betas.len() != count {
                return Err(CudaError::Unsupported("per-agent confidence widths".into()));
            }
            if count > s.chunk_max {
                return Err(CudaError::Unsupported(format!("{count} rounds in one launch")));
            }
            // The chunk's work, for the watchdog's deadline: its rounds of every agent.
            s.l.expect_work((count as u64).saturating_mul(n as u64));
            match s.coop {
                Some((agents, shared)) => {
                    if s.adaptive.is_none() && s.peer.is_none() {
                        s.l.upload(s.betas_dev, bytemuck_like::as_bytes(betas))?;
                    }
                    s.launch_coop(t0, agents, shared, count)?;
                }
                None => {
                    for &beta in betas {
                        let args = [
                            &s.shape[..],
                            &[Arg::F64(beta)],
                            &state[..],
                            &[
                                p(s.bufs.round_regret),
                                p(s.bufs.gbuf),
                                Arg::I32(s.gstride as i32),
                                p(s.bufs.work),
                                Arg::I32(s.wstride as i32),
                            ],
                        ]
                        .concat();
                        s.l.launch("fb_linear_step", n, &args)?;
                        s.l.launch(
                            "fb_round_reduce",
                            s.nf,
                            &[Arg::I32(nf), Arg::I32(mi), p(s.bufs.round_regret), p(s.bufs.group)],
                        )?;
                    }
                }
            }
            Ok(())
        })
    }

    fn refactor(&mut self) -> Result<(), BatchError> {
        self.ops(|s| s.launch_refactor(DevPtr(0)))
    }

    fn sync(&mut self, index: u64) -> Result<(), BatchError> {
        self.ops(|s| s.launch_sync(DevPtr(0), index, DevPtr(0)))
    }

    fn observe(&mut self, out: &mut Vec<Observation>) -> Result<(), BatchError> {
        self.ops(|s| {
            let lr: &mut dyn Launcher = &mut **s.l;
            download_slice(lr, s.bufs.group, &mut s.group)?;
            download_slice(lr, s.bufs.regret, &mut s.regret)?;
            download_slice(lr, s.bufs.failures, &mut s.failures)?;
            download_slice(lr, s.bufs.clipped, &mut s.clipped)?;
            if let Some(a) = &s.adaptive {
                download_slice(lr, a.leaves, &mut s.syncs)?;
                download_slice(lr, a.clamps, &mut s.clamps)?;
            }
            if let Some(a) = &s.peer {
                download_slice(lr, a.clamps, &mut s.clamps)?;
            }
            Ok(())
        })?;
        let m = self.m;
        out.clear();
        out.extend((0..self.nf).map(|f| {
            Observation {
                group_regret: self.group[f],
                agent_regret_max: self.regret[f * m..(f + 1) * m]
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max),
                cholesky_failures: self.failures[f].max(0) as u64,
                clipped_rewards: self.clipped[f * m..(f + 1) * m].iter().sum(),
                beta_clamps: self.clamps[f * m..(f + 1) * m].iter().sum(),
                syncs: self.syncs[f],
                messages: self.messages_per_sync * self.syncs[f],
            }
        }));
        if let Some(p) = self.peer.as_mut() {
            p.count(&mut **self.l, m, out)?;
        }
        Ok(())
    }
}

/// A federation's blocks of `fb_feducb_rounds` or `fb_peer_rounds` meet at
/// group barriers, so
/// all of them must be resident at once: refused where the device holds
/// fewer (a very large federation on a small device).
fn check_resident(l: &dyn Launcher, kernel: &str, blocks: usize, shared: usize) -> Result<(), CudaError> {
    match l.resident_blocks(kernel, COOP_BLOCK, shared) {
        Some(r) if r < blocks => Err(CudaError::Unsupported(format!(
            "a federation spans {blocks} blocks of {kernel} ({} agents each), but this device holds {r} \
             at once; fewer agents per federation or the CPU backend",
            COOP_BLOCK / COOP_LANES
        ))),
        _ => Ok(()),
    }
}

/// Estimator slots per agent: gamma on a network, else 1.
fn slots_per_agent(batch: &LinearBatch) -> usize {
    batch.network.as_ref().map_or(1, |n| n.gamma.max(1))
}

/// A size as a kernel's `int` argument.
fn int_arg(v: usize) -> Result<Arg, CudaError> {
    i32::try_from(v)
        .map(Arg::I32)
        .map_err(|_| CudaError::Unsupported(format!("size {v} exceeds i32")))
}

/// Agents per block and dynamic shared memory of `fb_linear_rounds_coop` for
/// the environment (`gap`: linear_gap, else linear_sphere) and (d, K): four
/// agents of one warp each (a block of [`COOP_BLOCK`] threads, the size its
/// register budget assumes; small blocks let more of them share an SM),
/// their state in shared memory (the layout is kernels/rounds.cu's
/// fb_coop_agent_doubles); `None` when four do not fit the device's shared
/// memory per block (its opt-in limit, read when it opens; large d): then
/// linear_sphere runs on the one-thread-per-agent `fb_linear_step` and
/// linear_gap is unsupported.
pub fn coop_step_shape(gap: bool, d: usize, k: usize, shared_limit: usize) -> Option<(usize, usize)> {
    let kp = k.div_ceil(8) * 8;
    let fixed = d.min(k);
    let normals = if gap {
        k * d.saturating_sub(1)
    } else {
        (k - fixed) * d.saturating_sub(1)
    };
    let region = if gap { 3 * kp } else { 2 * kp }.max(64);
    let doubles = d * d + 4 * d + 4 + region + normals.div_ceil(2);
    let bytes = doubles * 8;
    let agents = COOP_BLOCK / COOP_LANES;
    (agents * bytes <= shared_limit).then_some((agents, agents * bytes))
}

/// The multi-round kernels' launch shapes at the bench workloads' d = 10,
/// K = 100 on both environments, on a device whose blocks may use
/// `shared_limit` bytes of shared memory (the static occupancy table,
/// kernels/README.md).
pub fn static_shapes(shared_limit: usize) -> Vec<crate::algo::family_entry::StaticShape> {
    let (d, k) = (10, 100);
    let mut out = Vec::new();
    for kernel in ["fb_linear_rounds_coop", "fb_feducb_rounds", "fb_peer_rounds"] {
        for (environment, gap) in [("linear_sphere", false), ("linear_gap", true)] {
            out.push(crate::algo::family_entry::StaticShape {
                kernel,
                environment,
                threads: COOP_BLOCK,
                shared: coop_step_shape(gap, d, k, shared_limit).map(|(_, bytes)| bytes),
            });
        }
    }
    out
}

/// Most rounds one launch of `fb_linear_rounds_coop` runs.
const CHUNK_MAX: usize = 64;
/// Bytes for the per-(round, agent) regrets of a chunk (caps the chunk for
/// very large batches).
const RR_BUDGET: usize = 256 << 20;

/// Threads per block of the cooperative kernels (a multiple of 32; the
/// kernels' FB_COOP_BLOCK, which their register budget assumes).
pub const COOP_BLOCK: usize = 128;
/// Threads per agent of the cooperative kernels (`fb_linear_rounds_coop`,
/// `fb_score_coop`): one warp (the kernels' FB_COOP_LANES).
pub const COOP_LANES: usize = 32;

/// The family's kernel sources, for NVRTC (in this order: each may use the
/// device functions of those before it): the step, sync and scoring
/// kernels, FedUCB's events, the vector-summation protocol, FedUCB on a
/// graph, the multi-round kernels.
pub const KERNELS: &[KernelSource] = &[
    KernelSource {
        file: "linear.cu",
        source: include_str!("../../../../kernels/linear.cu"),
        kernels: &[
            "fb_linear_step",
            "fb_round_reduce",
            "fb_refactor",
            "fb_tree_insert",
            "fb_sync_reduce",
            "fb_sync_factor",
            "fb_sync_broadcast",
            "fb_score_coop",
        ],
        coop: &["fb_score_coop"],
        grouped: &[],
    },
    KernelSource {
        file: "feducb.cu",
        source: include_str!("../../../../kernels/feducb.cu"),
        kernels: &[],
        coop: &[],
        grouped: &[],
    },
    KernelSource {
        file: "vecsum.cu",
        source: include_str!("../../../../kernels/vecsum.cu"),
        kernels: &["fb_vecsum_close"],
        coop: &[],
        grouped: &[],
    },
    KernelSource {
        file: "peer.cu",
        source: include_str!("../../../../kernels/peer.cu"),
        kernels: &[],
        coop: &[],
        grouped: &[],
    },
    KernelSource {
        file: "rounds.cu",
        source: include_str!("../../../../kernels/rounds.cu"),
        kernels: &["fb_linear_rounds_coop", "fb_feducb_rounds", "fb_peer_rounds", "fb_rounds_reduce"],
        coop: &["fb_linear_rounds_coop", "fb_feducb_rounds", "fb_peer_rounds"],
        grouped: &["fb_feducb_rounds", "fb_peer_rounds"],
    },
];

#[cfg(test)]
mod tests {
    /// The kernels' block shape is the host's: the emulation ignores
    /// `__launch_bounds__`, so a mismatch would only show on a device (a
    /// launch larger than the budgeted block fails there).
    #[test]
    fn the_cooperative_kernels_shape_constants_match_the_host() {
        let source = crate::algo::family::kernel_sources()
            .iter()
            .filter(|s| s.file == "linear.cu" || s.file == "rounds.cu")
            .map(|s| s.source)
            .collect::<String>();
        assert!(source.contains(&format!("#define FB_COOP_LANES {}\n", super::COOP_LANES)));
        assert!(source.contains(&format!("#define FB_COOP_BLOCK {}\n", super::COOP_BLOCK)));
    }
}
