//! The UCB scorer written with AVX-512 intrinsics: the same operations, in
//! the same order per action, as the portable scorer ([`super::score_argmax`]),
//! so the two return identical bits (tested against each other).
//!
//! Why by hand: compiled from the portable code, the four-block group kept
//! its 4 x 8 accumulators partly in 256-bit, 128-bit and scalar registers and
//! reassembled them with inserts in the innermost loop (`perf annotate`),
//! about half the fused multiply-add rate the loop allows.
//!
//! The one rewrite of the arithmetic: the portable scorer forms
//! t_i = sum_{j>i} A_ij x_j and then 2 t_i; here each off-diagonal entry is
//! doubled in its broadcast register (once per group of blocks) and
//! t'_i = sum_{j>i} (2 A_ij) x_j. Doubling commutes with every rounding in
//! the chain (a power of two scales a binary floating-point result exactly,
//! short of overflow or a subnormal product, which entries of V^{-1} and
//! unit actions do not reach), so t'_i = 2 t_i bit for bit and one multiply
//! per coordinate and block is saved. (A doubled copy of A built once per
//! call, by a scalar loop over d^2 entries, cost about a seventh of a call
//! at d = 10; doubling in the register costs one add per entry and group.)

use std::arch::x86_64::{
    __m512d, __m512i, _CMP_GT_OQ, _mm512_add_epi64, _mm512_add_pd, _mm512_cmp_pd_mask, _mm512_fmadd_pd,
    _mm512_loadu_pd, _mm512_mask_blend_epi64, _mm512_mask_blend_pd, _mm512_max_pd, _mm512_set1_epi64, _mm512_set1_pd,
    _mm512_setr_epi64, _mm512_setzero_pd, _mm512_sqrt_pd, _mm512_storeu_epi64, _mm512_storeu_pd,
};

use crate::rng::lanes::LANES;

/// Largest dimension this scorer takes (its loops over coordinates are
/// instantiated for each d up to it).
pub const MAX_D: usize = 16;

/// Whether this CPU runs [`score_argmax`] (checked once per call; the
/// standard library caches the detection).
#[inline]
pub fn available(d: usize) -> bool {
    d <= MAX_D && std::arch::is_x86_feature_detected!("avx512f")
}

/// What every block of one call is scored against.
struct Set<'a> {
    /// Real actions.
    k: usize,
    /// Padded actions (the row stride of x).
    kp: usize,
    x: &'a [f64],
    /// V^{-1} (d x d, row-major).
    a: &'a [f64],
    theta: &'a [f64],
    beta: f64,
}

/// Lane-wise best score so far, its action and its x^T A x.
struct Best {
    s: __m512d,
    i: __m512i,
    q: __m512d,
}

