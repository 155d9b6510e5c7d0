//! The driver's operations for decentralized FedUCB (kernels/peer.cu, state
//! in [`crate::algo::linear::cuda::peer`]): the first factorization of every
//! slot, each round's exchange before the agents play (the broadcasts that
//! requests ask for, every slot's deliveries, the played slot's
//! factorization) and the test, requests and broadcasts after it. Every
//! decision is made on the device: a round costs a fixed number of launches
//! and no copy.

use super::{CudaLinear, int_arg};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{Arg, DevPtr};

impl CudaLinear<'_> {
    /// Factorizes every slot (all start dirty), as the CPU's `PeerFed::new`.
    pub(super) fn peer_init(&mut self) -> Result<(), CudaError> {
        let Some(gamma) = self.peer.as_ref().map(|p| p.gamma) else {
            return Ok(());
        };
        for g in 0..gamma {
            self.peer_refactor(g, 0)?;
        }
        Ok(())
    }

    /// `fb_peer_refactor` of slot g in round t.
    fn peer_refactor(&mut self, g: usize, t: u64) -> Result<(), CudaError> {
        let Some(ps) = self.peer.as_ref() else {
            return Ok(());
        };
        let (p, b) = (Arg::Ptr, &self.bufs);
        let n = self.nf * self.m;
        let args = [
            int_arg(n)?,
            int_arg(self.m)?,
            int_arg(self.d)?,
            int_arg(ps.gamma)?,
            int_arg(g)?,
            Arg::U64(t),
            Arg::I32(ps.refactor_every),
            Arg::I32(i32::from(ps.private)),
            p(ps.start),
            p(ps.nbr),
            p(ps.hops),
            p(ps.payload_round),
            p(ps.heard),
            p(ps.dirty),
            p(ps.since),
            p(ps.smat),
            p(ps.svec),
            p(b.gram),
            p(b.bias),
            p(ps.shift),
            p(b.vinv),
            p(b.logdet),
            p(b.b),
            p(ps.logdet_s),
            p(ps.vinvc),
            p(ps.logdetc),
            p(b.scratch),
            p(b.failures),
            Arg::I32(i32::from(ps.svt.is_some())),
            Arg::F64(ps.svt.as_ref().map_or(0.0, |s| s.bufs.l2)),
            p(ps.svt.as_ref().map_or(DevPtr(0), |s| s.bufs.sens)),
            p(ps.svt.as_ref().map_or(DevPtr(0), |s| s.sinv)),
        ];
        self.l.launch("fb_peer_refactor", n, &args)
    }

    /// The broadcasts of the slots in `mask` in round t: tree leaves
    /// (private), payloads into the ring, local sums reset; with
    /// `self_deliver` each sender's own S takes its payload at once.
    fn peer_broadcast(&mut self, mask: DevPtr, t: u64, self_deliver: bool) -> Result<(), CudaError> {
        let Some(ps) = self.peer.as_ref() else {
            return Ok(());
        };
        let (p, b) = (Arg::Ptr, &self.bufs);
        let (d, ns) = (self.d, self.nf * self.m * ps.gamma);
        let width = d * d + d;
        let payload = [
            int_arg(ns)?,
            int_arg(d)?,
            int_arg(ps.gamma)?,
            Arg::U64(t),
            Arg::I32(i32::from(ps.private)),
            Arg::I32(i32::from(self_deliver)),
            Arg::F64(ps.first_heard),
            p(mask),
            p(b.gram),
            p(b.bias),
            p(b.tsum),
            p(b.nsum),
            p(ps.prev),
            p(ps.payload),
            p(ps.payload_round),
            p(ps.last_bc),
            p(ps.dt),
            p(ps.nbc),
            p(ps.smat),
            p(ps.svec),
        ];
        if ps.private {
            let insert = [
                int_arg(ns)?,
                Arg::I32(1),
                int_arg(d)?,
                Arg::U64(0),
                p(ps.leaves),
                p(mask),
                Arg::I32(i32::from(self.dubey)),
                Arg::F64(self.sigma),
                p(b.akey),
                p(b.gram),
                p(b.bias),
                p(b.tsum),
                p(b.nsum),
            ];
            self.l.launch("fb_tree_insert", ns * width, &insert)?;
        }
        self.l.launch("fb_peer_payload", ns * width, &payload)
    }

    /// Before round t: the broadcasts that requests ask for, every slot's
    /// deliveries, then the first-heard flags and the factorization of the
    /// slot the agents play (t mod gamma).
    pub(super) fn peer_exchange(&mut self, t: u64) -> Result<(), CudaError> {
        let Some(ps) = self.peer.as_ref() else {
            return Ok(());
        };
        let p = Arg::Ptr;
        let (n, m, d, gamma) = (self.nf * self.m, self.m, self.d, ps.gamma);
        let leaves = if ps.private { ps.leaves } else { DevPtr(0) };
        let asked = [
            int_arg(n)?,
            int_arg(m)?,
            int_arg(gamma)?,
            Arg::U64(t),
            p(ps.start),
            p(ps.nbr),
            p(ps.hops),
            p(ps.request_round),
            p(ps.asked),
            p(leaves),
        ];
        let deliver = [
            int_arg(n)?,
            int_arg(m)?,
            int_arg(d)?,
            int_arg(gamma)?,
            Arg::U64(t),
            Arg::F64(ps.first_heard),
            p(ps.start),
            p(ps.nbr),
            p(ps.hops),
            p(ps.payload),
            p(ps.payload_round),
            p(ps.heard),
            p(ps.smat),
            p(ps.svec),
        ];
        let mask = ps.asked;
        self.l.launch("fb_peer_asked", n, &asked)?;
        self.peer_broadcast(mask, t, false)?;
        self.l.launch("fb_peer_deliver", n * gamma * (d * d + d), &deliver)?;
        let g = (t % gamma as u64) as usize;
        self.slot = g;
        self.peer_refactor(g, t)
    }

    /// After round t: every agent's test on its slot, the requests, and the
    /// requesters' broadcasts (each delivered to itself at once).
    pub(super) fn peer_after(&mut self, t: u64) -> Result<(), CudaError> {
        let Some(ps) = self.peer.as_ref() else {
            return Ok(());
        };
        let (p, b) = (Arg::Ptr, &self.bufs);
        let (n, gamma) = (self.nf * self.m, ps.gamma);
        let leaves = if ps.private { ps.leaves } else { DevPtr(0) };
        let test = [
            int_arg(n)?,
            int_arg(self.m)?,
            int_arg(self.d)?,
            int_arg(gamma)?,
            int_arg(self.slot)?,
            Arg::U64(t),
            Arg::I32(i32::from(ps.private)),
            Arg::I32(i32::from(ps.every_round)),
            Arg::F64(ps.threshold),
            p(ps.xlast),
            p(ps.vinvc),
            p(ps.logdetc),
            p(b.logdet),
            p(ps.logdet_s),
            p(ps.dt),
            p(ps.since),
            p(ps.last_bc),
            p(ps.work),
            p(ps.request_round),
            p(ps.nreq),
            p(ps.heard),
            p(ps.dirty),
            p(ps.bmask),
            p(leaves),
            Arg::I32(i32::from(ps.svt.is_some())),
            Arg::I32(
                ps.svt
                    .as_ref()
                    .map_or(0, |s| i32::try_from(s.bufs.cap).unwrap_or(i32::MAX)),
            ),
            Arg::F64(ps.svt.as_ref().map_or(0.0, |s| s.bufs.qscale)),
            p(ps.svt.as_ref().map_or(DevPtr(0), |s| s.bufs.keys)),
            p(ps.svt.as_ref().map_or(DevPtr(0), |s| s.bufs.rho)),
            p(ps.svt.as_ref().map_or(DevPtr(0), |s| s.bufs.sens)),
            p(ps.svt.as_ref().map_or(DevPtr(0), |s| s.bufs.used)),
        ];
        let mask = ps.bmask;
        self.l.launch("fb_peer_test", n, &test)?;
        self.peer_broadcast(mask, t, true)
    }
}
