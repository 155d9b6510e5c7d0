//! The driver's event operations: refactorizations and syncs (all
//! federations, or those a device-side mask selects; kernels/linear.cu,
//! and the vector-summation protocol's release, kernels/vecsum.cu). Split
//! from the driver for size; they act on its state. FedUCB's events and
//! the protocol's per-round randomization run inside the multi-round
//! kernels (kernels/rounds.cu).

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
        // The cumulative release (mode 2) is FedUCB's, whose syncs run in
        // fb_feducb_rounds: no running total here.
        let total = DevPtr(0);
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
}
