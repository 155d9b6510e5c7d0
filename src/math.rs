//! Portable elementary functions: f64 logarithm and sine/cosine written with
//! +, -, *, / and bit operations only, so that the CPU and a CUDA device
//! compute them bit for bit alike.
//!
//! Why: libm's `log`, `sin` and `cos` (glibc on the CPU, libdevice on a GPU)
//! are not correctly rounded and round differently in a few ulp-ties. A
//! simulation whose rewards and privacy noise go through them diverges
//! between CPU and GPU as soon as one reward differs in its last bit and a
//! near-tie in the UCB scores flips (linear_sphere offers structural near-ties
//! in the first rounds, when every action has norm 1). Everything that decides
//! what an agent plays therefore uses these functions; `kernels/common.cuh`
//! has the same code operation for operation (`fb_ln`, `fb_ln_1p`,
//! `fb_sincos_kernel`), and the host emulation of the kernels refuses libm's
//! transcendental functions at compile time (kernels/emulation.hpp), so a
//! kernel cannot use one by accident.
//!
//! IEEE-754 +, -, *, / and sqrt are correctly rounded on both sides (the
//! kernels are compiled with `--fmad=false`, precise division and square
//! root), so equal operation order gives equal bits. Accuracy (tested against
//! std): `ln` within 1 ulp, `sincos_kernel` within 2e-16 absolute on
//! [-pi/4, pi/4]. The polynomials are the classic fdlibm minimax
//! coefficients (Sun Microsystems, 1993).

// The constants carry the digits fdlibm publishes (kernels/common.cuh repeats
// them), which round to the intended doubles.
#![allow(clippy::excessive_precision)]

pub(crate) const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
pub(crate) const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
pub(crate) const LG1: f64 = 6.666_666_666_666_735_130e-1;
pub(crate) const LG2: f64 = 3.999_999_999_940_941_908e-1;
pub(crate) const LG3: f64 = 2.857_142_874_366_239_149e-1;
pub(crate) const LG4: f64 = 2.222_219_843_214_978_396e-1;
pub(crate) const LG5: f64 = 1.818_357_216_161_805_012e-1;
pub(crate) const LG6: f64 = 1.531_383_769_920_937_332e-1;
pub(crate) const LG7: f64 = 1.479_819_860_511_658_591e-1;

/// Natural logarithm. `ln(0) = -inf`, negative or NaN input gives NaN,
/// `ln(inf) = inf`; subnormal inputs are scaled first.
#[inline]
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x == f64::INFINITY {
        return x;
    }
    let bits = x.to_bits();
    if bits < 0x0010_0000_0000_0000 {
        // Subnormal: scale by 2^54.
        return ln_core((x * 18_014_398_509_481_984.0).to_bits(), -54);
    }
    ln_core(bits, 0)
}

/// [`ln`] of a positive, normal, finite `x`, without branches (so a loop
/// of it vectorizes): the same operations, so the same bits.
#[inline(always)]
pub fn ln_normal_positive(x: f64) -> f64 {
    ln_core(x.to_bits(), 0)
}

/// ln of the positive normal double whose bits are `bits`, plus k0 ln 2
/// (k0 = -54 undoes [`ln`]'s scaling of a subnormal by 2^54).
#[inline(always)]
fn ln_core(bits: u64, k0: i64) -> f64 {
    let mut k = k0;
    let hx = (bits >> 32) as u32;
    k += i64::from(hx >> 20) - 1023;
    let hm = hx & 0x000f_ffff;
    // Move the mantissa into [sqrt(2)/2, sqrt(2)): i is 0x100000 when the
    // mantissa is at least sqrt(2)/2 * 2 (then divide by 2).
    let i = (hm + 0x95f64) & 0x0010_0000;
    let xn = f64::from_bits((u64::from(hm | (i ^ 0x3ff0_0000)) << 32) | (bits & 0xffff_ffff));
    k += i64::from(i >> 20);
    let f = xn - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    // |k| < 1100: through i32, whose conversion vectorizes (same value).
    let dk = f64::from(k as i32);
    dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
}

/// ln(1 + q) for q > -1, accurate for small q (Goldberg's trick: the
/// rounding error of 1 + q is divided out).
#[inline]
pub fn ln_1p(q: f64) -> f64 {
    let u = 1.0 + q;
    if u == 1.0 { q } else { ln(u) * q / (u - 1.0) }
}

