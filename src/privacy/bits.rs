//! The exact-bits test of a floating-point release: could the neighbour's
//! input have produced exactly these bits? A mechanism that adds noise drawn
//! in floating point releases r = fl(x + n) with n from a finite set of
//! doubles, so some releases of x are unreachable from x + 1 whatever the
//! noise: seeing one rules the neighbour out with certainty, which no
//! finite epsilon allows (the attack Mironov describes for the textbook
//! Laplace sampler, "On Significance of the Least Significant Bits for
//! Differential Privacy", CCS 2012). A sampler on a lattice whose noise has
//! full support there (the discrete Laplace and Gaussian of
//! [`crate::rng::discrete`], added to a statistic rounded to the lattice)
//! reaches every lattice point from every input, and passes.
//!
//! **The engine's float Laplace** ([`crate::rng::laplace_at`]): u_k = (k +
//! 1/2) 2^-53 for the 2^53 values k of a word's top 53 bits, n =
//! [`crate::rng::laplace_of_uniform`]`(u_k, scale)`, non-decreasing in k.
//! [`laplace_reachable`] finds, by bisection over k, the first k whose
//! release fl(center + n_k) is at least r, then compares the releases of a
//! window of k around it with r bit for bit (the window covers any
//! rounding that breaks monotonicity by a few steps).
//!
//! **Any float noise added to a statistic** ([`float_sum_unreachable`]): a
//! release r = fl(y + a) of the statistic y (a normal double, exponent E:
//! 2^E <= |y| < 2^(E+1)) plus any double a whatsoever, with |r| <= |y| / 4,
//! is the exact sum y + a, a multiple of 2^(E - 53). Proof: |y + a| <=
//! |r| (1 + 2^-53) < |y| / 2, so -a lies within (|y| / 2, 3 |y| / 2) of y's
//! sign, where Sterbenz's lemma makes y + a representable, hence r = y + a;
//! |a| > |y| / 2 >= 2^(E - 1) puts a on the grid 2^(E - 53) and y lies on
//! 2^(E - 52). So a release near 0 that is not on that grid cannot come
//! from y whatever the noise (the Gaussian's Box-Muller pairs, the float
//! Laplace): from a statistic 0 every double near 0 is a release, most of
//! them off the grid. The test is one-sided (a release it does not flag
//! may still be unreachable), so the share it finds is a lower bound on
//! delta; it is what `audit --bits` runs on the float Gaussian samplers.

use crate::privacy::lattice::{DiscreteLaplace, STEP, to_lattice};
use crate::privacy::vecsum::VecSum;
use crate::rng::laplace_of_uniform;

/// Draws k on each side of the bisection's answer that are compared bit
/// for bit.
const WINDOW: u64 = 64;

/// The release of the float Laplace at word value `k` (0 <= k < 2^53) for
/// input `center`.
fn release(center: f64, scale: f64, k: u64) -> f64 {
    let u = (k as f64 + 0.5) * (1.0 / (1u64 << 53) as f64);
    center + laplace_of_uniform(u, scale)
}

