//! The gossip family's batched operations ([`crate::algo::rounds::RoundOps`]) on a [`Launcher`]:
//! `fb_gossip_rounds` (kernels/gossip.cu) runs chunks of rounds with one
//! block per federation and one thread per agent; the state stays on the
//! device between launches and is read back only to observe. The initial
//! state is built from the same keys as the CPU's
//! ([`crate::algo::gossip::cpu::CpuGossip`]), and under the host emulation
//! the output equals the CPU's bit for bit.

use super::batch::{FederationState, GossipBatch, GossipObservation, GossipPolicy, observation};
use crate::backend::BatchError;
use crate::backend::cuda::launcher::{Arg, DevPtr, Launcher, download_slice, upload_slice};
use crate::backend::cuda::{CudaError, i32_of};
use crate::env::mab::MabEnv;
use crate::rng::state_words;

/// Most rounds one launch runs (bounds a launch's duration).
const CHUNK: u64 = 4096;

/// Device buffers.
struct Bufs {
    local_means: DevPtr,
    means: DevPtr,
    best: DevPtr,
    rec_total: DevPtr,
    rec_ones: DevPtr,
    adj_off: DevPtr,
    adj: DevPtr,
    edges: DevPtr,
    edge_off: DevPtr,
    nstate: DevPtr,
    nspare: DevPtr,
    nhas: DevPtr,
    estate: DevPtr,
    nkeys: DevPtr,
    cnt: DevPtr,
    nt: DevPtr,
    ntp: DevPtr,
    sum: DevPtr,
    pssum: DevPtr,
    psmask: DevPtr,
    /// The lattice partial sums (`sampler: discrete`): exact sums and
    /// live-block noise in steps (i64 as u64 words).
    lsum: DevPtr,
    lnoise: DevPtr,
    xbar: DevPtr,
    xold: DevPtr,
    theta: DevPtr,
    regret: DevPtr,
    group: DevPtr,
    forced: DevPtr,
    clipped: DevPtr,
    rr: DevPtr,
}

/// The device state of every federation of a gossip batch.
pub struct CudaGossip<'a> {
    l: crate::backend::cuda::Lease<'a>,
    b: Bufs,
    envs: Vec<MabEnv>,
    policy: GossipPolicy,
    scalars: [Arg; 13],
    /// `fb_gossip_rounds`, or `fb_gossip_rounds_lattice` under `sampler:
    /// discrete` (the lattice partial sums, compiled apart so that the
    /// float kernel keeps its registers).
    kernel: &'static str,
    records: bool,
    noise_std: f64,
    block: usize,
    // Host copies for observations.
    theta: Vec<f64>,
    xbar: Vec<f64>,
    regret: Vec<f64>,
    group: Vec<f64>,
    forced: Vec<u64>,
    clipped: Vec<u64>,
}

/// Whether the kernel can run this batch: federations of one shape, at most
/// 1024 agents (one block).
pub fn supports(batch: &GossipBatch) -> Result<(), CudaError> {
    let Some(first) = batch.envs.first() else {
        return Err(CudaError::Unsupported("an empty batch".into()));
    };
    let (n, m) = (first.spec.agents, first.spec.arms);
    if batch.envs.iter().any(|e| e.spec.agents != n || e.spec.arms != m) || batch.graphs.len() != batch.federations() {
        return Err(CudaError::Unsupported("federations of different shapes".into()));
    }
    if n > 1024 {
        return Err(CudaError::Unsupported(format!(
            "{n} agents exceed one block's 1024 threads"
        )));
    }
    Ok(())
}

/// The host-side initial state of every federation of a batch: the arms'
/// means (and a data environment's records), each graph's adjacency and
/// edges (offsets per federation), and the noise and edge streams.
struct Host {
    local_means: Vec<f64>,
    means: Vec<f64>,
    best: Vec<f64>,
    rec_total: Vec<u64>,
    rec_ones: Vec<u64>,
    adj_off: Vec<i32>,
    adj: Vec<i32>,
    edges: Vec<i32>,
    edge_off: Vec<i32>,
    nstate: Vec<u64>,
    estate: Vec<u64>,
}

