//! The device state of decentralized FedUCB (a [`LinearBatch`] with a
//! [`crate::algo::linear::batch::Network`], `kernels/peer.cu`): per slot (slot s =
//! g x n + agent, so that slot g's rows are an agent-indexed array the
//! step plays on) S and s, log det S, the shifted inverse
//! (private), Delta, the updates since the last factorization, the dirty
//! and first-heard flags, the payload ring and the tree's leaf count; per
//! agent the request ring and the widths; every agent's
//! senders within gamma hops as a CSR list. The per-slot V^{-1}, log det,
//! b, local sums and tree sums are the driver's own buffers, sized by slot
//! ([`super::driver`]). The CPU's operations are
//! [`crate::algo::linear::cpu::peer`], whose round the kernels reproduce.

use crate::algo::linear::batch::{LinearBatch, Observation, Release, Width};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{DevPtr, Launcher, download_slice, upload_slice};
use crate::graph::Reach;

/// Never (a ring entry or slot that has not broadcast).
const NEVER: u64 = u64::MAX;

/// Decentralized FedUCB's buffers and constants on the device.
pub struct PeerState {
    /// `fb_peer_rounds`' blocks per federation and its `fb_peer_args`
    /// (set by the driver once the launch shape is known; see [`Self::args`]).
    pub fused: Option<(usize, DevPtr)>,
    /// Slots per agent (gamma).
    pub gamma: usize,
    /// Whether the release is the PRIVATIZER tree.
    pub private: bool,
    /// D.
    pub threshold: f64,
    /// `sync: every_round`.
    pub every_round: bool,
    /// Rank-1 updates between factorizations.
    pub refactor_every: i32,
    /// Added to a slot's S diagonal when it first hears a sender.
    pub first_heard: f64,
    /// Per agent: (offset, tail1, tail2) of Proposition 2's width.
    pub widths: DevPtr,
    /// confidence_scale of the width.
    pub wscale: f64,
    /// Sub-Gaussian constant of the width.
    pub wsigma: f64,
    /// Per agent: clamped widths so far.
    pub clamps: DevPtr,
    /// Per agent: c (the shift of the private test).
    pub shift: DevPtr,
    /// CSR of every agent's senders: offsets (n + 1), local index, hops.
    pub start: DevPtr,
    /// Sender (local index).
    pub nbr: DevPtr,
    /// Hops to the sender.
    pub hops: DevPtr,
    /// Per agent and ring entry: the round of a request.
    pub request_round: DevPtr,
    /// Per agent: requests so far.
    pub nreq: DevPtr,
    /// Per slot: broadcasts so far.
    pub nbc: DevPtr,
    /// Per slot: asked to broadcast in this round's exchange.
    pub asked: DevPtr,
    /// Per slot: broadcasts after the test (1, 2: with its own first-heard shift).
    pub bmask: DevPtr,
    /// Per slot: S (d x d) and s (d).
    pub smat: DevPtr,
    /// s.
    pub svec: DevPtr,
    /// Per slot: log det S.
    pub logdet_s: DevPtr,
    /// Per slot (private): (S + U + c I)^{-1} and its log det.
    pub vinvc: DevPtr,
    /// Log det of the shifted matrix.
    pub logdetc: DevPtr,
    /// Per slot: rounds since its last broadcast.
    pub dt: DevPtr,
    /// Per slot: rank-1 updates since its last factorization.
    pub since: DevPtr,
    /// Per slot: S changed since the last factorization.
    pub dirty: DevPtr,
    /// Per slot: the round of its last broadcast.
    pub last_bc: DevPtr,
    /// Per slot and sender: heard from it (bytes).
    pub heard: DevPtr,
    /// Per slot (private): the previous release.
    pub prev: DevPtr,
    /// Per slot (private): leaves of its tree.
    pub leaves: DevPtr,
    /// Per slot and ring entry: the payload (d^2 + d) and its round.
    pub payload: DevPtr,
    /// Round of each ring entry's payload.
    pub payload_round: DevPtr,
    /// Per agent (host): receivers of each of its messages.
    receivers: Vec<u64>,
    nreq_host: Vec<u64>,
    nbc_host: Vec<u64>,
    /// The private schedule, one instance per slot (device order).
    pub svt: Option<PeerSvt>,
}

/// A private schedule on the device (the CPU's `PeerFed::svt`): the rule
/// with per slot its key, threshold noise, requests and sensitivity (the
/// centralized form's buffers, [`super::adaptive::SvtBufs`]), and per agent
/// a d x d workspace for (S + c I)^{-1}.
pub struct PeerSvt {
    /// The rule and its per-slot buffers.
    pub bufs: super::adaptive::SvtBufs,
    /// Per agent: (S + c I)^{-1}.
    pub sinv: DevPtr,
}

