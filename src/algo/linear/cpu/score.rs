//! The UCB scorer of the linear family's CPU step: every action of a
//! decision set scored with <theta, x> + beta sqrt(x^T V^-1 x), the argmax
//! kept, with runtime instruction-set dispatch.
//!
//! The scorer works on 8 actions at a time (one 512-bit vector of f64 per
//! coordinate, since decision sets are column-major) and uses the symmetry of
//! V^{-1}: x^T A x = sum_i x_i (A_ii x_i + 2 sum_{j>i} A_ij x_j), which is
//! d (d + 3) / 2 fused multiply-adds per action instead of d^2 + d. Each lane
//! computes one action with a fixed operation order, so results do not depend
//! on the vector width the dispatcher picks (and `mul_add` is exact on every
//! path), hence bit-identical output on any x86-64 CPU.

use crate::rng::lanes::LANES;

#[cfg(target_arch = "x86_64")]
#[path = "score_avx512.rs"]
mod avx512;

/// Lane-wise running argmax over blocks of 8 actions.
struct Best {
    s: [f64; LANES],
    i: [usize; LANES],
    q: [f64; LANES],
}

impl Best {
    #[inline(always)]
    fn new() -> Self {
        Self {
            s: [f64::NEG_INFINITY; LANES],
            i: [0; LANES],
            q: [0.0; LANES],
        }
    }

    #[inline(always)]
    fn offer(&mut self, blk: usize, k: usize, mean: &[f64; LANES], quad: &[f64; LANES], beta: f64) {
        for l in 0..LANES {
            let idx = blk * LANES + l;
            let s = beta.mul_add(quad[l].max(0.0).sqrt(), mean[l]);
            let s = if idx < k { s } else { f64::NEG_INFINITY };
            if s > self.s[l] {
                self.s[l] = s;
                self.i[l] = idx;
                self.q[l] = quad[l];
            }
        }
    }

    /// Highest score, lowest index on ties; action 0 if every score was NaN
    /// (only with a corrupted V^{-1}).
    #[inline(always)]
    fn finish(&self) -> (usize, f64) {
        let mut bi = usize::MAX;
        let mut bs = f64::NEG_INFINITY;
        let mut bq = 0.0;
        for l in 0..LANES {
            if self.s[l] > bs || (self.s[l] == bs && self.i[l] < bi) {
                bs = self.s[l];
                bi = self.i[l];
                bq = self.q[l];
            }
        }
        if bi == usize::MAX { (0, 0.0) } else { (bi, bq) }
    }
}

/// Scores NB consecutive 8-action blocks starting at `blk0`. Working on
/// several blocks at once gives NB independent multiply-add chains, so the
/// loop is bound by FMA throughput rather than latency.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn score_group<const NB: usize>(
    d: usize,
    k: usize,
    xb: &[[f64; LANES]],
    kb: usize,
    blk0: usize,
    a: &[f64],
    theta: &[f64],
    beta: f64,
    best: &mut Best,
) {
    let mut mean = [[0.0f64; LANES]; NB];
    let mut quad = [[0.0f64; LANES]; NB];
    for i in 0..d {
        let row = &a[i * d..(i + 1) * d];
        let mut t = [[0.0f64; LANES]; NB];
        for (j, &aij) in row.iter().enumerate().skip(i + 1) {
            let xs = &xb[j * kb + blk0..j * kb + blk0 + NB];
            for g in 0..NB {
                for l in 0..LANES {
                    t[g][l] = aij.mul_add(xs[g][l], t[g][l]);
                }
            }
        }
        let aii = row[i];
        let th = theta[i];
        let xs = &xb[i * kb + blk0..i * kb + blk0 + NB];
        for g in 0..NB {
            for l in 0..LANES {
                let xi = xs[g][l];
                let inner = aii.mul_add(xi, 2.0 * t[g][l]);
                quad[g][l] = xi.mul_add(inner, quad[g][l]);
                mean[g][l] = th.mul_add(xi, mean[g][l]);
            }
        }
    }
    for g in 0..NB {
        best.offer(blk0 + g, k, &mean[g], &quad[g], beta);
    }
}

/// Scores all actions of a column-major decision set (`x`, d blocks of
/// K rounded up to 8) with <theta, x> + beta sqrt(x^T A x) and returns the
/// argmax (lowest index on ties) and its x^T A x. On a CPU with AVX-512F
/// and d <= 16 the intrinsics scorer runs ([`avx512`], the same bits),
/// otherwise [`score_argmax_portable`].
#[inline]
pub fn score_argmax(d: usize, k: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> (usize, f64) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available(d) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { avx512::score_argmax(d, k, x, a, theta, beta) };
    }
    score_argmax_portable(d, k, x, a, theta, beta)
}