/// Scores all actions of a column-major decision set and returns the
/// argmax (lowest index on ties) and its x^T A x: the contract of
/// [`super::score_argmax`], for d <= [`MAX_D`] on a CPU with AVX-512F.
///
/// # Panics
/// If `x` holds fewer than d blocks of K rounded up to 8, or `a` fewer
/// than d^2 entries, or `theta` fewer than d (bounds are checked once, here).
#[target_feature(enable = "avx512f")]
pub fn score_argmax(d: usize, k: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> (usize, f64) {
    assert!(d <= MAX_D && a.len() >= d * d && theta.len() >= d);
    let kp = k.div_ceil(LANES) * LANES;
    assert!(x.len() >= d * kp);
    let mut best = Best {
        s: _mm512_set1_pd(f64::NEG_INFINITY),
        i: _mm512_set1_epi64(0),
        q: _mm512_setzero_pd(),
    };
    let set = Set {
        k,
        kp,
        x,
        a,
        theta,
        beta,
    };
    macro_rules! blocks {
        ($($n:literal)*) => {
            match d {
                $($n => blocks::<$n>(&set, &mut best),)*
                _ => unreachable!("d <= MAX_D is asserted above"),
            }
        };
    }
    blocks!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    let (mut s, mut i, mut q) = ([0.0f64; LANES], [0i64; LANES], [0.0f64; LANES]);
    // SAFETY: each array holds exactly one 512-bit vector.
    unsafe {
        _mm512_storeu_pd(s.as_mut_ptr(), best.s);
        _mm512_storeu_epi64(i.as_mut_ptr(), best.i);
        _mm512_storeu_pd(q.as_mut_ptr(), best.q);
    }
    finish(&s, &i, &q)
}

/// Highest score, lowest index on ties; action 0 if every score was NaN
/// (as [`super::Best::finish`]).
fn finish(s: &[f64; LANES], i: &[i64; LANES], q: &[f64; LANES]) -> (usize, f64) {
    let mut bi = usize::MAX;
    let mut bs = f64::NEG_INFINITY;
    let mut bq = 0.0;
    for l in 0..LANES {
        let il = i[l] as usize;
        if s[l] > bs || (s[l] == bs && il < bi) {
            bs = s[l];
            bi = il;
            bq = q[l];
        }
    }
    if bi == usize::MAX { (0, 0.0) } else { (bi, bq) }
}

/// All blocks, eight at a time, then four, two and one, for dimension D
/// (the loops over coordinates then unroll fully: no branch inside a
/// group; eight blocks give eight independent chains per row of A).
#[inline(always)]
fn blocks<const D: usize>(set: &Set<'_>, best: &mut Best) {
    let kb = set.kp / LANES;
    let mut blk = 0;
    while blk + 8 <= kb {
        group::<D, 8>(set, blk, best);
        blk += 8;
    }
    if blk + 4 <= kb {
        group::<D, 4>(set, blk, best);
        blk += 4;
    }
    if blk + 2 <= kb {
        group::<D, 2>(set, blk, best);
        blk += 2;
    }
    if blk < kb {
        group::<D, 1>(set, blk, best);
    }
}

/// Scores NB consecutive 8-action blocks from block `blk0`: NB independent
/// chains share each broadcast entry of A.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn group<const D: usize, const NB: usize>(set: &Set<'_>, blk0: usize, best: &mut Best) {
    let Set {
        k,
        kp,
        x,
        a,
        theta,
        beta,
    } = *set;
    // SAFETY: the caller checked x.len() >= d * kp, and blk0 + NB <= kp / 8,
    // so every load below reads 8 f64 inside x; a and theta are indexed
    // below d * d and d, checked by the caller too; AVX-512F is enabled by
    // the caller's target feature.
    unsafe {
        let xp = x.as_ptr().add(blk0 * LANES);
        let load = |j: usize, g: usize| _mm512_loadu_pd(xp.add(j * kp + g * LANES));
        let mut quad = [_mm512_setzero_pd(); NB];
        let mut mean = [_mm512_setzero_pd(); NB];
        let d = D;
        for i in 0..d {
            let mut t = [_mm512_setzero_pd(); NB];
            for j in i + 1..d {
                let aij = _mm512_set1_pd(*a.get_unchecked(i * d + j));
                let aij = _mm512_add_pd(aij, aij);
                for g in 0..NB {
                    t[g] = _mm512_fmadd_pd(aij, load(j, g), t[g]);
                }
            }
            let aii = _mm512_set1_pd(*a.get_unchecked(i * d + i));
            let th = _mm512_set1_pd(*theta.get_unchecked(i));
            for g in 0..NB {
                let xi = load(i, g);
                let inner = _mm512_fmadd_pd(aii, xi, t[g]);
                quad[g] = _mm512_fmadd_pd(xi, inner, quad[g]);
                mean[g] = _mm512_fmadd_pd(th, xi, mean[g]);
            }
        }
        let vbeta = _mm512_set1_pd(beta);
        let ninf = _mm512_set1_pd(f64::NEG_INFINITY);
        for g in 0..NB {
            let first = (blk0 + g) * LANES;
            let valid: u8 = if first + LANES <= k {
                0xff
            } else if first < k {
                ((1u16 << (k - first)) - 1) as u8
            } else {
                0
            };
            // max(q, 0) returns 0 for a NaN q, as f64::max does.
            let root = _mm512_sqrt_pd(_mm512_max_pd(quad[g], _mm512_setzero_pd()));
            let s = _mm512_mask_blend_pd(valid, ninf, _mm512_fmadd_pd(vbeta, root, mean[g]));
            let gt = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(s, best.s);
            let idx = _mm512_add_epi64(
                _mm512_set1_epi64(first as i64),
                _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
            );
            best.s = _mm512_mask_blend_pd(gt, best.s, s);
            best.i = _mm512_mask_blend_epi64(gt, best.i, idx);
            best.q = _mm512_mask_blend_pd(gt, best.q, quad[g]);
        }
    }
}