/// Whether the engine's float Laplace mechanism with `scale` can release
/// exactly `r` (bit for bit) from input `center`.
pub fn laplace_reachable(center: f64, r: f64, scale: f64) -> bool {
    let (mut lo, mut hi) = (0u64, 1u64 << 53);
    // The first k whose release is >= r (releases non-decreasing in k).
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if release(center, scale, mid) < r {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let first = lo.saturating_sub(WINDOW);
    let last = (lo + WINDOW).min((1u64 << 53) - 1);
    (first..=last).any(|k| release(center, scale, k).to_bits() == r.to_bits())
}

/// Whether `r` is a point of the lattice ([`crate::privacy::lattice`]):
/// an integer number of steps, below 2^53 in magnitude. The discrete
/// Laplace gives every integer a positive probability (P(z) proportional
/// to exp(-|z| s / t)), so a lattice mechanism reaches exactly these
/// releases from every lattice input.
pub fn lattice_point(r: f64) -> bool {
    on_lattice(r, STEP)
}

/// Whether `r` is a point of the lattice of step `step` (a power of two):
/// an integer number of steps, below 2^53 in magnitude (the trees'
/// lattices, [`crate::privacy::tree_lattice`]).
pub fn on_lattice(r: f64, step: f64) -> bool {
    let k = r / step;
    r.is_finite() && k.fract() == 0.0 && k.abs() < (1u64 << 53) as f64
}

/// Whether no double a gives fl(`y` + a) = `r` bit for bit, by the
/// cancellation argument of the module docs: `y` a normal double (exponent
/// E at least -960), |`r`| <= |`y`| / 4 and `r` off the grid 2^(E - 53).
/// False where the argument says nothing (it is one-sided).
pub fn float_sum_unreachable(y: f64, r: f64) -> bool {
    let e = ((y.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    if !y.is_normal() || e < -960 || !r.is_finite() || r.abs() > y.abs() / 4.0 {
        return false;
    }
    // Division by a power of two is exact (the quotient is below 2^52).
    (r / 2f64.powi(e - 53)).fract() != 0.0
}

/// How the entries of a vector release are tested
/// ([`vector_bits_test`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EntryTest {
    /// Lattice noise of this step: a release is reachable from a lattice
    /// statistic exactly when it is a lattice point at a lattice distance.
    Lattice(f64),
    /// Floating-point noise: [`float_sum_unreachable`], entry by entry.
    Float,
}

impl EntryTest {
    /// Whether entry `r` of a release may come from statistic entry `y`.
    fn reachable(self, y: f64, r: f64) -> bool {
        match self {
            Self::Lattice(step) => on_lattice(r, step) && on_lattice(r - y, step),
            Self::Float => !float_sum_unreachable(y, r),
        }
    }
}

/// The exact-bits test of a vector release x + z (entry by entry in f64,
/// as the mechanisms add it), `noise(key, z)` filling z with one release's
/// noise: `trials` releases, alternately of `x[0]` tested against `x[1]`
/// and of `x[1]` against `x[0]` (privacy is owed both ways; the float test
/// has power only where the released statistic is 0 and the other is
/// not), each unreachable when some entry is, and unfound when its own
/// statistic fails the test (a check of the test: never, by its proof).
pub fn vector_bits_test(
    x: [&[f64]; 2],
    test: EntryTest,
    trials: u64,
    seed: u64,
    mut noise: impl FnMut(u64, &mut [f64]),
) -> BitsOutcome {
    let mut o = BitsOutcome {
        releases: trials,
        unreachable: 0,
        unfound: 0,
    };
    let mut z = vec![0.0; x[0].len()];
    for i in 0..trials {
        noise(crate::rng::fold_key(&[seed, 0xB175, i]), &mut z);
        let (own, other) = if i % 2 == 0 { (x[0], x[1]) } else { (x[1], x[0]) };
        let release = own.iter().zip(&z).map(|(s, n)| s + n);
        o.unfound += u64::from(!release.clone().zip(own).all(|(r, &s)| test.reachable(s, r)));
        o.unreachable += u64::from(!release.zip(other).all(|(r, &s)| test.reachable(s, r)));
    }
    o
}

/// The exact-bits test of the vector-summation protocol
/// ([`crate::privacy::vecsum`]): `trials` first releases (the level-0 node
/// of batch 1: `points` points, the first `pair`'s end, the others 0),
/// alternating the ends. Each released double is mapped back to the
/// shuffler's integer sum ([`VecSum::sum_of_release`]; unfound where no
/// integer gives its bits, or where its own end cannot give that sum). It is
/// unreachable from the other end where, in some coordinate, no rounding
/// of that end's points ([`VecSum::rounding_range`]) plus a Binomial count
/// in [0, t_0] makes it. The Binomial's law gives every count of [0, t_0]
/// positive probability; that the double-precision draw
/// ([`crate::rng::binomial`]) can produce each needed count is taken, not
/// searched (a count it cannot produce would only be missed: the test
/// stays sound where it fails a cell).
pub fn vecsum_bits_test(
    proto: &VecSum,
    points: u64,
    pair: [&(Vec<f64>, f64); 2],
    trials: u64,
    seed: u64,
) -> BitsOutcome {
    let t0 = proto.levels_params().1[0];
    let d = pair[0].0.len();
    let zero = vec![0.0; d];
    // Per end: the coordinates' reachable sums before the noise.
    let ranges: Vec<Vec<(u64, u64)>> = pair
        .iter()
        .map(|(x, y)| {
            let own = proto.rounding_range(x, *y, 0);
            let rest = proto.rounding_range(&zero, 0.0, 0);
            let others = points.saturating_sub(1);
            own.iter()
                .zip(&rest)
                .map(|(a, b)| (a.0 + others * b.0, a.1 + others * b.1))
                .collect()
        })
        .collect();
    let reaches = |sums: &[u64], r: &[(u64, u64)]| sums.iter().zip(r).all(|(&y, &(lo, hi))| y >= lo && y <= hi + t0);
    let mut o = BitsOutcome {
        releases: trials,
        unreachable: 0,
        unfound: 0,
    };
    let (mut out, mut sums) = (vec![0.0; d * d + d], Vec::with_capacity(proto.coords()));
    for i in 0..trials {
        let (own, other) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
        let (agent, shuffler) = (
            crate::rng::fold_key(&[seed, 0xB175, i, 0]),
            crate::rng::fold_key(&[seed, 0xB175, i, 1]),
        );
        let mut vs = proto.clone();
        for p in 0..points {
            let (x, y) = if p == 0 {
                (&pair[own].0, pair[own].1)
            } else {
                (&zero, 0.0)
            };
            vs.add_point(x, y, crate::rng::fold_more(agent, p));
        }
        vs.close_batch(shuffler, &mut out);
        // The node's coordinates in add_point's order: the upper triangle
        // row-major, then the bias.
        let entries = (0..d)
            .flat_map(|r| (r..d).map(move |c| r * d + c))
            .chain(d * d..d * d + d);
        sums.clear();
        sums.extend(entries.map(|e| proto.sum_of_release(0, out[e])));
        let Some(found) = sums.iter().copied().collect::<Option<Vec<u64>>>() else {
            o.unfound += 1;
            continue;
        };
        o.unfound += u64::from(!reaches(&found, &ranges[own]));
        o.unreachable += u64::from(!reaches(&found, &ranges[other]));
    }
    o
}

/// An elementary release the exact-bits test draws: a statistic plus one
/// noise draw, as the mechanism adds it.
#[derive(Clone, Copy, Debug)]
pub enum BitsRelease {
    /// The float Laplace of this scale ([`crate::rng::laplace_at`]).
    FloatLaplace {
        /// The Laplace scale.
        scale: f64,
    },
    /// The statistic rounded to the lattice plus a discrete Laplace draw.
    LatticeLaplace(DiscreteLaplace),
}

/// What the exact-bits test found over its releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitsOutcome {
    /// Releases drawn from the first input.
    pub releases: u64,
    /// Of them, releases the neighbouring input cannot produce.
    pub unreachable: u64,
    /// Of them, releases the search did not find from their own input (a
    /// failure of the search itself; 0 when it works).
    pub unfound: u64,
}

impl BitsOutcome {
    /// The Clopper-Pearson lower bound (at `confidence`) on the
    /// probability that a release rules the neighbour out: a lower bound
    /// on delta at every epsilon (0 when nothing was unreachable).
    pub fn delta_lower_bound(&self, confidence: f64) -> f64 {
        if self.unreachable == 0 {
            return 0.0;
        }
        1.0 - crate::privacy::audit::clopper_pearson_upper(
            self.releases - self.unreachable,
            self.releases,
            1.0 - confidence,
        )
    }
}

/// The exact-bits test: `trials` releases of `x[0]` (their noise keyed by
/// `seed` and the trial), each tested for whether `x[1]` could have
/// produced exactly its bits, and whether `x[0]` could (the search's own
/// check).
pub fn bits_test(x: [f64; 2], release: BitsRelease, trials: u64, seed: u64) -> BitsOutcome {
    let mut o = BitsOutcome {
        releases: trials,
        unreachable: 0,
        unfound: 0,
    };
    for i in 0..trials {
        let key = crate::rng::fold_key(&[seed, 0xB175, i]);
        let (reach_own, reach_other) = match release {
            BitsRelease::FloatLaplace { scale } => {
                let r = x[0] + crate::rng::laplace_at(key, scale);
                (laplace_reachable(x[0], r, scale), laplace_reachable(x[1], r, scale))
            }
            BitsRelease::LatticeLaplace(lap) => {
                let r = (to_lattice(x[0]) + lap.draw(key)) as f64 * STEP;
                (lattice_point(r), lattice_point(r))
            }
        };
        o.unfound += u64::from(!reach_own);
        o.unreachable += u64::from(!reach_other);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector-summation protocol releases integer sums: with its
    /// Binomial noise (10^4 trials a coordinate) every release of either
    /// end of a pair that moves every coordinate by up to 2 g is reachable
    /// from the other; with one trial (the noise all but removed) most are
    /// not. Every release maps back to its own sum (none unfound).
    #[test]
    fn the_vecsum_test_passes_the_binomial_noise_and_fails_without_it() {
        let pair = [(vec![1.0, 0.0, 0.0], 1.0), (vec![0.0, 1.0, 0.0], -1.0)];
        for (tau, lo, hi) in [(1e4 / 64.0, 0, 0), (0.0, 150, 200)] {
            let proto = VecSum::exact(3, 2, 5, 2, 1.0, tau);
            let o = vecsum_bits_test(&proto, 10, [&pair[0], &pair[1]], 200, 7);
            assert_eq!(o.unfound, 0, "{o:?}");
            assert!((lo..=hi).contains(&o.unreachable), "tau {tau}: {o:?}");
        }
    }

    /// The float sampler fails the exact-bits test: of 4,000 releases of x
    /// = 0 at scale 1 (epsilon 1 for a sensitivity of 1), the neighbour x =
    /// 1 cannot produce most (0.85 expected), while the search finds every
    /// release from its own input (a check of the search itself).
    #[test]
    fn the_float_laplace_releases_bits_the_neighbour_cannot_produce() {
        for (x, scale, low) in [(0.0, 1.0, 0.75), (0.37, 1.0, 0.65), (0.0, 1.0 / 0.3, 0.75)] {
            let n = 4000u64;
            let mut unreachable = 0;
            for i in 0..n {
                let r = x + crate::rng::laplace_at(crate::rng::fold_key(&[0xB175, i]), scale);
                assert!(
                    laplace_reachable(x, r, scale),
                    "release {r} not found from its own input {x}"
                );
                if !laplace_reachable(x + 1.0, r, scale) {
                    unreachable += 1;
                }
            }
            let share = f64::from(unreachable) / n as f64;
            println!("x {x} scale {scale}: {share:.3} of releases unreachable from x + 1");
            assert!(share > low, "x {x} scale {scale}: only {share}");
        }
    }

    /// The test itself: the float sampler's releases of 0 are unreachable
    /// from 1 at about the share above (and its lower bound on delta is
    /// far from 0), the lattice sampler's are all reachable; neither
    /// search misses a release from its own input.
    #[test]
    fn the_bits_test_fails_the_float_laplace_and_passes_the_lattice() {
        let float = bits_test([0.0, 1.0], BitsRelease::FloatLaplace { scale: 1.0 }, 2000, 7);
        assert_eq!(float.unfound, 0);
        assert!(float.unreachable > 1500, "{float:?}");
        assert!(float.delta_lower_bound(0.99) > 0.7, "{}", float.delta_lower_bound(0.99));
        let lap = DiscreteLaplace::budget(1.0, 1 << 20).unwrap();
        let lattice = bits_test([0.0, 1.0], BitsRelease::LatticeLaplace(lap), 2000, 7);
        assert_eq!((lattice.unfound, lattice.unreachable), (0, 0));
        assert_eq!(lattice.delta_lower_bound(0.99), 0.0);
        assert!(lattice_point(3.0 * STEP) && !lattice_point(0.5 * STEP) && !lattice_point(f64::NAN));
    }

    /// The cancellation argument on what the engine computes: for y = 1,
    /// -0.75 and 3e-5 and 200 000 noises a each (the float Gaussian's, and
    /// the 4096 doubles around -y, where the cancellation is), no sum
    /// fl(y + a) is flagged as unreachable from y (soundness); releases of
    /// 0 under the float Gaussian at sigma 3 are flagged against 1 at 5/6
    /// P(|n| <= 1/4) = 0.055 within 10% (its power); lattice releases pass
    /// both ways.
    #[test]
    fn the_cancellation_test_is_sound_and_has_power() {
        for y in [1.0f64, -0.75, 3.0e-5] {
            for i in 0..200_000u64 {
                let a = if i % 2 == 0 {
                    3.0 * y.abs() * crate::rng::normal_at(11, i)
                } else {
                    // Doubles near -y, the cancellation's edge.
                    f64::from_bits((-y).to_bits().wrapping_add(i / 2 % 4096).wrapping_sub(2048))
                };
                let r = y + a;
                assert!(!float_sum_unreachable(y, r), "y {y} a {a:e} r {r:e}");
            }
        }
        let sigma = 3.0;
        let o = vector_bits_test([&[0.0], &[1.0]], EntryTest::Float, 40_000, 3, |k, z| {
            z[0] = sigma * crate::rng::normal_at(k, 0);
        });
        assert_eq!(o.unfound, 0);
        let share = o.unreachable as f64 / 20_000.0;
        // Of the releases of 0 (half the trials), P(|n| <= 1/4) are near 0,
        // and of those 5/6 off the grid 2^-53 (the doubles in [2^-j-2,
        // 2^-j-1), mass 2^-j near 0, are on it one in 2^(j+1)).
        let p = 2.0 * (0.25 / sigma) / (2.0 * std::f64::consts::PI).sqrt() * 5.0 / 6.0;
        assert!((share / p - 1.0).abs() < 0.1, "share {share} against {p}");
        let step = 2f64.powi(-10);
        let l = vector_bits_test([&[0.0, 1.0], &[1.0, 0.0]], EntryTest::Lattice(step), 1000, 3, |k, z| {
            z.iter_mut()
                .enumerate()
                .for_each(|(e, x)| *x = step * (k % 1000 + e as u64) as f64);
        });
        assert_eq!((l.unfound, l.unreachable), (0, 0));
    }
}
