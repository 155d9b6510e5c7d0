//! `linear_sphere`: Zhou & Chowdhury's synthetic environment, as in the
//! authors' code (after Vaswani et al. 2020).
//!
//! Per round and agent K raw vectors z: the first d - 1 coordinates are a
//! standard normal vector normalized to the unit sphere, the last coordinate
//! is 1; the first min(d, K) actions are replaced by the rows of I_d with the
//! last column set to 1. theta* = 0.5 (unit vector in R^{d-1}) appended with
//! 0.5. The agent observes x = z / ||z||. Rewards are mean + N(0,
//! noise_std^2), the mean being
//! - `reward_on: normalized` (the default): <x, theta*>,
//!   the linear model every learner assumes;
//! - `reward_on: raw` (the authors' code, kept to reproduce their figures):
//!   <z, theta*> on the raw vector. The rows e_i + e_{d-1} and the random
//!   rows have ||z|| = sqrt(2), so their means are sqrt(2) <x, theta*>, but
//!   the row e_{d-1} (present when K >= d) has ||z|| = 1 and mean
//!   <x, theta*>: once a random row is offered too (K > d), no single
//!   theta' gives every action's mean as <x, theta'> ([`misspecified`]),
//!   and a learner can settle on a wrong
//!   action for good (regret linear in T; analysis/README.md, "Long horizons").
//!
//! Random rows have ||z|| = sqrt(2) exactly, so x = z / sqrt(2). Requires
//! d >= 2.
//!
//! Draws per round: (K - min(d, K)) (d - 1) normals (lanes).

use super::{AgentStreams, DecisionSet, SphereRows, inv_norm, random_unit};
use crate::rng::Stream;
use crate::rng::normal::fill_normals_f32;

/// Whether the linear model <x, theta'> cannot give every action's mean.
/// With `raw` means the d fixed rows (K >= d) are linearly independent and
/// pin theta' down: theta'_{d-1} = theta*_{d-1} from e_{d-1} (||z|| = 1),
/// theta'_i = sqrt(2) (theta*_i + theta*_{d-1}) - theta*_{d-1} from
/// e_i + e_{d-1}. A random row z = (u, 1) then gets <x, theta'> = <z,
/// theta*> + (1 - 1/sqrt(2)) theta*_{d-1} (sum_i u_i - 1), wrong unless the
/// coordinates of u sum to 1 (probability 0): misspecified when K > d.
/// With K < d every row has ||z|| = sqrt(2) and theta' = sqrt(2) theta* is
/// exact; with K = d the d fixed rows alone are offered and any means fit;
/// `normalized` means are exact with theta' = theta*.
pub fn misspecified(raw: bool, d: usize, k: usize) -> bool {
    raw && k > d
}

pub(crate) fn draw_theta(d: usize, s: &mut Stream) -> Vec<f64> {
    let mut theta: Vec<f64> = random_unit(d - 1, s).into_iter().map(|v| 0.5 * v).collect();
    theta.push(0.5);
    theta
}

pub(crate) fn draw(theta: &[f64], raw: bool, env_id: u64, s: &mut AgentStreams, ds: &mut DecisionSet) {
    let (d, k, kp) = (ds.d, ds.k, ds.kp);
    let last = d - 1;
    let fixed = d.min(k);
    let inv_sqrt2 = std::f64::consts::FRAC_1_SQRT_2;
    // Deterministic rows, e_i + e_{d-1} (i < d - 1) and e_{d-1}: the same in
    // every round, written once per buffer and environment.
    if ds.prepared_for != env_id {
        let mut fixed_best = f64::NEG_INFINITY;
        for a in 0..fixed {
            for j in 0..d {
                ds.x[j * kp + a] = 0.0;
            }
            let (raw_mean, norm) = if a < last {
                (theta[a] + theta[last], std::f64::consts::SQRT_2)
            } else {
                (theta[last], 1.0)
            };
            if a < last {
                ds.x[a * kp + a] = 1.0 / norm;
            }
            ds.x[last * kp + a] = 1.0 / norm;
            let m = if raw { raw_mean } else { raw_mean / norm };
            ds.mean[a] = m;
            fixed_best = fixed_best.max(m);
        }
        ds.prepared_for = env_id;
        ds.prepared_best = fixed_best;
    }
    let nr = k - fixed;
    let mut best = ds.prepared_best;
    if nr > 0 {
        fill_normals_f32(&mut s.lanes, &mut ds.scratch32[..nr * last]);
        let scale = if raw { 1.0 } else { inv_sqrt2 };
        let rows = SphereRows {
            theta,
            g: &ds.scratch32[..nr * last],
            nr,
            kp,
            fixed,
            scale,
        };
        let top = rows_dispatch(&rows, &mut ds.x, &mut ds.mean, &mut ds.norms);
        best = if top > best { top } else { best };
    }
    ds.best = best;
}

/// [`random_rows`] by the AVX-512 intrinsics where this CPU has them
/// (`sphere_avx512`, the same bits), else the portable passes.
fn rows_dispatch(rows: &SphereRows<'_>, x: &mut [f64], mean: &mut [f64], inv: &mut [f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if super::sphere_avx512::available(rows.theta.len()) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { super::sphere_avx512::random_rows(rows, x, mean) };
    }
    random_rows(rows, x, mean, inv)
}

/// The nr random actions of a round: x = (g / ||g||, 1) / sqrt(2) written
/// to columns fixed..fixed + nr of `x`, each mean (<z, theta*>, times the
/// scale) to the same columns of `mean`; returns the largest of those
/// means. Column-wise passes over the actions (long, unit-stride loops
/// that vectorize); `inv` is workspace (nr).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub(crate) fn random_rows(rows: &SphereRows<'_>, x: &mut [f64], mean: &mut [f64], inv: &mut [f64]) -> f64 {
    let SphereRows {
        theta,
        g,
        nr,
        kp,
        fixed,
        scale,
    } = *rows;
    let last = theta.len() - 1;
    let inv_sqrt2 = std::f64::consts::FRAC_1_SQRT_2;
    let inv = &mut inv[..nr];
    inv.fill(0.0);
    for j in 0..last {
        for (n2, v) in inv.iter_mut().zip(&g[j * nr..(j + 1) * nr]) {
            let v = f64::from(*v);
            *n2 += v * v;
        }
    }
    for n2 in inv.iter_mut() {
        *n2 = inv_norm(*n2);
    }
    let means = &mut mean[fixed..fixed + nr];
    means.fill(theta[last]);
    for j in 0..last {
        let tj = theta[j];
        let col = &g[j * nr..(j + 1) * nr];
        let dst = &mut x[j * kp + fixed..j * kp + fixed + nr];
        for (((x, m), v), iv) in dst.iter_mut().zip(means.iter_mut()).zip(col).zip(inv.iter()) {
            let z = f64::from(*v) * iv; // coordinate of the unit vector
            *m += tj * z;
            *x = z * inv_sqrt2;
        }
    }
    x[last * kp + fixed..last * kp + fixed + nr].fill(inv_sqrt2);
    // Lane-wise maximum (vectorizes; means are finite).
    let mut best = f64::NEG_INFINITY;
    let mut top = [f64::NEG_INFINITY; 8];
    let (chunks, rest) = means.as_chunks_mut::<8>();
    for c in chunks {
        for l in 0..8 {
            c[l] *= scale;
            top[l] = if c[l] > top[l] { c[l] } else { top[l] };
        }
    }
    for m in rest.iter_mut() {
        *m *= scale;
        best = if *m > best { *m } else { best };
    }
    for v in top {
        best = if v > best { v } else { best };
    }
    best
}
