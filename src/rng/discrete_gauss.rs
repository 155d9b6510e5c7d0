//! The discrete Gaussian without divisions in its inner loops: the
//! sampler of Canonne, Kamath and Steinke (2020, Algorithm 3) as
//! [`super::discrete`] describes it, with a power-of-two Laplace scale and
//! every Bernoulli(n / d) decided lazily, bit by bit, against the binary
//! expansion of n / d (a uniform real U in [0, 1) is below n / d exactly
//! when, at the first bit where the two expansions differ, U's bit is 0;
//! each step of the expansion is a shift, a compare and a subtract). Every
//! output has exactly its distribution's probability but for one
//! documented truncation below: no floating-point number is involved.
//!
//! **The algorithm.** For an integer deviation sigma (variance sigma^2 in
//! lattice steps squared), t = 2^b the smallest power of two above sigma:
//! 1. Y ~ discrete Laplace of scale t: U uniform below t (b bits); accept
//!    with probability exp(-U / t); V the number of Bernoulli(exp(-1))
//!    successes before the first failure; X = U + t V; a fair sign; reject
//!    a negative zero; Y = +-X.
//! 2. Accept Y with probability exp(-(|Y| t - sigma^2)^2 / (2 sigma^2
//!    t^2)); else go to 1.
//!
//! P(Y = y) exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2)) is proportional to
//! exp(-y^2 / (2 sigma^2)) for any t > 0 (the |y| terms cancel), so the
//! output is the discrete Gaussian; t near sigma keeps the acceptance
//! high (CKS take floor(sigma) + 1; a power of two up to twice that costs a
//! few more tries and saves every division of the uniform draw).
//! Bernoulli(exp(-gamma)) for gamma = n / d <= 1 is the first k with
//! A_k ~ Bernoulli(gamma / k) = 0, output k odd; for larger gamma,
//! floor(gamma) draws of Bernoulli(exp(-1)) that must all be 1, then one of
//! exp(-(gamma - floor(gamma))).
//!
//! **The truncation.** A proposal with |Y| t >= 2^64 (|Y| >= 2^37 at the
//! engine's sigma below 2^26; a Laplace of scale t reaches it with
//! probability below e^-1024) is rejected rather than tested, so the output
//! is the discrete Gaussian conditioned on |x| < 2^64 / t: its total
//! variation from the exact one is the Gaussian's mass beyond 2^37 sigma /
//! sigma, below e^-(2^21). No computed figure moves by it (it is below the
//! smallest double).
//!
//! **Randomness**: the words of one release ([`super::discrete::KeyedBits`]),
//! consumed bit by bit ([`Bits`]), so a release is a pure function of its
//! key and resumes and regenerates as every keyed draw does.

use super::discrete::KeyedBits;

/// The largest deviation accepted, in steps (so that 2 sigma^2 t^2 k stays
/// below 2^127 for the k the exponential's loop reaches).
pub const MAX_SIGMA: u64 = 1 << 26;

/// One release's random bits, most significant first from each word.
#[derive(Clone, Debug)]
pub struct Bits {
    words: KeyedBits,
    word: u64,
    left: u32,
}

impl Bits {
    /// The bits of the release keyed `key`.
    pub fn new(key: u64) -> Self {
        Self {
            words: KeyedBits::new(key),
            word: 0,
            left: 0,
        }
    }

    /// The next bit.
    #[inline]
    pub fn bit(&mut self) -> bool {
        if self.left == 0 {
            self.word = self.words.word();
            self.left = 64;
        }
        self.left -= 1;
        let b = self.word >> 63;
        self.word <<= 1;
        b == 1
    }

    /// The next `n` bits as an integer (1 <= n <= 63).
    #[inline]
    pub fn take(&mut self, n: u32) -> u64 {
        debug_assert!((1..=63).contains(&n));
        if self.left >= n {
            let v = self.word >> (64 - n);
            self.word <<= n;
            self.left -= n;
            return v;
        }
        let have = self.left;
        let hi = if have == 0 { 0 } else { self.word >> (64 - have) };
        self.word = self.words.word();
        let rest = n - have;
        let lo = self.word >> (64 - rest);
        self.word <<= rest;
        self.left = 64 - rest;
        (hi << rest) | lo
    }
}

