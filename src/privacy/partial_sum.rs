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
    /// Block by block; [`Releases`] computes the same bits for many partial
    /// sums at once, their noises in vector lanes (the engine's path).
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

/// One agent's partial sums for one arm on the lattice
/// ([`crate::privacy::lattice`], `sampler: discrete`): the exact running
/// sum of the rounded observations in lattice steps, the running sum of
/// the live non-empty blocks' discrete Laplace noise, and the same
/// non-empty bits as [`PartialSum`]. Integer arithmetic makes the running
/// noise sum exact, so it is kept rather than regenerated at every
/// release: round t closes the blocks of the levels below t's lowest set
/// bit j (their noise, regenerated from their keys, is subtracted) and
/// forms the block of level j (its noise added): two draws per round on
/// average over a run, instead of the popcount(t) blocks of a release.
/// The release after round t is then `sum + noise` steps, equal to the
/// sum of the live blocks, each plus its own noise, as
/// [`DiscretePartialSum::release_regenerated`] computes it block by block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiscretePartialSum {
    /// Exact running sum of the rounded observations, in steps.
    pub sum: i64,
    /// The live non-empty blocks' noise, in steps.
    pub noise: i64,
    /// Bit j: the live block of level j contains an observation.
    pub nonempty: u64,
}

impl DiscretePartialSum {
    /// Appends round `t`'s rounded value (rounds 1, 2, ... in order); `key`
    /// is the agent's and arm's folded noise key.
    #[inline]
    pub fn push(&mut self, t: u64, x: Option<i64>, key: u64, lap: &crate::privacy::lattice::DiscreteLaplace) {
        let j = t.trailing_zeros();
        let below = (1u64 << j) - 1;
        let mut closed = self.nonempty & below;
        while closed != 0 {
            let i = closed.trailing_zeros();
            self.noise -= lap.draw(block_key(key, ((t - 1) >> i) << i, i));
            closed &= closed - 1;
        }
        let merged = x.is_some() || self.nonempty & below != 0;
        let keep = !((below << 1) | 1);
        self.nonempty = (self.nonempty & keep) | (u64::from(merged) << j);
        if merged {
            self.noise += lap.draw(block_key(key, t, j));
        }
        if let Some(x) = x {
            self.sum += x;
        }
    }

    /// The release after round `t`, in steps.
    #[inline]
    pub fn release(&self) -> i64 {
        self.sum + self.noise
    }

    /// The release after round `t` from its live blocks, each block's noise
    /// regenerated (the definition [`Self::release`] keeps up to date).
    pub fn release_regenerated(&self, t: u64, key: u64, lap: &crate::privacy::lattice::DiscreteLaplace) -> i64 {
        let mut out = self.sum;
        let mut bits = t & self.nonempty;
        while bits != 0 {
            let j = bits.trailing_zeros();
            out += lap.draw(block_key(key, (t >> j) << j, j));
            bits &= bits - 1;
        }
        out
    }
}

/// Blocks whose noises [`laplace_blocks`] draws together (one 512-bit
/// vector of f64); its slices are a multiple of this long.
pub const LANES: usize = 8;

/// The releases of many partial sums in one pass (their live blocks'
/// noises drawn in lanes together, so the lanes are full and independent
/// blocks of lanes overlap): workspace kept between rounds, so a round
/// allocates nothing once it has seen its largest number of blocks.
#[derive(Clone, Debug, Default)]
pub struct Releases {
    /// Per live block: its sum's key, end round and level.
    blocks: [Vec<u64>; 3],
    noise: Vec<f64>,
}

