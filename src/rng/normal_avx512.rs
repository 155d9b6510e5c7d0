//! The lane-parallel Box-Muller of [`super::normal`] written with AVX-512
//! intrinsics, two blocks (64 normals) per iteration: operation for
//! operation the portable code's, so the draws are the same bits (tested
//! against it), in the same places, from the same lane steps.
//!
//! Why by hand: compiled from the portable code one block is about 95
//! vector instructions whose critical path (the logarithm's nine dependent
//! multiply-adds, then the square root) is nearly as long as the block, so
//! the out-of-order window overlapped little of the next block (about 2.2
//! cycles per normal where the vector ports allow 1.4). Here the
//! two blocks' chains interleave in the instruction stream, and the 32-bit
//! halves of the lane outputs are gathered by two permutes instead of
//! eight shifts, narrowings and inserts.

use std::arch::x86_64::*;

use super::lanes::{LANES, Lanes};

// The portable generator's constants, restated (this file names nothing of
// `super::normal`, which dispatches to it); the bit-for-bit test there
// fails if one drifts.
/// Normals per block: `super::normal::NORMALS_PER_BLOCK`.
const NORMALS_PER_BLOCK: usize = 4 * LANES;
/// ln 2 in two parts (Cephes `logf`), as `super::normal::ln_f32` uses them.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// Whether this CPU runs [`fill_pairs`].
#[inline]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// Fills `out` (a multiple of 64 long) with standard normals from `lanes`:
/// the bits `super::normal::normals32` writes, block after block.
#[target_feature(enable = "avx512f")]
pub fn fill_pairs(lanes: &mut Lanes, out: &mut [[f32; 2 * NORMALS_PER_BLOCK]]) {
    let st = lanes.state_mut();
    // SAFETY: AVX-512F is enabled; each state row is 8 u64 (one vector),
    // each output chunk 64 f32 (four vectors).
    unsafe {
        let mut s = [
            _mm512_loadu_si512(st[0].as_ptr().cast()),
            _mm512_loadu_si512(st[1].as_ptr().cast()),
            _mm512_loadu_si512(st[2].as_ptr().cast()),
            _mm512_loadu_si512(st[3].as_ptr().cast()),
        ];
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for chunk in out.iter_mut() {
            let w = [step(&mut s), step(&mut s), step(&mut s), step(&mut s)];
            let (c0, s0) = box_muller(
                _mm512_permutex2var_epi32(w[0], odd, w[1]),
                _mm512_permutex2var_epi32(w[0], even, w[1]),
            );
            let (c1, s1) = box_muller(
                _mm512_permutex2var_epi32(w[2], odd, w[3]),
                _mm512_permutex2var_epi32(w[2], even, w[3]),
            );
            let p = chunk.as_mut_ptr();
            _mm512_storeu_ps(p, c0);
            _mm512_storeu_ps(p.add(2 * LANES), s0);
            _mm512_storeu_ps(p.add(4 * LANES), c1);
            _mm512_storeu_ps(p.add(6 * LANES), s1);
        }
        for (row, v) in st.iter_mut().zip(s) {
            _mm512_storeu_si512(row.as_mut_ptr().cast(), v);
        }
    }
}

/// One xoshiro256++ step of the eight lanes ([`Lanes::next_block`]).
#[inline(always)]
fn step(s: &mut [__m512i; 4]) -> __m512i {
    // SAFETY: called only from `fill_pairs`, which enables AVX-512F.
    unsafe {
        let out = _mm512_add_epi64(_mm512_rol_epi64::<23>(_mm512_add_epi64(s[0], s[3])), s[0]);
        let t = _mm512_slli_epi64::<17>(s[1]);
        s[2] = _mm512_xor_si512(s[2], s[0]);
        s[3] = _mm512_xor_si512(s[3], s[1]);
        s[1] = _mm512_xor_si512(s[1], s[2]);
        s[0] = _mm512_xor_si512(s[0], s[3]);
        s[2] = _mm512_xor_si512(s[2], t);
        s[3] = _mm512_rol_epi64::<45>(s[3]);
        out
    }
}

