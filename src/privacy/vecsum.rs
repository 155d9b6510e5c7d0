//! The shuffle-model vector-summation protocol (Cheu et al. 2021) inside the
//! binary-counter tree, as `private_fedlinucb` with protocol `sdp_vecsum`
//! uses it, in memory independent of the horizon.
//!
//! A node of tree level j covers 2^j batches, i.e. n_j = 2^j B M data points
//! (every agent's x x^T upper triangle and x y of every round in the window).
//! Each coordinate v (clipped to [-L, L]; `add_point` says whether a point
//! had a coordinate clipped) is shifted to v + L
//! and randomized as R = floor(w) + Bernoulli(w - floor(w)) + Binomial(b_j, p)
//! with w = (v + L) g_j / L (capped at 2 g_j, which only a floating-point
//! rounding can pass), g_j = max(2 sqrt(n_j), d, 4),
//! b_j = ceil(scale g_j^2 log(d^2/delta)^2 / (eps^2 n_j)), p = 1/4 (the
//! authors' calibration; under `calibration: exact` the level's trials t_j
//! = ceil(tau g_j^2) in all, [`VecSum::exact`]); the shuffler sums the n_j
//! randomized values and the analyzer outputs (L/g_j)(y - p t_j) - n_j L,
//! t_j = n_j b_j under the authors' calibration.
//!
//! The literal protocol keeps every point of a window (the authors' code
//! holds an [M, T, d, d] array). Here each point is randomized as it arrives
//! into one integer accumulator per level and coordinate (every point lies in
//! exactly one open window per level), and the Binomial parts are drawn when
//! the window closes. Equivalence: the shuffler's output is the sum of the n
//! randomized values; the rounding parts floor(w_p) + Bernoulli(frac(w_p)) are
//! drawn per point exactly as in the literal protocol, and the n independent
//! Binomial(b, p) parts sum to one Binomial(n b, p) (a sum of independent
//! binomials with the same p is binomial in the total count), independent of
//! the rest; so the output has exactly the literal protocol's distribution.
//! Memory: 2 x levels x (d(d+1)/2 + d) values per federation. Tested against
//! the literal protocol in this module.
//!
//! Randomness is keyed: a point's rounding draws are
//! `uniform_at(point key, coordinate x levels + level)` and the shuffler's
//! Binomial of coordinate e at batch k is `binomial_at(fold_more(shuffler
//! key, k), e * STRIDE, ...)` ([`crate::rng::binomial`]), so a GPU thread per
//! coordinate computes the same bits as the CPU.

use crate::rng::binomial::{STRIDE, binomial_at};
use crate::rng::{Stream, fold_more, uniform_at};

/// Per-federation state of the protocol.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct VecSum {
    d: usize,
    levels: usize,
    coords: usize,
    l: f64,
    g: Vec<f64>,
    trials: Vec<u64>,
    n: Vec<u64>,
    acc: Vec<u64>,
    stored: Vec<f64>,
    batches: u64,
    /// Workspace of `add_point`: the point's shifted coordinates (not
    /// state: sized on first use, never serialized).
    #[serde(skip)]
    shifted: Vec<f64>,
}

/// Bernoulli parameter of the Binomial noise.
pub const P: f64 = 0.25;

impl VecSum {
    /// Protocol state for dimension d, `levels` tree levels, batches of
    /// `batch` rounds by `m` agents, bound `l`, privacy (eps, delta) and the
    /// noise `scale`, as the authors' code calibrates it: n_j b_j Binomial
    /// trials at level j.
    #[allow(clippy::too_many_arguments)]
    pub fn new(d: usize, levels: usize, batch: u64, m: usize, l: f64, eps: f64, delta: f64, scale: f64) -> Self {
        let logt = ((d * d) as f64 / delta).ln();
        Self::with_trials(d, levels, batch, m, l, |g, n| {
            let b = (scale * g * g * logt * logt / (eps * eps * n as f64)).ceil().max(1.0) as u64;
            n.saturating_mul(b)
        })
    }

    /// Protocol state whose level j adds max(1, ceil(tau g_j^2)) Binomial
    /// trials in all (`calibration: exact`, tau solved by
    /// [`crate::privacy::vecsum_account`]): the analyzer's noise is then
    /// L sqrt(tau p (1 - p)) per coordinate at every level.
    pub fn exact(d: usize, levels: usize, batch: u64, m: usize, l: f64, tau: f64) -> Self {
        Self::with_trials(d, levels, batch, m, l, |g, _| {
            (tau * g * g).ceil().clamp(1.0, 1e18) as u64
        })
    }

