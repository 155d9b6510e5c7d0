//! The keyed normals of [`super::keyed`] written with AVX-512 intrinsics:
//! eight pairs per vector, two vectors (16 pairs, 32 entries) per step,
//! operation for operation the portable code's (`pair_branch_free` there,
//! [`crate::math`]'s logarithm and sine/cosine), so the entries are the same
//! bits (tested against the scalar definition).
//!
//! Why by hand: compiled from the portable code, one vector of pairs is
//! about 130 instructions whose dependency chain (two 64-bit multiplies of
//! the hash, the logarithm's division, the square root) is as long as the
//! block, and the out-of-order window overlapped little of the next block
//! (about 170 cycles per 8 pairs where the ports allow about 75; the tree
//! release of `feducb_private_every_d10` spends a third of its time here).
//! Here two vectors' chains are in flight at once, the 53-bit
//! conversions are the AVX-512DQ instruction (exact below 2^53, as the
//! portable integer trick), and the pairs are interleaved into entries by
//! two permutes and stored whole (masked at the end: no scalar remainder).

use std::arch::x86_64::*;

use crate::math::{C1, C2, C3, C4, C5, C6, LG1, LG2, LG3, LG4, LG5, LG6, LG7, LN2_HI, LN2_LO, S1, S2, S3, S4, S5, S6};

// The hash's constants, restated (this file names nothing of
// `super::keyed` or `super`, which dispatch to it); the bit-for-bit tests
// in `super::keyed` fail if one drifts.
/// `super::keyed::INDEX_MIX`.
const INDEX_MIX: u64 = 0xD2B7_4407_B1CE_6E93;
/// SplitMix64's increment and multipliers (`super::splitmix64`).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
const MIX1: u64 = 0xBF58_476D_1CE4_E5B9;
const MIX2: u64 = 0x94D0_49BB_1331_11EB;
/// 2^-53.
const TWO_M53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// Whether this CPU runs [`fill`].
#[inline]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512dq")
}

/// `out[i] = scale * normal_entry(key, i)` for every i: the contract and
/// bits of `super::keyed::fill_normals_at`.
#[target_feature(enable = "avx512f,avx512dq")]
pub fn fill(key: u64, scale: f64, out: &mut [f64]) {
    let n = out.len();
    let p = out.as_mut_ptr();
    let mut e = 0usize;
    let mut first = 0u64;
    // SAFETY: AVX-512F and DQ are enabled; every store writes entries
    // e..e + 8 with e + 8 <= n (whole) or the lanes below n - e (masked).
    unsafe {
        while e + 32 <= n {
            let (c0, s0) = pairs(key, first);
            let (c1, s1) = pairs(key, first + 8);
            put(p.add(e), scale, c0, s0, 16);
            put(p.add(e + 16), scale, c1, s1, 16);
            e += 32;
            first += 16;
        }
        while e < n {
            let (c, s) = pairs(key, first);
            put(p.add(e), scale, c, s, n - e);
            e += 16;
            first += 8;
        }
    }
}

/// Stores `scale * (c_0, s_0, c_1, s_1, ...)`, its first `len` entries
/// (at most 16) from `dst`.
#[inline(always)]
unsafe fn put(dst: *mut f64, scale: f64, c: __m512d, s: __m512d, len: usize) {
    // SAFETY: the caller enables AVX-512F and owns dst[..len.min(16)].
    unsafe {
        let vs = _mm512_set1_pd(scale);
        let lo = _mm512_permutex2var_pd(c, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), s);
        let hi = _mm512_permutex2var_pd(c, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), s);
        let (lo, hi) = (_mm512_mul_pd(vs, lo), _mm512_mul_pd(vs, hi));
        if len >= 16 {
            _mm512_storeu_pd(dst, lo);
            _mm512_storeu_pd(dst.add(8), hi);
        } else {
            let mask = |m: usize| ((1u16 << m.min(8)) - 1) as u8;
            _mm512_mask_storeu_pd(dst, mask(len), lo);
            if len > 8 {
                _mm512_mask_storeu_pd(dst.add(8), mask(len - 8), hi);
            }
        }
    }
}

/// One SplitMix64 step of eight states.
#[inline(always)]
fn splitmix(h: &mut __m512i) -> __m512i {
    // SAFETY: called only from `fill`, which enables AVX-512F and DQ.
    unsafe {
        *h = _mm512_add_epi64(*h, _mm512_set1_epi64(GAMMA as i64));
        let z = *h;
        let z = _mm512_mullo_epi64(
            _mm512_xor_si512(z, _mm512_srli_epi64::<30>(z)),
            _mm512_set1_epi64(MIX1 as i64),
        );
        let z = _mm512_mullo_epi64(
            _mm512_xor_si512(z, _mm512_srli_epi64::<27>(z)),
            _mm512_set1_epi64(MIX2 as i64),
        );
        _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z))
    }
}

