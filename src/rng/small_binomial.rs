//! Keyed Binomial(n, p) draws for small n (at most [`SMALL_N`]) from one
//! keyed uniform each, by inversion of the cumulative distribution: the
//! thresholds C_0 <= ... <= C_n are the pmf's recurrence summed in order
//! ([`cdf_thresholds`]), a pure function of (n, p) that a caller drawing
//! many times at the same p caches ([`CdfTables`]) and a GPU thread
//! recomputes with the same operations (`fb_small_binomial_at` in
//! `kernels/common.cuh`), so both draw the same bits. Larger n go to
//! [`super::binomial::binomial_at`] (BINV / BTRD). The procurement
//! environment's good units (units bought from a producer, each good with
//! the producer's quality) are drawn this way.

use super::binomial::{binomial_at, pow_u64};

/// The largest n [`small_binomial_at`] draws by inversion of the cumulative
/// distribution (above it, [`binomial_at`]). At p <= 1/2 the first pmf term
/// q^n >= 2^-128 stays far from underflow.
pub const SMALL_N: u64 = 128;

/// The cumulative thresholds of Binomial(n, p), p <= 1/2: `out[k]` = C_k =
/// f(0) + ... + f(k) with f(0) = q^n ([`pow_u64`]) and f(k) = f(k - 1)
/// (a / k - s), a = (n + 1) p / q, s = p / q (BINV's recurrence), summed in
/// order; `out` holds n + 1 entries. Non-decreasing (every term is >= 0).
pub fn cdf_thresholds(n: u64, p: f64, out: &mut [f64]) {
    let q = 1.0 - p;
    let s = p / q;
    let a = (n as f64 + 1.0) * s;
    let mut r = pow_u64(q, n);
    let mut c = r;
    out[0] = c;
    for k in 1..=n {
        r *= a / k as f64 - s;
        c += r;
        out[k as usize] = c;
    }
}

/// The draw of uniform `u` on thresholds `c` (n + 1 entries): the least k
/// with u <= C_k, i.e. the number of thresholds below u (they are
/// non-decreasing), and n where rounding left C_n below u (probability below
/// n 2^-52). Inlined into its callers (and their SIMD clones).
#[inline(always)]
fn invert(u: f64, c: &[f64]) -> u64 {
    let below = c.iter().fold(0u64, |acc, &ck| acc + u64::from(ck < u));
    below.min(c.len() as u64 - 1)
}

/// Binomial(n, p) from one keyed uniform, `uniform_at(key, index)`, by
/// inversion of the cumulative distribution for n <= [`SMALL_N`] (p > 1/2
/// draws n - Binomial(n, 1 - p)); [`binomial_at`] for larger n. Invalid p
/// or n = 0 give 0, as [`binomial_at`].
pub fn small_binomial_at(key: u64, index: u64, n: u64, p: f64) -> u64 {
    if n == 0 || p.is_nan() || p <= 0.0 || p > 1.0 {
        return 0;
    }
    if p >= 1.0 {
        return n;
    }
    if n > SMALL_N {
        return binomial_at(key, index, n, p);
    }
    let flip = p > 0.5;
    let pp = if flip { 1.0 - p } else { p };
    let mut c = [0.0; SMALL_N as usize + 1];
    let c = &mut c[..=n as usize];
    cdf_thresholds(n, pp, c);
    let x = invert(super::uniform_at(key, index), c);
    if flip { n - x } else { x }
}

/// [`small_binomial_at`] for a fixed set of success probabilities (one per
/// slot, e.g. a procurement instance's producer qualities), with each
/// (slot, n)'s thresholds computed once, on first use, beside a guide table
/// (Chen and Asau's indexed search: guide[j] is the least k whose threshold
/// reaches j / (n + 1), so the search for u starts at guide[floor(u (n +
/// 1))] and walks about one step): the same draws as [`small_binomial_at`]
/// (the least k with u <= C_k), without the recurrence's divisions or a
/// scan of every threshold. At most [`CdfTables::MAX_ENTRIES`] thresholds
/// are kept (8 MiB and 1 MiB of guide); draws past that are computed as
/// [`small_binomial_at`] computes them. Not serialized (a snapshot drops
/// it; it is rebuilt from the probabilities).
#[derive(Clone, Debug, Default)]
pub struct CdfTables {
    p: Vec<f64>,
    /// n + 1 for the largest n cached.
    width: usize,
    /// Offset of (slot, n)'s n + 1 thresholds in `thresholds` (and of its
    /// guide in `guide`), u32::MAX until computed; slot-major, `width`
    /// entries per slot.
    offset: Vec<u32>,
    thresholds: Vec<f64>,
    guide: Vec<u8>,
}

impl CdfTables {
    /// The most thresholds kept.
    pub const MAX_ENTRIES: usize = 1 << 20;

