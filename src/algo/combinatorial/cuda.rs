//! The combinatorial family's batched operations ([`crate::algo::rounds::RoundOps`]) on a
//! [`Launcher`]: `fb_comb_rounds` (kernels/combinatorial.cu) runs chunks of
//! rounds with one block per federation, its threads striding over the
//! federation's (agent, producer) elements; the state stays on the device
//! between launches and is read back only to observe. Instances, benchmarks
//! ([`Benchmarks`]), keys and P-FCB's noise scales are built on the host
//! exactly as the CPU's ([`crate::algo::combinatorial::cpu::CpuComb`]),
//! and under the host emulation the output equals the CPU's bit for bit.
//! Only the greedy oracle runs here (`oracle: exact` is a CPU-only option
//! for small studies).

use super::batch::{Benchmarks, CombBatch, CombObservation, CombPolicy};
use crate::backend::BatchError;
use crate::backend::cuda::launcher::{Arg, DevPtr, Launcher, download_slice, upload_slice};
use crate::backend::cuda::{CudaError, i32_of};
use crate::env::procurement::Oracle;

/// Most rounds one launch runs (bounds a launch's duration).
const CHUNK: u64 = 1024;

/// Most threads per block (a block strides over n x m elements).
const MAX_BLOCK: usize = 512;

/// Device buffers.
struct Bufs {
    comm_rounds: DevPtr,
    comm_scale: DevPtr,
    quality: DevPtr,
    cost: DevPtr,
    cap: DevPtr,
    r_true: DevPtr,
    best: DevPtr,
    penalty: DevPtr,
    keys: DevPtr,
    nkeys: DevPtr,
    w: DevPtr,
    y: DevPtr,
    own: DevPtr,
    pw: DevPtr,
    py: DevPtr,
    regret: DevPtr,
    totals: DevPtr,
    viol: DevPtr,
    acc: DevPtr,
    rej: DevPtr,
    l: DevPtr,
    order: DevPtr,
    qp: DevPtr,
    r: DevPtr,
    rw: DevPtr,
    ry: DevPtr,
    msg: DevPtr,
    reg: DevPtr,
}

/// The device state of every federation of a combinatorial batch.
pub struct CudaComb<'a> {
    l: crate::backend::cuda::Lease<'a>,
    b: Bufs,
    /// Federations, agents, producers.
    shape: (usize, usize, usize),
    /// Rounds run so far.
    t: u64,
    scalars: [Arg; 6],
    /// P-FCB's schedule, the epsilon each round spends and delta (empty for
    /// the others).
    rounds: Vec<u64>,
    eps: Vec<f64>,
    delta: f64,
    pfcb: Option<(f64, f64, bool)>,
    block: usize,
    // Host copies for observations.
    regret: Vec<f64>,
    totals: Vec<f64>,
    viol: Vec<u64>,
    acc: Vec<u64>,
    rej: Vec<u64>,
}

/// Whether the kernel can run this batch: federations of one shape, the
/// greedy oracle, capacities that fit an i32.
pub fn supports(batch: &CombBatch) -> Result<(), CudaError> {
    let Some(first) = batch.instances.first() else {
        return Err(CudaError::Unsupported("an empty batch".into()));
    };
    let (n, m) = (first.spec.agents, first.spec.producers);
    if batch
        .instances
        .iter()
        .any(|i| i.spec.agents != n || i.spec.producers != m)
    {
        return Err(CudaError::Unsupported("federations of different shapes".into()));
    }
    if batch.oracle != Oracle::Greedy {
        return Err(CudaError::Unsupported(
            "oracle: exact runs on the CPU only (a small-study option)".into(),
        ));
    }
    if let CombPolicy::PFcb(p) = &batch.policy
        && p.lattice.is_some()
    {
        return Err(CudaError::Unsupported(
            "sampler: discrete: the kernel draws P-FCB's messages with float normals (fb_normal_at); the discrete \
             Gaussian runs on the CPU only (backend: cpu)"
                .into(),
        ));
    }
    i32_of(n * m)?;
    if first.spec.max_capacity > i32::MAX as u32 {
        return Err(CudaError::Unsupported("capacities exceed i32".into()));
    }
    Ok(())
}

/// The instances of a batch, one after another: each producer's quality,
/// cost and capacity, and the benchmarks (true revenue, best, penalty)
/// regret is measured against.
struct Instances {
    quality: Vec<f64>,
    cost: Vec<f64>,
    cap: Vec<i32>,
    r_true: Vec<f64>,
    best: Vec<f64>,
    penalty: Vec<f64>,
}

