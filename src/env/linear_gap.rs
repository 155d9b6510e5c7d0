//! `linear_gap`: Dubey & Pentland's synthetic environment (NeurIPS 2020, 4.4).
//!
//! theta* is uniform on the unit sphere. Each round each agent gets K actions:
//! K - 1 with <x, theta*> ~ U[0.5, 0.6] and one optimal with <x*, theta*> ~
//! U[0.7, 0.8] at a uniformly random index, each built as
//! x = v theta* + sqrt(1 - v^2) r u with u a random unit vector orthogonal to
//! theta* and r ~ U[0, 1], so ||x|| <= 1 and <x, theta*> = v exactly. Rewards
//! are Bernoulli(v). For d = 1 there is no orthogonal direction and x = v theta*.
//!
//! Draws per round: K d normals and 2K uniforms (v's offsets, then r) from the
//! agent's lanes, the optimal index from its scalar stream. Every pass runs
//! over all K actions of one coordinate (column-major), so it vectorizes.

use super::{AgentStreams, DecisionSet, inv_norm, random_unit};
use crate::rng::Stream;
use crate::rng::lanes::fill_uniforms;
use crate::rng::normal::fill_normals_f32;

pub(crate) fn draw_theta(d: usize, s: &mut Stream) -> Vec<f64> {
    random_unit(d, s)
}

#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub(crate) fn draw(theta: &[f64], s: &mut AgentStreams, ds: &mut DecisionSet) {
    let (d, k, kp) = (ds.d, ds.k, ds.kp);
    ds.prepared_for = 0; // every action is rewritten each round
    // [coordinate][action], stored as drawn (f32: half the bytes to pass
    // over; widened exactly where read).
    let g = &mut ds.scratch32[..k * d];
    fill_normals_f32(&mut s.lanes, g);
    let opt = s.uniforms.below(k as u64) as usize;
    // v's offsets, then r (2K lane uniforms).
    fill_uniforms(&mut s.lanes, &mut ds.aux[..2 * k]);
    let (g, u) = (&ds.scratch32[..k * d], &ds.aux[..2 * k]);
    let work = (&mut ds.aux2[..k], &mut ds.norms[..k]);
    project_dispatch(theta, g, k, kp, opt, u, &mut ds.x, &mut ds.mean, work);
    // The optimal action's mean is at least 0.7, every other at most 0.6:
    // the best mean is v[opt] (a serial maximum over K was a chain of K
    // dependent compares).
    ds.best = ds.mean[opt];
}

/// [`project`] by the AVX-512 intrinsics where this CPU has them
/// (`gap_avx512`, the same bits), else the portable passes.
#[allow(clippy::too_many_arguments)]
fn project_dispatch(
    theta: &[f64],
    g: &[f32],
    k: usize,
    kp: usize,
    opt: usize,
    u: &[f64],
    x: &mut [f64],
    mean: &mut [f64],
    work: (&mut [f64], &mut [f64]),
) {
    #[cfg(target_arch = "x86_64")]
    if super::gap_avx512::available(theta.len()) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        unsafe { super::gap_avx512::project(theta, g, k, kp, opt, u, x, mean) };
        return;
    }
    project(theta, g, k, kp, opt, u, x, mean, work);
}

/// x and the means of a round's K actions from their normals `g`
/// (`[coordinate][action]`, d rows of k), the optimal index `opt` and the
/// 2K uniforms `u` (v's offsets, then r): v to `mean[..k]`, x to columns
/// 0..k of `x` (row stride kp); `work` is workspace (two of k). Passes over
/// all K actions of one coordinate (long, unit-stride loops that
/// vectorize); `gap_avx512` computes the same bits in one pass.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn project(
    theta: &[f64],
    g: &[f32],
    k: usize,
    kp: usize,
    opt: usize,
    u: &[f64],
    x: &mut [f64],
    mean: &mut [f64],
    work: (&mut [f64], &mut [f64]),
) {
    let d = theta.len();
    let (vu, ru) = u[..2 * k].split_at(k);
    let v = &mut mean[..k];
    for (a, (vi, u)) in v.iter_mut().zip(vu).enumerate() {
        let base = if a == opt { 0.7 } else { 0.5 };
        *vi = base + 0.1 * u;
    }
    // The projection out of theta is a rank-one update, so neither g - p
    // theta nor its norm is formed: with p_a = <g_a, theta> and ||theta|| = 1,
    // ||g_a - p_a theta||^2 = ||g_a||^2 - p_a^2, and
    // x_a = v theta + c (g_a - p_a theta) = (v - c p_a) theta + c g_a.
    // One pass reads g for p and ||g||^2, one writes x (semantics 14; the
    // four passes before it formed g - p theta).
    let (proj, n2) = work;
    proj.fill(0.0);
    n2.fill(0.0);
    for (j, tj) in theta.iter().enumerate().take(d) {
        for ((p, q), gv) in proj.iter_mut().zip(n2.iter_mut()).zip(&g[j * k..(j + 1) * k]) {
            let gv = f64::from(*gv);
            *p += gv * tj;
            *q += gv * gv;
        }
    }
    // c_a = r sqrt(1 - v^2) / ||g_a - p_a theta|| (0 when that vanishes, as
    // for d = 1), with sqrt(s) = s / sqrt(s) and both reciprocal roots by
    // [`inv_norm`] (no f64 square root or division: their latency bound
    // this loop); proj becomes alpha_a = v - c_a p_a, n2 becomes c_a. An
    // error of 1e-14 in c_a moves x along the orthogonal direction only:
    // <x, theta> = alpha_a + c_a p_a = v still.
    for (((q, p), vi), r) in n2.iter_mut().zip(proj.iter_mut()).zip(v.iter()).zip(ru) {
        let o2 = *q - *p * *p;
        let s = 1.0 - vi * vi;
        let c = if o2 > 1e-24 {
            r * (s * inv_norm(s)) * inv_norm(o2)
        } else {
            0.0
        };
        *p = vi - c * *p;
        *q = c;
    }
    let (alpha, c) = (&*proj, &*n2);
    for (j, tj) in theta.iter().enumerate().take(d) {
        let col = &mut x[j * kp..j * kp + k];
        for (((x, gv), ci), al) in col
            .iter_mut()
            .zip(&g[j * k..(j + 1) * k])
            .zip(c.iter())
            .zip(alpha.iter())
        {
            *x = al * tj + ci * f64::from(*gv);
        }
    }
}
