//! Seeded random streams.
//!
//! Every random number the engine draws comes from a xoshiro256++ stream whose
//! 256-bit state is derived from a key: (job seed, scope, repetition, agent,
//! purpose[, lane]). The key is folded through SplitMix64 (Steele et al. 2014)
//! and four further SplitMix64 outputs form the state. Consequences:
//!
//! * a stream never depends on thread count, batch size or shard layout;
//! * adding a grid value never changes another cell's streams (scopes are
//!   hashes of parameters, not positions in the grid);
//! * a CUDA kernel can derive the very same state from the same key.
//!
//! Scalar streams are `rand_xoshiro::Xoshiro256PlusPlus`. The hot path uses
//! [`lanes::Lanes`], eight xoshiro256++ generators in struct-of-arrays layout so
//! that the compiler vectorizes them; lane `l` of a key is bit-for-bit the scalar
//! stream of the key extended by `l` (tested).

pub mod binomial;
pub mod discrete;
pub mod discrete_gauss;
pub mod keyed;
#[cfg(target_arch = "x86_64")]
mod keyed_avx512;
pub mod lanes;
pub mod normal;
#[cfg(target_arch = "x86_64")]
mod normal_avx512;
pub mod small_binomial;

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// What a stream is used for. Part of every key, so that two purposes of the
/// same agent never share numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Purpose {
    /// The environment's hidden parameter (theta*), one per federation.
    EnvParameter = 1,
    /// Decision sets (contexts) of one agent.
    Contexts = 2,
    /// Reward noise of one agent.
    Rewards = 3,
    /// Privacy-mechanism noise of one agent.
    PrivacyNoise = 4,
    /// Draws of a baseline policy (e.g. the uniformly random policy).
    Policy = 5,
    /// A random communication graph of a federation.
    Graph = 6,
}

/// One SplitMix64 step: advances `state` and returns the mixed output.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Folds a sequence of 64-bit words into one 64-bit key.
pub fn fold_key(parts: &[u64]) -> u64 {
    let h = 0x6A09_E667_F3BC_C908u64; // sqrt(2) fraction bits: an arbitrary non-zero start
    parts.iter().fold(h, |h, &p| fold_more(h, p))
}

/// Extends a folded key by one word: `fold_more(fold_key(k), p) ==
/// fold_key(k ++ [p])`, so a kernel can derive per-node keys from one
/// per-agent word.
#[inline]
pub fn fold_more(mut h: u64, p: u64) -> u64 {
    h ^= p;
    splitmix64(&mut h)
}

/// The four state words of the xoshiro256++ stream for `parts`.
pub fn state_words(parts: &[u64]) -> [u64; 4] {
    let mut h = fold_key(parts);
    let mut s = [0u64; 4];
    for w in &mut s {
        *w = splitmix64(&mut h);
    }
    if s == [0; 4] {
        s[0] = 1; // the all-zero state is a fixed point; unreachable in practice
    }
    s
}

/// A standard normal as a pure function of (`key`, `index`): counter-based,
/// so noise that can be regenerated need not be stored, and any thread of a
/// kernel can compute any entry. `key` is a [`fold_key`] of the noise's
/// identity (e.g. agent noise key and tree node); `index` the entry.
#[inline]
pub fn normal_at(key: u64, index: u64) -> f64 {
    let mut h = key ^ index.wrapping_mul(0xD2B7_4407_B1CE_6E93);
    let a = splitmix64(&mut h);
    let b = splitmix64(&mut h);
    crate::math::box_muller(a, b).0
}

