//! Releases on a lattice, with noise drawn exactly on the integers
//! (`sampler: discrete`), against the floating-point samplers the engine
//! drew before (`sampler: float`, the default).
//!
//! **Why.** A float sampler's output is a double whose low-order bits
//! depend on the input: an adversary who sees a release r = x + n and asks
//! whether r can come out at all under the neighbour x' finds, for the
//! engine's inverse-CDF Laplace, that most releases cannot (Mironov 2012;
//! [`super::bits`] measures it), so no finite epsilon holds for the bits
//! released. On a lattice with exact integer noise nothing of the kind
//! arises: every statistic is an integer count of lattice steps, the noise
//! an integer from a sampler whose every output has exactly the
//! probability of its distribution ([`crate::rng::discrete`]), and the
//! release the integer sum times the step, a double that names its integer
//! exactly (below 2^53 steps). Every integer has positive probability under
//! the discrete Laplace, so every release is reachable from every input.
//!
//! **The lattice** is 2^-[`STEP_BITS`] (about 1e-6): a statistic is rounded
//! to it (to nearest, ties to even) before it enters a sum, a change of at
//! most half a step against noise of scale (hi - lo) / epsilon' per block
//! (2^20 / epsilon' steps at the unit range: a million at epsilon' = 1),
//! so utility is that of the float mechanism within its sampling
//! error (`jobs/study_sampler.yaml` measures it). The
//! accountant charges the sensitivity of the rounded statistic: an
//! observation clipped to [lo, hi] becomes an integer in [round(lo / step),
//! round(hi / step)], whose width [`lattice_width`] is at most one step
//! more than (hi - lo) / step, and exactly that for a range whose ends are
//! lattice points (the default [0, 1]).
//!
//! **The discrete Laplace** ([`DiscreteLaplace`]): P(z) proportional to
//! exp(-|z| s / t) on the integers. For an integer statistic of L1
//! sensitivity D (in steps) one release is exactly (D s / t)-DP: the ratio
//! of the probabilities of r under x and x' is exp((|r - x'| - |r - x|) s /
//! t), at most exp(D s / t) and equal to it for r beyond both. The scale is
//! chosen as t = 2^[`DENOMINATOR_BITS`] and s = floor(epsilon' t / D), so
//! the release's exact epsilon D s / t is at most the budget epsilon' and
//! short of it by less than D / t: for the unit range (D = 2^20) by less
//! than 2^-20, under 0.1% of any epsilon' >= 1e-3 ([`DiscreteLaplace::budget`]
//! refuses a budget that rounds to s = 0).

use crate::rng::discrete::{DiscreteError, KeyedBits, discrete_laplace};

crate::named_enum! {
    /// How a private mechanism draws its noise.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
    pub enum Sampler {
        /// The floating-point samplers (inverse-CDF Laplace, Box-Muller
        /// normals): figures hold over the reals, not for the bits.
        #[default]
        Float = "float",
        /// Statistics rounded to the lattice, exact integer noise
        /// ([`crate::rng::discrete`]): figures hold for the bits released.
        Discrete = "discrete",
    }
}

/// The lattice step is 2^-STEP_BITS.
pub const STEP_BITS: i32 = 20;

/// The lattice step, 2^-[`STEP_BITS`].
pub const STEP: f64 = 1.0 / (1u64 << STEP_BITS) as f64;

/// The discrete Laplace's denominator t is 2^DENOMINATOR_BITS.
pub const DENOMINATOR_BITS: u32 = 40;

/// `x` in lattice steps, rounded to nearest (ties to even); `x` finite and
/// of magnitude below 2^32 (the engine's clipped statistics).
#[inline]
pub fn to_lattice(x: f64) -> i64 {
    (x * (1u64 << STEP_BITS) as f64).round_ties_even() as i64
}

/// The width in steps of the rounded range [lo, hi]: the L1 sensitivity
/// of one rounded observation clipped to it.
pub fn lattice_width(lo: f64, hi: f64) -> u64 {
    to_lattice(hi).abs_diff(to_lattice(lo))
}

/// The discrete Laplace of a release: P(z) proportional to exp(-|z| s / t).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiscreteLaplace {
    /// Numerator of the exponent's rate.
    pub s: u64,
    /// Denominator of the exponent's rate.
    pub t: u64,
}