/// Every agent's neighbours within gamma hops, flattened over the
/// federations: `start[a]..start[a + 1]` indexes `nbr` (the neighbour) and
/// `hops` (its distance); `receivers[a]`: how many agents hear agent a.
#[allow(clippy::type_complexity)]
fn neighbour_table(
    graphs: &[crate::graph::Graph],
    m: usize,
    gamma: usize,
) -> Result<(Vec<i32>, Vec<i32>, Vec<i32>, Vec<u64>), CudaError> {
    let (mut start, mut nbr, mut hops, mut receivers) = (vec![0i32], Vec::new(), Vec::new(), Vec::new());
    for g in graphs {
        let reach = Reach::new(g, gamma);
        for i in 0..m {
            for &(j, h) in reach.of(i) {
                nbr.push(j as i32);
                hops.push(h as i32);
            }
            let end = i32::try_from(nbr.len()).map_err(|_| CudaError::Unsupported("too many neighbours".into()))?;
            start.push(end);
            receivers.push(reach.receivers(i));
        }
    }
    Ok((start, nbr, hops, receivers))
}

impl PeerState {
    /// The state of `batch` (a network batch with FedUCB's test and widths)
    /// at round 0: S = n_i rho_min I in every slot, all slots due for a
    /// factorization (the driver runs it before the first round).
    pub fn new(l: &mut dyn Launcher, batch: &LinearBatch) -> Result<Option<Self>, CudaError> {
        let Some(net) = batch.network.as_ref() else {
            return Ok(None);
        };
        let unsupported = |w: &str| CudaError::Unsupported(w.into());
        let (nf, m, d) = (batch.federations(), batch.m, batch.env.d);
        let (n, gamma) = (nf * m, net.gamma.max(1));
        let (ns, ring, dd, width) = (n * gamma, gamma + 1, d * d, d * d + d);
        let a = batch
            .sync
            .as_ref()
            .and_then(|s| s.adaptive())
            .ok_or_else(|| unsupported("a network batch without FedUCB's test"))?;
        let Width::LogDet { scale, sigma, agents } = &batch.beta else {
            return Err(unsupported("a network batch without per-agent widths"));
        };
        if net.graphs.len() != nf || net.bases.len() != n || agents.len() != n {
            return Err(unsupported(
                "a network batch needs a graph per federation and a width per agent",
            ));
        }
        let private = matches!(batch.sync.as_ref().map(|s| &s.release), Some(Release::Tree { .. }));
        let (start, nbr, hops, receivers) = neighbour_table(&net.graphs, m, gamma)?;
        let mut smat = vec![0.0f64; ns * dd];
        for g in 0..gamma {
            for (ag, &base) in net.bases.iter().enumerate() {
                for k in 0..d {
                    smat[(g * n + ag) * dd + k * d + k] = base;
                }
            }
        }
        let shifts = if a.shifts.is_empty() {
            vec![0.0; n]
        } else {
            a.shifts.clone()
        };
        let widths: Vec<f64> = agents.iter().flat_map(|&(o, t1, t2)| [o, t1, t2]).collect();
        let z = |l: &mut dyn Launcher, bytes: usize| l.alloc_zeroed(bytes);
        // Device slot g x n + a holds the CPU's slot i x gamma + g of
        // federation a / m (a = f m + i).
        let svt = match &a.svt {
            Some(r) if r.keys.len() == ns => {
                let cpu = |s: usize| {
                    let (g, a) = (s / n, s % n);
                    (a / m) * m * gamma + (a % m) * gamma + g
                };
                let keys: Vec<u64> = (0..ns).map(|s| r.keys[cpu(s)]).collect();
                let rho: Vec<f64> = (0..ns).map(|s| r.rho(cpu(s))).collect();
                Some(PeerSvt {
                    bufs: super::adaptive::SvtBufs::upload(l, r, &keys, &rho, &vec![f64::INFINITY; ns])?,
                    sinv: z(l, n * dd * 8)?,
                })
            }
            Some(_) => return Err(unsupported("a private schedule without one key per slot")),
            None => None,
        };
        Ok(Some(Self {
            fused: None,
            gamma,
            private,
            threshold: a.threshold,
            every_round: a.every_round,
            refactor_every: i32::try_from(batch.refactor_every.max(1)).unwrap_or(i32::MAX),
            first_heard: net.first_heard,
            widths: upload_slice(l, &widths)?,
            wscale: *scale,
            wsigma: *sigma,
            clamps: z(l, n * 8)?,
            shift: upload_slice(l, &shifts)?,
            start: upload_slice(l, &start)?,
            nbr: upload_slice(l, &nbr)?,
            hops: upload_slice(l, &hops)?,
            request_round: upload_slice(l, &vec![NEVER; n * ring])?,
            nreq: z(l, n * 8)?,
            nbc: z(l, ns * 8)?,
            asked: z(l, ns * 4)?,
            bmask: z(l, ns * 4)?,
            smat: upload_slice(l, &smat)?,
            svec: z(l, ns * d * 8)?,
            logdet_s: z(l, ns * 8)?,
            vinvc: z(l, if private { ns * dd * 8 } else { 8 })?,
            logdetc: z(l, ns * 8)?,
            dt: z(l, ns * 8)?,
            since: z(l, ns * 4)?,
            dirty: upload_slice(l, &vec![1i32; ns])?,
            last_bc: upload_slice(l, &vec![NEVER; ns])?,
            heard: z(l, ns * m)?,
            prev: z(l, if private { ns * width * 8 } else { 8 })?,
            leaves: z(l, ns * 8)?,
            payload: z(l, ns * ring * width * 8)?,
            payload_round: upload_slice(l, &vec![NEVER; ns * ring])?,
            receivers,
            nreq_host: vec![0; n],
            nbc_host: vec![0; ns],
            svt,
        }))
    }

