//! The device state of FedUCB's data-dependent sync ([`SyncWhen::Adaptive`])
//! for `fb_feducb_rounds` (kernels/rounds.cu, its events in
//! kernels/feducb.cu): per agent the shifted inverse and its log det, the
//! width parameters and the test's verdicts (two rounds' worth); per
//! federation log det S, the rounds since the last sync and since the last
//! factorization, the sync count and the group barrier's words; and
//! [`FedArgs`], the struct of every pointer and constant the kernel reads,
//! uploaded once. Every federation decides its own refactorizations and
//! syncs inside the multi-round launch (no host round trip, no launch per
//! round).
//!
//! [`SyncWhen::Adaptive`]: crate::algo::linear::batch::SyncWhen::Adaptive

use crate::algo::linear::batch::{LinearBatch, Width};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{DevPtr, Launcher, upload_slice};

/// `struct fb_fed_args` of kernels/feducb.cu, field for field (every field
/// 8 bytes, so the C and Rust layouts agree): constants, then pointers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FedArgs {
    m: i64,
    blocks: i64,
    d: i64,
    every_round: i64,
    shifted: i64,
    refactor_every: i64,
    svt: i64,
    cap: i64,
    mode: i64,
    dubey: i64,
    threshold: f64,
    qscale: f64,
    l2: f64,
    diag: f64,
    sigma: f64,
    vinvc: u64,
    logdetc: u64,
    shift: u64,
    fire: u64,
    sused: u64,
    skeys: u64,
    srho: u64,
    akey: u64,
    tsum: u64,
    nsum: u64,
    logdets: u64,
    dt: u64,
    since: u64,
    leaves: u64,
    ssens: u64,
    total: u64,
    base: u64,
    usyn: u64,
    failures: u64,
    bars: u64,
    tickets: u64,
    scratch: u64,
}

