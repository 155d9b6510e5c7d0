//! The device state of FedUCB's data-dependent sync ([`SyncWhen::Adaptive`],
//! `kernels/feducb.cu`): per agent the shifted inverse and its log det, the
//! width parameters, the round's action and the test's verdict; per
//! federation log det S, the rounds since the last sync and since the last
//! factorization, the round's decisions and the sync count. The driver
//! ([`super::driver`]) runs one round per launch for such a batch and then
//! the kernels that act on these buffers, every federation deciding its own
//! refactorizations and syncs on the device (no host round trip).
//!
//! [`SyncWhen::Adaptive`]: crate::algo::linear::batch::SyncWhen::Adaptive

use crate::algo::linear::batch::{LinearBatch, Width};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{DevPtr, Launcher, upload_slice};

/// The buffers and constants of an adaptive batch on the device.
pub struct AdaptiveState {
    /// D.
    pub threshold: f64,
    /// `sync: every_round`.
    pub every_round: bool,
    /// Whether the test uses the shifted inverse (private).
    pub shifted: bool,
    /// Rank-1 updates between factorizations.
    pub refactor_every: i32,
    /// Per agent: (offset, tail1, tail2) of Proposition 2's width.
    pub widths: DevPtr,
    /// confidence_scale and sigma of the width.
    pub wscale: f64,
    /// Sub-Gaussian constant of the width.
    pub wsigma: f64,
    /// Per agent: clamped widths so far.
    pub clamps: DevPtr,
    /// Per agent: the round's action (d).
    pub xlast: DevPtr,
    /// Per agent: (S + U + c I)^{-1} (d x d) and its log det.
    pub vinvc: DevPtr,
    /// Log det of the shifted matrix.
    pub logdetc: DevPtr,
    /// Per agent: c.
    pub shift: DevPtr,
    /// Per agent: the test's verdict.
    pub fire: DevPtr,
    /// Per agent: d doubles of workspace.
    pub work: DevPtr,
    /// Per federation: log det S.
    pub logdets: DevPtr,
    /// Per federation: rounds since the last sync.
    pub dt: DevPtr,
    /// Per federation: rank-1 updates since the last factorization.
    pub since: DevPtr,
    /// Per federation: refactorize after this round.
    pub do_refactor: DevPtr,
    /// Per federation: sync after this round.
    pub do_sync: DevPtr,
    /// Per federation: syncs so far (the tree's leaf count).
    pub leaves: DevPtr,
    /// Per federation: the running total of every leaf (cumulative release).
    pub total: DevPtr,
    /// The private schedule ([`crate::algo::linear::batch::Svt`]), if any.
    pub svt: Option<SvtBufs>,
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
    /// widths) at round 0: S = lambda I, (S + c I)^{-1} per agent, as
    /// the CPU's `DetTest::new` builds them.
    pub fn new(l: &mut dyn Launcher, batch: &LinearBatch) -> Result<Self, CudaError> {
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
        let s0 = batch.lambda;
        let shifts: Vec<f64> = if a.shifts.is_empty() {
            vec![0.0; n]
        } else {
            a.shifts.clone()
        };
        // A federation's agents share one S, so one shift (DetTest::new).
        let shifted = shifts.iter().step_by(m.max(1)).any(|&c| c > 0.0);
        let mut vinvc = Vec::with_capacity(if shifted { n * dd } else { 1 });
        let mut logdetc = Vec::with_capacity(n);
        for f in 0..nf {
            let c = shifts[f * m];
            for _ in 0..m {
                logdetc.push(d as f64 * (s0 + c).ln());
                if shifted {
                    for i in 0..d {
                        for j in 0..d {
                            vinvc.push(if i == j { 1.0 / (s0 + c) } else { 0.0 });
                        }
                    }
                }
            }
        }
        let widths: Vec<f64> = agents.iter().flat_map(|&(o, t1, t2)| [o, t1, t2]).collect();
        let svt = match &a.svt {
            Some(r) => {
                if !shifted || batch.network.is_some() || r.keys.len() != n {
                    return Err(unsupported(
                        "a private schedule without a shifted test, on a graph or without keys",
                    ));
                }
                // DetTest::new: rho per agent, the sensitivity of S = s0 I.
                let sens: Vec<f64> = (0..nf)
                    .map(|f| {
                        let mut inv = vec![0.0; dd];
                        crate::linalg::set_scaled_identity(&mut inv, d, 1.0 / (s0 + shifts[f * m]));
                        r.sensitivity(&inv, true)
                    })
                    .collect();
                let rho: Vec<f64> = (0..n).map(|g| r.rho(g)).collect();
                Some(SvtBufs::upload(l, r, &r.keys, &rho, &sens)?)
            }
            None => None,
        };
        Ok(Self {
            threshold: a.threshold,
            every_round: a.every_round,
            shifted,
            refactor_every: i32::try_from(batch.refactor_every.max(1)).unwrap_or(i32::MAX),
            widths: upload_slice(l, &widths)?,
            wscale: *scale,
            wsigma: *sigma,
            clamps: upload_slice(l, &vec![0u64; n])?,
            xlast: l.alloc_zeroed(n * d * 8)?,
            vinvc: if shifted {
                upload_slice(l, &vinvc)?
            } else {
                l.alloc_zeroed(8)?
            },
            logdetc: upload_slice(l, &logdetc)?,
            shift: upload_slice(l, &shifts)?,
            fire: upload_slice(l, &vec![0i32; n])?,
            work: l.alloc_zeroed(n * d * 8)?,
            logdets: upload_slice(l, &vec![d as f64 * s0.ln(); nf])?,
            dt: upload_slice(l, &vec![0u64; nf])?,
            since: upload_slice(l, &vec![0i32; nf])?,
            do_refactor: upload_slice(l, &vec![0i32; nf])?,
            do_sync: upload_slice(l, &vec![0i32; nf])?,
            leaves: upload_slice(l, &vec![0u64; nf])?,
            total: l.alloc_zeroed(nf * width * 8)?,
            svt,
        })
    }
}
