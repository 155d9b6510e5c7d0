//! Exact samplers on the integers, in integer arithmetic only: a
//! Bernoulli with a rational probability, Bernoulli(exp(-gamma)) for a
//! rational gamma, the discrete Laplace and the discrete Gaussian, after
//! Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
//! Privacy" (NeurIPS 2020), Algorithms 1-3. No floating-point number is
//! involved, so every output has exactly the probability the distribution
//! gives it: the gap between the reals and the doubles a floating-point
//! sampler draws (an exact-bits adversary can tell which releases a
//! neighbour could not have produced) does not arise.
//!
//! **The algorithms, as implemented here.**
//! - *Bernoulli(n / d)*: a uniform integer below d (rejection from 64-bit
//!   words: exact) is below n.
//! - *Bernoulli(exp(-n / d))* for n <= d: draw A_1 ~ Bernoulli(gamma / 1),
//!   A_2 ~ Bernoulli(gamma / 2), ... until the first A_k = 0; output 1 when
//!   k is odd. P(k odd) = sum over odd k of gamma^(k-1)/(k-1)! - gamma^k/k!
//!   = exp(-gamma). For n > d: floor(n / d) draws of Bernoulli(exp(-1)),
//!   all of which must be 1, then one of Bernoulli(exp(-(n mod d) / d)).
//! - *Discrete Laplace*, P(x) proportional to exp(-|x| s / t) on the
//!   integers (s, t positive integers): U uniform below t, accepted with
//!   probability exp(-U / t); V the number of Bernoulli(exp(-1)) successes
//!   before the first failure (geometric); X = U + t V (geometric with
//!   ratio exp(-1 / t)), Y = floor(X / s); a fair sign B; reject B = 1, Y =
//!   0 (so that 0 is not counted twice); output (1 - 2B) Y.
//! - *Discrete Gaussian*, P(x) proportional to exp(-x^2 / (2 sigma^2)) for
//!   an integer sigma^2 = `sigma2` (a noise scale in lattice steps, whose
//!   square a caller rounds up, so the noise is never smaller than asked):
//!   t = floor(sigma) + 1; Y ~ discrete Laplace with s = 1 (scale t);
//!   accept with probability exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2)) =
//!   exp(-(|Y| t - sigma^2)^2 / (2 sigma^2 t^2)), a rational exponent.
//!
//! The linear trees' node noise draws the division-free form of the same
//! discrete Gaussian ([`super::discrete_gauss`]: integer deviations, a
//! power-of-two Laplace scale, Bernoulli draws decided bit by bit; 2.5x
//! faster on the CPU); this form is the one the kernels implement
//! (`common.cuh`, equal under the emulation) and a second implementation
//! of the distribution for the tests.
//!
//! **Randomness** comes from [`KeyedBits`]: word i of a release is a pure
//! function of (the release's key, i), the project's counter-based
//! construction ([`super::uniform_at`]'s mixing), consumed for as many
//! tries as the rejection loops take; so a release is reproducible from its
//! key, on any backend, without storing anything, and a resumed run draws
//! the same noise. Every integer fits in a u128 for the sizes the engine
//! uses (sigma^2 below 2^60, |x| below 2^40); larger ones are refused
//! ([`DiscreteError`]) rather than wrapped.

/// The random words of one release: word i is a pure function of (key,
/// i).
#[derive(Clone, Debug)]
pub struct KeyedBits {
    key: u64,
    next: u64,
}

impl KeyedBits {
    /// The words of the release keyed `key` (a [`super::fold_key`] of its
    /// identity), from the first.
    pub fn new(key: u64) -> Self {
        Self { key, next: 0 }
    }

    /// The next word.
    pub fn word(&mut self) -> u64 {
        let mut h = self.key ^ self.next.wrapping_mul(0xD2B7_4407_B1CE_6E93);
        self.next += 1;
        super::splitmix64(&mut h)
    }

    /// How many words were drawn so far.
    pub fn used(&self) -> u64 {
        self.next
    }