/// A uniform on (0, 1] as a pure function of (`key`, `index`), like
/// [`normal_at`]: 53 random bits k, (k + 1/2) 2^-53, never 0. It is not
/// quite centred in every cell: for k >= 2^52 the sum k + 1/2 rounds to an
/// even integer, and at k = 2^53 - 1 (probability 2^-53) u is exactly 1.
#[inline]
pub fn uniform_at(key: u64, index: u64) -> f64 {
    let mut h = key ^ index.wrapping_mul(0xD2B7_4407_B1CE_6E93);
    ((splitmix64(&mut h) >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

/// Laplace(scale) as a pure function of `key`: with u = [`uniform_at`]`(key,
/// 0)` uniform on (0, 1), -scale sgn(v) ln(1 - 2|v|), v = u - 1/2, with the
/// portable logarithm (the same bits on every backend; the kernels'
/// `fb_laplace_at`).
#[inline]
pub fn laplace_at(key: u64, scale: f64) -> f64 {
    laplace_of_uniform(uniform_at(key, 0), scale)
}

/// [`laplace_at`]'s arithmetic on its uniform u: -scale sgn(v) ln(1 -
/// 2|v|), v = u - 1/2, with 1 - 2|v| at least 2^-53. For every u that
/// [`uniform_at`] gives (a multiple of 2^-54) 1 - 2|v| is a positive
/// normal double of at least 2^-53, or 0 at u = 1 exactly (probability
/// 2^-53, where the formula's value would be infinite): that one is
/// raised to 2^-53, the value of u's cell had k + 1/2 not rounded (a
/// noise of 53 ln 2 scale). Every other draw is unchanged, and the
/// logarithm is [`crate::math::ln_normal_positive`] (`ln`'s bits, with no
/// special case, so lanes of it vectorize). The kernels' `fb_laplace_at`
/// is the same.
#[inline(always)]
pub fn laplace_of_uniform(u: f64, scale: f64) -> f64 {
    const TWO_M53: f64 = 1.0 / (1u64 << 53) as f64;
    let v = u - 0.5;
    let x = 1.0 - 2.0 * v.abs();
    let x = if x < TWO_M53 { TWO_M53 } else { x };
    let mag = -scale * crate::math::ln_normal_positive(x);
    if v < 0.0 { -mag } else { mag }
}

/// FNV-1a hash of a string, used to turn parameter descriptions into scopes.
pub fn hash_str(s: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// A scalar stream with a cached second Box-Muller normal.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Stream {
    rng: Xoshiro256PlusPlus,
    spare: Option<f64>,
}

impl Stream {
    /// The stream of a key.
    pub fn new(parts: &[u64]) -> Self {
        let words = state_words(parts);
        let mut seed = [0u8; 32];
        for (chunk, w) in seed.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        Self {
            rng: Xoshiro256PlusPlus::from_seed(seed),
            spare: None,
        }
    }

    /// Next raw 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Uniform on [0, 1) with 53 random bits.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform on (0, 1): never returns 0, so its logarithm is finite.
    #[inline]
    pub fn uniform_open(&mut self) -> f64 {
        ((self.rng.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in 0..n (Lemire's multiply-shift; bias below 2^-64 * n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.rng.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Standard normal by the Box-Muller transform in f64
    /// ([`crate::math::box_muller`] of the next two words: portable, so a
    /// CUDA kernel draws the same bits); the pair's second value is cached.
    #[inline]
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let a = self.rng.next_u64();
        let b = self.rng.next_u64();
        let (c, s) = crate::math::box_muller(a, b);
        self.spare = Some(s);
        c
    }

    /// Binomial(n, p) draw (rand_distr's exact BTPE/inversion sampler).
    /// Invalid p (outside [0, 1] or NaN) yields 0.
    pub fn binomial(&mut self, n: u64, p: f64) -> u64 {
        use rand_distr::Distribution;
        match rand_distr::Binomial::new(n, p) {
            Ok(b) => b.sample(&mut self.rng),
            Err(_) => 0,
        }
    }

    /// Bernoulli(p) draw, as 0.0 or 1.0.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> f64 {
        if self.uniform() < p { 1.0 } else { 0.0 }
    }
}

/// Statistics helpers of the tests.
#[cfg(test)]
pub(crate) mod stats {
    /// Standard normal CDF (via an erfc with relative error < 1.2e-7,
    /// Numerical Recipes' erfcc).
    pub fn phi(x: f64) -> f64 {
        0.5 * erfc(-x / std::f64::consts::SQRT_2)
    }

    fn erfc(x: f64) -> f64 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.5 * z);
        let r = t
            * (-z * z - 1.265_512_23
                + t * (1.000_023_68
                    + t * (0.374_091_96
                        + t * (0.096_784_18
                            + t * (-0.186_288_06
                                + t * (0.278_868_07
                                    + t * (-1.135_203_98
                                        + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
                .exp();
        if x >= 0.0 { r } else { 2.0 - r }
    }

    /// Asserts that `v` (n = 1e6 draws) looks standard normal: mean,
    /// variance, kurtosis, the |z| > 3 tail and the Kolmogorov-Smirnov
    /// statistic of its first 200,000 values, each at about 5 standard
    /// errors (KS: the alpha = 0.001 critical value).
    pub fn assert_standard_normal(v: &[f64], what: &str) {
        let nf = v.len() as f64;
        assert_eq!(v.len(), 1_000_000);
        let mean = v.iter().sum::<f64>() / nf;
        let m2 = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / nf;
        let m4 = v.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / nf;
        // Standard errors at n = 1e6: mean 1e-3, var 1.4e-3, kurtosis 4.9e-3.
        assert!(mean.abs() < 5e-3, "{what}: mean {mean}");
        assert!((m2 - 1.0).abs() < 7e-3, "{what}: var {m2}");
        assert!((m4 / (m2 * m2) - 3.0).abs() < 2.5e-2, "{what}: kurtosis");
        // P(|z| > 3) = 2.6998e-3, sd of the estimate 5.2e-5.
        let p3 = v.iter().filter(|x| x.abs() > 3.0).count() as f64 / nf;
        assert!((p3 - 2.6998e-3).abs() < 2.6e-4, "{what}: P(|z|>3) = {p3}");
        let d = ks_statistic(&v[..200_000]);
        assert!(d < 4.4e-3, "{what}: KS statistic {d}");
    }

    /// Kolmogorov-Smirnov distance between a sample and N(0, 1).
    pub fn ks_statistic(sample: &[f64]) -> f64 {
        let mut s = sample.to_vec();
        s.sort_by(f64::total_cmp);
        let m = s.len() as f64;
        s.iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = phi(x);
                (f - i as f64 / m).abs().max((f - (i + 1) as f64 / m).abs())
            })
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_normals_are_standard_normal() {
        let mut s = Stream::new(&[7, 7]);
        let v: Vec<f64> = (0..1_000_000).map(|_| s.normal()).collect();
        stats::assert_standard_normal(&v, "Stream::normal");
        let key = fold_key(&[3, 1, 4]);
        let v: Vec<f64> = (0..1_000_000).map(|i| normal_at(key, i)).collect();
        stats::assert_standard_normal(&v, "normal_at");
        // Neighbouring keys and indices are uncorrelated.
        let w: Vec<f64> = (0..1_000_000).map(|i| normal_at(key + 1, i)).collect();
        let corr = v.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() / 1e6;
        let lag = v.windows(2).map(|p| p[0] * p[1]).sum::<f64>() / 1e6;
        assert!(corr.abs() < 5e-3 && lag.abs() < 5e-3, "corr {corr} lag {lag}");
    }

    #[test]
    fn keys_separate_streams() {
        let a = Stream::new(&[1, 2, 3]).next_u64();
        let b = Stream::new(&[1, 2, 4]).next_u64();
        let c = Stream::new(&[1, 2, 3]).next_u64();
        assert_ne!(a, b);
        assert_eq!(a, c);
    }

    #[test]
    fn splitmix_reference_values() {
        // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_is_in_range_and_covers() {
        let mut s = Stream::new(&[7]);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            let v = s.below(5) as usize;
            seen[v] += 1;
        }
        for c in seen {
            assert!((1800..2200).contains(&c), "{seen:?}");
        }
    }
}
