//! `linear_sphere`'s random actions with AVX-512 intrinsics, in one pass:
//! each block of 8 actions is normalized, written and given its mean while
//! its 9 (d - 1) coordinates sit in registers. The portable code
//! ([`super::linear_sphere::random_rows`]) makes three passes (norms, then
//! coordinates and means, then the scaling); both perform the same
//! operations in the same order per action, so they write identical bits
//! (tested against each other).

use super::SphereRows;
use std::arch::x86_64::{
    __m512d, _mm256_div_ps, _mm256_set1_ps, _mm256_sqrt_ps, _mm512_add_pd, _mm512_castps512_ps256, _mm512_cvtpd_ps,
    _mm512_cvtps_pd, _mm512_mask_blend_pd, _mm512_mask_storeu_pd, _mm512_maskz_loadu_ps, _mm512_max_pd, _mm512_mul_pd,
    _mm512_reduce_max_pd, _mm512_set1_pd, _mm512_setzero_pd, _mm512_storeu_pd, _mm512_sub_pd,
};

/// Largest d - 1 this pass keeps in registers.
pub const MAX_COORDS: usize = 15;

/// Whether this CPU runs [`random_rows`] for dimension d.
#[inline]
pub fn available(d: usize) -> bool {
    d >= 2 && d - 1 <= MAX_COORDS && std::arch::is_x86_feature_detected!("avx512f")
}

/// The random actions' part of a decision set: see
/// [`super::linear_sphere::random_rows`], whose contract and bits this
/// shares. Returns the largest (scaled) mean among them.
///
/// The pass runs over the decision set's own 8-column blocks (aligned:
/// [`crate::linalg::AlignedVec`]), so every whole block's store fills one
/// cache line; the first random action sits at column `fixed`, so the
/// first block's lanes before it (fixed actions) are masked off.
///
/// # Panics
/// If a slice is shorter than the shape needs (checked once, here).
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)]
pub fn random_rows(rows: &SphereRows<'_>, x: &mut [f64], mean: &mut [f64]) -> f64 {
    let SphereRows {
        theta,
        g,
        nr,
        kp,
        fixed,
        scale,
    } = *rows;
    let last = theta.len() - 1;
    let end = fixed + nr;
    assert!(last <= MAX_COORDS && g.len() >= nr * last && mean.len() >= kp && end <= kp);
    assert!(x.len() >= theta.len() * kp);
    let mut top = _mm512_set1_pd(f64::NEG_INFINITY);
    let inv_sqrt2 = _mm512_set1_pd(std::f64::consts::FRAC_1_SQRT_2);
    let mut c = fixed / 8 * 8;
    while c < end {
        let (gp, mask) = block(c, fixed, end, g);
        let mut v = [_mm512_setzero_pd(); MAX_COORDS];
        let mut n2 = _mm512_setzero_pd();
        for j in 0..last {
            v[j] = load(gp, j * nr, mask);
            n2 = _mm512_add_pd(n2, _mm512_mul_pd(v[j], v[j]));
        }
        let iv = inv_norm(n2);
        let mut m = _mm512_set1_pd(theta[last]);
        for j in 0..last {
            let z = _mm512_mul_pd(v[j], iv);
            m = _mm512_add_pd(m, _mm512_mul_pd(_mm512_set1_pd(theta[j]), z));
            store(&mut x[j * kp + c..], _mm512_mul_pd(z, inv_sqrt2), mask);
        }
        store(&mut x[last * kp + c..], inv_sqrt2, mask);
        let m = _mm512_mul_pd(m, _mm512_set1_pd(scale));
        store(&mut mean[c..], m, mask);
        top = _mm512_max_pd(_mm512_mask_blend_pd(mask, _mm512_set1_pd(f64::NEG_INFINITY), m), top);
        c += 8;
    }
    _mm512_reduce_max_pd(top)
}

/// The block of columns c..c + 8: where its actions' normals start in `g`
/// (column c - fixed, which may lie before g's start: only the masked
/// lanes, inside g, are ever read) and the mask of its random actions
/// (columns fixed..end).
#[inline(always)]
fn block(c: usize, fixed: usize, end: usize, g: &[f32]) -> (*const f32, u8) {
    let from = fixed.saturating_sub(c);
    let to = (end - c).min(8);
    let mask = ((0xffu16 >> (8 - to)) & (0xffu16 << from)) as u8;
    (g.as_ptr().wrapping_add(c).wrapping_sub(fixed), mask)
}

