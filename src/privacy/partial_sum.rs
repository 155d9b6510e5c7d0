//! The binary partial-sum mechanism of Zhu et al. (Algorithms 2 and 3) with
//! Laplace noise regenerated from keys.
//!
//! One agent privatizes its stream for one arm, X(tau) = 1(a(tau) = k)
//! x(tau), tau = 1, 2, ...: the running sum up to t is decomposed into
//! exactly popcount(t) dyadic blocks (clear the lowest set bit of t
//! repeatedly: for each set bit j of t, the block of 2^j rounds ending at
//! (t >> j) << j), and the release is the sum of the blocks, each plus its
//! Laplace noise if it contains at least one observation (a pull of the
//! arm). A block's noise is drawn once, when the block is formed, and reused
//! while it stays in the decomposition.
//!
//! Here, as for the tree mechanism of the linear family
//! ([`super::tree`]), nothing per block is stored: the sum of the live blocks
//! is the exact running sum, a block's noise is a pure function of its key
//! (the agent's and arm's key, the block's last round and its level), so it
//! has the same value every time it is used (drawn "once" in the
//! mechanism's sense), and which live blocks contain a pull is one bit per
//! level ([`PartialSum::nonempty`]), maintained like a binary counter. State
//! per agent and arm: one f64 and one u64, whatever the horizon.
//!
//! Each observation lies in at most floor(log2 T) + 1 blocks over a horizon
//! T, so with per-block budget epsilon' the mechanism is
//! (floor(log2 T) + 1) epsilon'-DP by basic composition, for observations in
//! a range of width `range` and Laplace scale range / epsilon'.

use crate::rng::fold_more;

/// One agent's partial sums for one arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PartialSum {
    /// Exact running sum of the (clipped) observations.
    pub sum: f64,
    /// Bit j: the live block of level j (a set bit of the round count)
    /// contains at least one observation.
    pub nonempty: u64,
}

impl PartialSum {
    /// Appends round `t`'s value (`Some(x)` when the arm was pulled, `None`
    /// otherwise); rounds must come in order 1, 2, ....
    #[inline]
    pub fn push(&mut self, t: u64, x: Option<f64>) {
        let j = t.trailing_zeros();
        // The new block of level j merges round t with the blocks of levels
        // below j of round t - 1 (its bits 0..j are all set).
        let below = (1u64 << j) - 1;
        let merged = x.is_some() || self.nonempty & below != 0;
        let keep = !((below << 1) | 1);
        self.nonempty = (self.nonempty & keep) | (u64::from(merged) << j);
        if let Some(x) = x {
            self.sum += x;
        }
    }

    /// The release after round `t`: the exact sum plus the Laplace noise
    /// (scale `scale`) of every live block that contains an observation,
    /// lowest level first. `key` is the agent's and arm's folded noise key.
    #[inline]
    pub fn release(&self, t: u64, key: u64, scale: f64) -> f64 {
        let mut out = self.sum;
        let mut bits = t & self.nonempty;
        while bits != 0 {
            let j = bits.trailing_zeros();
            out += laplace(block_key(key, (t >> j) << j, j), scale);
            bits &= bits - 1;
        }
        out
    }
}

/// The key of the block of level `level` that ends at round `end`.
#[inline]
pub fn block_key(key: u64, end: u64, level: u32) -> u64 {
    fold_more(fold_more(key, end), u64::from(level))
}

/// Laplace(0, `scale`) as a pure function of `key`: the inverse CDF of a
/// uniform on (0, 1), -scale sgn(v) ln(1 - 2|v|) with v = u - 1/2, with the
/// portable logarithm (the same bits on every backend).
#[inline]
pub fn laplace(key: u64, scale: f64) -> f64 {
    crate::rng::laplace_at(key, scale)
}

