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

use super::{AgentStreams, DecisionSet, random_unit};
use crate::rng::Stream;
use crate::rng::lanes::fill_uniforms;
use crate::rng::normal::fill_normals;

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
    let g = &mut ds.scratch[..k * d];
    fill_normals(&mut s.lanes, g); // [coordinate][action]
    let opt = s.uniforms.below(k as u64) as usize;
    // v in the mean buffer, r in the norms buffer (2K lane uniforms).
    fill_uniforms(&mut s.lanes, &mut ds.aux[..2 * k]);
    let (vu, ru) = ds.aux[..2 * k].split_at(k);
    let v = &mut ds.mean[..k];
    for (a, (vi, u)) in v.iter_mut().zip(vu).enumerate() {
        let base = if a == opt { 0.7 } else { 0.5 };
        *vi = base + 0.1 * u;
    }
    let c = &mut ds.norms[..k];
    c.copy_from_slice(ru);
    // Project out theta: proj_a = sum_j g_ja theta_j, g_ja -= proj_a theta_j.
    let proj = &mut ds.aux2[..k];
    proj.fill(0.0);
    for (j, tj) in theta.iter().enumerate().take(d) {
        for (p, gv) in proj.iter_mut().zip(&g[j * k..(j + 1) * k]) {
            *p += gv * tj;
        }
    }
    let n2 = &mut ds.aux[..k];
    n2.fill(0.0);
    for (j, tj) in theta.iter().enumerate().take(d) {
        for ((gv, p), q) in g[j * k..(j + 1) * k].iter_mut().zip(proj.iter()).zip(n2.iter_mut()) {
            *gv -= p * tj;
            *q += *gv * *gv;
        }
    }
    // c_a = sqrt(1 - v^2) r / ||g_a|| (0 when g_a vanishes, as for d = 1).
    for ((ci, vi), q) in c.iter_mut().zip(v.iter()).zip(n2.iter()) {
        *ci = if *q > 1e-24 {
            (1.0 - vi * vi).sqrt() * *ci / q.sqrt()
        } else {
            0.0
        };
    }
    for (j, tj) in theta.iter().enumerate().take(d) {
        let col = &mut ds.x[j * kp..j * kp + k];
        for (((x, gv), ci), vi) in col.iter_mut().zip(&g[j * k..(j + 1) * k]).zip(c.iter()).zip(v.iter()) {
            *x = vi * tj + ci * gv;
        }
    }
    let mut best = f64::NEG_INFINITY;
    for &vi in v.iter() {
        best = if vi > best { vi } else { best };
    }
    ds.best = best;
}