    /// `struct fb_peer_args` of kernels/peer.cu for `fb_peer_rounds`, `m`
    /// agents per federation in blocks of `per_block`, uploaded: its
    /// blocks per federation and the struct's address. `shared`: the
    /// driver's buffers the exchange shares (tree sums and keys, failures,
    /// workspace) and the tree's noise.
    pub fn args(
        &self,
        l: &mut dyn Launcher,
        nf: usize,
        m: usize,
        d: usize,
        per_block: usize,
        shared: &super::adaptive::Shared,
    ) -> Result<(usize, DevPtr), CudaError> {
        let blocks = m.div_ceil(per_block.max(1));
        let svt = self.svt.as_ref();
        let ptr = |p: Option<DevPtr>| p.map_or(0, |p| p.0);
        // Field for field, in the C struct's order (every field 8 bytes).
        let words: Vec<u64> = vec![
            m as u64,
            blocks as u64,
            d as u64,
            self.gamma as u64,
            u64::from(self.private),
            u64::from(self.every_round),
            self.refactor_every.max(1) as u64,
            u64::from(svt.is_some()),
            svt.map_or(0, |s| u64::from(s.bufs.cap.min(i32::MAX as u32))),
            u64::from(shared.dubey),
            self.threshold.to_bits(),
            self.first_heard.to_bits(),
            svt.map_or(0.0, |s| s.bufs.qscale).to_bits(),
            svt.map_or(0.0, |s| s.bufs.l2).to_bits(),
            shared.sigma.to_bits(),
            self.start.0,
            self.nbr.0,
            self.hops.0,
            self.request_round.0,
            self.nreq.0,
            self.nbc.0,
            self.asked.0,
            self.bmask.0,
            self.smat.0,
            self.svec.0,
            self.logdet_s.0,
            self.vinvc.0,
            self.logdetc.0,
            self.dt.0,
            self.since.0,
            self.dirty.0,
            self.last_bc.0,
            self.heard.0,
            self.prev.0,
            if self.private { self.leaves.0 } else { 0 },
            self.payload.0,
            self.payload_round.0,
            self.shift.0,
            shared.akey.0,
            shared.tsum.0,
            shared.nsum.0,
            shared.failures.0,
            shared.scratch.0,
            ptr(svt.map(|s| s.bufs.keys)),
            ptr(svt.map(|s| s.bufs.rho)),
            ptr(svt.map(|s| s.bufs.sens)),
            ptr(svt.map(|s| s.bufs.used)),
            ptr(svt.map(|s| s.sinv)),
            l.alloc_zeroed(nf * 2 * 4)?.0,
            l.alloc_zeroed(2 * 4)?.0,
        ];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let at = l.alloc_zeroed(bytes.len())?;
        l.upload(at, &bytes)?;
        Ok((blocks, at))
    }

    /// Each federation's requests (`syncs`) and deliveries (`messages`:
    /// every request and broadcast once per receiver other than the sender)
    /// into `out`, whose other fields the driver filled.
    pub fn count(&mut self, l: &mut dyn Launcher, m: usize, out: &mut [Observation]) -> Result<(), CudaError> {
        download_slice(l, self.nreq, &mut self.nreq_host)?;
        download_slice(l, self.nbc, &mut self.nbc_host)?;
        let n = self.nreq_host.len();
        for (f, o) in out.iter_mut().enumerate() {
            let (mut syncs, mut messages) = (0, 0);
            for a in f * m..(f + 1) * m {
                let broadcasts: u64 = (0..self.gamma).map(|g| self.nbc_host[g * n + a]).sum();
                syncs += self.nreq_host[a];
                messages += (self.nreq_host[a] + broadcasts) * self.receivers[a];
            }
            o.syncs = syncs;
            o.messages = messages;
        }
        Ok(())
    }
}
