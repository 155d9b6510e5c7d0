//! Whether the linear driver can run a batch on a device of a given shared
//! memory ([`supports`]): the cells it refuses, each with the reason the
//! placement and the user see.

use super::{coop_step_shape, slots_per_agent};
use crate::algo::linear::batch::{LinearBatch, Release, SyncRule};
use crate::backend::cuda::CudaError;
use crate::env::LinearEnvKind;

/// Whether the driver can run this batch: linear_gap and `random` exist only
/// on the cooperative kernel, so they need its shape to fit the device's
/// shared memory; d >= 2; one key per agent where keys are needed; the
/// trees' float node noise only (`sampler: discrete` draws on the CPU).
pub fn supports(batch: &LinearBatch, shared_limit: usize) -> Result<(), CudaError> {
    let gap = matches!(batch.env.kind, LinearEnvKind::Gap);
    if batch.env.d < 2 {
        return Err(CudaError::Unsupported("d < 2".into()));
    }
    if matches!(
        batch.sync.as_ref().map(|s| &s.release),
        Some(Release::Tree { lattice: Some(_), .. })
    ) {
        return Err(CudaError::Unsupported(
            "sampler: discrete for the trees' node noise (the discrete Gaussian is drawn on the CPU only; \
             use backend: cpu or sampler: float)"
                .into(),
        ));
    }
    if batch
        .sync
        .as_ref()
        .and_then(|s| s.adaptive())
        .and_then(|a| a.svt.as_ref())
        .is_some_and(|svt| svt.lattice.is_some())
    {
        return Err(CudaError::Unsupported(
            "sampler: discrete for the private schedule's sparse vector test (its discrete Laplace is drawn on \
             the CPU only; use backend: cpu or sampler: float)"
                .into(),
        ));
    }
    if (gap || batch.random_policy.is_some()) && coop_step_shape(gap, batch.env.d, batch.env.k, shared_limit).is_none()
    {
        return Err(CudaError::Unsupported(format!(
            "{} at d = {}, K = {}: four agents' state exceeds the device's {shared_limit} bytes of shared memory per block",
            if gap { "linear_gap" } else { "random" },
            batch.env.d,
            batch.env.k
        )));
    }
    if batch
        .random_policy
        .as_ref()
        .is_some_and(|k| k.len() != batch.federations() * batch.m)
    {
        return Err(CudaError::Unsupported(
            "a random batch needs one policy key per agent".into(),
        ));
    }
    if let Some(crate::algo::linear::batch::Release::VecSum { .. }) = batch.sync.as_ref().map(|s| &s.release)
        && coop_step_shape(gap, batch.env.d, batch.env.k, shared_limit).is_none()
    {
        return Err(CudaError::Unsupported(format!(
            "sdp_vecsum at d = {}, K = {}: its kernels need the cooperative kernel, and four agents' state \
             exceeds the device's {shared_limit} bytes of shared memory per block",
            batch.env.d, batch.env.k
        )));
    }
    let per_agent = !matches!(batch.beta, crate::algo::linear::batch::Width::Schedule(_));
    if (batch.adaptive() || per_agent)
        && (batch.adaptive() != per_agent || coop_step_shape(gap, batch.env.d, batch.env.k, shared_limit).is_none())
    {
        return Err(CudaError::Unsupported(format!(
            "FedUCB at d = {}, K = {} on {}: its kernels need the cooperative kernel, and four agents' state \
             exceeds the device's {shared_limit} bytes of shared memory per block",
            batch.env.d,
            batch.env.k,
            if gap { "linear_gap" } else { "linear_sphere" }
        )));
    }
    if batch.sync.as_ref().is_some_and(SyncRule::tree)
        && batch.noise_keys.len() != batch.federations() * batch.m * slots_per_agent(batch)
    {
        return Err(CudaError::Unsupported(
            "a private batch needs one noise key per agent and slot".into(),
        ));
    }
    Ok(())
}