pub(crate) const S1: f64 = -1.666_666_666_666_663_243_48e-1;
pub(crate) const S2: f64 = 8.333_333_333_322_489_461_24e-3;
pub(crate) const S3: f64 = -1.984_126_982_985_794_931_34e-4;
pub(crate) const S4: f64 = 2.755_731_370_707_006_767_89e-6;
pub(crate) const S5: f64 = -2.505_076_025_340_686_341_95e-8;
pub(crate) const S6: f64 = 1.589_690_995_211_550_102_21e-10;
pub(crate) const C1: f64 = 4.166_666_666_666_660_190_37e-2;
pub(crate) const C2: f64 = -1.388_888_888_887_410_957_49e-3;
pub(crate) const C3: f64 = 2.480_158_728_947_672_941_78e-5;
pub(crate) const C4: f64 = -2.755_731_435_139_066_330_35e-7;
pub(crate) const C5: f64 = 2.087_572_321_298_174_827_90e-9;
pub(crate) const C6: f64 = -1.135_964_755_778_819_482_65e-11;

/// (sin x, cos x) for x in [-pi/4, pi/4].
#[inline]
pub fn sincos_kernel(x: f64) -> (f64, f64) {
    let z = x * x;
    let v = z * x;
    let rs = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
    let s = x + v * (S1 + z * rs);
    let rc = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
    let c = 1.0 - (0.5 * z - z * rc);
    (s, c)
}

/// pi / 2.
const FRAC_PI_2: f64 = std::f64::consts::FRAC_PI_2;
/// 2^-53.
const TWO_M53: f64 = 1.0 / 9_007_199_254_740_992.0;

/// Box-Muller from two 64-bit words: `a` gives u1 = (a >> 11 + 1/2) 2^-53
/// in (0, 1); the top two bits of `b` pick a quadrant q and its next 53 bits
/// an angle theta uniform in [-pi/4, pi/4), so phi = q pi/2 + theta is uniform
/// on a full turn. Returns (r cos phi, r sin phi) with r = sqrt(-2 ln u1):
/// two independent standard normals.
#[inline]
pub fn box_muller(a: u64, b: u64) -> (f64, f64) {
    let u1 = ((a >> 11) as f64 + 0.5) * TWO_M53;
    let r = (-2.0 * ln(u1)).sqrt();
    let q = b >> 62;
    let f = ((b << 2) >> 11) as f64 * TWO_M53;
    let (s, c) = sincos_kernel((f - 0.5) * FRAC_PI_2);
    // cos(q pi/2 + t), sin(q pi/2 + t) by quadrant.
    let (cq, sq) = match q {
        0 => (c, s),
        1 => (-s, c),
        2 => (-c, -s),
        _ => (s, -c),
    };
    (r * cq, r * sq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn ln_within_one_ulp_of_std() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut worst = 0;
        for _ in 0..200_000 {
            let w = crate::rng::splitmix64(&mut s);
            // Positive finite doubles across the whole exponent range.
            let x = f64::from_bits(w & 0x7fef_ffff_ffff_ffff);
            if x == 0.0 {
                continue;
            }
            worst = worst.max(ulps(ln(x), x.ln()));
        }
        for x in [
            1.0,
            2.0,
            0.5,
            1.0 + 1e-12,
            1.0 - 1e-12,
            1e-300,
            5e-324,
            f64::MAX,
            std::f64::consts::FRAC_1_SQRT_2,
            std::f64::consts::SQRT_2,
        ] {
            worst = worst.max(ulps(ln(x), x.ln()));
        }
        assert!(worst <= 1, "worst error {worst} ulp");
        assert_eq!(ln(1.0), 0.0);
        assert!(ln(-1.0).is_nan() && ln(f64::NAN).is_nan());
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn ln_1p_accurate_for_small_and_large() {
        for q in [0.0, 1e-300, 1e-17, 1e-10, 3e-5, 0.1, 0.5, 1.0, 7.0, 1e6, 1e300] {
            let (a, b) = (ln_1p(q), q.ln_1p());
            assert!((a - b).abs() <= 4.0 * f64::EPSILON * b.abs(), "q={q}: {a} vs {b}");
        }
    }

    #[test]
    fn sincos_kernel_matches_std_on_the_reduced_range() {
        let n = 100_000;
        for i in 0..=n {
            let x = (i as f64 / n as f64 - 0.5) * FRAC_PI_2;
            let (s, c) = sincos_kernel(x);
            assert!((s - x.sin()).abs() <= 2e-16, "sin {x}");
            assert!((c - x.cos()).abs() <= 2e-16, "cos {x}");
        }
    }

    #[test]
    fn box_muller_covers_every_quadrant_with_unit_radius_circle() {
        // With u1 = e^-1/2 the radius is 1: the pair lies on the unit circle,
        // in the quadrant the top bits of b say.
        let a = ((0.606_530_659_712_633_4f64 / TWO_M53) as u64) << 11;
        for q in 0..4u64 {
            let b = (q << 62) | (1u64 << 61); // theta = 0: the quadrant's axis
            let (x, y) = box_muller(a, b);
            assert!(((x * x + y * y).sqrt() - 1.0).abs() < 1e-9);
            let want = [(1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0)][q as usize];
            assert!(
                (x - want.0).abs() < 1e-9 && (y - want.1).abs() < 1e-9,
                "q={q}: ({x}, {y})"
            );
        }
    }
}