    /// The state with the resolution g_j = max(2 sqrt(n_j), d, 4) of each
    /// level's n_j = 2^j B M points and `trials(g_j, n_j)` Binomial trials.
    fn with_trials(d: usize, levels: usize, batch: u64, m: usize, l: f64, trials: impl Fn(f64, u64) -> u64) -> Self {
        let coords = d * (d + 1) / 2 + d;
        let mut g = Vec::with_capacity(levels);
        let mut t = Vec::with_capacity(levels);
        let mut n = Vec::with_capacity(levels);
        for j in 0..levels {
            let nj = (1u64 << j) * batch * m as u64;
            let gj = (2.0 * (nj as f64).sqrt()).max(d as f64).max(4.0);
            g.push(gj);
            t.push(trials(gj, nj));
            n.push(nj);
        }
        Self {
            d,
            levels,
            coords,
            l,
            g,
            trials: t,
            n,
            acc: vec![0; levels * coords],
            stored: vec![0.0; levels * coords],
            batches: 0,
            shifted: Vec::new(),
        }
    }

    /// The same protocol without its Binomial noise (`noise: false`): no
    /// trials at any level, so the analyzer's output is the clipped,
    /// randomly rounded sum (the rounding is the protocol's quantization,
    /// kept).
    pub fn without_noise(mut self) -> Self {
        self.trials.iter_mut().for_each(|t| *t = 0);
        self
    }

    /// Tree levels.
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Coordinates per data point: d(d+1)/2 + d.
    pub fn coords(&self) -> usize {
        self.coords
    }

    /// The standard deviation of the noise the protocol adds to each
    /// coordinate of a released node, at its least noisy level: the
    /// analyzer's (L / g_j) times the Binomial(trials_j, p) part's standard
    /// deviation (the rounding part, Bernoulli per point, is data-dependent
    /// and not counted).
    pub fn noise_std(&self) -> f64 {
        (0..self.levels)
            .map(|j| (self.l / self.g[j]) * (self.trials[j] as f64 * P * (1.0 - P)).sqrt())
            .fold(f64::INFINITY, f64::min)
    }

    /// Bytes of protocol state (the memory formula above).
    pub fn state_bytes(&self) -> usize {
        (self.acc.len() + self.stored.len()) * 8
    }

    /// The coordinate values of a data point (x, y): x x^T upper triangle
    /// row-major, then x y (the order `add_point` uses).
    #[cfg(test)]
    fn coordinate(x: &[f64], y: f64, d: usize, c: usize) -> f64 {
        let tri = d * (d + 1) / 2;
        if c >= tri {
            return x[c - tri] * y;
        }
        // Row i holds d - i entries.
        let mut i = 0;
        let mut start = 0;
        while start + (d - i) <= c {
            start += d - i;
            i += 1;
        }
        x[i] * x[i + (c - start)]
    }

    /// Randomizes one data point into every level's open window (the
    /// agent's local randomizer); true when clipping to [-L, L] changed one
    /// of its coordinates. `key` is the point's own key (a pure function of
    /// the agent's key and the point's index): the rounding of coordinate c
    /// at level j compares [`uniform_at`]`(key, c * levels + j)`, so a GPU
    /// thread per coordinate draws the same bits.
    pub fn add_point(&mut self, x: &[f64], y: f64, key: u64) -> bool {
        let coords = self.coords;
        if self.shifted.len() != coords {
            self.shifted.resize(coords, 0.0);
        }
        let clipped = shift_point(x, y, self.d, self.l, &mut self.shifted);
        let (l, levels) = (self.l, self.levels as u64);
        for (j, (acc, &gj)) in self.acc.chunks_exact_mut(coords).zip(&self.g).enumerate() {
            round_level(acc, &self.shifted, gj, l, key, (j as u64, levels));
        }
        clipped
    }

    /// What the randomized rounding of the point (x, y) can add at level
    /// `j`, per coordinate: (floor(w), floor(w) + 1 where the fractional
    /// part exceeds the least uniform, 2^-54), w as [`Self::add_point`]
    /// computes it (for the exact-bits test,
    /// [`crate::privacy::bits::vecsum_bits_test`]).
    pub fn rounding_range(&self, x: &[f64], y: f64, j: usize) -> Vec<(u64, u64)> {
        let mut shifted = vec![0.0; self.coords];
        shift_point(x, y, self.d, self.l, &mut shifted);
        let gj = self.g[j];
        shifted
            .iter()
            .map(|&s| {
                let w = (s * gj / self.l).min(2.0 * gj);
                let fl = w.floor();
                (fl as u64, fl as u64 + u64::from(w - fl > 2f64.powi(-54)))
            })
            .collect()
    }

