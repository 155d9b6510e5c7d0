//! Keyed f64 normals in blocks: privacy noise regenerated from keys at the
//! speed of a vector unit.
//!
//! A tree node's noise (d^2 + d entries, 110 at d = 10) is regenerated every
//! time the mechanism needs it, so its cost is the cost of a private sync.
//! [`crate::rng::normal_at`] spends one hash, one `ln`, one `sqrt` and one
//! sine/cosine pair on one normal (23 ns here) and throws the sine away.
//! Here entry `e` of a key's sequence is component `e % 2` of the
//! Box-Muller pair `e / 2` ([`normal_pair_at`]), so one hash and one `ln`
//! give two entries, and [`fill_normals_at`] computes a block of pairs in a
//! loop without branches that the compiler vectorizes (AVX2: four pairs at
//! a time). Every entry stays a pure function of (key, entry index): a GPU
//! thread computes entry `e` alone with `fb_normal_entry` in
//! `kernels/common.cuh`, bit for bit (same operations, no FMA contraction
//! on either side; [`crate::math`]).
//!
//! Bits: entry 2p is `normal_at(key, p)` exactly (the same hash and the same
//! cosine branch of [`crate::math::box_muller`]); entry 2p + 1 is its sine
//! partner, an independent N(0, 1).

/// The multiplier that spreads an index over the key (as in `normal_at`).
const INDEX_MIX: u64 = 0xD2B7_4407_B1CE_6E93;

/// The Box-Muller pair `pair` of `key`: `(normal_at(key, pair), its sine
/// partner)`.
#[inline]
pub fn normal_pair_at(key: u64, pair: u64) -> (f64, f64) {
    let mut h = key ^ pair.wrapping_mul(INDEX_MIX);
    let a = super::splitmix64(&mut h);
    let b = super::splitmix64(&mut h);
    crate::math::box_muller(a, b)
}

/// Entry `e` of `key`'s sequence: component `e % 2` of pair `e / 2`.
#[inline]
pub fn normal_entry(key: u64, e: u64) -> f64 {
    let (c, s) = normal_pair_at(key, e >> 1);
    if e & 1 == 0 { c } else { s }
}

/// Fills `out[i]` with `scale * normal_entry(key, i)` for every i, two
/// entries per pair, vectorized: on a CPU with AVX-512F and DQ by the
/// intrinsics code (`keyed_avx512`), else by
/// [`fill_normals_at_portable`]. Both equal the scalar definition bit for
/// bit (tested).
pub fn fill_normals_at(key: u64, scale: f64, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if super::keyed_avx512::available() {
        // SAFETY: `available` checked that this CPU has AVX-512F and DQ.
        unsafe { super::keyed_avx512::fill(key, scale, out) };
        return;
    }
    fill_normals_at_portable(key, scale, out);
}

/// [`fill_normals_at`] by the compiler's vectorization of the portable
/// code (the path of CPUs without AVX-512, and the reference the
/// intrinsics code is tested against).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn fill_normals_at_portable(key: u64, scale: f64, out: &mut [f64]) {
    // Blocks of BLOCK pairs: the pairs of a block are computed lane-parallel
    // into two arrays, then interleaved.
    const BLOCK: usize = 8;
    let mut c = [0.0f64; BLOCK];
    let mut s = [0.0f64; BLOCK];
    let mut blocks = out.chunks_exact_mut(2 * BLOCK);
    let mut first = 0u64;
    for chunk in &mut blocks {
        for p in 0..BLOCK {
            (c[p], s[p]) = pair_branch_free(key, first + p as u64);
        }
        for (p, pair) in chunk.chunks_exact_mut(2).enumerate() {
            pair[0] = scale * c[p];
            pair[1] = scale * s[p];
        }
        first += BLOCK as u64;
    }
    for (e, v) in blocks.into_remainder().iter_mut().enumerate() {
        let (c, s) = pair_branch_free(key, first + (e >> 1) as u64);
        *v = scale * if e & 1 == 0 { c } else { s };
    }
}

/// `x as f64` for x < 2^53, with integer operations and one exact addition
/// (the vector units have no 64-bit integer conversion before AVX-512):
/// the low 52 bits as 2^52 + low - 2^52, the bit 52 as 0 or 2^52.
#[inline(always)]
fn u53_to_f64(x: u64) -> f64 {
    const TWO52: u64 = 0x4330_0000_0000_0000; // bits of 2^52
    let low = f64::from_bits(TWO52 | (x & 0x000F_FFFF_FFFF_FFFF)) - 4_503_599_627_370_496.0;
    low + f64::from_bits((x >> 52) * TWO52)
}