/// Bernoulli(n / d) (d >= 1, d < 2^127), decided lazily against n / d's
/// binary expansion.
#[inline]
pub fn bernoulli(bits: &mut Bits, n: u128, d: u128) -> bool {
    if n >= d {
        return true;
    }
    let mut r = n;
    while r != 0 {
        r <<= 1;
        let p = r >= d;
        if p {
            r -= d;
        }
        if bits.bit() != p {
            return p;
        }
    }
    // The rest of n / d's expansion is zeros: U >= n / d.
    false
}

/// Bernoulli(exp(-n / d)) for n <= d.
#[inline]
fn exp_at_most_one(bits: &mut Bits, n: u128, d: u128) -> bool {
    let mut k: u128 = 1;
    loop {
        // d k < 2^127 for d below 2^108 and k below 2^19; k passes 34 with
        // probability below 1 / 34! (no such run in practice).
        if k >= 1 << 19 || !bernoulli(bits, n, d * k) {
            return k % 2 == 1;
        }
        k += 1;
    }
}

/// floor(n / d) for d >= 1 without a 128-bit division where the quotient
/// is below 2^50 (the double quotient, off by at most one there, corrected
/// by exact products; the quotients the sampler meets are small); a
/// division above.
#[inline]
fn quotient(n: u128, d: u128) -> u128 {
    let estimate = n as f64 / d as f64;
    if estimate >= (1u64 << 50) as f64 {
        return n / d;
    }
    let mut q = estimate as u128;
    while q > 0 && q.checked_mul(d).is_none_or(|p| p > n) {
        q -= 1;
    }
    while (q + 1).checked_mul(d).is_some_and(|p| p <= n) {
        q += 1;
    }
    q
}

/// Bernoulli(exp(-n / d)).
#[inline]
fn exp_neg(bits: &mut Bits, n: u128, d: u128) -> bool {
    let whole = quotient(n, d);
    let mut i = 0;
    while i < whole {
        if !exp_at_most_one(bits, 1, 1) {
            return false;
        }
        i += 1;
    }
    exp_at_most_one(bits, n - whole * d, d)
}

/// A discrete Laplace draw of scale t = 2^`b` (P(x) proportional to
/// exp(-|x| / t)).
#[inline]
fn laplace_pow2(bits: &mut Bits, b: u32) -> Signed {
    let t = 1u128 << b;
    loop {
        let u = u128::from(bits.take(b));
        if !exp_at_most_one(bits, u, t) {
            continue;
        }
        let mut v: u128 = 0;
        while exp_at_most_one(bits, 1, 1) {
            v += 1;
        }
        let x = u + (v << b);
        let negative = bits.bit();
        if negative && x == 0 {
            continue;
        }
        return (x, negative);
    }
}

/// A signed magnitude.
type Signed = (u128, bool);

