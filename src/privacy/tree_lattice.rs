//! The tree mechanism's Gaussian node noise on a lattice (`sampler:
//! discrete` for the linear family): each leaf rounded to the lattice, each
//! node's noise drawn entry by entry from the discrete Gaussian in integer
//! arithmetic ([`crate::rng::discrete_gauss`]), so that every
//! release is a lattice point with exactly the probability the accountant
//! charges ([`super::lattice_gdp`]), not a double whose low-order bits
//! depend on the data (see [`super::lattice`]).
//!
//! **The lattice** is a power of two chosen from the noise: the step is
//! 2^-[`SIGMA_BITS`] of the smallest per-entry standard deviation (rounded
//! down to a power of two), so that every entry's noise spans 2^24 to 2^25
//! steps and more, whatever epsilon; it is coarsened where needed so that
//! every sum the release path forms stays below 2^[`EXACT_BITS`] steps
//! (the caller's `magnitude` bound), where f64 adds lattice points exactly:
//! the tree's running sums, the noise sums, the server's sum over agents
//! and the peers' increments are then the exact integers the mechanism
//! defines, and each release is a function of the agents' releases only.
//! The step is a function of the noise scale and the configuration alone,
//! never of data, and the rows state it (`acct_lattice_step`).
//!
//! **The noise** has the per-entry variances the float mechanism's node
//! noise has (the papers' symmetrizations), each deviation rounded up to an
//! integer number of steps, drawn for the released upper triangle and the
//! bias entries and mirrored to the lower triangle:
//! - [`NodeNoise::Half`] (Zhou & Chowdhury): diagonal sigma^2, off-diagonal
//!   sigma^2 / 2, bias sigma^2;
//! - [`NodeNoise::Dubey`] (Dubey & Pentland, sigma = sigma_N): diagonal 2
//!   sigma^2, off-diagonal sigma^2, bias sigma^2.
//!
//! Entry e of a node (its flat index in the leaf's layout: i d + j for the
//! Gram entry i <= j, d^2 + i for bias i) draws from the words of
//! `fold_more(node key, e)` ([`crate::rng::discrete::KeyedBits`]), so a
//! node is regenerated from its key as the float noise is.
//!
//! **What the accountant charges** ([`LatticeNodeNoise::rounding`]): one
//! observation shifts each rounded released entry by at most its real shift
//! |v_e| plus one step, so by Minkowski the lattice mechanism's mu (with
//! the lattice variances, which are never below the real ones) is at most
//! (Delta + step sqrt(sum_e sigma^2 / sigma_e^2)) / sigma over the
//! accountant's sigma: Delta + step sqrt(d^2 + d) for Half, Delta + step
//! sqrt(d^2 + 2 d) for Dubey (its sigma sqrt(2) sigma_N convention).

use super::tree::NodeNoise;
use crate::rng::discrete::isqrt;
use crate::rng::discrete_gauss::{Bits, discrete_gaussian};

/// The smallest per-entry noise standard deviation spans at least 2^SIGMA_BITS
/// steps (unless [`EXACT_BITS`] forces a coarser step).
pub const SIGMA_BITS: i32 = 24;

/// Every sum a release path forms stays below 2^EXACT_BITS steps.
pub const EXACT_BITS: i32 = 52;

/// A bound on the node noise's sum in standard deviations per level, for
/// the magnitude check (a discrete Gaussian beyond 64 sigma has probability
/// below e^-2048).
pub const NOISE_SIGMAS: f64 = 64.0;

/// Why a lattice cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LatticeError {
    /// The noise scale is not a positive finite number.
    #[error("the node noise's sigma {0} is not a positive finite number")]
    Sigma(f64),
    /// The sums cannot be held exactly.
    #[error(
        "sums of magnitude up to {magnitude:.3e} cannot be held exactly on a lattice fine enough for noise of \
         sigma {sigma:.3e} (2^{EXACT_BITS} steps)"
    )]
    Range {
        /// The magnitude bound.
        magnitude: f64,
        /// The noise scale.
        sigma: f64,
    },
}

/// The lattice and per-entry variances of one tree's node noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatticeNodeNoise {
    /// The step is 2^step_exp.
    pub step_exp: i32,
    /// The symmetrization whose variances these are.
    pub kind: NodeNoise,
    /// Diagonal Gram entries' deviation in steps (an integer, whose square
    /// is at least the real variance in steps^2).
    pub diag: u64,
    /// Off-diagonal Gram entries' deviation in steps.
    pub off: u64,
    /// Bias entries' deviation in steps.
    pub bias: u64,
}