impl Instances {
    fn new(batch: &CombBatch) -> Result<Self, CudaError> {
        let mut h = Instances {
            quality: Vec::new(),
            cost: Vec::new(),
            cap: Vec::new(),
            r_true: Vec::new(),
            best: Vec::new(),
            penalty: Vec::new(),
        };
        for inst in &batch.instances {
            let bm = Benchmarks::new(inst, batch.oracle);
            h.quality.extend_from_slice(&inst.quality);
            h.cost.extend_from_slice(&inst.cost);
            for &k in &inst.capacity {
                h.cap
                    .push(i32::try_from(k).map_err(|_| CudaError::Unsupported("capacity exceeds i32".into()))?);
            }
            h.r_true.extend_from_slice(&bm.r_true);
            h.best.extend_from_slice(&bm.best);
            h.penalty.extend_from_slice(&bm.penalty);
        }
        Ok(h)
    }
}

impl<'a> CudaComb<'a> {
    /// Uploads the initial state of every federation of `batch`.
    pub fn new(
        l: crate::backend::cuda::LauncherGuard<'a>,
        batch: &CombBatch,
    ) -> Result<Self, CudaError> {
        // Frees what was allocated if building fails part-way.
        let mut l = crate::backend::cuda::Lease::new(l);
        supports(batch)?;
        let nf = batch.federations();
        let Some(first) = batch.instances.first() else {
            return Err(CudaError::Unsupported("an empty batch".into()));
        };
        let spec = &first.spec;
        let (n, m) = (spec.agents, spec.producers);
        let inst = Instances::new(batch)?;
        if batch.quality_keys.len() != nf * n {
            return Err(CudaError::Unsupported("one quality key per agent".into()));
        }
        let (policy, rounds, scale, delta, pfcb, nkeys) = match &batch.policy {
            CombPolicy::NonFederated => (0, Vec::new(), Vec::new(), 0.0, None, vec![0u64; nf * n]),
            CombPolicy::Fcb => (1, Vec::new(), Vec::new(), 0.0, None, vec![0u64; nf * n]),
            CombPolicy::PFcb(p) => {
                if p.noise_keys.len() != nf * n || p.eps.len() != p.rounds.len() || p.spent.len() != p.rounds.len() {
                    return Err(CudaError::Unsupported(
                        "one noise key per agent, one epsilon per round".into(),
                    ));
                }
                (
                    2,
                    p.rounds.clone(),
                    // The CPU's noise scale of each round.
                    (0..p.rounds.len()).map(|z| p.noise_scale(z)).collect::<Vec<f64>>(),
                    p.delta,
                    Some((p.omega1, p.omega2, p.prose_window)),
                    p.noise_keys.clone(),
                )
            }
        };
        let eps = match &batch.policy {
            CombPolicy::PFcb(p) => p.spent.clone(),
            _ => Vec::new(),
        };
        let lr: &mut dyn Launcher = &mut **l;
        let (nnm, nn) = (nf * n * m, nf * n);
        let zf = |len: usize| vec![0.0f64; len];
        let zu = |len: usize| vec![0u64; len];
        let b = Bufs {
            comm_rounds: upload_slice(lr, &rounds)?,
            comm_scale: upload_slice(lr, &scale)?,
            quality: upload_slice(lr, &inst.quality)?,
            cost: upload_slice(lr, &inst.cost)?,
            cap: upload_slice(lr, &inst.cap)?,
            r_true: upload_slice(lr, &inst.r_true)?,
            best: upload_slice(lr, &inst.best)?,
            penalty: upload_slice(lr, &inst.penalty)?,
            keys: upload_slice(lr, &batch.quality_keys)?,
            nkeys: upload_slice(lr, &nkeys)?,
            w: upload_slice(lr, &zf(nnm))?,
            y: upload_slice(lr, &zf(nnm))?,
            own: upload_slice(lr, &zf(nnm))?,
            pw: upload_slice(lr, &zf(nnm))?,
            py: upload_slice(lr, &zf(nnm))?,
            regret: upload_slice(lr, &zf(nn))?,
            totals: upload_slice(lr, &zf(2 * nf))?,
            viol: upload_slice(lr, &zu(nn))?,
            acc: upload_slice(lr, &zu(nnm))?,
            rej: upload_slice(lr, &zu(nnm))?,
            l: upload_slice(lr, &vec![0i32; nnm])?,
            order: upload_slice(lr, &vec![0i32; nnm])?,
            qp: upload_slice(lr, &zf(nnm))?,
            r: upload_slice(lr, &zf(nnm))?,
            rw: upload_slice(lr, &zf(nnm))?,
            ry: upload_slice(lr, &zf(nnm))?,
            msg: upload_slice(lr, &zf(2 * nnm))?,
            reg: upload_slice(lr, &zf(nn))?,
        };
        let scalars = [
            Arg::I32(i32_of(n)?),
            Arg::I32(i32_of(m)?),
            Arg::I32(policy),
            Arg::F64(spec.alpha),
            Arg::F64(spec.rho),
            Arg::U64(batch.explore_rounds),
        ];
        Ok(Self {
            l,
            b,
            shape: (nf, n, m),
            t: 0,
            scalars,
            rounds,
            eps,
            delta,
            pfcb,
            block: (n * m).div_ceil(32).clamp(1, MAX_BLOCK / 32) * 32,
            regret: zf(nn),
            totals: zf(2 * nf),
            viol: zu(nn),
            acc: zu(nnm),
            rej: zu(nnm),
        })
    }