    /// The analyzer's output of level `i` for the shuffler's integer sum
    /// `y`: (L / g_i)(y - p t_i) - n_i L.
    fn analyze(&self, i: usize, y: u64) -> f64 {
        (self.l / self.g[i]) * (y as f64 - P * self.trials[i] as f64) - self.n[i] as f64 * self.l
    }

    /// The integer sum whose analysis at level `i` is `o` to the bit (None:
    /// no integer near (o + n_i L) g_i / L + p t_i gives it).
    pub fn sum_of_release(&self, i: usize, o: f64) -> Option<u64> {
        let y = ((o + self.n[i] as f64 * self.l) * self.g[i] / self.l + P * self.trials[i] as f64).round();
        let y = if y.is_finite() && y >= 0.0 {
            y as u64
        } else {
            return None;
        };
        [y, y.saturating_sub(1), y + 1]
            .into_iter()
            .find(|&c| self.analyze(i, c).to_bits() == o.to_bits())
    }

    /// Closes the next batch: the node of level i = (lowest set bit of the
    /// batch count k) is released (the shuffler's Binomial noise of
    /// coordinate e is [`binomial_at`]`(fold_more(key, k), e * STRIDE, n b,
    /// p)`, then analyzed); lower levels empty. Writes the server's output,
    /// the sum of the released nodes of the set bits, into `out` as a full
    /// symmetric d x d matrix followed by d entries.
    pub fn close_batch(&mut self, key: u64, out: &mut [f64]) {
        self.batches += 1;
        let k = self.batches;
        let i = k.trailing_zeros() as usize;
        let (d, c) = (self.d, self.coords);
        if i < self.levels {
            let ti = self.trials[i];
            let bkey = fold_more(key, k);
            for e in 0..c {
                let noise = binomial_at(bkey, e as u64 * STRIDE, ti, P);
                self.stored[i * c + e] = self.analyze(i, self.acc[i * c + e] + noise);
            }
        }
        let upto = (i + 1).min(self.levels);
        self.acc[..upto * c].fill(0);
        self.stored[..i.min(self.levels) * c].fill(0.0);
        out[..d * d + d].fill(0.0);
        for j in (0..self.levels).filter(|j| (k >> j) & 1 == 1) {
            let node = &self.stored[j * c..(j + 1) * c];
            let mut e = 0;
            for r in 0..d {
                for s in r..d {
                    out[r * d + s] += node[e];
                    if s != r {
                        out[s * d + r] += node[e];
                    }
                    e += 1;
                }
            }
            for r in 0..d {
                out[d * d + r] += node[e + r];
            }
        }
    }

    /// The protocol's per-level parameters (g_j, the Binomial trials of a
    /// release, n_j), for the GPU and the accountant.
    pub fn levels_params(&self) -> (&[f64], &[u64], &[u64]) {
        (&self.g, &self.trials, &self.n)
    }

    /// The bound L.
    pub fn bound(&self) -> f64 {
        self.l
    }

    /// The analyzer's output for one coordinate of n points under the literal
    /// protocol (every point draws its own Binomial(b, p)); for the tests.
    pub fn literal_one(values: &[f64], l: f64, g: f64, b: u64, rng: &mut Stream) -> f64 {
        let mut y = 0u64;
        for &v in values {
            let w = ((v.clamp(-l, l) + l) * g / l).min(2.0 * g);
            let fl = w.floor();
            y += fl as u64 + u64::from(rng.uniform() < w - fl) + rng.binomial(b, P);
        }
        let n = values.len() as f64;
        (l / g) * (y as f64 - P * b as f64 * n) - n * l
    }

    /// The same through the accumulated form (one Binomial(n b, p)); for the
    /// tests.
    pub fn accumulated_one(values: &[f64], l: f64, g: f64, b: u64, rng: &mut Stream) -> f64 {
        let mut y = 0u64;
        for &v in values {
            let w = ((v.clamp(-l, l) + l) * g / l).min(2.0 * g);
            let fl = w.floor();
            y += fl as u64 + u64::from(rng.uniform() < w - fl);
        }
        let n = values.len() as u64;
        y += rng.binomial(n * b, P);
        (l / g) * (y as f64 - P * (b * n) as f64) - n as f64 * l
    }
}