impl LatticeNodeNoise {
    /// The lattice for node noise of `kind` at `sigma` (the float
    /// mechanism's parameter) whose release path forms sums of magnitude at
    /// most `magnitude` (statistic units, noise included).
    pub fn new(kind: NodeNoise, sigma: f64, magnitude: f64) -> Result<Self, LatticeError> {
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(LatticeError::Sigma(sigma));
        }
        if !(magnitude.is_finite() && magnitude < 1e300) {
            return Err(LatticeError::Range { magnitude, sigma });
        }
        let (f_diag, f_off, f_bias) = factors(kind);
        let smallest = sigma * f_off.sqrt();
        let fine = smallest.log2().floor() as i32 - SIGMA_BITS;
        let coarse = if magnitude > 0.0 {
            magnitude.log2().ceil() as i32 + 1 - EXACT_BITS
        } else {
            i32::MIN
        };
        let step_exp = fine.max(coarse);
        // The largest deviation must stay in the sampler's range
        // ([`crate::rng::discrete_gauss::MAX_SIGMA`], 2^26 steps; at the
        // finest step it is below 2^25.5).
        if f64::from(step_exp) * -2.0 + (sigma * sigma * f_diag.max(f_bias)).log2() > 51.9
            || !(-1000..=1000).contains(&step_exp)
        {
            return Err(LatticeError::Range { magnitude, sigma });
        }
        // The deviation in steps: the smallest integer whose square is at
        // least the variance in steps^2 (rounded up).
        let steps2 = |f: f64| {
            let v = (sigma * sigma * f * 2f64.powi(-2 * step_exp)).next_up().ceil().max(1.0) as u64;
            isqrt(v - 1) + 1
        };
        Ok(Self {
            step_exp,
            kind,
            diag: steps2(f_diag),
            off: steps2(f_off),
            bias: steps2(f_bias),
        })
    }

    /// The lattice step, 2^step_exp.
    pub fn step(&self) -> f64 {
        2f64.powi(self.step_exp)
    }

    /// The smallest per-entry variance, steps^2.
    pub fn min_sigma2(&self) -> f64 {
        let s = self.diag.min(self.off).min(self.bias) as f64;
        s * s
    }

    /// Released entries per node: the upper triangle and the bias.
    pub fn entries(d: usize) -> u64 {
        (d * (d + 1) / 2 + d) as u64
    }

    /// What rounding adds to the node statistic's sensitivity, in the
    /// accountant's units (module doc): step sqrt(d^2 + d) (Half), step
    /// sqrt(d^2 + 2 d) (Dubey).
    pub fn rounding(&self, d: usize) -> f64 {
        let d = d as f64;
        let extra = match self.kind {
            NodeNoise::Half => d,
            NodeNoise::Dubey => 2.0 * d,
        };
        self.step() * (d * d + extra).sqrt()
    }

    /// What the accountant charges for a node of a d-dimensional leaf
    /// ([`super::accountant::Mechanism::lattice`]).
    pub fn charge(&self, d: usize) -> super::accountant::LatticeGaussian {
        super::accountant::LatticeGaussian {
            step: self.step(),
            min_sigma2: self.min_sigma2(),
            entries: Self::entries(d),
        }
    }

    /// Rounds a flat (d x d Gram, d bias) leaf to the lattice, to nearest
    /// (ties to even): the upper triangle mirrored to the lower.
    pub fn round_leaf(&self, leaf: &mut [f64], d: usize) {
        let (up, down) = (2f64.powi(-self.step_exp), self.step());
        let r = |x: f64| (x * up).round_ties_even() * down;
        for i in 0..d {
            for j in i..d {
                let v = r(leaf[i * d + j]);
                leaf[i * d + j] = v;
                leaf[j * d + i] = v;
            }
        }
        for v in &mut leaf[d * d..d * d + d] {
            *v = r(*v);
        }
    }

    /// One node's noise of key `key`, on the lattice, into `z` (flat
    /// layout).
    pub fn fill(&self, z: &mut [f64], d: usize, key: u64) {
        let step = self.step();
        let draw = |e: usize, sigma: u64| {
            let mut bits = Bits::new(crate::rng::fold_more(key, e as u64));
            discrete_gaussian(&mut bits, sigma) as f64 * step
        };
        for i in 0..d {
            for j in i..d {
                let v = draw(i * d + j, if i == j { self.diag } else { self.off });
                z[i * d + j] = v;
                z[j * d + i] = v;
            }
        }
        for i in 0..d {
            z[d * d + i] = draw(d * d + i, self.bias);
        }
    }
}

