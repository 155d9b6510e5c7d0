//! `linear_gap`'s actions from their normals with AVX-512 intrinsics, in
//! one pass: each block of 8 actions keeps its d - 1 normals in registers
//! while <theta*, h>, ||h||^2, the scale c and the offset alpha are formed,
//! then writes x (the Householder construction of
//! [`super::linear_gap`]'s module doc). The portable code
//! ([`super::linear_gap::project`]) makes three passes over all K actions
//! with the sums accumulated through memory; both perform the same
//! operations in the same order per action (the same fused multiply-adds),
//! so they write identical bits (tested against each other).
//!
//! Why by hand: the portable first pass loads and stores both running sums
//! at every coordinate (two stores per coordinate and 8 actions, the store
//! port's limit), and its last four actions of K = 100 ran in a scalar
//! tail; together the three passes were about a third of
//! `independent_gap_d10_k100_m100` (perf). Here d is a
//! compile-time constant (the loops over coordinates unroll, the normals
//! stay in registers) and two blocks are in flight at once (the two
//! reciprocal square roots are a long chain).

use std::arch::x86_64::*;

use super::sphere_avx512::inv_norm;
use super::{GapRound, Householder};

/// Largest d this pass keeps in registers.
pub const MAX_D: usize = 16;

/// Whether this CPU runs [`project`] for dimension d.
#[inline]
pub fn available(d: usize) -> bool {
    (1..=MAX_D).contains(&d) && std::arch::is_x86_feature_detected!("avx512f")
}

/// What every block of one call reads.
struct Shape<'a> {
    theta: &'a [f64],
    g: &'a [f32],
    k: usize,
    kp: usize,
    opt: usize,
    vu: &'a [f64],
    ru: &'a [f64],
    hh: Householder,
}

