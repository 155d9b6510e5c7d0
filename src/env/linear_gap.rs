//! `linear_gap`: Dubey & Pentland's synthetic environment (NeurIPS 2020, 4.4).
//!
//! theta* is uniform on the unit sphere. Each round each agent gets K actions:
//! K - 1 with <x, theta*> ~ U[0.5, 0.6] and one optimal with <x*, theta*> ~
//! U[0.7, 0.8] at a uniformly random index, each built as
//! x = v theta* + sqrt(1 - v^2) r u with u a random unit vector orthogonal to
//! theta* and r ~ U[0, 1], so ||x|| <= 1 and <x, theta*> = v exactly. Rewards
//! are Bernoulli(v). For d = 1 there is no orthogonal direction and x = v theta*.
//!
//! u is built from d - 1 normals h: with
//! sigma = sign(theta*_0) (+1 at 0), the Householder reflection H = I - 2 w
//! w^T / ||w||^2, w = theta* + sigma e_0, is orthogonal and maps e_0 to
//! -sigma theta*, so it maps e_0's orthogonal complement onto theta*'s: for
//! h ~ N(0, I) on coordinates 1..d, H h / ||h|| is uniform on the unit
//! sphere orthogonal to theta*, exactly as the projection of a d-dimensional
//! normal was, one normal per action cheaper. With s = <theta*, h> and
//! beta = 1 / (1 + |theta*_0|) (= 2 / ||w||^2, at least 1/2: no
//! cancellation), H h = h - beta s w, so
//! x_0 = v theta*_0 - c sigma s and x_j = (v - c beta s) theta*_j + c h_j
//! (j >= 1) with c = r sqrt(1 - v^2) / ||h||; <x, theta*> = v up to
//! rounding (the terms in c s cancel: sigma theta*_0 + beta (1 -
//! theta*_0^2) = 1).
//!
//! Draws per round: K (d - 1) normals and 2K uniforms (v's offsets, then r)
//! from the agent's lanes, the optimal index from its scalar stream. Every
//! pass runs over all K actions of one coordinate (column-major), so it
//! vectorizes.

use super::{AgentStreams, DecisionSet, GapRound, Householder, inv_norm, random_unit};
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
    let g = &mut ds.scratch32[..k * (d - 1)];
    fill_normals_f32(&mut s.lanes, g);
    let opt = s.uniforms.below(k as u64) as usize;
    // v's offsets, then r (2K lane uniforms).
    fill_uniforms(&mut s.lanes, &mut ds.aux[..2 * k]);
    let round = GapRound {
        theta,
        g: &ds.scratch32[..k * (d - 1)],
        k,
        kp,
        opt,
        u: &ds.aux[..2 * k],
    };
    let work = (&mut ds.aux2[..k], &mut ds.norms[..k]);
    project_dispatch(&round, &mut ds.x, &mut ds.mean, work);
    // The optimal action's mean is at least 0.7, every other at most 0.6:
    // the best mean is v[opt] (a serial maximum over K was a chain of K
    // dependent compares).
    ds.best = ds.mean[opt];
}

/// [`project`] by the AVX-512 intrinsics where this CPU has them
/// (`gap_avx512`, the same bits), else the portable passes.
fn project_dispatch(round: &GapRound<'_>, x: &mut [f64], mean: &mut [f64], work: (&mut [f64], &mut [f64])) {
    #[cfg(target_arch = "x86_64")]
    if super::gap_avx512::available(round.theta.len()) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        unsafe { super::gap_avx512::project(round, x, mean) };
        return;
    }
    project(round, x, mean, work);
}

