//! The lattice of a linear configuration's tree noise under `sampler:
//! discrete` ([`crate::privacy::tree_lattice`]): one function of the
//! configuration and the node noise's sigma, which the batch (what is drawn)
//! and the mechanism (what is charged) both call, so the two cannot differ.

use super::LinearConfig;
use crate::privacy::lattice::Sampler;
use crate::privacy::tree::NodeNoise;
use crate::privacy::tree_lattice::{LatticeNodeNoise, NOISE_SIGMAS};

/// A bound on every sum a release path forms, in the statistic's units:
/// M agents' prefix sums of T observations, each entry at most max(L^2, L
/// |y|) with |y| <= 1 (the papers' reward bound; where rewards are
/// unbounded no figure holds and the bound is that of |y| <= 1), plus
/// `levels` nodes' noise of at most [`NOISE_SIGMAS`] times the largest
/// per-entry deviation (sqrt(2) sigma) each.
pub fn magnitude(cfg: &LinearConfig, sigma: f64, levels: usize) -> f64 {
    let l = cfg.l_bound;
    let per_agent = cfg.horizon as f64 * (l * l).max(l) + levels as f64 * NOISE_SIGMAS * std::f64::consts::SQRT_2 * sigma;
    cfg.m.max(1) as f64 * per_agent
}

/// The lattice of node noise of `kind` at `sigma` in a tree of `levels`
/// levels: Some under `sampler: discrete` with noise drawn (sigma > 0),
/// None otherwise (the float sampler, or `noise: false`). `sigma` is the
/// drawn one ([`LinearConfig::drawn`]).
pub fn node_lattice(cfg: &LinearConfig, sigma: f64, kind: NodeNoise, levels: usize) -> Option<LatticeNodeNoise> {
    if cfg.sampler != Sampler::Discrete || sigma <= 0.0 {
        return None;
    }
    LatticeNodeNoise::new(kind, sigma, magnitude(cfg, sigma, levels)).ok()
}

/// `calibration: exact`'s sigma for node noise of `kind`: `sigma_of` (the
/// float calibration's sigma at a sensitivity) at `sensitivity` under the
/// float sampler; under the discrete one, at the rounded statistic's
/// sensitivity at the result's own lattice
/// ([`crate::privacy::tree_lattice::calibrate`]).
pub fn exact_sigma(
    cfg: &LinearConfig,
    kind: NodeNoise,
    levels: usize,
    sensitivity: f64,
    sigma_of: impl Fn(f64) -> f64,
) -> f64 {
    if cfg.sampler != Sampler::Discrete {
        return sigma_of(sensitivity);
    }
    crate::privacy::tree_lattice::calibrate(kind, cfg.env.d, |s| magnitude(cfg, s, levels), sensitivity, sigma_of)
}