/// [`normal_pair_at`] without branches: the radius's `ln` is
/// [`crate::math::ln`] restricted to the normal numbers in (0, 1) the
/// uniform takes (2^-54 ..= 1 - 2^-54), and the quadrant is applied by
/// swapping and sign bits. The same operations in the same order as
/// [`crate::math::box_muller`], so the same bits.
#[inline(always)]
fn pair_branch_free(key: u64, pair: u64) -> (f64, f64) {
    let mut h = key ^ pair.wrapping_mul(INDEX_MIX);
    let a = super::splitmix64(&mut h);
    let b = super::splitmix64(&mut h);
    const TWO_M53: f64 = 1.0 / 9_007_199_254_740_992.0;
    let u1 = (u53_to_f64(a >> 11) + 0.5) * TWO_M53;
    let r = (-2.0 * crate::math::ln_normal_positive(u1)).sqrt();
    let q = b >> 62;
    let f = u53_to_f64((b << 2) >> 11) * TWO_M53;
    let (s, c) = crate::math::sincos_kernel((f - 0.5) * std::f64::consts::FRAC_PI_2);
    let swap = q & 1 == 1;
    let cos_v = if swap { s } else { c };
    let sin_v = if swap { c } else { s };
    let neg_cos = ((q ^ (q >> 1)) & 1) << 63;
    let neg_sin = (q >> 1) << 63;
    let cos_phi = f64::from_bits(cos_v.to_bits() ^ neg_cos);
    let sin_phi = f64::from_bits(sin_v.to_bits() ^ neg_sin);
    (r * cos_phi, r * sin_phi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::normal_at;

    #[test]
    fn the_conversion_is_exact() {
        for x in [
            0u64,
            1,
            2,
            (1 << 52) - 1,
            1 << 52,
            (1 << 52) + 1,
            (1 << 53) - 1,
            0x1234_5678_9ABC,
        ] {
            assert_eq!(u53_to_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    #[test]
    fn blocks_equal_the_scalar_definition_bit_for_bit() {
        for (key, len) in [(7u64, 110usize), (0xDEAD_BEEF, 121), (1, 1), (2, 0), (3, 17)] {
            let mut out = vec![0.0; len];
            fill_normals_at(key, 1.5, &mut out);
            for (e, v) in out.iter().enumerate() {
                assert_eq!(
                    v.to_bits(),
                    (1.5 * normal_entry(key, e as u64)).to_bits(),
                    "key {key} entry {e}"
                );
            }
            for p in 0..len as u64 / 2 {
                assert_eq!(normal_entry(key, 2 * p).to_bits(), normal_at(key, p).to_bits());
            }
        }
        // Both quadrant halves and both signs occur (the sign-bit selection
        // is exercised), across many keys.
        let mut signs = [0usize; 4];
        for key in 0..2000u64 {
            let (c, s) = normal_pair_at(key, 3);
            let mut out = [0.0; 8];
            fill_normals_at(key, 1.0, &mut out);
            assert_eq!((out[6].to_bits(), out[7].to_bits()), (c.to_bits(), s.to_bits()));
            signs[usize::from(c < 0.0) * 2 + usize::from(s < 0.0)] += 1;
        }
        assert!(signs.iter().all(|&n| n > 400), "{signs:?}");
    }

    /// The dispatched fill (the AVX-512 intrinsics where this CPU has them)
    /// equals the portable fill bit for bit: every length 0..=300 (whole
    /// 32-entry steps, a last 16-entry vector cut anywhere), keys whose
    /// pairs reach all quadrants, scales of both signs.
    #[test]
    fn dispatched_fill_equals_portable_bit_for_bit() {
        for len in 0..=300usize {
            for (key, scale) in [(len as u64 * 7919 + 3, 1.0), (u64::MAX - len as u64, -0.37)] {
                let (mut a, mut b) = (vec![9.0; len + 3], vec![9.0; len + 3]);
                fill_normals_at(key, scale, &mut a[..len]);
                fill_normals_at_portable(key, scale, &mut b[..len]);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "key {key} len {len}");
            }
        }
    }

    #[test]
    fn entries_are_standard_normal_and_pair_partners_uncorrelated() {
        // 2e6 entries of 1000 keys: mean, variance, the correlation of the
        // two components of a pair, and the tail mass beyond 3 (0.0027),
        // each within 5 standard errors.
        let (keys, per) = (1000u64, 2000usize);
        let n = (keys as usize * per) as f64;
        let (mut s1, mut s2, mut cross, mut tail) = (0.0, 0.0, 0.0, 0.0);
        let mut out = vec![0.0; per];
        for key in 0..keys {
            fill_normals_at(crate::rng::fold_key(&[key, 99]), 1.0, &mut out);
            for pair in out.chunks_exact(2) {
                cross += pair[0] * pair[1];
            }
            for &v in &out {
                s1 += v;
                s2 += v * v;
                tail += f64::from(u8::from(v.abs() > 3.0));
            }
        }
        let mean = s1 / n;
        let var = s2 / n - mean * mean;
        assert!(mean.abs() < 5.0 / n.sqrt(), "mean {mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / n).sqrt(), "variance {var}");
        assert!(
            (cross / (n / 2.0)).abs() < 5.0 / (n / 2.0).sqrt(),
            "pair correlation {}",
            cross / (n / 2.0)
        );
        let p = 0.002_699_796;
        assert!(
            (tail / n - p).abs() < 5.0 * (p * (1.0 - p) / n).sqrt(),
            "tail {}",
            tail / n
        );
    }
}