/// x and the means of a round's K actions: v to `mean[..k]`, x to columns
/// 0..k of `x` (row stride kp); `work` is workspace (two of k). Passes over
/// all K actions of one coordinate (long, unit-stride loops that
/// vectorize); `gap_avx512` computes the same bits in one pass. The sums
/// over coordinates and x's coordinates are fused multiply-adds
/// (`mul_add`: one rounding; the instruction on every path the dispatch
/// picks on x86-64 with FMA and on aarch64, a slow but equal software fma
/// on an x86-64 CPU without it).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub(crate) fn project(round: &GapRound<'_>, x: &mut [f64], mean: &mut [f64], work: (&mut [f64], &mut [f64])) {
    let GapRound {
        theta,
        g,
        k,
        kp,
        opt,
        u,
    } = *round;
    let d = theta.len();
    let (vu, ru) = u[..2 * k].split_at(k);
    let v = &mut mean[..k];
    for (a, (vi, u)) in v.iter_mut().zip(vu).enumerate() {
        let base = if a == opt { 0.7 } else { 0.5 };
        *vi = base + 0.1 * u;
    }
    // s_a = <theta, h_a> (coordinates 1..d) and ||h_a||^2.
    let (sp, n2) = work;
    sp.fill(0.0);
    n2.fill(0.0);
    for j in 1..d {
        let tj = theta[j];
        for ((p, q), gv) in sp.iter_mut().zip(n2.iter_mut()).zip(&g[(j - 1) * k..j * k]) {
            let gv = f64::from(*gv);
            *p = tj.mul_add(gv, *p);
            *q = gv.mul_add(gv, *q);
        }
    }
    // c_a = r sqrt(1 - v^2) / ||h_a|| (0 when h vanishes, as for d = 1),
    // with sqrt(s) = s / sqrt(s) and both reciprocal roots by [`inv_norm`]
    // (no f64 square root or division: their latency bound this loop); sp
    // becomes alpha_a = v - c_a beta s_a, n2 becomes c_a, and x_0 goes
    // straight to x.
    let h = Householder::of(theta);
    for (a, ((q, p), (vi, r))) in n2.iter_mut().zip(sp.iter_mut()).zip(v.iter().zip(ru)).enumerate() {
        let sv = 1.0 - vi * vi;
        let c = if *q > 1e-24 {
            r * (sv * inv_norm(sv)) * inv_norm(*q)
        } else {
            0.0
        };
        x[a] = h.x0(*vi, c, *p);
        *p = h.alpha(*vi, c, *p);
        *q = c;
    }
    let (alpha, c) = (&*sp, &*n2);
    for j in 1..d {
        let tj = theta[j];
        let col = &mut x[j * kp..j * kp + k];
        for (((x, gv), ci), al) in col
            .iter_mut()
            .zip(&g[(j - 1) * k..j * k])
            .zip(c.iter())
            .zip(alpha.iter())
        {
            *x = ci.mul_add(f64::from(*gv), al * tj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::lanes::Lanes;

    /// The Householder construction (module doc) gives <x, theta*> = v to
    /// rounding, ||x|| <= 1, and a direction u = (x - v theta*) / ||x - v
    /// theta*|| orthogonal to theta* whose second moments are those of the
    /// uniform distribution on that sphere, E[u_j^2] = (1 - theta*_j^2) /
    /// (d - 1), and E[u_j] = 0 (20,000 actions per theta*: within 0.03, some
    /// eight standard errors of E[u_j^2] at d = 3; a reflection about the
    /// wrong axis or a wrong beta fails the first check by far). theta* with
    /// theta*_0 negative, positive, zero and +-1 (beta = 1/2), and d = 1 (x =
    /// v theta*).
    #[test]
    fn reflected_directions_are_orthogonal_and_uniform() {
        let mut lanes = Lanes::new(&[77, 1]);
        let cases: [&[f64]; 7] = [
            &[-0.6, 0.8, 0.0],
            &[0.6, 0.0, -0.8],
            &[0.0, 0.6, 0.8],
            &[1.0, 0.0, 0.0],
            &[-1.0, 0.0, 0.0, 0.0],
            &[0.5, -0.5, 0.5, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            &[-1.0],
        ];
        let k = 100;
        for theta in cases {
            let d = theta.len();
            let (mut sum, mut sq) = (vec![0.0; d], vec![0.0; d]);
            let mut n = 0.0;
            for rep in 0..200 {
                let mut g = vec![0.0f32; (d - 1) * k];
                fill_normals_f32(&mut lanes, &mut g);
                let mut u = vec![0.0; 2 * k];
                fill_uniforms(&mut lanes, &mut u);
                let (mut x, mut mean) = (vec![0.0; d * k], vec![0.0; k]);
                let (mut w1, mut w2) = (vec![0.0; k], vec![0.0; k]);
                let round = GapRound {
                    theta,
                    g: &g,
                    k,
                    kp: k,
                    opt: rep % k,
                    u: &u,
                };
                project(&round, &mut x, &mut mean, (&mut w1, &mut w2));
                for a in 0..k {
                    let xa: Vec<f64> = (0..d).map(|j| x[j * k + a]).collect();
                    let dot: f64 = xa.iter().zip(theta).map(|(p, q)| p * q).sum();
                    assert!(
                        (dot - mean[a]).abs() < 1e-13,
                        "<x, theta> {dot} v {} theta {theta:?}",
                        mean[a]
                    );
                    let norm2: f64 = xa.iter().map(|p| p * p).sum();
                    assert!(norm2 <= 1.0 + 1e-12, "||x||^2 {norm2}");
                    if d == 1 {
                        assert_eq!(xa[0], mean[a] * theta[0]);
                        continue;
                    }
                    let o: Vec<f64> = xa.iter().zip(theta).map(|(p, q)| p - mean[a] * q).collect();
                    let on = o.iter().map(|p| p * p).sum::<f64>().sqrt();
                    if on > 1e-9 {
                        for j in 0..d {
                            sum[j] += o[j] / on;
                            sq[j] += (o[j] / on).powi(2);
                        }
                        n += 1.0;
                    }
                }
            }
            if d == 1 {
                continue;
            }
            for j in 0..d {
                let want = (1.0 - theta[j] * theta[j]) / (d - 1) as f64;
                assert!(
                    (sq[j] / n - want).abs() < 0.03,
                    "E[u_{j}^2] {} want {want}, theta {theta:?}",
                    sq[j] / n
                );
                assert!((sum[j] / n).abs() < 0.03, "E[u_{j}] {}, theta {theta:?}", sum[j] / n);
            }
        }
    }
}