impl Releases {
    /// `out[e] = sums[e].release(t, keys[e], scale)` for every e, bit for
    /// bit.
    pub fn release_all(&mut self, sums: &[PartialSum], keys: &[u64], t: u64, scale: f64, out: &mut [f64]) {
        let live = |ps: &PartialSum| (t & ps.nonempty).count_ones() as usize;
        let total: usize = sums.iter().map(live).sum();
        let n = total.next_multiple_of(LANES);
        // One entry beyond `total`: the gather below may write there.
        for v in &mut self.blocks {
            v.resize(n.max(total + 1), 0);
        }
        self.noise.resize(n, 0.0);
        // t's levels, lowest first: every sum's live blocks are among them.
        let (mut levels, mut ends, mut count) = ([0u64; 64], [0u64; 64], 0);
        let mut bits = t;
        while bits != 0 {
            let j = bits.trailing_zeros();
            (levels[count], ends[count]) = (u64::from(j), (t >> j) << j);
            count += 1;
            bits &= bits - 1;
        }
        let [bk, be, bl] = &mut self.blocks;
        // Each of t's levels is written at b, and b advances where the
        // sum's block holds an observation: no data-dependent branch. A
        // write that does not advance is overwritten by the next one or
        // lies at `total`, beyond the blocks.
        let mut b = 0;
        for (ps, &k) in sums.iter().zip(keys) {
            if t & ps.nonempty == 0 {
                continue;
            }
            for (&j, &end) in levels[..count].iter().zip(&ends[..count]) {
                (bk[b], be[b], bl[b]) = (k, end, j);
                b += ((ps.nonempty >> j) & 1) as usize;
            }
        }
        // Padding lanes: round 0, level 0, not added.
        for v in [&mut *bk, &mut *be, &mut *bl] {
            v[total..].fill(0);
        }
        laplace_blocks([&bk[..n], &be[..n], &bl[..n]], scale, &mut self.noise);
        let mut b = 0;
        for (ps, o) in sums.iter().zip(out.iter_mut()) {
            let c = live(ps);
            let mut r = ps.sum;
            for z in &self.noise[b..b + c] {
                r += z;
            }
            b += c;
            *o = r;
        }
    }
}