    /// Communication rounds before round `t` (the schedule is increasing).
    fn comms_before(&self, t: u64) -> usize {
        self.rounds.partition_point(|&r| r < t)
    }

    fn launch(&mut self, t0: u64, count: u64) -> Result<(), CudaError> {
        // The chunk's work, for the watchdog's deadline: its rounds of every agent.
        self.l.expect_work(count.saturating_mul((self.shape.0 * self.shape.1) as u64));
        let (b, p) = (&self.b, Arg::Ptr);
        let (omega1, omega2, prose) = self.pfcb.unwrap_or((0.0, 0.0, false));
        let args = [
            &self.scalars[..],
            &[
                Arg::U64(t0),
                Arg::I32(i32::try_from(count).map_err(|_| CudaError::Unsupported("chunk too long".into()))?),
                Arg::I32(i32_of(self.comms_before(t0))?),
                Arg::I32(i32_of(self.rounds.len())?),
                p(b.comm_rounds),
                p(b.comm_scale),
                Arg::F64(omega1),
                Arg::F64(omega2),
                Arg::I32(i32::from(prose)),
                p(b.quality),
                p(b.cost),
                p(b.cap),
                p(b.r_true),
                p(b.best),
                p(b.penalty),
                p(b.keys),
                p(b.nkeys),
                p(b.w),
                p(b.y),
                p(b.own),
                p(b.pw),
                p(b.py),
                p(b.regret),
                p(b.totals),
                p(b.viol),
                p(b.acc),
                p(b.rej),
                p(b.l),
                p(b.order),
                p(b.qp),
                p(b.r),
                p(b.rw),
                p(b.ry),
                p(b.msg),
                p(b.reg),
            ],
        ]
        .concat();
        self.l.launch_grid("fb_comb_rounds", self.shape.0, self.block, 0, &args)
    }
}

impl crate::algo::rounds::RoundOps for CudaComb<'_> {
    type Obs = CombObservation;

    fn rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError> {
        crate::backend::cuda::in_chunks(t0, count, CHUNK, |t, c| self.launch(t, c))?;
        if count > 0 {
            self.t = self.t.max(t0 + count - 1);
        }
        Ok(())
    }

    fn observe(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError> {
        let lr: &mut dyn Launcher = &mut **self.l;
        let b = &self.b;
        download_slice(lr, b.regret, &mut self.regret)?;
        download_slice(lr, b.totals, &mut self.totals)?;
        download_slice(lr, b.viol, &mut self.viol)?;
        download_slice(lr, b.acc, &mut self.acc)?;
        download_slice(lr, b.rej, &mut self.rej)?;
        // The CPU's running sums over communication rounds, in order.
        let comms = self.comms_before(self.t + 1);
        let (mut eps_spent, mut delta_spent) = (0.0, 0.0);
        for &e in &self.eps[..comms] {
            eps_spent += e;
            delta_spent += self.delta;
        }
        let (nf, n, m) = self.shape;
        out.clear();
        for f in 0..nf {
            let (agents, elems) = (f * n..(f + 1) * n, f * n * m..(f + 1) * n * m);
            out.push(CombObservation {
                group_regret: self.totals[2 * f],
                agent_regret_max: self.regret[agents.clone()]
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max),
                regret_after_exploration: self.totals[2 * f + 1],
                violations: self.viol[agents].iter().sum(),
                accepted: self.acc[elems.clone()].iter().sum(),
                rejected: self.rej[elems].iter().sum(),
                communications: comms as u64,
                epsilon_spent: eps_spent,
                delta_spent,
            });
        }
        Ok(())
    }
}

/// The family's kernel source, for NVRTC.
pub const KERNELS: &[crate::backend::cuda::nvrtc::KernelSource] = &[crate::backend::cuda::nvrtc::KernelSource {
    file: "combinatorial.cu",
    source: include_str!("../../../kernels/combinatorial.cu"),
    kernels: &["fb_comb_rounds"],
    coop: &["fb_comb_rounds"],
    grouped: &[],
}];