impl DiscreteLaplace {
    /// The scale for a release of `epsilon` at L1 sensitivity `width`
    /// steps: t = 2^[`DENOMINATOR_BITS`], s = floor(epsilon t / width), so
    /// [`Self::epsilon`] is at most `epsilon`. None where s would be 0 (an
    /// epsilon below width / t) or `width` is 0.
    pub fn budget(epsilon: f64, width: u64) -> Option<Self> {
        let t = 1u64 << DENOMINATOR_BITS;
        if width == 0 || epsilon.is_nan() || epsilon <= 0.0 {
            return None;
        }
        // epsilon t / width rounded down, in f64 then checked exactly: the
        // product is at most 2^53-exact for the magnitudes here, and the
        // rounding is corrected so that s width <= epsilon t holds.
        let mut s = (epsilon * t as f64 / width as f64).floor();
        if s.is_nan() || s < 1.0 || s > (1u64 << 52) as f64 {
            return None;
        }
        while s * width as f64 > epsilon * t as f64 {
            s -= 1.0;
        }
        Some(Self { s: s as u64, t })
    }

    /// The exact epsilon of one release at L1 sensitivity `width`: width s
    /// / t, rounded up to a double.
    pub fn epsilon(&self, width: u64) -> f64 {
        let num = u128::from(width) * u128::from(self.s);
        let e = num as f64 / self.t as f64;
        // A quotient of exact doubles (t a power of two): exact unless num
        // exceeds 2^53, where it is rounded; round up by one ulp then.
        if num < (1u128 << 53) { e } else { e.next_up() }
    }

    /// The noise standard deviation in steps: sqrt(2 q) / (1 - q), q =
    /// exp(-s / t).
    pub fn std_steps(&self) -> f64 {
        let q = (-(self.s as f64) / self.t as f64).exp();
        (2.0 * q).sqrt() / (1.0 - q)
    }

    /// One draw, from the release's own random words (`key`).
    pub fn try_draw(&self, key: u64) -> Result<i64, DiscreteError> {
        discrete_laplace(&mut KeyedBits::new(key), self.s, self.t)
    }

    /// [`Self::try_draw`] for a scale [`Self::budget`] made (s, t >= 1,
    /// scale t / s below 2^60 steps), which cannot fail: the sampler's one
    /// other error is a draw beyond i64, which the geometric tail reaches
    /// with probability below exp(-2^63 s / t) (none at all in practice);
    /// it saturates there.
    #[inline]
    pub fn draw(&self, key: u64) -> i64 {
        self.try_draw(key).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lattice_rounds_to_nearest_and_counts_its_width() {
        assert_eq!(to_lattice(1.0), 1 << 20);
        assert_eq!(to_lattice(-0.5), -(1 << 19));
        assert_eq!(to_lattice(0.5 * STEP), 0);
        assert_eq!(to_lattice(1.5 * STEP), 2);
        assert_eq!(lattice_width(0.0, 1.0), 1 << 20);
        // A range whose ends are not lattice points: at most one step more.
        let w = lattice_width(0.1, 0.7);
        assert!(w as f64 <= 0.6 / STEP + 1.0 && w as f64 >= 0.6 / STEP - 1.0, "{w}");
    }

    #[test]
    fn a_budget_is_never_exceeded_and_is_nearly_spent() {
        for &(eps, width) in &[
            (1.0, 1u64 << 20),
            (0.3 / 14.0, 1 << 20),
            (9.0 / 24.0, 629_146),
            (1e-3, 1 << 20),
        ] {
            let d = DiscreteLaplace::budget(eps, width).unwrap();
            let e = d.epsilon(width);
            assert!(e <= eps && e >= eps * (1.0 - 1e-3), "{eps} {width}: {e}");
            // Exactly: width s <= eps t.
            assert!((u128::from(width) * u128::from(d.s)) as f64 <= eps * d.t as f64);
        }
        assert_eq!(DiscreteLaplace::budget(1e-9, 1 << 20), None);
        assert_eq!(DiscreteLaplace::budget(1.0, 0), None);
    }

    #[test]
    fn the_noise_has_the_scale_it_states() {
        // Scale t / s = 2^20 / 0.5 steps (epsilon 0.5 over the unit range).
        let d = DiscreteLaplace::budget(0.5, 1 << 20).unwrap();
        let n = 200_000u64;
        let (mut m1, mut m2) = (0.0, 0.0);
        for i in 0..n {
            let z = d.draw(crate::rng::fold_key(&[0x1A77, i])) as f64;
            m1 += z;
            m2 += z * z;
        }
        let (mean, sd) = (m1 / n as f64, (m2 / n as f64).sqrt());
        let want = d.std_steps();
        // The sample sd of a Laplace has relative error about 1.2 /
        // sqrt(n) (kurtosis 6): 0.0027 at n = 2e5; 5 of them allowed.
        assert!((sd / want - 1.0).abs() < 0.014, "sd {sd} vs {want}");
        assert!(mean.abs() < 5.0 * want / (n as f64).sqrt(), "mean {mean}");
        assert!((want * 0.5 / (1u64 << 20) as f64 - std::f64::consts::SQRT_2).abs() < 1e-3);
    }
}