/// Pairs first..first + 8 of `key`: (r cos phi, r sin phi) per lane, as
/// `super::keyed::normal_pair_at`.
#[inline(always)]
fn pairs(key: u64, first: u64) -> (__m512d, __m512d) {
    // SAFETY: called only from `fill`, which enables AVX-512F and DQ.
    unsafe {
        let pd = _mm512_set1_pd;
        let idx = _mm512_add_epi64(
            _mm512_set1_epi64(first as i64),
            _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
        );
        let mut h = _mm512_xor_si512(
            _mm512_set1_epi64(key as i64),
            _mm512_mullo_epi64(idx, _mm512_set1_epi64(INDEX_MIX as i64)),
        );
        let a = splitmix(&mut h);
        let b = splitmix(&mut h);
        let u1 = _mm512_mul_pd(
            _mm512_add_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64::<11>(a)), pd(0.5)),
            pd(TWO_M53),
        );
        let r = _mm512_sqrt_pd(_mm512_mul_pd(pd(-2.0), ln(u1)));
        let f = _mm512_mul_pd(
            _mm512_cvtepu64_pd(_mm512_srli_epi64::<11>(_mm512_slli_epi64::<2>(b))),
            pd(TWO_M53),
        );
        let (s, c) = sincos(_mm512_mul_pd(
            _mm512_sub_pd(f, pd(0.5)),
            pd(std::f64::consts::FRAC_PI_2),
        ));
        // Quadrant q = b >> 62: bit 62 swaps sine and cosine; the cosine's
        // sign is bit 63 ^ bit 62, the sine's bit 63.
        let swap = _mm512_test_epi64_mask(b, _mm512_set1_epi64(1 << 62));
        let cos_v = _mm512_mask_blend_pd(swap, c, s);
        let sin_v = _mm512_mask_blend_pd(swap, s, c);
        let sign = _mm512_set1_epi64(i64::MIN);
        // 0x78: A ^ (B & C).
        let flip = _mm512_xor_si512(_mm512_slli_epi64::<1>(b), b);
        let cos_phi = _mm512_castsi512_pd(_mm512_ternarylogic_epi64::<0x78>(
            _mm512_castpd_si512(cos_v),
            flip,
            sign,
        ));
        let sin_phi = _mm512_castsi512_pd(_mm512_ternarylogic_epi64::<0x78>(_mm512_castpd_si512(sin_v), b, sign));
        (_mm512_mul_pd(r, cos_phi), _mm512_mul_pd(r, sin_phi))
    }
}

/// [`crate::math::ln_normal_positive`] on 8 lanes (positive normal inputs).
#[inline(always)]
fn ln(x: __m512d) -> __m512d {
    // SAFETY: called only from `fill`, which enables AVX-512F and DQ.
    unsafe {
        let pd = _mm512_set1_pd;
        let q = _mm512_set1_epi64;
        let bits = _mm512_castpd_si512(x);
        let hx = _mm512_srli_epi64::<32>(bits);
        let k = _mm512_sub_epi64(_mm512_srli_epi64::<20>(hx), q(1023));
        let hm = _mm512_and_si512(hx, q(0x000f_ffff));
        let i = _mm512_and_si512(_mm512_add_epi64(hm, q(0x95f64)), q(0x0010_0000));
        let top = _mm512_or_si512(hm, _mm512_xor_si512(i, q(0x3ff0_0000)));
        let xn = _mm512_castsi512_pd(_mm512_or_si512(
            _mm512_slli_epi64::<32>(top),
            _mm512_and_si512(bits, q(0xffff_ffff)),
        ));
        let k = _mm512_add_epi64(k, _mm512_srli_epi64::<20>(i));
        let f = _mm512_sub_pd(xn, pd(1.0));
        let s = _mm512_div_pd(f, _mm512_add_pd(pd(2.0), f));
        let z = _mm512_mul_pd(s, s);
        let w = _mm512_mul_pd(z, z);
        let mul = |a, b| _mm512_mul_pd(a, b);
        let add = |a, b| _mm512_add_pd(a, b);
        let t1 = mul(w, add(pd(LG2), mul(w, add(pd(LG4), mul(w, pd(LG6))))));
        let t2 = mul(
            z,
            add(pd(LG1), mul(w, add(pd(LG3), mul(w, add(pd(LG5), mul(w, pd(LG7))))))),
        );
        let r = add(t2, t1);
        let hfsq = mul(mul(pd(0.5), f), f);
        let dk = _mm512_cvtepi64_pd(k);
        let inner = _mm512_sub_pd(hfsq, add(mul(s, add(hfsq, r)), mul(dk, pd(LN2_LO))));
        _mm512_sub_pd(mul(dk, pd(LN2_HI)), _mm512_sub_pd(inner, f))
    }
}

/// [`crate::math::sincos_kernel`] on 8 lanes: (sin x, cos x).
#[inline(always)]
fn sincos(x: __m512d) -> (__m512d, __m512d) {
    // SAFETY: called only from `fill`, which enables AVX-512F and DQ.
    unsafe {
        let pd = _mm512_set1_pd;
        let mul = |a, b| _mm512_mul_pd(a, b);
        let add = |a, b| _mm512_add_pd(a, b);
        let z = mul(x, x);
        let v = mul(z, x);
        let rs = add(
            pd(S2),
            mul(z, add(pd(S3), mul(z, add(pd(S4), mul(z, add(pd(S5), mul(z, pd(S6)))))))),
        );
        let s = add(x, mul(v, add(pd(S1), mul(z, rs))));
        let rc = mul(
            z,
            add(
                pd(C1),
                mul(
                    z,
                    add(
                        pd(C2),
                        mul(z, add(pd(C3), mul(z, add(pd(C4), mul(z, add(pd(C5), mul(z, pd(C6)))))))),
                    ),
                ),
            ),
        );
        let c = _mm512_sub_pd(pd(1.0), _mm512_sub_pd(mul(pd(0.5), z), mul(z, rc)));
        (s, c)
    }
}