impl Host {
    fn new(batch: &GossipBatch, n: usize, m: usize) -> Result<Self, CudaError> {
        let nf = batch.federations();
        let mut h = Host {
            local_means: Vec::with_capacity(nf * n * m),
            means: Vec::with_capacity(nf * m),
            best: Vec::with_capacity(nf),
            rec_total: Vec::new(),
            rec_ones: Vec::new(),
            adj_off: Vec::new(),
            adj: Vec::new(),
            edges: Vec::new(),
            edge_off: vec![0i32],
            nstate: Vec::with_capacity(nf * n * 4),
            estate: Vec::with_capacity(nf * 4),
        };
        for (f, (env, g)) in batch.envs.iter().zip(&batch.graphs).enumerate() {
            h.local_means.extend_from_slice(&env.local_means);
            h.means.extend_from_slice(&env.means);
            h.best.push(env.best);
            if let Some(r) = &env.spec.records {
                h.rec_total.extend_from_slice(&r.total);
                h.rec_ones.extend_from_slice(&r.ones);
            }
            for i in 0..n {
                h.adj_off.push(i32_of(h.adj.len())?);
                for &j in g.neighbors(i) {
                    h.adj.push(i32_of(j)?);
                }
                h.nstate.extend_from_slice(&state_words(&env.noise_key(i)));
            }
            h.adj_off.push(i32_of(h.adj.len())?);
            for (u, v) in g.edges() {
                h.edges.push(i32_of(u)?);
                h.edges.push(i32_of(v)?);
            }
            h.edge_off.push(i32_of(h.edges.len() / 2)?);
            h.estate.extend_from_slice(&state_words(&batch.edge_keys[f]));
        }
        Ok(h)
    }
}

/// The round kernel's scalar arguments: N, arms, the policy, privacy and
/// its constants (neutral values when not private).
fn scalars(batch: &GossipBatch, n: usize, m: usize) -> Result<[Arg; 13], CudaError> {
    let p = batch.privacy.as_ref();
    let lattice = p.and_then(|p| p.discrete);
    let policy = match batch.policy {
        GossipPolicy::Gossip => 0,
        GossipPolicy::Local => 1,
        GossipPolicy::Oracle => 2,
    };
    Ok([
        Arg::I32(i32_of(n)?),
        Arg::I32(i32_of(m)?),
        Arg::I32(policy),
        Arg::I32(i32::from(p.is_some())),
        Arg::F64(batch.confidence_scale),
        Arg::F64(p.map_or(0.0, |p| p.c_priv)),
        Arg::F64(p.map_or(0.0, |p| p.log2_horizon)),
        Arg::F64(p.map_or(1.0, |p| p.epsilon)),
        Arg::F64(p.map_or(0.0, |p| p.scale)),
        Arg::F64(p.map_or(0.0, |p| p.lo)),
        Arg::F64(p.map_or(0.0, |p| p.hi)),
        // sampler: discrete's rate s / t (`fb_gossip_rounds_lattice`).
        Arg::U64(lattice.map_or(0, |d| d.s)),
        Arg::U64(lattice.map_or(0, |d| d.t)),
    ])
}

impl<'a> CudaGossip<'a> {
    /// Uploads the initial state of every federation of `batch`.
    pub fn new(
        l: crate::backend::cuda::LauncherGuard<'a>,
        batch: &GossipBatch,
    ) -> Result<Self, CudaError> {
        // Frees what was allocated if building fails part-way.
        let mut l = crate::backend::cuda::Lease::new(l);
        supports(batch)?;
        let nf = batch.federations();
        let Some(first) = batch.envs.first() else {
            return Err(CudaError::Unsupported("an empty batch".into()));
        };
        let (n, m) = (first.spec.agents, first.spec.arms);
        let records = first.spec.records.is_some();
        let h = Host::new(batch, n, m)?;
        let nkeys: Vec<u64> = match &batch.privacy {
            Some(p) if p.noise_keys.len() == nf * n => p.noise_keys.clone(),
            Some(_) => return Err(CudaError::Unsupported("one noise key per agent".into())),
            None => vec![0; nf * n],
        };
        let lr: &mut dyn Launcher = &mut **l;
        let (nnm, nn) = (nf * n * m, nf * n);
        let zf = |len: usize| vec![0.0f64; len];
        let zu = |len: usize| vec![0u64; len];
        let b = Bufs {
            local_means: upload_slice(lr, &h.local_means)?,
            means: upload_slice(lr, &h.means)?,
            best: upload_slice(lr, &h.best)?,
            rec_total: upload_slice(lr, &h.rec_total)?,
            rec_ones: upload_slice(lr, &h.rec_ones)?,
            adj_off: upload_slice(lr, &h.adj_off)?,
            adj: upload_slice(lr, &h.adj)?,
            edges: upload_slice(lr, &h.edges)?,
            edge_off: upload_slice(lr, &h.edge_off)?,
            nstate: upload_slice(lr, &h.nstate)?,
            nspare: upload_slice(lr, &zf(nn))?,
            nhas: upload_slice(lr, &vec![0i32; nn])?,
            estate: upload_slice(lr, &h.estate)?,
            nkeys: upload_slice(lr, &nkeys)?,
            cnt: upload_slice(lr, &zu(nnm))?,
            nt: upload_slice(lr, &zu(nnm))?,
            ntp: upload_slice(lr, &zu(nnm))?,
            sum: upload_slice(lr, &zf(nnm))?,
            pssum: upload_slice(lr, &zf(nnm))?,
            psmask: upload_slice(lr, &zu(nnm))?,
            lsum: upload_slice(lr, &zu(nnm))?,
            lnoise: upload_slice(lr, &zu(nnm))?,
            xbar: upload_slice(lr, &zf(nnm))?,
            xold: upload_slice(lr, &zf(nnm))?,
            theta: upload_slice(lr, &zf(nnm))?,
            regret: upload_slice(lr, &zf(nn))?,
            group: upload_slice(lr, &zf(nf))?,
            forced: upload_slice(lr, &zu(nn))?,
            clipped: upload_slice(lr, &zu(nn))?,
            rr: upload_slice(lr, &zf(nn))?,
        };
        let scalars = scalars(batch, n, m)?;
        Ok(Self {
            l,
            b,
            envs: batch.envs.clone(),
            policy: batch.policy,
            scalars,
            kernel: if batch.privacy.as_ref().is_some_and(|p| p.discrete.is_some()) {
                "fb_gossip_rounds_lattice"
            } else {
                "fb_gossip_rounds"
            },
            records,
            noise_std: first.spec.noise_std,
            block: n.div_ceil(32) * 32,
            theta: zf(nnm),
            xbar: zf(nnm),
            regret: zf(nn),
            group: zf(nf),
            forced: zu(nn),
            clipped: zu(nn),
        })
    }