    /// Tables for these success probabilities and n up to `max_n` (none
    /// computed yet).
    pub fn new(p: &[f64], max_n: u64) -> Self {
        let width = max_n.min(SMALL_N) as usize + 1;
        CdfTables {
            p: p.to_vec(),
            width,
            offset: vec![u32::MAX; p.len() * width],
            thresholds: Vec::new(),
            guide: Vec::new(),
        }
    }

    /// The number of probabilities (slots).
    pub fn slots(&self) -> usize {
        self.p.len()
    }

    /// `small_binomial_at(key, index, n, p[slot])`, bit for bit.
    #[inline(always)]
    pub fn draw(&mut self, key: u64, index: u64, slot: usize, n: u64) -> u64 {
        self.draw_with(super::uniform_at(key, index), key, index, slot, n)
    }

    /// [`CdfTables::draw`] given its uniform `u` = `uniform_at(key, index)`
    /// (a caller drawing many at once computes them together, in vectors).
    #[inline(always)]
    pub fn draw_with(&mut self, u: f64, key: u64, index: u64, slot: usize, n: u64) -> u64 {
        debug_assert_eq!(u.to_bits(), super::uniform_at(key, index).to_bits());
        let p = self.p[slot];
        if n == 0 || n as usize >= self.width || p.is_nan() || p <= 0.0 || p >= 1.0 {
            return small_binomial_at(key, index, n, p);
        }
        let flip = p > 0.5;
        let at = slot * self.width + n as usize;
        if self.offset[at] == u32::MAX && !self.build(at, n, if flip { 1.0 - p } else { p }) {
            return small_binomial_at(key, index, n, p);
        }
        let start = self.offset[at] as usize;
        let c = &self.thresholds[start..=start + n as usize];
        let nu = n as usize;
        // u < 1, so the guide index is at most n.
        let j = ((u * (n + 1) as f64) as usize).min(nu);
        let mut k = usize::from(self.guide[start + j]);
        // Two steps without branches (the walk is short), then the rest.
        k += usize::from((k < nu) & (c[k] < u));
        k += usize::from((k < nu) & (c[k] < u));
        while k < nu && c[k] < u {
            k += 1;
        }
        let x = k as u64;
        if flip { n - x } else { x }
    }

    /// Computes (slot, n)'s thresholds at p <= 1/2 and their guide, stored
    /// at `offset[at]`; false when the tables are full.
    fn build(&mut self, at: usize, n: u64, p: f64) -> bool {
        let (start, len) = (self.thresholds.len(), n as usize + 1);
        if start + len > Self::MAX_ENTRIES {
            return false;
        }
        self.thresholds.resize(start + len, 0.0);
        let c = &mut self.thresholds[start..];
        cdf_thresholds(n, p, c);
        // guide[j]: the least k with C_k >= j / (n + 1), less a margin that
        // covers the rounding of u (n + 1) (so the walk never starts past
        // the answer); n where no threshold reaches it.
        let mut k = 0;
        for j in 0..len {
            let target = j as f64 / len as f64 - 1e-9;
            while k < n as usize && c[k] < target {
                k += 1;
            }
            self.guide.push(k as u8);
        }
        self.offset[at] = start as u32;
        true
    }

