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

use crate::privacy::lattice::{DiscreteLaplace, STEP, to_lattice};
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
}