/// The scorer from portable code, compiled for each instruction set the
/// dispatcher knows (see the module docs).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn score_argmax_portable(d: usize, k: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> (usize, f64) {
    let (xb, _) = x.as_chunks::<LANES>();
    let kb = xb.len() / d.max(1);
    let mut best = Best::new();
    let mut blk = 0;
    while blk + 4 <= kb {
        score_group::<4>(d, k, xb, kb, blk, a, theta, beta, &mut best);
        blk += 4;
    }
    while blk < kb {
        score_group::<1>(d, k, xb, kb, blk, a, theta, beta, &mut best);
        blk += 1;
    }
    best.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::dense;
    use crate::linalg;
    use crate::rng::Stream;

    /// Plain reference scorer: full quadratic form, scalar loop.
    fn reference(d: usize, k: usize, kp: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> usize {
        let mut best = (f64::NEG_INFINITY, 0);
        for arm in 0..k {
            let xa: Vec<f64> = (0..d).map(|j| x[j * kp + arm]).collect();
            let mut q = 0.0;
            for i in 0..d {
                for j in 0..d {
                    q += xa[i] * a[i * d + j] * xa[j];
                }
            }
            let m: f64 = (0..d).map(|i| theta[i] * xa[i]).sum();
            let s = m + beta * q.max(0.0).sqrt();
            if s > best.0 {
                best = (s, arm);
            }
        }
        best.1
    }

    #[test]
    fn scorer_matches_reference() {
        let mut s = Stream::new(&[3]);
        for (d, k) in [(1usize, 3usize), (3, 8), (5, 25), (10, 100), (7, 9)] {
            let kp = k.div_ceil(8usize) * 8;
            for _ in 0..50 {
                let mut x = vec![0.0; d * kp];
                for j in 0..d {
                    for a in 0..k {
                        x[j * kp + a] = s.normal();
                    }
                }
                let mut a = vec![0.0; d * d];
                for _ in 0..d + 2 {
                    let v: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                    linalg::add_outer(&mut a, &v, d);
                }
                let theta: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                let beta = s.uniform() * 3.0;
                let (arm, _) = score_argmax(d, k, &x, &a, &theta, beta);
                assert_eq!(arm, reference(d, k, kp, &x, &a, &theta, beta));
            }
        }
    }

    /// The intrinsics scorer returns the portable scorer's bits (action and
    /// x^T A x) on Gram-like inverses, ties and NaN included; d up to its
    /// largest, K not a multiple of 8. Skipped (vacuous) on a CPU without
    /// AVX-512F, where the portable scorer is the only one.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn intrinsics_scorer_equals_portable_bit_for_bit() {
        if !avx512::available(1) {
            return;
        }
        let mut s = Stream::new(&[11]);
        for (d, k) in [(1usize, 3usize), (2, 20), (5, 25), (10, 100), (16, 37), (7, 9)] {
            let kp = k.div_ceil(8usize) * 8;
            for rep in 0..200 {
                let mut x = vec![0.0; d * kp];
                for j in 0..d {
                    for a in 0..k {
                        // Every fifth set has repeated actions (ties).
                        x[j * kp + a] = if rep % 5 == 0 {
                            0.25 * ((a % 3) as f64)
                        } else {
                            s.normal()
                        };
                    }
                }
                let mut v = vec![0.0; d * d];
                linalg::set_scaled_identity(&mut v, d, 1.0);
                for _ in 0..rep % 30 {
                    let u: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                    linalg::add_outer(&mut v, &u, d);
                }
                let mut a = vec![0.0; d * d];
                let (mut m1, mut m2) = (vec![0.0; d * d], vec![0.0; d * d]);
                linalg::spd_inverse_with_jitter(&v, d, &mut a, &mut m1, &mut m2).expect("spd");
                if rep == 7 {
                    a[0] = f64::NAN;
                }
                let theta: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                let beta = s.uniform() * 3.0;
                // SAFETY: `available` checked AVX-512F above.
                let (i1, q1) = unsafe { avx512::score_argmax(d, k, &x, &a, &theta, beta) };
                let (i2, q2) = score_argmax_portable(d, k, &x, &a, &theta, beta);
                assert_eq!((i1, q1.to_bits()), (i2, q2.to_bits()), "d {d} k {k} rep {rep}");
            }
        }
    }

    #[test]
    fn ties_go_to_lowest_index() {
        let (d, k) = (2, 20);
        let kp = 24;
        let mut x = vec![0.0; d * kp];
        for a in 0..k {
            x[a] = 0.5;
            x[kp + a] = 0.5;
        }
        let a = [1.0, 0.0, 0.0, 1.0];
        let (arm, q) = score_argmax(d, k, &x, &a, &[1.0, 1.0], 1.0);
        assert_eq!(arm, 0);
        assert!((q - 0.5).abs() < 1e-15);
        // Make action 13 strictly best.
        x[13] = 0.6;
        assert_eq!(score_argmax(d, k, &x, &a, &[1.0, 1.0], 1.0).0, 13);
    }

    /// The GEMM scorer of the backend's dense kernels (used above its
    /// crossover) picks what this scorer picks.
    #[test]
    fn gemm_scorer_picks_what_the_handwritten_one_picks() {
        let mut s = Stream::new(&[22]);
        for (d, k) in [(4usize, 9usize), (16, 100), (64, 40), (130, 17)] {
            let kp = k.div_ceil(8) * 8;
            let mut scratch = dense::DenseScratch::new(d, kp);
            for _ in 0..20 {
                let mut x = vec![0.0; d * kp];
                for j in 0..d {
                    for a in 0..k {
                        x[j * kp + a] = s.normal();
                    }
                }
                let a = linalg::random_spd(d, &mut s);
                let theta: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                let beta = 3.0 * s.uniform();
                let (arm, q) = dense::score_argmax(d, k, &x, &a, &theta, beta, &mut scratch);
                let (arm2, q2) = score_argmax(d, k, &x, &a, &theta, beta);
                assert_eq!(arm, arm2, "d={d} k={k}");
                assert!((q - q2).abs() < 1e-9 * q2.abs().max(1.0));
            }
        }
    }
}