/// The contract and bits of [`super::linear_gap::project`]: each action's
/// mean v to `mean[..k]` and its coordinates to columns 0..k of `x` (row
/// stride kp).
///
/// # Panics
/// If a slice is shorter than the shape needs (checked once, here).
#[target_feature(enable = "avx512f")]
pub fn project(round: &GapRound<'_>, x: &mut [f64], mean: &mut [f64]) {
    let GapRound {
        theta,
        g,
        k,
        kp,
        opt,
        u,
    } = *round;
    let d = theta.len();
    assert!((1..=MAX_D).contains(&d) && g.len() >= (d - 1) * k && u.len() >= 2 * k && mean.len() >= k && kp >= k);
    assert!(x.len() >= d * kp);
    let (vu, ru) = u[..2 * k].split_at(k);
    let sh = Shape {
        theta,
        g,
        k,
        kp,
        opt,
        vu,
        ru,
        hh: Householder::of(theta),
    };
    macro_rules! dims {
        ($($n:literal)*) => {
            match d {
                $($n => pass::<$n>(&sh, x, mean),)*
                _ => unreachable!("1 <= d <= MAX_D is checked by `available`"),
            }
        };
    }
    dims!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// Every block for dimension D, two blocks per step while two remain.
#[inline(always)]
fn pass<const D: usize>(sh: &Shape<'_>, x: &mut [f64], mean: &mut [f64]) {
    let mut c = 0;
    while c + 8 < sh.k {
        group::<D, 2>(sh, c, x, mean);
        c += 16;
    }
    if c < sh.k {
        group::<D, 1>(sh, c, x, mean);
    }
}

/// NB consecutive blocks of 8 actions from action c (lanes at or past k
/// masked off: neither read nor written).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn group<const D: usize, const NB: usize>(sh: &Shape<'_>, c: usize, x: &mut [f64], mean: &mut [f64]) {
    let Shape {
        theta,
        g,
        k,
        kp,
        opt,
        vu,
        ru,
        hh,
    } = *sh;
    // SAFETY: AVX-512F is enabled by `project`, which checked the slices'
    // lengths; every access is masked to actions below k of its row (g: d
    // rows of k, u: 2k, mean: k, x: d rows of kp >= k).
    unsafe {
        let pd = _mm512_set1_pd;
        let mut mask = [0u8; NB];
        for b in 0..NB {
            let a0 = c + 8 * b;
            mask[b] = if a0 + 8 <= k {
                0xff
            } else if a0 < k {
                ((1u16 << (k - a0)) - 1) as u8
            } else {
                0
            };
        }
        let mut hv = [[_mm512_setzero_pd(); D]; NB];
        let mut sp = [_mm512_setzero_pd(); NB];
        let mut n2 = [_mm512_setzero_pd(); NB];
        for j in 1..D {
            let tj = pd(theta[j]);
            for b in 0..NB {
                let lo = _mm512_maskz_loadu_ps(u16::from(mask[b]), g.as_ptr().add((j - 1) * k + c + 8 * b));
                let h = _mm512_cvtps_pd(_mm512_castps512_ps256(lo));
                hv[b][j] = h;
                sp[b] = _mm512_fmadd_pd(tj, h, sp[b]);
                n2[b] = _mm512_fmadd_pd(h, h, n2[b]);
            }
        }
        let lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
        let sign = _mm512_set1_epi64(i64::MIN);
        // sigma s is s with its sign flipped when theta*_0 < 0.
        let flip = if hh.negative { sign } else { _mm512_setzero_si512() };
        let mut alpha = [_mm512_setzero_pd(); NB];
        let mut cs = [_mm512_setzero_pd(); NB];
        for b in 0..NB {
            let a0 = c + 8 * b;
            let m = mask[b];
            let u = _mm512_maskz_loadu_pd(m, vu.as_ptr().add(a0));
            let r = _mm512_maskz_loadu_pd(m, ru.as_ptr().add(a0));
            let is_opt = _mm512_cmpeq_epi64_mask(
                _mm512_add_epi64(lane, _mm512_set1_epi64(a0 as i64)),
                _mm512_set1_epi64(opt as i64),
            );
            let base = _mm512_mask_blend_pd(is_opt, pd(0.5), pd(0.7));
            let v = _mm512_add_pd(base, _mm512_mul_pd(pd(0.1), u));
            _mm512_mask_storeu_pd(mean.as_mut_ptr().add(a0), m, v);
            let sv = _mm512_sub_pd(pd(1.0), _mm512_mul_pd(v, v));
            let cv = _mm512_mul_pd(_mm512_mul_pd(r, _mm512_mul_pd(sv, inv_norm(sv))), inv_norm(n2[b]));
            let keep = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(n2[b], pd(1e-24));
            cs[b] = _mm512_maskz_mov_pd(keep, cv);
            let ss = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(sp[b]), flip));
            let neg = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(_mm512_mul_pd(cs[b], ss)), sign));
            let x0 = _mm512_fmadd_pd(v, pd(hh.theta0), neg);
            _mm512_mask_storeu_pd(x.as_mut_ptr().add(a0), m, x0);
            alpha[b] = _mm512_sub_pd(v, _mm512_mul_pd(cs[b], _mm512_mul_pd(pd(hh.beta), sp[b])));
        }
        for j in 1..D {
            let tj = pd(theta[j]);
            for b in 0..NB {
                let xv = _mm512_fmadd_pd(cs[b], hv[b][j], _mm512_mul_pd(alpha[b], tj));
                _mm512_mask_storeu_pd(x.as_mut_ptr().add(j * kp + c + 8 * b), mask[b], xv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::lanes::{Lanes, fill_uniforms};
    use crate::rng::normal::fill_normals_f32;

    /// The one-pass projection equals the portable passes bit for bit (x
    /// over the whole padded buffer, the means), for d from 1 (no
    /// orthogonal direction: c = 0) to 16, K with and without a partial
    /// last block or a lone last block, the optimal action anywhere, and
    /// inputs from the generators. Vacuous on a CPU without AVX-512F.
    #[test]
    fn one_pass_equals_portable_bit_for_bit() {
        if !available(1) {
            return;
        }
        let mut lanes = Lanes::new(&[43, 2]);
        for (d, k) in [
            (1usize, 9usize),
            (2, 16),
            (3, 17),
            (10, 100),
            (10, 8),
            (16, 33),
            (5, 1),
            (7, 24),
        ] {
            let kp = k.div_ceil(8) * 8;
            let mut theta = vec![0.0f32; d];
            fill_normals_f32(&mut lanes, &mut theta);
            let n = theta.iter().map(|t| f64::from(*t).powi(2)).sum::<f64>().sqrt();
            let theta: Vec<f64> = theta.iter().map(|t| f64::from(*t) / n).collect();
            for rep in 0..40 {
                let mut g = vec![0.0f32; (d - 1) * k];
                fill_normals_f32(&mut lanes, &mut g);
                let mut u = vec![0.0; 2 * k];
                fill_uniforms(&mut lanes, &mut u);
                let opt = (rep * 7 + d) % k;
                let (mut x1, mut x2) = (vec![0.25; d * kp], vec![0.25; d * kp]);
                let (mut m1, mut m2) = (vec![-1.0; kp], vec![-1.0; kp]);
                let (mut w1, mut w2) = (vec![0.0; k], vec![0.0; k]);
                let round = GapRound {
                    theta: &theta,
                    g: &g,
                    k,
                    kp,
                    opt,
                    u: &u,
                };
                // SAFETY: `available` checked AVX-512F above.
                unsafe { project(&round, &mut x1, &mut m1) };
                crate::env::linear_gap::project(&round, &mut x2, &mut m2, (&mut w1, &mut w2));
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&x1), bits(&x2), "x, d {d} k {k} rep {rep}");
                assert_eq!(bits(&m1), bits(&m2), "means, d {d} k {k} rep {rep}");
            }
        }
    }
}
