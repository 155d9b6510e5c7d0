//! The driver's event operations: refactorizations and syncs (all
//! federations, or those a device-side mask selects), FedUCB's after-round
//! kernels and the vector-summation protocol's per-round randomization
//! (kernels/feducb.cu, kernels/vecsum.cu). Split from the driver for size;
//! they act on its state.

use super::{CudaLinear, int_arg};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{Arg, DevPtr};

impl CudaLinear<'_> {
    /// `fb_refactor` for every agent of the federations in `mask` (null:
    /// all): V^{-1} and log det rebuilt from base + local Gram.
    pub(super) fn launch_refactor(&mut self, mask: DevPtr) -> Result<(), CudaError> {
        let p = Arg::Ptr;
        let n = self.nf * self.m;
        self.l.launch(
            "fb_refactor",
            n,
            &[
                int_arg(n)?,
                int_arg(self.m)?,
                int_arg(self.d)?,
                p(mask),
                p(self.bufs.base),
                p(self.bufs.gram),
                p(self.bufs.vinv),
                p(self.bufs.logdet),
                p(self.bufs.scratch),
                p(self.bufs.failures),
            ],
        )
    }

    /// A sync of the federations in `mask` (null: all): the tree leaf
    /// `leaf` (or each federation's from `leaves`), the server's release
    /// into every agent's base and bias, and the local sums reset.
    pub(super) fn launch_sync(&mut self, mask: DevPtr, leaf: u64, leaves: DevPtr) -> Result<(), CudaError> {
        let p = Arg::Ptr;
        let (n, nf, m, d) = (self.nf * self.m, self.nf, self.m, self.d);
        let (ni, nfi, mi, di) = (int_arg(n)?, int_arg(nf)?, int_arg(m)?, int_arg(d)?);
        let width = d * d + d;
        if let Some(v) = &self.vecsum {
            let coords = d * (d + 1) / 2 + d;
            let args = [
                nfi,
                di,
                int_arg(v.levels)?,
                Arg::U64(leaf),
                Arg::F64(v.l),
                p(v.glev),
                p(v.tlev),
                p(v.nlev),
                p(v.shkeys),
                p(v.acc),
                p(v.stored),
                Arg::F64(self.diag),
                p(self.bufs.base),
                p(self.bufs.usyn),
            ];
            self.l.launch("fb_vecsum_close", nf * coords, &args)?;
        }
        if self.mode == 1 {
            self.l.launch(
                "fb_tree_insert",
                n * width,
                &[
                    ni,
                    mi,
                    di,
                    Arg::U64(leaf),
                    p(leaves),
                    p(mask),
                    Arg::I32(i32::from(self.dubey)),
                    Arg::F64(self.sigma),
                    p(self.bufs.akey),
                    p(self.bufs.gram),
                    p(self.bufs.bias),
                    p(self.bufs.tsum),
                    p(self.bufs.nsum),
                ],
            )?;
        }
        let total = self.adaptive.as_ref().map_or(DevPtr(0), |a| a.total);
        if self.mode != 3 {
            self.l.launch(
                "fb_sync_reduce",
                nf * width,
                &[
                    nfi,
                    mi,
                    di,
                    Arg::I32(self.mode),
                    p(mask),
                    Arg::F64(self.diag),
                    p(self.bufs.tsum),
                    p(self.bufs.nsum),
                    p(total),
                    p(self.bufs.gram),
                    p(self.bufs.bias),
                    p(self.bufs.base),
                    p(self.bufs.usyn),
                ],
            )?;
        }
        self.l.launch(
            "fb_sync_factor",
            nf,
            &[
                nfi,
                mi,
                di,
                p(mask),
                p(self.bufs.base),
                p(self.bufs.vinv),
                p(self.bufs.logdet),
                p(self.bufs.scratch),
                p(self.bufs.failures),
            ],
        )?;
        self.l.launch(
            "fb_sync_broadcast",
            n,
            &[
                ni,
                mi,
                di,
                p(mask),
                p(self.bufs.usyn),
                p(self.bufs.vinv),
                p(self.bufs.logdet),
                p(self.bufs.b),
                p(self.bufs.gram),
                p(self.bufs.bias),
            ],
        )
    }

    /// After a round of an adaptive batch, on the device: every agent's
    /// determinant test, each federation's decisions, the refactorizations
    /// due and the syncs fired (kernels/feducb.cu).
    pub(super) fn after_round(&mut self, round: u64) -> Result<(), CudaError> {
        let Some(a) = self.adaptive.as_ref() else {
            return Ok(());
        };
        let p = Arg::Ptr;
        // The private schedule's arguments (zeros and null pointers without).
        let (svt, cap, qscale, l2, skeys, srho, ssens, sused) = match &a.svt {
            Some(s) => (
                1,
                i32::try_from(s.cap).unwrap_or(i32::MAX),
                s.qscale,
                s.l2,
                s.keys,
                s.rho,
                s.sens,
                s.used,
            ),
            None => (0, 0, 0.0, 0.0, DevPtr(0), DevPtr(0), DevPtr(0), DevPtr(0)),
        };
        let (n, nf) = (self.nf * self.m, self.nf);
        let (ni, nfi, mi, di) = (int_arg(n)?, int_arg(nf)?, int_arg(self.m)?, int_arg(self.d)?);
        let shifted = Arg::I32(i32::from(a.shifted));
        let (vinvc, logdetc, shift, do_refactor, do_sync) = (a.vinvc, a.logdetc, a.shift, a.do_refactor, a.do_sync);
        let (logdets, leaves) = (a.logdets, a.leaves);
        let test = [
            ni,
            mi,
            di,
            shifted,
            Arg::F64(a.threshold),
            p(a.xlast),
            p(vinvc),
            p(logdetc),
            p(self.bufs.logdet),
            p(logdets),
            p(a.dt),
            p(a.work),
            p(a.fire),
            Arg::I32(svt),
            Arg::U64(round),
            Arg::I32(cap),
            Arg::F64(qscale),
            p(skeys),
            p(srho),
            p(ssens),
            p(sused),
        ];
        let events = [
            nfi,
            mi,
            Arg::I32(i32::from(a.every_round)),
            Arg::I32(a.refactor_every),
            p(a.fire),
            p(a.since),
            p(a.dt),
            p(do_refactor),
            p(do_sync),
            p(leaves),
        ];
        let is_shifted = a.shifted;
        self.l.launch("fb_det_test", n, &test)?;
        self.l.launch("fb_adaptive_events", nf, &events)?;
        self.launch_refactor(do_refactor)?;
        let bufs = &self.bufs;
        if is_shifted {
            let args = [
                ni,
                mi,
                di,
                p(do_refactor),
                p(shift),
                p(bufs.base),
                p(bufs.gram),
                p(vinvc),
                p(logdetc),
                p(bufs.scratch),
                p(bufs.failures),
            ];
            self.l.launch("fb_refactor_shifted", n, &args)?;
        }
        self.launch_sync(do_sync, 0, leaves)?;
        let bufs = &self.bufs;
        let args = [
            nfi,
            mi,
            di,
            shifted,
            p(do_sync),
            p(shift),
            p(bufs.base),
            p(bufs.logdet),
            p(logdets),
            p(vinvc),
            p(logdetc),
            p(bufs.scratch),
            p(bufs.failures),
            Arg::I32(svt),
            Arg::F64(l2),
            p(ssens),
        ];
        self.l.launch("fb_sync_shifted", nf, &args)
    }

    /// After round `round` of a `sdp_vecsum` batch: every agent's point
    /// randomized into its federation's accumulators, and the points the
    /// protocol clipped counted (kernels/vecsum.cu).
    pub(super) fn randomize_points(&mut self, round: u64) -> Result<(), CudaError> {
        let Some(v) = &self.vecsum else {
            return Ok(());
        };
        let p = Arg::Ptr;
        let (n, d) = (self.nf * self.m, self.d);
        let coords = d * (d + 1) / 2 + d;
        let add = [
            int_arg(n)?,
            int_arg(self.m)?,
            int_arg(d)?,
            int_arg(v.levels)?,
            Arg::F64(v.l),
            p(v.glev),
            p(v.akeys),
            Arg::U64(round),
            p(v.xlast),
            p(v.ylast),
            p(v.acc),
            p(v.pclip),
        ];
        let count = [int_arg(n)?, p(v.pclip), p(v.ylast), p(self.bufs.clipped)];
        self.l.launch("fb_vecsum_add", n * coords, &add)?;
        self.l.launch("fb_vecsum_clipcount", n, &count)
    }
}