/// [`super::normal::box_muller_words`] on 16 pairs: (r cos phi, r sin phi).
#[inline(always)]
fn box_muller(a: __m512i, b: __m512i) -> (__m512, __m512) {
    // SAFETY: called only from `fill_pairs`, which enables AVX-512F.
    unsafe {
        let ps = _mm512_set1_ps;
        let u1 = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepu32_ps(a), ps(0.5)), ps(1.0 / 4_294_967_296.0));
        let r = _mm512_sqrt_ps(_mm512_mul_ps(ps(-2.0), ln(u1)));
        let f = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x3fff_ffff))),
            ps(1.0 / 1_073_741_824.0),
        );
        let theta = _mm512_mul_ps(_mm512_sub_ps(f, ps(0.5)), ps(std::f32::consts::FRAC_PI_2));
        let (s, c) = sincos(theta);
        // The quadrant q = b >> 30: bit 30 of b swaps sine and cosine; the
        // cosine's sign is bit 31 ^ bit 30, the sine's bit 31 (the
        // portable code's shifts of q, on b's own bits).
        let swap = _mm512_test_epi32_mask(b, _mm512_set1_epi32(0x4000_0000));
        let cos_v = _mm512_mask_blend_ps(swap, c, s);
        let sin_v = _mm512_mask_blend_ps(swap, s, c);
        let sign = _mm512_set1_epi32(i32::MIN);
        // 0x78: A ^ (B & C).
        let flip = _mm512_xor_si512(_mm512_slli_epi32::<1>(b), b);
        let cos_phi = _mm512_castsi512_ps(_mm512_ternarylogic_epi32::<0x78>(
            _mm512_castps_si512(cos_v),
            flip,
            sign,
        ));
        let sin_phi = _mm512_castsi512_ps(_mm512_ternarylogic_epi32::<0x78>(_mm512_castps_si512(sin_v), b, sign));
        (_mm512_mul_ps(r, cos_phi), _mm512_mul_ps(r, sin_phi))
    }
}

/// [`super::normal::ln_f32`] on 16 lanes.
#[inline(always)]
fn ln(x: __m512) -> __m512 {
    // SAFETY: called only from `fill_pairs`, which enables AVX-512F.
    unsafe {
        let ps = _mm512_set1_ps;
        // u1 is a positive normal f32: getexp gives its unbiased exponent
        // (the portable code's biased exponent - 127, exactly, as f32) and
        // getmant its significand scaled to [0.5, 1) (the portable code's
        // bit masking).
        let ge = _mm512_getexp_ps(x);
        let m = _mm512_getmant_ps::<{ _MM_MANT_NORM_P5_1 }, { _MM_MANT_SIGN_SRC }>(x);
        let small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(m, ps(std::f32::consts::FRAC_1_SQRT_2));
        // e = exponent - 126, less one when small: getexp + 1 unless small.
        let fe = _mm512_mask_add_ps(ge, !small, ge, ps(1.0));
        let m = _mm512_mask_blend_ps(
            small,
            _mm512_sub_ps(m, ps(1.0)),
            _mm512_sub_ps(_mm512_add_ps(m, m), ps(1.0)),
        );
        let z = _mm512_mul_ps(m, m);
        let mut y = ps(7.037_683_6e-2);
        for c in [
            -1.151_461e-1,
            1.167_699_9e-1,
            -1.242_014_1e-1,
            1.424_932_3e-1,
            -1.666_805_8e-1,
            2.000_071_4e-1,
            -2.499_999_4e-1,
            3.333_333e-1,
        ] {
            y = _mm512_fmadd_ps(y, m, ps(c));
        }
        y = _mm512_mul_ps(_mm512_mul_ps(y, m), z);
        y = _mm512_add_ps(y, _mm512_mul_ps(ps(LN2_LO), fe));
        y = _mm512_add_ps(y, _mm512_mul_ps(ps(-0.5), z));
        let r = _mm512_add_ps(m, y);
        _mm512_add_ps(r, _mm512_mul_ps(ps(LN2_HI), fe))
    }
}

/// [`super::normal::sincos_kernel_f32`] on 16 lanes: (sin x, cos x).
#[inline(always)]
fn sincos(x: __m512) -> (__m512, __m512) {
    // SAFETY: called only from `fill_pairs`, which enables AVX-512F.
    unsafe {
        let ps = _mm512_set1_ps;
        let z = _mm512_mul_ps(x, x);
        let t = _mm512_fmadd_ps(
            _mm512_fmadd_ps(ps(-1.951_529_6e-4), z, ps(8.332_161e-3)),
            z,
            ps(-1.666_665_5e-1),
        );
        let s = _mm512_fmadd_ps(_mm512_mul_ps(t, z), x, x);
        let u = _mm512_fmadd_ps(
            _mm512_fmadd_ps(ps(2.443_315_7e-5), z, ps(-1.388_731_6e-3)),
            z,
            ps(4.166_664_6e-2),
        );
        let c = _mm512_fmadd_ps(_mm512_mul_ps(u, z), z, _mm512_fmadd_ps(ps(-0.5), z, ps(1.0)));
        (s, c)
    }
}