    /// Bytes held at most for `slots` probabilities and n up to `max_n`:
    /// the offsets, and every (slot, n)'s n + 1 thresholds (8 bytes) and
    /// guide entries (1 byte), at most [`CdfTables::MAX_ENTRIES`].
    pub fn max_bytes(slots: usize, max_n: u64) -> u64 {
        let width = max_n.min(SMALL_N) + 1;
        let entries = (slots as u64 * width * (width + 1) / 2).min(Self::MAX_ENTRIES as u64);
        slots as u64 * width * 4 + entries * 9
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::binomial::STRIDE;
    use crate::rng::binomial::reference::{assert_fits, pmf};
    use crate::rng::{fold_key, uniform_at};

    /// Exact pmf by enumeration of the inversion, small (n, p): every
    /// threshold is the reference CDF to 1e-12, and the draw at uniforms
    /// just below and just above each threshold is k and k + 1, so the mass
    /// the inversion gives k is exactly C_k - C_{k-1} = pmf(k). Also for
    /// p > 1/2 (drawn as n - Binomial(n, 1 - p)).
    #[test]
    fn inversion_enumerates_the_pmf() {
        for (n, p) in [(1u64, 0.5f64), (7, 0.03), (20, 0.3), (50, 0.4), (3, 0.45), (128, 0.5)] {
            let mut c = vec![0.0; n as usize + 1];
            cdf_thresholds(n, p, &mut c);
            let reference = pmf(n, p);
            let mut cum = 0.0;
            for k in 0..=n as usize {
                cum += reference[k];
                assert!((c[k] - cum).abs() < 1e-12, "n {n} p {p} k {k}: {} vs {cum}", c[k]);
                // Uniforms just below and above C_k (where k's and k + 1's
                // masses are above the uniforms' resolution).
                let below = c[k] * (1.0 - 1e-15);
                let above = c[k] * (1.0 + 1e-15);
                if reference[k] > 1e-13 {
                    assert_eq!(invert(below, &c), k as u64, "n {n} p {p} k {k}");
                }
                if k < n as usize && reference[k + 1] > 1e-13 {
                    assert_eq!(invert(above, &c), k as u64 + 1, "n {n} p {p} k {k}");
                }
            }
        }
        // p > 1/2 mirrors p < 1/2 on the same uniform.
        for i in 0..1000 {
            let (a, b) = (small_binomial_at(5, i, 40, 0.8), small_binomial_at(5, i, 40, 0.2));
            assert_eq!(a, 40 - b);
        }
    }

    /// Chi-square of 10^6 draws against the pmf at 99.9% (cells of expected
    /// count below 5 pooled into their neighbours), at the sizes
    /// (1, 0.5), (7, 0.03), (50, 0.4), (50, 0.97), and at n = 128 (the
    /// inversion's largest) and n = 500 (BTRD beyond it).
    #[test]
    fn draws_follow_the_binomial_pmf() {
        for (case, (n, p)) in [
            (1u64, 0.5f64),
            (7, 0.03),
            (50, 0.4),
            (50, 0.97),
            (128, 0.25),
            (500, 0.3),
        ]
        .into_iter()
        .enumerate()
        {
            let key = fold_key(&[41, case as u64]);
            let draws = 1_000_000u64;
            let mut counts = vec![0u64; n as usize + 1];
            let mut tables = CdfTables::new(&[p], n);
            for i in 0..draws {
                counts[tables.draw(key, i * STRIDE, 0, n) as usize] += 1;
            }
            assert_fits(&counts, n, p);
        }
    }

    /// Mean and variance of 10^7 draws within 3 standard errors of n p and
    /// n p (1 - p) at the sizes.
    #[test]
    fn mean_and_variance_of_ten_million_draws() {
        for (case, (n, p)) in [(1u64, 0.5f64), (7, 0.03), (50, 0.4), (50, 0.97)]
            .into_iter()
            .enumerate()
        {
            let key = fold_key(&[43, case as u64]);
            let draws = 10_000_000u64;
            let mut tables = CdfTables::new(&[p], n);
            let (mut s, mut s2) = (0.0f64, 0.0f64);
            for i in 0..draws {
                let x = tables.draw(key, i * STRIDE, 0, n) as f64;
                s += x;
                s2 += x * x;
            }
            let d = draws as f64;
            let (mean, var) = (s / d, s2 / d - (s / d) * (s / d));
            let (mu, sigma2) = (n as f64 * p, n as f64 * p * (1.0 - p));
            assert!(
                (mean - mu).abs() < 3.0 * (sigma2 / d).sqrt(),
                "n {n} p {p}: mean {mean} vs {mu}"
            );
            // The variance's standard error: sqrt((mu4 - sigma^4) / draws),
            // mu4 = sigma^2 (1 + 3 (n - 2) p q) for the binomial, plus the
            // second-order term (mean - mu)^2 ~ sigma^2 / draws (3 SE of it:
            // 9 sigma^2 / draws), which is all there is for a fair coin
            // (mu4 = sigma^4).
            let mu4 = sigma2 * (1.0 + 3.0 * (n as f64 - 2.0) * p * (1.0 - p));
            let se_var = ((mu4 - sigma2 * sigma2).max(0.0) / d).sqrt();
            let tolerance = 3.0 * se_var + 9.0 * sigma2 / d;
            assert!(
                (var - sigma2).abs() < tolerance,
                "n {n} p {p}: variance {var} vs {sigma2}"
            );
        }
    }

    /// The cached tables draw what the uncached sampler draws, bit for bit:
    /// every n up to and past the cache's width, both sides of p = 1/2, the
    /// edges p = 0 and 1, n = 0, and once the tables are full.
    #[test]
    fn cached_tables_equal_the_sampler() {
        let ps = [0.03, 0.4, 0.5, 0.6, 0.97, 0.0, 1.0];
        let mut tables = CdfTables::new(&ps, 60);
        for i in 0..20_000u64 {
            let slot = (i % ps.len() as u64) as usize;
            let n = (i * 7) % 140;
            let (key, index) = (fold_key(&[47, i]), (i % 30) * STRIDE);
            let want = small_binomial_at(key, index, n, ps[slot]);
            assert_eq!(tables.draw(key, index, slot, n), want, "slot {slot} n {n}");
            assert_eq!(tables.draw_with(uniform_at(key, index), key, index, slot, n), want);
        }
        // Full tables: the draws are still the sampler's.
        let mut full = CdfTables::new(&vec![0.3; 40_000], 128);
        for i in 0..40_000u64 {
            let (slot, n) = (i as usize, 100 + i % 29);
            let want = small_binomial_at(3, i * STRIDE, n, 0.3);
            assert_eq!(full.draw(3, i * STRIDE, slot, n), want);
        }
        assert!(full.thresholds.len() <= CdfTables::MAX_ENTRIES);
    }
}
