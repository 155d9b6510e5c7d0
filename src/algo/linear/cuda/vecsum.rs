//! The device state of the shuffle vector-summation protocol
//! ([`crate::privacy::vecsum`], `kernels/vecsum.cu`): per federation the
//! per-level integer accumulators and released nodes, per agent its
//! randomizer key and the round's point; the protocol's per-level
//! parameters. The driver ([`super::driver`]) steps such a batch one round
//! per launch, randomizes every point on the device after each round and
//! closes a batch at each sync.

use crate::algo::linear::batch::{LinearBatch, Release};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{DevPtr, Launcher, upload_slice};

/// The protocol's buffers and constants on the device.
pub struct VecSumState {
    /// Levels of the tree.
    pub levels: usize,
    /// The bound L.
    pub l: f64,
    /// Per level: g_j, the Binomial trials of a release, n_j.
    pub glev: DevPtr,
    /// The Binomial trials of a release.
    pub tlev: DevPtr,
    /// n_j.
    pub nlev: DevPtr,
    /// Per agent: the randomizer's folded key.
    pub akeys: DevPtr,
    /// Per federation: the shuffler's folded key.
    pub shkeys: DevPtr,
    /// Per federation: levels x coordinates integer accumulators.
    pub acc: DevPtr,
    /// Per federation: levels x coordinates released nodes.
    pub stored: DevPtr,
    /// Per agent: whether the protocol clipped a coordinate of the round's point.
    pub pclip: DevPtr,
    /// Per agent: the round's reward and whether clipping changed it.
    pub ylast: DevPtr,
    /// Per agent: the round's action (d).
    pub xlast: DevPtr,
}

impl VecSumState {
    /// The protocol state of every federation of `batch` (whose release is
    /// [`Release::VecSum`]) at round 0; `None` for another release.
    pub fn new(l: &mut dyn Launcher, batch: &LinearBatch) -> Result<Option<Self>, CudaError> {
        let Some(Release::VecSum { proto, keys }) = batch.sync.as_ref().map(|s| &s.release) else {
            return Ok(None);
        };
        let (nf, m, d) = (batch.federations(), batch.m, batch.env.d);
        let n = nf * m;
        if keys.len() != nf * (m + 1) {
            return Err(CudaError::Unsupported(
                "sdp_vecsum needs M + 1 keys per federation".into(),
            ));
        }
        let levels = proto.levels();
        let coords = proto.coords();
        let (g, trials, nn) = proto.levels_params();
        let akeys: Vec<u64> = (0..nf)
            .flat_map(|f| keys[f * (m + 1)..f * (m + 1) + m].to_vec())
            .collect();
        let shkeys: Vec<u64> = (0..nf).map(|f| keys[f * (m + 1) + m]).collect();
        Ok(Some(Self {
            levels,
            l: proto.bound(),
            glev: upload_slice(l, g)?,
            tlev: upload_slice(l, trials)?,
            nlev: upload_slice(l, nn)?,
            akeys: upload_slice(l, &akeys)?,
            shkeys: upload_slice(l, &shkeys)?,
            acc: l.alloc_zeroed(nf * levels * coords * 8)?,
            stored: l.alloc_zeroed(nf * levels * coords * 8)?,
            pclip: upload_slice(l, &vec![0i32; n])?,
            ylast: l.alloc_zeroed(n * 2 * 8)?,
            xlast: l.alloc_zeroed(n * d * 8)?,
        }))
    }
}