/// Observations one round's value enters over a horizon of `t` rounds:
/// floor(log2 T) + 1 (the budget split of basic composition).
pub fn blocks_per_observation(t: u64) -> u32 {
    64 - t.max(1).leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;
    use std::collections::HashMap;

    /// Algorithms 2 and 3 as written: each round, decompose t into dyadic
    /// blocks by clearing the lowest set bit repeatedly; a block seen for the
    /// first time is formed (its exact sum computed from the stored stream)
    /// and, if it holds an observation, gets noise drawn then and stored;
    /// afterwards it is reused. Counts the draws.
    struct Textbook {
        values: Vec<Option<f64>>,
        noise: HashMap<(u64, u64), f64>,
        draws: usize,
    }

    impl Textbook {
        fn release(&mut self, t: u64, key: u64, scale: f64) -> (f64, usize) {
            let mut out = 0.0;
            let mut blocks = 0;
            let mut rest = t;
            while rest != 0 {
                let size = rest & rest.wrapping_neg();
                let (start, end) = (rest - size + 1, rest);
                let vals = &self.values[(start - 1) as usize..end as usize];
                let exact: f64 = vals.iter().flatten().sum();
                let any = vals.iter().any(Option::is_some);
                let noise = match self.noise.get(&(start, end)) {
                    Some(&z) => z,
                    None => {
                        let z = if any {
                            self.draws += 1;
                            laplace(block_key(key, end, size.trailing_zeros()), scale)
                        } else {
                            0.0
                        };
                        self.noise.insert((start, end), z);
                        z
                    }
                };
                out += exact + noise;
                blocks += 1;
                rest -= size;
            }
            (out, blocks)
        }
    }

    #[test]
    fn release_equals_algorithms_2_and_3_with_popcount_blocks_each_drawn_once() {
        for p in [0.0, 0.05, 0.3, 1.0] {
            let mut s = Stream::new(&[42, (p * 100.0) as u64]);
            let mut ps = PartialSum::default();
            let mut book = Textbook {
                values: Vec::new(),
                noise: HashMap::new(),
                draws: 0,
            };
            let key = 0xABCD;
            for t in 1..=1000u64 {
                let x = (s.uniform() < p).then(|| s.uniform());
                ps.push(t, x);
                book.values.push(x);
                let (want, blocks) = book.release(t, key, 0.7);
                assert_eq!(blocks, t.count_ones() as usize, "t = {t}: popcount(t) blocks");
                let got = ps.release(t, key, 0.7);
                assert!((got - want).abs() < 1e-9, "p = {p}, t = {t}: {got} vs {want}");
            }
            // Every non-empty block formed got exactly one draw: the distinct
            // non-empty blocks of the decompositions of t = 1..1000.
            let formed: std::collections::HashSet<(u64, u64)> = (1..=1000u64)
                .flat_map(|t| {
                    let mut v = Vec::new();
                    let mut rest = t;
                    while rest != 0 {
                        let size = rest & rest.wrapping_neg();
                        v.push((rest - size + 1, rest));
                        rest -= size;
                    }
                    v
                })
                .collect();
            let nonempty = formed
                .iter()
                .filter(|(a, b)| book.values[(*a - 1) as usize..*b as usize].iter().any(Option::is_some))
                .count();
            assert_eq!(book.draws, nonempty);
            if p == 0.0 {
                assert_eq!(ps.release(1000, key, 0.7), 0.0, "no observation, no noise");
            }
        }
    }

    #[test]
    fn laplace_has_the_right_distribution() {
        // Laplace(0, b): mean 0, E|X| = b, P(|X| > b ln 10) = 1/10.
        let b = 2.0;
        let xs: Vec<f64> = (0..200_000u64)
            .map(|i| laplace(crate::rng::fold_key(&[9, i]), b))
            .collect();
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let abs = xs.iter().map(|x| x.abs()).sum::<f64>() / n;
        let tail = xs.iter().filter(|x| x.abs() > b * 10f64.ln()).count() as f64 / n;
        // Standard errors: sd(X) = b sqrt 2 -> 0.0063; sd|X| = b -> 0.0045.
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((abs - b).abs() < 0.025, "{abs}");
        assert!((tail - 0.1).abs() < 0.004, "{tail}");
    }

    #[test]
    fn blocks_per_observation_is_floor_log2_plus_one() {
        assert_eq!(blocks_per_observation(1), 1);
        assert_eq!(blocks_per_observation(2), 2);
        assert_eq!(blocks_per_observation(10_000), 14);
        assert_eq!(blocks_per_observation(1 << 20), 21);
    }
}