/// Per-entry variance factors of sigma^2: (diagonal, off-diagonal, bias).
fn factors(kind: NodeNoise) -> (f64, f64, f64) {
    match kind {
        NodeNoise::Half => (1.0, 0.5, 1.0),
        NodeNoise::Dubey => (2.0, 1.0, 1.0),
    }
}

/// The noise `calibration: exact` gives under the lattice (`magnitude`:
/// the sums' bound at a sigma): `sigma_of` (the float calibration's sigma
/// at a sensitivity, linear in it) at the rounded statistic's sensitivity,
/// `sensitivity` + [`LatticeNodeNoise::rounding`] at the lattice of the
/// result, times a margin of 1e-9 plus 4 eta (eta =
/// 9 / the smallest lattice variance: what the lattice bound adds,
/// [`super::lattice_gdp`]), so the lattice figure stays at or below the
/// target; iterated until the lattice is that of the result.
pub fn calibrate(
    kind: NodeNoise,
    d: usize,
    magnitude: impl Fn(f64) -> f64,
    sensitivity: f64,
    sigma_of: impl Fn(f64) -> f64,
) -> f64 {
    let mut sigma = sigma_of(sensitivity);
    for _ in 0..16 {
        let Ok(l) = LatticeNodeNoise::new(kind, sigma, magnitude(sigma)) else {
            return sigma;
        };
        let margin = 1.0 + 1e-9 + 4.0 * super::lattice_gdp::TAU2 / l.min_sigma2();
        let next = sigma_of(sensitivity + l.rounding(d)) * margin;
        match LatticeNodeNoise::new(kind, next, magnitude(next)) {
            Ok(n) if n.step_exp == l.step_exp && next >= sigma => return next,
            _ => sigma = next.max(sigma),
        }
    }
    sigma
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step puts the smallest deviation in [2^24, 2^25) steps; the
    /// variances are the classes', rounded up; a magnitude too large for
    /// that step coarsens it.
    #[test]
    fn the_lattice_follows_the_noise() {
        for &(kind, sigma) in &[
            (NodeNoise::Half, 37.3),
            (NodeNoise::Dubey, 0.02),
            (NodeNoise::Dubey, 4100.0),
        ] {
            let l = LatticeNodeNoise::new(kind, sigma, 1e3).unwrap();
            let (fd, fo, fb) = factors(kind);
            let small = sigma * fo.sqrt() / l.step();
            assert!(
                (2f64.powi(24)..2f64.powi(25)).contains(&small),
                "{kind:?} {sigma}: {small}"
            );
            for (s, f) in [(l.diag, fd), (l.off, fo), (l.bias, fb)] {
                let (real, v) = (sigma * sigma * f / (l.step() * l.step()), (s * s) as f64);
                assert!(v >= real && v < real + 2.0 * s as f64 + 2.0, "{v} vs {real}");
            }
        }
        let fine = LatticeNodeNoise::new(NodeNoise::Half, 1.0, 10.0).unwrap();
        let coarse = LatticeNodeNoise::new(NodeNoise::Half, 1.0, 1e12).unwrap();
        assert_eq!(fine.step_exp, -25);
        assert!(1e12 / coarse.step() < 2f64.powi(EXACT_BITS), "{}", coarse.step());
        assert!(coarse.step_exp > fine.step_exp);
        assert!(LatticeNodeNoise::new(NodeNoise::Half, 0.0, 1.0).is_err());
        assert!(LatticeNodeNoise::new(NodeNoise::Half, 1.0, f64::INFINITY).is_err());
        // Noise below one step of the coarse lattice: one step^2, never less.
        let tiny = LatticeNodeNoise::new(NodeNoise::Half, 1e-6, 1e12).unwrap();
        assert_eq!((tiny.diag, tiny.off, tiny.bias), (1, 1, 1));
    }

    /// Rounded leaves and drawn noise are lattice points, symmetric, and
    /// sums of them are exact; the noise is a function of the key with the
    /// variances of its classes (20 000 nodes at d = 3: sample variances
    /// within 4% of the class's, about 5 standard errors).
    #[test]
    fn leaves_and_noise_are_lattice_points_with_their_variances() {
        let d = 3;
        let l = LatticeNodeNoise::new(NodeNoise::Dubey, 2.5, 1e6).unwrap();
        let mut leaf: Vec<f64> = (0..d * d + d).map(|k| (k as f64 * 0.7311).sin() * 3.0).collect();
        leaf[1] = leaf[3];
        l.round_leaf(&mut leaf, d);
        let step = l.step();
        let on = |x: f64| (x / step).fract() == 0.0;
        assert!(leaf.iter().all(|&x| on(x)));
        let mut z = vec![0.0; d * d + d];
        let mut again = z.clone();
        let (mut s_diag, mut s_off, mut s_bias) = (0.0, 0.0, 0.0);
        let n = 20_000u64;
        for key in 0..n {
            l.fill(&mut z, d, key);
            l.fill(&mut again, d, key);
            assert_eq!(z, again);
            assert!(z.iter().all(|&x| on(x)));
            assert_eq!(z[1], z[3]);
            s_diag += z[0] * z[0];
            s_off += z[1] * z[1];
            s_bias += z[d * d] * z[d * d];
        }
        let s2 = 2.5f64 * 2.5;
        for (s, want) in [(s_diag, 2.0 * s2), (s_off, s2), (s_bias, s2)] {
            let got = s / n as f64;
            assert!((got / want - 1.0).abs() < 0.04, "{got} vs {want}");
        }
    }

    /// The release path is exact: 4 agents x 4096 rounded leaves of
    /// magnitude up to 4000 (prefix sums to 1.6e7) with node noise drawn
    /// on the lattice; after every leaf the server's f64 sum of the agents'
    /// releases equals the same sums in i128 steps, entry for entry.
    #[test]
    fn the_release_path_adds_lattice_points_exactly() {
        use super::super::tree::AgentTrees;
        let (d, m, leaves) = (2usize, 4usize, 4096u64);
        let w = d * d + d;
        let magnitude = 4000.0 * leaves as f64 * m as f64 * 2.0;
        let l = LatticeNodeNoise::new(NodeNoise::Half, 0.37, magnitude).unwrap();
        let mut trees = AgentTrees::new(m, w, 13, &[3, 1]);
        let to_int = |x: f64| {
            let k = x / l.step();
            assert_eq!(k.fract(), 0.0, "{x} is not a lattice point");
            k as i128
        };
        let mut rng = crate::rng::Stream::new(&[44]);
        let (mut leaf, mut out) = (vec![0.0; w], vec![0.0; w]);
        let mut sums = vec![vec![0i128; w]; m];
        let mut noise = vec![vec![0i128; w]; m];
        for k in 1..=leaves {
            out.fill(0.0);
            let mut want = vec![0i128; w];
            for (i, (sum, nz)) in sums.iter_mut().zip(noise.iter_mut()).enumerate() {
                for v in &mut leaf {
                    *v = (rng.uniform() - 0.5) * 8000.0;
                }
                leaf[2] = leaf[1];
                l.round_leaf(&mut leaf, d);
                for (s, v) in sum.iter_mut().zip(&leaf) {
                    *s += to_int(*v);
                }
                // The live nodes' noise, regenerated from their keys.
                nz.fill(0);
                let key = crate::rng::fold_key(&AgentTrees::noise_key(&[3, 1], i));
                let mut z = vec![0.0; w];
                for node in super::super::tree::live_nodes(k) {
                    l.fill(&mut z, d, AgentTrees::node_key(key, node));
                    for (n, v) in nz.iter_mut().zip(&z) {
                        *n += to_int(*v);
                    }
                }
                trees
                    .contribute(i, &leaf, &mut out, |z, key| l.fill(z, d, key))
                    .unwrap();
                for (e, x) in want.iter_mut().enumerate() {
                    *x += sum[e] + nz[e];
                }
            }
            let got: Vec<i128> = out.iter().map(|&x| to_int(x)).collect();
            assert_eq!(got, want, "leaf {k}");
        }
    }

    /// Exact calibration: the result's sigma covers the rounded
    /// sensitivity at its own lattice, with the margin.
    #[test]
    fn calibration_covers_the_rounding() {
        for &(kind, per_unit) in &[(NodeNoise::Half, 35.0), (NodeNoise::Dubey, 0.3)] {
            let sigma = calibrate(kind, 10, |_| 1e9, 2.0, |s| per_unit * s);
            let l = LatticeNodeNoise::new(kind, sigma, 1e9).unwrap();
            let need = per_unit * (2.0 + l.rounding(10));
            assert!(
                sigma >= need * (1.0 + 1e-9) && sigma < need * (1.0 + 1e-6),
                "{sigma} vs {need}"
            );
        }
    }
}
