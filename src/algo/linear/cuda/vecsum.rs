//! The device state of the shuffle vector-summation protocol
//! ([`crate::privacy::vecsum`], `kernels/vecsum.cu`): per federation the
//! per-level integer accumulators and released nodes, per agent its
//! randomizer key; the protocol's per-level parameters, and the struct
//! `fb_vecsum_args` through which `fb_linear_rounds_coop` randomizes every
//! round's points inside its launch. The driver closes a batch at each
//! sync (`fb_vecsum_close`).

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
    /// Per federation: the shuffler's folded key.
    pub shkeys: DevPtr,
    /// Per federation: levels x coordinates integer accumulators.
    pub acc: DevPtr,
    /// Per federation: levels x coordinates released nodes.
    pub stored: DevPtr,
    /// `struct fb_vecsum_args` of kernels/vecsum.cu (levels, L, g_j, the
    /// agents' keys, the accumulators; every field 8 bytes).
    pub args: DevPtr,
}

impl VecSumState {
    /// The protocol state of every federation of `batch` (whose release is
    /// [`Release::VecSum`]) at round 0; `None` for another release.
    pub fn new(l: &mut dyn Launcher, batch: &LinearBatch) -> Result<Option<Self>, CudaError> {
        let Some(Release::VecSum { proto, keys }) = batch.sync.as_ref().map(|s| &s.release) else {
            return Ok(None);
        };
        let (nf, m) = (batch.federations(), batch.m);
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
        let (glev, akeys) = (upload_slice(l, g)?, upload_slice(l, &akeys)?);
        let acc = l.alloc_zeroed(nf * levels * coords * 8)?;
        let words = [levels as u64, proto.bound().to_bits(), glev.0, akeys.0, acc.0];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let args = l.alloc_zeroed(bytes.len())?;
        l.upload(args, &bytes)?;
        Ok(Some(Self {
            levels,
            l: proto.bound(),
            glev,
            tlev: upload_slice(l, trials)?,
            nlev: upload_slice(l, nn)?,
            shkeys: upload_slice(l, &shkeys)?,
            acc,
            stored: l.alloc_zeroed(nf * levels * coords * 8)?,
            args,
        }))
    }
}
