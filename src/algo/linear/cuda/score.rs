//! The cooperative scorer on its own (`fb_score_coop`, kernels/linear.cu):
//! a batch of agents' decision sets scored with one warp per agent, the
//! kernel that checks the UCB argmax of the multi-round kernels' lanes
//! against the CPU scorer in isolation.

use super::{COOP_BLOCK, COOP_LANES, int_arg};
use crate::backend::cuda::CudaError;
use crate::backend::cuda::launcher::{Arg, Launcher, download_slice, upload_slice};

/// Scores `n` agents' column-major decision sets (`x`: n x d x kp) with
/// their V^{-1} (`a`: n x d x d) and theta_hat (`theta`: n x d) on the
/// cooperative kernel `fb_score_coop`, returning each agent's (arm, x^T A x)
/// -- bit for bit the CPU scorer's ([`crate::algo::linear::cpu::score::score_argmax`]).
/// V^{-1} is staged in shared memory when a block's agents fit in 48 KiB.
#[allow(clippy::too_many_arguments)]
pub fn score_batch(
    l: &mut dyn Launcher,
    d: usize,
    k: usize,
    kp: usize,
    beta: f64,
    x: &[f64],
    a: &[f64],
    theta: &[f64],
) -> Result<Vec<(usize, f64)>, CudaError> {
    let n = theta.len() / d.max(1);
    if x.len() != n * d * kp || a.len() != n * d * d || k > kp || !kp.is_multiple_of(8) {
        return Err(CudaError::Unsupported("score_batch: inconsistent shapes".into()));
    }
    let per_block = COOP_BLOCK / COOP_LANES;
    // Per agent: V^{-1} and theta when staged, then each lane's x scratch.
    let scratch = COOP_LANES * d;
    let limit = l.max_shared_per_block();
    let stage = per_block * (d * d + d + scratch) * 8 <= limit;
    let shared = per_block * (if stage { d * d + d } else { 0 } + scratch) * 8;
    if shared > limit {
        return Err(CudaError::Unsupported(format!(
            "score_batch: d = {d} needs {shared} bytes of shared memory"
        )));
    }
    let (xp, ap, tp) = (upload_slice(l, x)?, upload_slice(l, a)?, upload_slice(l, theta)?);
    let arms = upload_slice(l, &vec![0i32; n])?;
    let quads = upload_slice(l, &vec![0.0f64; n])?;
    l.launch_grid(
        "fb_score_coop",
        n.div_ceil(per_block).max(1),
        COOP_BLOCK,
        shared,
        &[
            int_arg(n)?,
            int_arg(d)?,
            int_arg(k)?,
            int_arg(kp)?,
            Arg::I32(i32::from(stage)),
            Arg::F64(beta),
            Arg::Ptr(xp),
            Arg::Ptr(ap),
            Arg::Ptr(tp),
            Arg::Ptr(arms),
            Arg::Ptr(quads),
        ],
    )?;
    let mut arm = vec![0i32; n];
    let mut quad = vec![0.0f64; n];
    download_slice(l, arms, &mut arm)?;
    download_slice(l, quads, &mut quad)?;
    Ok(arm.into_iter().map(|v| v.max(0) as usize).zip(quad).collect())
}