    /// A uniform integer below `n` (n >= 1), exactly: 128-bit words are
    /// drawn and rejected above the largest multiple of `n` (Lemire's
    /// threshold), so every value has probability 1 / n.
    pub fn below(&mut self, n: u128) -> u128 {
        debug_assert!(n >= 1);
        if n <= 1 {
            return 0;
        }
        if n.is_power_of_two() {
            // 2^128 mod n = 0: no word is rejected, and w mod n is its low
            // bits. The same words and the same value as the general path,
            // without its two 128-bit divisions (the discrete Laplace's
            // denominator 2^40 and its first multiples are powers of two).
            let w = (u128::from(self.word()) << 64) | u128::from(self.word());
            return w & (n - 1);
        }
        // 2^128 mod n, computed without 2^128: (u128::MAX - n + 1) mod n.
        let reject_below = (u128::MAX - n + 1) % n;
        loop {
            let w = (u128::from(self.word()) << 64) | u128::from(self.word());
            if w >= reject_below {
                return w % n;
            }
        }
    }
}

/// A sampler's parameters outside the range whose arithmetic fits 128
/// bits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiscreteError {
    /// A scale of zero (no distribution).
    #[error("a discrete sampler's scale must be positive")]
    ZeroScale,
    /// An intermediate product would not fit 128 bits.
    #[error("a discrete sampler's arithmetic exceeds 128 bits (sigma^2 {sigma2}, draw {draw}): use a coarser lattice")]
    Overflow {
        /// The variance in lattice steps.
        sigma2: u64,
        /// The draw being tested.
        draw: u64,
    },
}

/// Bernoulli(n / d), exactly (n <= d, d >= 1).
pub fn bernoulli_ratio(bits: &mut KeyedBits, n: u128, d: u128) -> bool {
    bits.below(d) < n
}

/// Bernoulli(exp(-n / d)), exactly (d >= 1).
pub fn bernoulli_exp_neg(bits: &mut KeyedBits, n: u128, d: u128) -> bool {
    if n > d {
        for _ in 0..n / d {
            if !bernoulli_exp_neg_at_most_one(bits, 1, 1) {
                return false;
            }
        }
        return bernoulli_exp_neg_at_most_one(bits, n % d, d);
    }
    bernoulli_exp_neg_at_most_one(bits, n, d)
}

/// Bernoulli(exp(-gamma)), gamma = n / d in [0, 1]: the first k with
/// A_k ~ Bernoulli(gamma / k) = 0, output k odd.
fn bernoulli_exp_neg_at_most_one(bits: &mut KeyedBits, n: u128, d: u128) -> bool {
    let mut k: u128 = 1;
    // d k stays far below 2^128: k exceeds 40 with probability below 1/40!.
    while let Some(dk) = d.checked_mul(k) {
        if !bernoulli_ratio(bits, n, dk) {
            return k % 2 == 1;
        }
        k += 1;
    }
    k % 2 == 1
}

/// A discrete Laplace draw: P(x) proportional to exp(-|x| s / t) on the
/// integers (s, t >= 1).
pub fn discrete_laplace(bits: &mut KeyedBits, s: u64, t: u64) -> Result<i64, DiscreteError> {
    if s == 0 || t == 0 {
        return Err(DiscreteError::ZeroScale);
    }
    loop {
        let u = bits.below(u128::from(t));
        if !bernoulli_exp_neg(bits, u, u128::from(t)) {
            continue;
        }
        let mut v: u128 = 0;
        while bernoulli_exp_neg(bits, 1, 1) {
            v += 1;
        }
        let x = u + u128::from(t) * v;
        let y = x / u128::from(s);
        let negative = bits.word() >> 63 == 1;
        if negative && y == 0 {
            continue;
        }
        let y = i64::try_from(y).map_err(|_| DiscreteError::Overflow {
            sigma2: 0,
            draw: u64::MAX,
        })?;
        return Ok(if negative { -y } else { y });
    }
}