/// Coordinate `at` of a block's 8 actions (masked lanes), widened to f64.
#[inline(always)]
fn load(gp: *const f32, at: usize, mask: u8) -> __m512d {
    // SAFETY: called from `random_rows` (AVX-512F enabled) with a block from
    // `block` and at = j * nr, j < d - 1: the masked lanes are entries
    // j * nr + a, a < nr, inside g (asserted there); the others are not read.
    unsafe {
        let lo = _mm512_maskz_loadu_ps(u16::from(mask), gp.wrapping_add(at));
        _mm512_cvtps_pd(_mm512_castps512_ps256(lo))
    }
}

/// Stores the masked lanes of `v` to `dst[..8]` (a plain store when all 8
/// are set).
#[inline(always)]
fn store(dst: &mut [f64], v: __m512d, mask: u8) {
    assert!(dst.len() >= 8);
    // SAFETY: AVX-512F is enabled by the caller; dst holds 8 f64.
    unsafe {
        if mask == 0xff {
            _mm512_storeu_pd(dst.as_mut_ptr(), v);
        } else {
            _mm512_mask_storeu_pd(dst.as_mut_ptr(), mask, v);
        }
    }
}

/// [`super::inv_norm`] on 8 lanes, operation for operation (also
/// `linear_gap`'s, `super::gap_avx512`).
#[inline(always)]
pub(super) fn inv_norm(n2: __m512d) -> __m512d {
    // SAFETY: called only from functions that enable AVX-512F.
    unsafe {
        let s = _mm256_sqrt_ps(_mm512_cvtpd_ps(n2));
        let y0 = _mm512_cvtps_pd(_mm256_div_ps(_mm256_set1_ps(1.0), s));
        let h = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.5), n2), y0), y0);
        _mm512_mul_pd(y0, _mm512_sub_pd(_mm512_set1_pd(1.5), h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::lanes::Lanes;
    use crate::rng::normal::fill_normals_f32;

    /// The one-pass rows equal the portable three-pass rows bit for bit
    /// (coordinates, means, the maximum), for shapes with and without a
    /// partial last block of 8, both mean scalings, and normals from the
    /// generator. Vacuous on a CPU without AVX-512F.
    #[test]
    fn one_pass_rows_equal_portable_rows_bit_for_bit() {
        if !available(2) {
            return;
        }
        let mut lanes = Lanes::new(&[21, 4]);
        for (d, nr, fixed) in [
            (2usize, 9usize, 2usize),
            (10, 90, 10),
            (5, 3, 5),
            (16, 40, 16),
            (4, 8, 0),
        ] {
            let kp = (fixed + nr).div_ceil(8) * 8;
            let last = d - 1;
            let theta: Vec<f64> = (0..d).map(|j| 0.1 * j as f64 - 0.3).collect();
            for rep in 0..50 {
                let mut g = vec![0.0f32; nr * last];
                fill_normals_f32(&mut lanes, &mut g);
                let scale = if rep % 2 == 0 {
                    1.0
                } else {
                    std::f64::consts::FRAC_1_SQRT_2
                };
                let (mut x1, mut x2) = (vec![0.25; d * kp], vec![0.25; d * kp]);
                let (mut m1, mut m2) = (vec![-1.0; kp], vec![-1.0; kp]);
                let mut inv = vec![0.0; nr];
                let rows = SphereRows {
                    theta: &theta,
                    g: &g,
                    nr,
                    kp,
                    fixed,
                    scale,
                };
                // SAFETY: `available` checked AVX-512F above.
                let b1 = unsafe { random_rows(&rows, &mut x1, &mut m1) };
                let b2 = crate::env::linear_sphere::random_rows(&rows, &mut x2, &mut m2, &mut inv);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&x1), bits(&x2), "x, d {d} nr {nr}");
                assert_eq!(bits(&m1), bits(&m2), "means, d {d} nr {nr}");
                assert_eq!(b1.to_bits(), b2.to_bits(), "best, d {d} nr {nr}");
            }
        }
    }
}