/// A discrete Gaussian draw of deviation `sigma` steps (1 <= sigma <=
/// [`MAX_SIGMA`]; clamped there): P(x) proportional to exp(-x^2 / (2
/// sigma^2)) on the integers.
pub fn discrete_gaussian(bits: &mut Bits, sigma: u64) -> i64 {
    let sigma = sigma.clamp(1, MAX_SIGMA);
    let b = 64 - sigma.leading_zeros();
    let t = 1u128 << b;
    let s2 = u128::from(sigma) * u128::from(sigma);
    let den = 2 * s2 * t * t;
    loop {
        let (a, negative) = laplace_pow2(bits, b);
        let at = a << b;
        if at >= 1 << 64 {
            continue;
        }
        let diff = at.abs_diff(s2);
        if exp_neg(bits, diff * diff, den) {
            let y = a as i64;
            return if negative { -y } else { y };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::discrete::tests::fit;

    /// A million draws at sigma = 3 and sigma = 10 against the exact pmf
    /// exp(-x^2 / (2 sigma^2)) normalized: chi-square p-values above 0.001
    /// (fixed seeds; the statistics are printed), and the same draws
    /// against a variance 5% larger fail (the test's power).
    #[test]
    fn a_million_draws_fit_the_discrete_gaussian_pmf() {
        for (sigma, span) in [(3u64, 16i64), (10, 50)] {
            let s2 = (sigma * sigma) as f64;
            let draw = |key: u64| discrete_gaussian(&mut Bits::new(key), sigma);
            let (stat, df, p) = fit(1_000_000, span, draw, |x| (-((x * x) as f64) / (2.0 * s2)).exp());
            println!("division-free discrete Gaussian sigma {sigma}: chi-square {stat:.2} on {df} df, p = {p:.4}");
            assert!(p > 1e-3, "sigma {sigma}: chi-square {stat} on {df} df, p = {p}");
            let (stat, df, p) = fit(1_000_000, span, draw, |x| (-((x * x) as f64) / (2.1 * s2)).exp());
            println!("  against 1.05 sigma^2: chi-square {stat:.2} on {df} df, p = {p:.3e}");
            assert!(p < 1e-6, "sigma {sigma}: chi-square {stat} on {df} df, p = {p}");
        }
    }

    /// At the engine's scale (sigma = 2^24.5 steps) 40 000 draws have mean
    /// 0 and variance sigma^2 within 3.5 standard errors (the variance of
    /// x^2's mean is 2 sigma^4 / n), and their fourth moment is the
    /// Gaussian's 3 sigma^4 within 5%.
    #[test]
    fn draws_at_the_engines_scale_have_its_moments() {
        let sigma = 23_726_566u64;
        let s2 = (sigma as f64) * (sigma as f64);
        let n = 40_000u64;
        let (mut m1, mut m2, mut m4) = (0.0, 0.0, 0.0);
        for i in 0..n {
            let x = discrete_gaussian(&mut Bits::new(crate::rng::fold_key(&[0x6A55, i])), sigma) as f64;
            m1 += x;
            m2 += x * x;
            m4 += (x * x / s2) * (x * x / s2);
        }
        let nf = n as f64;
        assert!((m1 / nf).abs() < 4.0 * sigma as f64 / nf.sqrt(), "mean {}", m1 / nf);
        let v = m2 / nf / s2;
        assert!((v - 1.0).abs() < 3.5 * (2.0 / nf).sqrt(), "variance {v} sigma^2");
        assert!((m4 / nf / 3.0 - 1.0).abs() < 0.05, "fourth moment {} sigma^4", m4 / nf);
    }

    /// The lazy Bernoulli has its probability at 1/3, 5/7 and 2^-40 + 1/2
    /// (200 000 draws each, within 4.5 standard errors); the bits come out
    /// of the words most significant first, `take` and `bit` agreeing; the
    /// quotient is floor(n / d); a draw is a function of its key.
    #[test]
    fn the_parts_are_exact() {
        let mut bits = Bits::new(5);
        for (n, d) in [(1u128, 3u128), (5, 7), ((1 << 39) + 1, 1 << 40)] {
            let draws = 200_000;
            let ones = (0..draws).filter(|_| bernoulli(&mut bits, n, d)).count() as f64;
            let p = n as f64 / d as f64;
            let z = (ones / draws as f64 - p) / (p * (1.0 - p) / draws as f64).sqrt();
            assert!(z.abs() < 4.5, "{n}/{d}: z = {z}");
        }
        let (mut a, mut b) = (Bits::new(77), Bits::new(77));
        for n in [1u32, 7, 25, 63, 2, 40] {
            let by_bits = (0..n).fold(0u64, |v, _| (v << 1) | u64::from(b.bit()));
            assert_eq!(a.take(n), by_bits, "{n} bits");
        }
        let w = KeyedBits::new(77).word();
        assert_eq!(Bits::new(77).take(20), w >> 44);
        for (n, d) in [
            (0u128, 1u128),
            (7, 7),
            (1 << 100, 3),
            (u128::MAX, (1 << 64) + 1),
            (99, 100),
        ] {
            assert_eq!(quotient(n, d), n / d, "{n} / {d}");
        }
        assert_eq!(
            discrete_gaussian(&mut Bits::new(42), 1000),
            discrete_gaussian(&mut Bits::new(42), 1000)
        );
    }
}