/// A discrete Gaussian draw: P(x) proportional to exp(-x^2 / (2 sigma2))
/// on the integers, `sigma2` >= 1 the variance parameter in lattice steps
/// squared (an integer: round the real one up).
pub fn discrete_gaussian(bits: &mut KeyedBits, sigma2: u64) -> Result<i64, DiscreteError> {
    if sigma2 == 0 {
        return Err(DiscreteError::ZeroScale);
    }
    let t = isqrt(sigma2) + 1;
    let s2 = u128::from(sigma2);
    let tt = u128::from(t);
    let overflow = |draw: u64| DiscreteError::Overflow { sigma2, draw };
    loop {
        let y = discrete_laplace(bits, 1, t)?;
        let a = u128::from(y.unsigned_abs());
        // (|y| t - sigma^2)^2 / (2 sigma^2 t^2).
        let diff = (a * tt).abs_diff(s2);
        let num = diff.checked_mul(diff).ok_or_else(|| overflow(y.unsigned_abs()))?;
        let den = s2.checked_mul(2 * tt * tt).ok_or_else(|| overflow(y.unsigned_abs()))?;
        if bernoulli_exp_neg(bits, num, den) {
            return Ok(y);
        }
    }
}

/// floor(sqrt(n)), exactly.
pub fn isqrt(n: u64) -> u64 {
    let mut r = (n as f64).sqrt() as u64;
    while r.checked_mul(r).is_none_or(|rr| rr > n) {
        r -= 1;
    }
    while (r + 1).checked_mul(r + 1).is_some_and(|rr| rr <= n) {
        r += 1;
    }
    r
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// ln Gamma(x) (Lanczos, g = 7, 9 terms; |error| below 1e-13 for x >
    /// 0.5): the chi-square p-values' reference.
    fn ln_gamma(x: f64) -> f64 {
        const C: [f64; 9] = [
            0.999_999_999_999_809_9,
            676.520_368_121_885_1,
            -1_259.139_216_722_402_8,
            771.323_428_777_653_1,
            -176.615_029_162_140_6,
            12.507_343_278_686_905,
            -0.138_571_095_265_720_12,
            9.984_369_578_019_572e-6,
            1.505_632_735_149_311_6e-7,
        ];
        let x = x - 1.0;
        let mut a = C[0];
        let t = x + 7.5;
        for (i, c) in C.iter().enumerate().skip(1) {
            a += c / (x + i as f64);
        }
        0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
    }

    /// P(chi-square with `df` degrees of freedom > `stat`): the regularized
    /// upper incomplete gamma Q(df / 2, stat / 2), by its series below a + 1
    /// and its continued fraction above (Lentz).
    fn chi_square_p(stat: f64, df: usize) -> f64 {
        let (a, x) = (df as f64 / 2.0, stat / 2.0);
        let front = (-x + a * x.ln() - ln_gamma(a)).exp();
        if x < a + 1.0 {
            let (mut sum, mut term, mut n) = (1.0 / a, 1.0 / a, a);
            for _ in 0..10_000 {
                n += 1.0;
                term *= x / n;
                sum += term;
                if term < sum * 1e-16 {
                    break;
                }
            }
            return 1.0 - front * sum;
        }
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < tiny { tiny } else { d };
            c = b + an / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let step = d * c;
            h *= step;
            if (step - 1.0).abs() < 1e-16 {
                break;
            }
        }
        front * h
    }

    /// Draws `n` values (release key i for draw i), counts them on
    /// [-span, span] (outside: pooled into the end cells) and returns the
    /// chi-square statistic against `pmf`, its degrees of freedom and its
    /// p-value, cells of expected count below 5 pooled toward the centre.
    pub(crate) fn fit(n: u64, span: i64, draw: impl Fn(u64) -> i64, pmf: impl Fn(i64) -> f64) -> (f64, usize, f64) {
        let width = (2 * span + 1) as usize;
        let mut counts = vec![0u64; width];
        for i in 0..n {
            let x = draw(super::super::fold_key(&[0xD15C, i])).clamp(-span, span);
            counts[(x + span) as usize] += 1;
        }
        let total: f64 = (-span..=span).map(&pmf).sum();
        let mut expected: Vec<f64> = (-span..=span).map(|x| pmf(x) / total * n as f64).collect();
        // The end cells take the tails beyond them (the clamp above).
        let tail: f64 = (span + 1..span + 400).map(&pmf).sum::<f64>() / total * n as f64;
        expected[0] += tail;
        expected[width - 1] += tail;
        let (mut stat, mut cells, mut o, mut e) = (0.0, 0usize, 0.0, 0.0);
        for (c, x) in counts.iter().zip(&expected) {
            o += *c as f64;
            e += x;
            if e >= 5.0 {
                stat += (o - e) * (o - e) / e;
                cells += 1;
                o = 0.0;
                e = 0.0;
            }
        }
        if e > 0.0 {
            stat += (o - e) * (o - e) / e;
            cells += 1;
        }
        let df = cells - 1;
        (stat, df, chi_square_p(stat, df))
    }

    /// The chi-square tail of known points: P(chi2_1 > 3.841) = 0.05,
    /// P(chi2_10 > 18.307) = 0.05, P(chi2_100 > 124.342) = 0.05.
    /// The power-of-two path of `below` returns what the general path
    /// (rejection above the largest multiple, then the remainder) returns
    /// for the same words, and consumes as many: the draws of every sampler
    /// are those they were before it.
    #[test]
    fn below_a_power_of_two_equals_the_general_path() {
        let general = |bits: &mut KeyedBits, n: u128| {
            let reject_below = (u128::MAX - n + 1) % n;
            loop {
                let w = (u128::from(bits.word()) << 64) | u128::from(bits.word());
                if w >= reject_below {
                    return w % n;
                }
            }
        };
        for k in [1u32, 2, 20, 40, 41, 63, 64, 100, 127] {
            let n = 1u128 << k;
            for key in 0..200u64 {
                let (mut a, mut b) = (KeyedBits::new(key), KeyedBits::new(key));
                assert_eq!(a.below(n), general(&mut b, n), "2^{k}, key {key}");
                assert_eq!(a.used(), b.used());
            }
        }
    }

    #[test]
    fn the_chi_square_tail_is_the_tables() {
        for (stat, df) in [(3.841_458_8, 1), (18.307_038, 10), (124.342_13, 100)] {
            let p = chi_square_p(stat, df);
            assert!((p - 0.05).abs() < 1e-6, "df {df}: {p}");
        }
    }

    /// Bernoulli(exp(-gamma)) at gamma = 0, 1/3, 1, 5/2 over 200 000 draws
    /// each: the frequency within 4.5 standard errors of exp(-gamma).
    #[test]
    fn bernoulli_exp_has_its_probability() {
        for (n, d) in [(0u128, 1u128), (1, 3), (1, 1), (5, 2)] {
            let draws = 200_000u64;
            let mut bits = KeyedBits::new(0xBE57 + n as u64 * 7 + d as u64);
            let ones = (0..draws).filter(|_| bernoulli_exp_neg(&mut bits, n, d)).count() as f64;
            let p = (-(n as f64) / d as f64).exp();
            let se = (p * (1.0 - p) / draws as f64).sqrt().max(1e-12);
            let z = (ones / draws as f64 - p) / se;
            assert!(
                z.abs() < 4.5 || (p == 1.0 && ones == draws as f64),
                "exp(-{n}/{d}): z = {z}"
            );
        }
    }

    /// A million discrete Laplace draws (s = 2, t = 7: P(x) proportional to
    /// exp(-2|x|/7)) against the exact pmf: the chi-square p-value above
    /// 0.001 (a fixed seed: the statistic is printed).
    #[test]
    fn a_million_discrete_laplace_draws_fit_the_pmf() {
        let (s, t) = (2u64, 7u64);
        let (stat, df, p) = fit(
            1_000_000,
            30,
            |k| discrete_laplace(&mut KeyedBits::new(k), s, t).unwrap_or_else(|e| panic!("{e}")),
            |x| (-(x.unsigned_abs() as f64) * s as f64 / t as f64).exp(),
        );
        println!("discrete Laplace s {s} t {t}: chi-square {stat:.2} on {df} df, p = {p:.4}");
        assert!(p > 1e-3, "chi-square {stat} on {df} df: p = {p}");
        // The test's power: the same draws against scale 7 / 2.1 fail it.
        let (stat, df, p) = fit(
            1_000_000,
            30,
            |k| discrete_laplace(&mut KeyedBits::new(k), s, t).unwrap_or_else(|e| panic!("{e}")),
            |x| (-(x.unsigned_abs() as f64) * 2.1 / t as f64).exp(),
        );
        println!("against s 2.1: chi-square {stat:.2} on {df} df, p = {p:.3e}");
        assert!(p < 1e-6, "chi-square {stat} on {df} df: p = {p}");
    }

    /// A million discrete Gaussian draws at sigma^2 = 10 against the exact
    /// pmf exp(-x^2 / 20) normalized: the chi-square p-value above 0.001;
    /// and at sigma^2 = 2^50 (a lattice of 2^-20 and sigma 32) the draws
    /// have the variance sigma^2 within 1%.
    #[test]
    fn a_million_discrete_gaussian_draws_fit_the_pmf() {
        let sigma2 = 10u64;
        let (stat, df, p) = fit(
            1_000_000,
            20,
            |k| discrete_gaussian(&mut KeyedBits::new(k), sigma2).unwrap_or_else(|e| panic!("{e}")),
            |x| (-((x * x) as f64) / (2.0 * sigma2 as f64)).exp(),
        );
        println!("discrete Gaussian sigma^2 {sigma2}: chi-square {stat:.2} on {df} df, p = {p:.4}");
        assert!(p > 1e-3, "chi-square {stat} on {df} df: p = {p}");
        // The test's power: the same draws against sigma^2 = 10.5 fail it.
        let (stat, df, p) = fit(
            1_000_000,
            20,
            |k| discrete_gaussian(&mut KeyedBits::new(k), sigma2).unwrap_or_else(|e| panic!("{e}")),
            |x| (-((x * x) as f64) / 21.0).exp(),
        );
        println!("against sigma^2 10.5: chi-square {stat:.2} on {df} df, p = {p:.3e}");
        assert!(p < 1e-6, "chi-square {stat} on {df} df: p = {p}");
        let big = 1u64 << 50;
        let n = 20_000;
        let var: f64 = (0..n)
            .map(|i| {
                let mut bits = KeyedBits::new(0xB16 + i);
                let x = discrete_gaussian(&mut bits, big).unwrap_or_else(|e| panic!("{e}")) as f64;
                x * x
            })
            .sum::<f64>()
            / n as f64;
        // The variance of the mean of x^2 is 2 sigma^4 / n: 1% is 3.5 sigma.
        assert!((var / big as f64 - 1.0).abs() < 0.035, "{}", var / big as f64);
    }

    /// Reproducible from the key; exact integer square roots; a zero scale
    /// is an error, not a hang.
    #[test]
    fn draws_are_functions_of_their_key() {
        let a = discrete_gaussian(&mut KeyedBits::new(42), 1000);
        let b = discrete_gaussian(&mut KeyedBits::new(42), 1000);
        assert_eq!(a, b);
        assert_eq!(
            discrete_laplace(&mut KeyedBits::new(1), 1, 0),
            Err(DiscreteError::ZeroScale)
        );
        assert_eq!(
            discrete_gaussian(&mut KeyedBits::new(1), 0),
            Err(DiscreteError::ZeroScale)
        );
        for n in [0u64, 1, 2, 3, 4, 15, 16, 17, (1 << 52) + 1, u64::MAX] {
            let r = isqrt(n);
            assert!(
                r * r <= n && (r + 1).checked_mul(r + 1).is_none_or(|x| x > n),
                "{n}: {r}"
            );
        }
    }
}