    fn launch(&mut self, t0: u64, count: u64) -> Result<(), CudaError> {
        // The chunk's work, for the watchdog's deadline: its rounds of every agent.
        self.l.expect_work(count.saturating_mul(self.regret.len() as u64));
        let (b, p) = (&self.b, Arg::Ptr);
        let args = [
            &self.scalars[..],
            &[
                Arg::U64(t0),
                Arg::I32(i32::try_from(count).map_err(|_| CudaError::Unsupported("chunk too long".into()))?),
                p(b.local_means),
                p(b.means),
                p(b.best),
                Arg::I32(i32::from(self.records)),
                p(b.rec_total),
                p(b.rec_ones),
                Arg::F64(self.noise_std),
                p(b.adj_off),
                p(b.adj),
                p(b.edges),
                p(b.edge_off),
                p(b.nstate),
                p(b.nspare),
                p(b.nhas),
                p(b.estate),
                p(b.nkeys),
                p(b.cnt),
                p(b.nt),
                p(b.ntp),
                p(b.sum),
                p(b.pssum),
                p(b.psmask),
                p(b.lsum),
                p(b.lnoise),
                p(b.xbar),
                p(b.xold),
                p(b.theta),
                p(b.regret),
                p(b.group),
                p(b.forced),
                p(b.clipped),
                p(b.rr),
            ],
        ]
        .concat();
        self.l
            .launch_grid(self.kernel, self.envs.len(), self.block, 0, &args)
    }
}

impl crate::algo::rounds::RoundOps for CudaGossip<'_> {
    type Obs = GossipObservation;

    fn rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError> {
        Ok(crate::backend::cuda::in_chunks(t0, count, CHUNK, |t, c| self.launch(t, c))?)
    }

    fn observe(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError> {
        let lr: &mut dyn Launcher = &mut **self.l;
        let b = &self.b;
        download_slice(lr, b.theta, &mut self.theta)?;
        download_slice(lr, b.xbar, &mut self.xbar)?;
        download_slice(lr, b.regret, &mut self.regret)?;
        download_slice(lr, b.group, &mut self.group)?;
        download_slice(lr, b.forced, &mut self.forced)?;
        download_slice(lr, b.clipped, &mut self.clipped)?;
        out.clear();
        for (f, env) in self.envs.iter().enumerate() {
            let (n, m) = (env.spec.agents, env.spec.arms);
            let (rows, agents) = (f * n * m..(f + 1) * n * m, f * n..(f + 1) * n);
            out.push(observation(
                self.policy,
                env,
                &FederationState {
                    theta: &self.theta[rows.clone()],
                    xbar: &self.xbar[rows],
                    regret: &self.regret[agents.clone()],
                    group: self.group[f],
                    forced: self.forced[agents.clone()].iter().sum(),
                    clipped: self.clipped[agents].iter().sum(),
                },
            ));
        }
        Ok(())
    }
}

/// The family's kernel source, for NVRTC.
pub const KERNELS: &[crate::backend::cuda::nvrtc::KernelSource] = &[crate::backend::cuda::nvrtc::KernelSource {
    file: "gossip.cu",
    source: include_str!("../../../kernels/gossip.cu"),
    kernels: &["fb_gossip_rounds", "fb_gossip_rounds_lattice"],
    coop: &["fb_gossip_rounds", "fb_gossip_rounds_lattice"],
    grouped: &[],
}];