/// The Laplace noises of blocks (key, end round, level), [`LANES`] at a
/// time: `out[b]` is [`laplace`]`(`[`block_key`]`(key_b, end_b, level_b),
/// scale)` bit for bit (integer hashing, then +, -, *, / of the portable
/// logarithm, the same operations in every lane), vectorized where the CPU
/// has 64-bit lane multiplies.
///
/// # Panics
/// If the slices' lengths differ or are not a multiple of [`LANES`].
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn laplace_blocks(blocks: [&[u64]; 3], scale: f64, out: &mut [f64]) {
    let [keys, ends, levels] = blocks;
    let n = out.len();
    assert!(n.is_multiple_of(LANES) && keys.len() == n && ends.len() == n && levels.len() == n);
    let lanes = keys
        .chunks_exact(LANES)
        .zip(ends.chunks_exact(LANES))
        .zip(levels.chunks_exact(LANES));
    for (z, ((k, e), l)) in out.chunks_exact_mut(LANES).zip(lanes) {
        for i in 0..LANES {
            let u = crate::rng::uniform_at(block_key(k[i], e[i], l[i] as u32), 0);
            z[i] = crate::rng::laplace_of_uniform(u, scale);
        }
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

    /// The lattice partial sum's running noise is, after every round, the
    /// sum of its live non-empty blocks' noise regenerated from their keys
    /// (so every block's noise is drawn "once" and dropped when it closes),
    /// and its exact sum that of the rounded observations; without an
    /// observation there is no noise.
    #[test]
    fn the_lattice_partial_sum_keeps_its_live_blocks_noise_exactly() {
        let lap = crate::privacy::lattice::DiscreteLaplace::budget(0.05, 1 << 20).unwrap();
        for p in [0.0, 0.05, 0.3, 1.0] {
            let mut s = Stream::new(&[43, (p * 100.0) as u64]);
            let mut ps = DiscretePartialSum::default();
            let (key, mut exact) = (0xBEEF, 0i64);
            for t in 1..=3000u64 {
                let x = (s.uniform() < p).then(|| crate::privacy::lattice::to_lattice(s.uniform()));
                exact += x.unwrap_or(0);
                ps.push(t, x, key, &lap);
                assert_eq!(ps.release(), ps.release_regenerated(t, key, &lap), "p = {p}, t = {t}");
                assert_eq!(ps.sum, exact);
            }
            if p == 0.0 {
                assert_eq!((ps.release(), ps.noise), (0, 0), "no observation, no noise");
            }
        }
    }

    /// The release in lanes ([`Releases`]) adds, bit for bit, what a
    /// block-by-block loop of [`laplace`] adds (lowest level first):
    /// single sums with 0 to 40 live blocks (so no lane block, one and
    /// several), every pattern of non-empty levels drawn at random; and
    /// `laplace_at`'s logarithm agrees with `ln` at the extreme uniforms,
    /// finite at u = 1.
    #[test]
    fn lane_release_equals_the_block_by_block_sum_bit_for_bit() {
        let mut s = Stream::new(&[43, 9]);
        let key = 0x5EED;
        let mut rel = Releases::default();
        let mut out = [0.0];
        for _ in 0..3000 {
            let t = s.next_u64() >> (s.next_u64() % 64);
            let nonempty = s.next_u64() | s.next_u64();
            let ps = PartialSum { sum: 0.25, nonempty };
            let mut want = ps.sum;
            let mut bits = t & nonempty;
            while bits != 0 {
                let j = bits.trailing_zeros();
                want += laplace(block_key(key, (t >> j) << j, j), 1.3);
                bits &= bits - 1;
            }
            rel.release_all(&[ps], &[key], t, 1.3, &mut out);
            assert_eq!(out[0].to_bits(), want.to_bits(), "t {t:#x} nonempty {nonempty:#x}");
        }
        // uniform_at's smallest and largest values (k = 0 and 2^53 - 1: the
        // latter rounds to exactly 1, and ln(0) = -inf), and one below.
        let uniform = |k: u64| (k as f64 + 0.5) * (1.0 / (1u64 << 53) as f64);
        assert_eq!(uniform((1 << 53) - 1), 1.0);
        for u in [uniform(0), uniform((1 << 53) - 3), uniform(1 << 52), uniform(12345)] {
            let v: f64 = u - 0.5;
            let exact = crate::math::ln(1.0 - 2.0 * v.abs()).abs();
            let got = crate::rng::laplace_of_uniform(u, 1.0).abs();
            assert_eq!(got.to_bits(), exact.to_bits(), "u {u}");
        }
        // u = 1 is a finite noise, that of the cell's centre: 53 ln 2.
        let top = crate::rng::laplace_of_uniform(1.0, 1.0);
        assert_eq!(top.to_bits(), (-crate::math::ln(f64::powi(2.0, -53))).to_bits());
        assert!((top - 53.0 * std::f64::consts::LN_2).abs() < 1e-12);
    }

    /// Many releases at once equal the releases one by one, bit for bit:
    /// 37 sums (some never observed, so with no live block) over 300
    /// rounds, each sum with its own key.
    #[test]
    fn releases_at_once_equal_releases_one_by_one() {
        let mut s = Stream::new(&[43, 10]);
        let mut sums = vec![PartialSum::default(); 37];
        let mut rel = Releases::default();
        let mut out = vec![0.0; sums.len()];
        let keys: Vec<u64> = (0..sums.len()).map(|e| fold_more(77, e as u64)).collect();
        for t in 1..=300u64 {
            for (e, ps) in sums.iter_mut().enumerate() {
                let p = if e % 5 == 0 { 0.0 } else { 0.1 * (e % 7) as f64 };
                ps.push(t, (s.uniform() < p).then(|| s.uniform()));
            }
            rel.release_all(&sums, &keys, t, 0.9, &mut out);
            for (e, ps) in sums.iter().enumerate() {
                assert_eq!(out[e].to_bits(), ps.release(t, keys[e], 0.9).to_bits(), "t {t} sum {e}");
            }
        }
        assert!(
            out.iter().filter(|&&v| v == 0.0).count() >= 8,
            "the unobserved sums release 0"
        );
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