/// The shifted coordinates of a data point (x, y) into `shifted`: x x^T's
/// upper triangle row-major, then x y, each clipped to [-L, L] plus L (a
/// NaN, never produced by finite x and y, as 0: it adds 0 at every level);
/// true when clipping changed one.
fn shift_point(x: &[f64], y: f64, d: usize, l: f64, shifted: &mut [f64]) -> bool {
    let mut clipped = false;
    let mut c = 0;
    let mut put = |v: f64| {
        let s = v.clamp(-l, l) + l;
        shifted[c] = if s.is_nan() { 0.0 } else { s };
        clipped |= v.abs() > l;
        c += 1;
    };
    for i in 0..d {
        for j in i..d {
            put(x[i] * x[j]);
        }
    }
    for xi in &x[..d] {
        put(xi * y);
    }
    clipped
}

/// One level's randomized rounding of a point's shifted coordinates `v`
/// into the level's accumulators: with w = v g_j / L, coordinate c adds
/// floor(w) + [u < w - floor(w)], u = [`uniform_at`]`(key, c levels + j)`
/// (`at` = (j, levels)). One pass over the coordinates with no dependence
/// between them, so it vectorizes where the CPU has 64-bit lane multiplies
/// and conversions (AVX-512DQ: the key hash, floor, u64 <-> f64 in
/// registers); every path performs the same exact operations, so the bits
/// are the same on each (and the same as the scalar reference the tests
/// keep).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn round_level(acc: &mut [u64], v: &[f64], gj: f64, l: f64, key: u64, at: (u64, u64)) {
    // floor(w) as an integer by the 2^52 trick (exact for 0 <= floor(w) <
    // 2^52: adding 2^52 puts it in the significand's low bits), which
    // vectorizes where `as u64`'s saturating conversion does not. Here
    // 0 <= w <= 2 g_j < 2^34: v lies in [0, 2L] (`add_point`) and g_j =
    // max(2 sqrt(n_j), d, 4) with n_j < 2^64.
    const TWO52: f64 = 4_503_599_627_370_496.0;
    let (j, levels) = at;
    // w is capped at 2 g_j: s <= 2L, but s g_j / L can round one unit in
    // the last place above 2 g_j (L not a power of two), and the
    // accountant's per-coordinate bound K_j = ceil(min(G_j, 2 g_j))
    // (`privacy::vecsum_account`) needs every rounded value in [0,
    // ceil(2 g_j)].
    let cap = 2.0 * gj;
    for (c, (a, &s)) in acc.iter_mut().zip(v).enumerate() {
        let w = s * gj / l;
        let w = if w > cap { cap } else { w };
        let fl = w.floor();
        let u = uniform_at(key, c as u64 * levels + j);
        let whole = (fl + TWO52).to_bits() - TWO52.to_bits();
        *a += whole + u64::from(u < w - fl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `add_point` written without vectors,
    /// value by value, level by level: the reference for the bits.
    fn add_point_reference(vs: &mut VecSum, x: &[f64], y: f64, key: u64) -> bool {
        let (d, l) = (vs.d, vs.l);
        let values: Vec<f64> = (0..d)
            .flat_map(|i| (i..d).map(move |j| (i, j)))
            .map(|(i, j)| x[i] * x[j])
            .chain(x[..d].iter().map(|xi| xi * y))
            .collect();
        let mut clipped = false;
        for (c, v) in values.into_iter().enumerate() {
            let shifted = v.clamp(-l, l) + l;
            for j in 0..vs.levels {
                let w = shifted * vs.g[j] / l;
                // The cap as round_level applies it (a NaN stays NaN).
                let w = if w > 2.0 * vs.g[j] { 2.0 * vs.g[j] } else { w };
                let fl = w.floor();
                let bern = u64::from(uniform_at(key, (c * vs.levels + j) as u64) < w - fl);
                vs.acc[j * vs.coords + c] += fl as u64 + bern;
            }
            clipped |= v.abs() > l;
        }
        clipped
    }

    /// The vectorized rounding accumulates exactly what the value-by-value
    /// reference does (every accumulator, every level) and reports the same
    /// clipping, for d = 1..=12 and 17, bounds that clip some points, keys
    /// and levels varied, and a NaN reward; a wrong index (c levels + j),
    /// rounding or shift breaks the equality.
    #[test]
    fn vectorized_rounding_equals_the_reference_bit_for_bit() {
        let mut s = Stream::new(&[43, 7]);
        for d in (1..=12).chain([17]) {
            for (levels, l) in [(1usize, 1.0), (5, 0.8), (11, 2.5)] {
                let mut a = VecSum::new(d, levels, 3, 4, l, 1.0, 0.1, 1.0);
                let mut b = a.clone();
                let mut x = vec![0.0; d];
                for p in 0..40u64 {
                    for xi in &mut x {
                        *xi = 2.0 * s.uniform() - 1.0;
                    }
                    // One point carries a NaN reward: its x y coordinates
                    // add nothing, on both.
                    let y = if p == 17 { f64::NAN } else { 3.0 * s.uniform() - 1.5 };
                    let key = fold_more(d as u64, p);
                    let (ca, cb) = (a.add_point(&x, y, key), add_point_reference(&mut b, &x, y, key));
                    assert_eq!(ca, cb, "clipped, d {d} levels {levels} point {p}");
                }
                assert_eq!(a.acc, b.acc, "d {d} levels {levels}");
                assert!(a.acc.iter().any(|&v| v > 0));
            }
        }
    }

    #[test]
    fn coordinates_enumerate_the_upper_triangle() {
        let x = [1.0, 2.0, 3.0];
        let got: Vec<f64> = (0..9).map(|c| VecSum::coordinate(&x, 10.0, 3, c)).collect();
        assert_eq!(got, vec![1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 10.0, 20.0, 30.0]);
    }

    #[test]
    fn accumulated_protocol_matches_literal_in_distribution() {
        // 4000 trials of one coordinate over n = 50 points; compare mean,
        // variance and the two-sample Kolmogorov-Smirnov statistic.
        let mut s = Stream::new(&[21]);
        let values: Vec<f64> = (0..50).map(|i| ((i as f64) * 0.37).sin() * 0.9).collect();
        let (l, g, b) = (1.0, 14.1, 30u64);
        let trials = 4000;
        let mut a: Vec<f64> = (0..trials)
            .map(|_| VecSum::literal_one(&values, l, g, b, &mut s))
            .collect();
        let mut c: Vec<f64> = (0..trials)
            .map(|_| VecSum::accumulated_one(&values, l, g, b, &mut s))
            .collect();
        let truth: f64 = values.iter().sum();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let var = |v: &[f64]| {
            let m = mean(v);
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
        };
        // Theory: variance = (L/g)^2 (n b p (1-p) + sum frac(1-frac)).
        let (ma, mc, va, vc) = (mean(&a), mean(&c), var(&a), var(&c));
        let se = (va / trials as f64).sqrt();
        assert!((ma - truth).abs() < 4.0 * se, "literal biased: {ma} vs {truth}");
        assert!((mc - truth).abs() < 4.0 * se, "accumulated biased: {mc} vs {truth}");
        // Variances agree within 10% (sd of a variance ratio at n=4000 ~ 3%).
        assert!((va / vc - 1.0).abs() < 0.1, "variances {va} {vc}");
        a.sort_by(f64::total_cmp);
        c.sort_by(f64::total_cmp);
        let mut ks = 0.0f64;
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < c.len() {
            if a[i] <= c[j] {
                i += 1;
            } else {
                j += 1;
            }
            ks = ks.max((i as f64 / a.len() as f64 - j as f64 / c.len() as f64).abs());
        }
        // Two-sample KS critical value at alpha = 0.001: 1.95 sqrt(2/n) = 0.0436.
        assert!(ks < 0.0436, "KS {ks}");
    }

    #[test]
    fn released_sum_is_symmetric_and_memory_is_fixed() {
        let (d, m, batch) = (3, 4, 5u64);
        let mut vs = VecSum::new(d, 4, batch, m, 1.0, 1.0, 0.1, 1.0);
        let bytes = vs.state_bytes();
        assert_eq!(bytes, 2 * 4 * (6 + 3) * 8);
        let (agent, sh) = (crate::rng::fold_key(&[3]), crate::rng::fold_key(&[4]));
        let mut point = 0u64;
        let mut out = vec![0.0; d * d + d];
        let mut truth = vec![0.0; d * d + d];
        let x = [0.5, -0.3, 0.2];
        for _k in 0..6 {
            for _ in 0..batch as usize * m {
                point += 1;
                vs.add_point(&x, 0.7, fold_more(agent, point));
                for r in 0..d {
                    for s in 0..d {
                        truth[r * d + s] += x[r] * x[s];
                    }
                    truth[d * d + r] += x[r] * 0.7;
                }
            }
            vs.close_batch(sh, &mut out);
        }
        assert_eq!(vs.state_bytes(), bytes);
        // The noise is large at these sizes; the output must still be finite
        // and symmetric.
        for r in 0..d {
            for s in 0..d {
                assert!(out[r * d + s].is_finite());
                assert_eq!(out[r * d + s], out[s * d + r]);
            }
        }
    }
}