impl FedArgs {
    /// The struct's bytes, as the kernel reads them.
    fn bytes(&self) -> Vec<u8> {
        let words: [u64; 37] = [
            self.m as u64,
            self.blocks as u64,
            self.d as u64,
            self.every_round as u64,
            self.shifted as u64,
            self.refactor_every as u64,
            self.svt as u64,
            self.cap as u64,
            self.mode as u64,
            self.dubey as u64,
            self.threshold.to_bits(),
            self.qscale.to_bits(),
            self.l2.to_bits(),
            self.diag.to_bits(),
            self.sigma.to_bits(),
            self.vinvc,
            self.logdetc,
            self.shift,
            self.fire,
            self.sused,
            self.skeys,
            self.srho,
            self.akey,
            self.tsum,
            self.nsum,
            self.logdets,
            self.dt,
            self.since,
            self.leaves,
            self.ssens,
            self.total,
            self.base,
            self.usyn,
            self.failures,
            self.bars,
            self.tickets,
            self.scratch,
        ];
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// The batch-wide buffers the events share with the step and sync kernels
/// (the driver's), and the release: what [`AdaptiveState::new`] points
/// [`FedArgs`] at.
pub struct Shared {
    /// Per agent: the tree's key, exact running sum and noise sum.
    pub akey: DevPtr,
    /// See `akey`.
    pub tsum: DevPtr,
    /// See `akey`.
    pub nsum: DevPtr,
    /// Per federation: S, s, failures.
    pub base: DevPtr,
    /// See `base`.
    pub usyn: DevPtr,
    /// See `base`.
    pub failures: DevPtr,
    /// Per agent: 3 d^2 doubles of workspace.
    pub scratch: DevPtr,
    /// The release's mode (0 exact, 1 tree, 2 cumulative) and node noise.
    pub mode: i32,
    /// Dubey & Pentland's node noise.
    pub dubey: bool,
    /// The tree's node noise deviation.
    pub sigma: f64,
    /// The released Gram's diagonal shift.
    pub diag: f64,
}

/// The buffers and constants of an adaptive batch on the device.
pub struct AdaptiveState {
    /// Blocks per federation (`fb_feducb_rounds`' group).
    pub blocks: usize,
    /// The kernel's [`FedArgs`] on the device.
    pub args: DevPtr,
    /// Per agent: (offset, tail1, tail2) of Proposition 2's width.
    pub widths: DevPtr,
    /// confidence_scale and sigma of the width.
    pub wscale: f64,
    /// Sub-Gaussian constant of the width.
    pub wsigma: f64,
    /// Per agent: clamped widths so far.
    pub clamps: DevPtr,
    /// Per federation: syncs so far (the tree's leaf count).
    pub leaves: DevPtr,
}

/// A private schedule on the device: the rule's constants, per agent its
/// key, threshold noise and requests, per federation the epoch's
/// sensitivity (all as the CPU's `DetTest` holds them).
pub struct SvtBufs {
    /// Requests before the fallback.
    pub cap: u32,
    /// Laplace scale of the query noise.
    pub qscale: f64,
    /// L^2.
    pub l2: f64,
    /// Per agent: keys, rho, requests so far.
    pub keys: DevPtr,
    /// Threshold noise.
    pub rho: DevPtr,
    /// Requests so far.
    pub used: DevPtr,
    /// Per federation: the sensitivity of the epoch.
    pub sens: DevPtr,
}

impl SvtBufs {
    /// The rule of `r` on the device, with these keys, threshold noises,
    /// sensitivities (one per entry: agent or slot) and no request yet.
    pub fn upload(
        l: &mut dyn Launcher,
        r: &crate::algo::linear::batch::Svt,
        keys: &[u64],
        rho: &[f64],
        sens: &[f64],
    ) -> Result<Self, CudaError> {
        Ok(SvtBufs {
            cap: r.cap,
            qscale: r.query_scale,
            l2: r.l2,
            keys: upload_slice(l, keys)?,
            rho: upload_slice(l, rho)?,
            used: upload_slice(l, &vec![0i32; keys.len()])?,
            sens: upload_slice(l, sens)?,
        })
    }
}

impl AdaptiveState {
    /// The state of `batch` (which has an adaptive sync and per-agent
    /// widths) at round 0, `per_block` agents to a block: S = lambda I,
    /// (S + c I)^{-1} per agent, as the CPU's `DetTest::new` builds them.
    pub fn new(
        l: &mut dyn Launcher,
        batch: &LinearBatch,
        per_block: usize,
        shared: &Shared,
    ) -> Result<Self, CudaError> {
        let (nf, m, d) = (batch.federations(), batch.m, batch.env.d);
        let n = nf * m;
        let (dd, width) = (d * d, d * d + d);
        let unsupported = |w: &str| CudaError::Unsupported(w.into());
        let a = batch
            .sync
            .as_ref()
            .and_then(|s| s.adaptive())
            .ok_or_else(|| unsupported("not an adaptive batch"))?;
        let Width::LogDet { scale, sigma, agents } = &batch.beta else {
            return Err(unsupported("an adaptive batch without per-agent widths"));
        };
        if !(0..=2).contains(&shared.mode) {
            return Err(unsupported("an adaptive batch with the vector-summation release"));
        }
        let s0 = batch.lambda;
        let shifts: Vec<f64> = if a.shifts.is_empty() {
            vec![0.0; n]
        } else {
            a.shifts.clone()
        };
        // A federation's agents share one S, so one shift.
        let shifted = shifts.iter().step_by(m.max(1)).any(|&c| c > 0.0);
        let mut vinvc = Vec::with_capacity(if shifted { n * dd } else { 1 });
        let mut logdetc = Vec::with_capacity(n);
        for f in 0..nf {
            let c = shifts[f * m];
            for _ in 0..m {
                logdetc.push(d as f64 * (s0 + c).ln());
                if shifted {
                    let mut one = vec![0.0; dd];
                    crate::linalg::set_scaled_identity(&mut one, d, 1.0 / (s0 + c));
                    vinvc.extend_from_slice(&one);
                }
            }
        }
        let widths: Vec<f64> = agents.iter().flat_map(|&(o, t1, t2)| [o, t1, t2]).collect();
        let svt = match &a.svt {
            Some(r) => Some(svt_bufs(l, batch, r, &shifts, shifted)?),
            None => None,
        };
        let blocks = m.div_ceil(per_block.max(1));
        let int = |v: usize| i64::try_from(v).map_err(|_| unsupported("a size beyond i64"));
        let leaves = upload_slice(l, &vec![0u64; nf])?;
        let fed = FedArgs {
            m: int(m)?,
            blocks: int(blocks)?,
            d: int(d)?,
            every_round: i64::from(a.every_round),
            shifted: i64::from(shifted),
            refactor_every: int(batch.refactor_every.max(1) as usize)?.min(i64::from(i32::MAX)),
            svt: i64::from(svt.is_some()),
            cap: svt.as_ref().map_or(0, |s| i64::from(s.cap.min(i32::MAX as u32))),
            mode: i64::from(shared.mode),
            dubey: i64::from(shared.dubey),
            threshold: a.threshold,
            qscale: svt.as_ref().map_or(0.0, |s| s.qscale),
            l2: svt.as_ref().map_or(0.0, |s| s.l2),
            diag: shared.diag,
            sigma: shared.sigma,
            vinvc: if shifted { upload_slice(l, &vinvc)? } else { l.alloc_zeroed(8)? }.0,
            logdetc: upload_slice(l, &logdetc)?.0,
            shift: upload_slice(l, &shifts)?.0,
            fire: l.alloc_zeroed(2 * n * 4)?.0,
            sused: svt.as_ref().map_or(0, |s| s.used.0),
            skeys: svt.as_ref().map_or(0, |s| s.keys.0),
            srho: svt.as_ref().map_or(0, |s| s.rho.0),
            akey: shared.akey.0,
            tsum: shared.tsum.0,
            nsum: shared.nsum.0,
            logdets: upload_slice(l, &vec![d as f64 * s0.ln(); nf])?.0,
            dt: upload_slice(l, &vec![0u64; nf])?.0,
            since: upload_slice(l, &vec![0i32; nf])?.0,
            leaves: leaves.0,
            ssens: svt.as_ref().map_or(0, |s| s.sens.0),
            total: l.alloc_zeroed(nf * width * 8)?.0,
            base: shared.base.0,
            usyn: shared.usyn.0,
            failures: shared.failures.0,
            bars: l.alloc_zeroed(nf * 2 * 4)?.0,
            tickets: l.alloc_zeroed(2 * 4)?.0,
            scratch: shared.scratch.0,
        };
        let bytes = fed.bytes();
        let args = l.alloc_zeroed(bytes.len())?;
        l.upload(args, &bytes)?;
        Ok(Self {
            blocks,
            args,
            widths: upload_slice(l, &widths)?,
            wscale: *scale,
            wsigma: *sigma,
            clamps: upload_slice(l, &vec![0u64; n])?,
            leaves,
        })
    }
}

/// A private schedule's buffers for `batch` (DetTest::new: rho per agent,
/// the sensitivity of S = s0 I per federation).
fn svt_bufs(
    l: &mut dyn Launcher,
    batch: &LinearBatch,
    r: &crate::algo::linear::batch::Svt,
    shifts: &[f64],
    shifted: bool,
) -> Result<SvtBufs, CudaError> {
    let (nf, m, d) = (batch.federations(), batch.m, batch.env.d);
    let n = nf * m;
    if !shifted || batch.network.is_some() || r.keys.len() != n {
        return Err(CudaError::Unsupported(
            "a private schedule without a shifted test, on a graph or without keys".into(),
        ));
    }
    let sens: Vec<f64> = (0..nf)
        .map(|f| {
            let mut inv = vec![0.0; d * d];
            crate::linalg::set_scaled_identity(&mut inv, d, 1.0 / (batch.lambda + shifts[f * m]));
            r.sensitivity(&inv, true)
        })
        .collect();
    let rho: Vec<f64> = (0..n).map(|g| r.rho(g)).collect();
    SvtBufs::upload(l, r, &r.keys, &rho, &sens)
}
