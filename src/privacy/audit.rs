//! Empirical privacy audits: run a mechanism's own code many times on two
//! neighbouring inputs, try to tell the outputs apart, and turn the test's
//! error rates into a lower bound on the epsilon the mechanism provides
//! (Jagielski et al. 2020; Nasr et al. 2021).
//!
//! **The bound.** If a mechanism is (epsilon, delta)-DP, every test that
//! says "world 1" on a set S of outputs has, with FPR = P0(S) and
//! FNR = P1(not S), both 1 - FNR <= e^epsilon FPR + delta and
//! 1 - FPR <= e^epsilon FNR + delta. So epsilon is at least
//! ln((1 - delta - FNR) / FPR) and ln((1 - delta - FPR) / FNR). With
//! one-sided Clopper-Pearson upper bounds on FPR and FNR, each at level
//! (1 - confidence) / 2, the larger is a lower bound on the mechanism's
//! epsilon at `delta` with probability at least `confidence` (union bound).
//! A correct accountant's epsilon is below it only with probability
//! 1 - confidence.
//!
//! **The test.** Half of the trials choose the threshold (the one whose
//! bound, computed on those trials, is largest); the other half, fresh,
//! give the counts the bound is computed from, so choosing the threshold
//! does not bias the bound. The statistic is the likelihood ratio where the
//! noise law is known: for Gaussian releases a projection on the data
//! difference weighted by the inverse noise variance (the variance measured
//! from the mechanism's own noise, [`inverse_variance_weights`]); for
//! Laplace releases the sum of |r - mu_0| - |r - mu_1| over the scale.
//!
//! **The views** ([`Harness`]) are subsets of what the mechanism releases
//! (any subset gives a valid lower bound): for the binary-counter tree and
//! the partial sums, the releases after leaves 1, 2, 4, ..., 2^(levels-1)
//! when the neighbouring data sit in leaf 1; each of those releases holds
//! exactly one live node and the nodes are the `levels` nodes that contain
//! leaf 1, so the view holds every noisy node the observation enters (the
//! accountant's composition) and the other leaves carry no information.

use crate::privacy::partial_sum::PartialSum;
use crate::privacy::tree::AgentTrees;
use crate::privacy::vecsum::VecSum;
use crate::rng::{fold_key, fold_more};
use rayon::prelude::*;
use statrs::distribution::{Beta, ContinuousCDF};

/// One-sided upper Clopper-Pearson bound (level 1 - `alpha`) on a binomial
/// proportion with `k` successes in `n` trials: the (1 - alpha) quantile of
/// Beta(k + 1, n - k); 1 when k = n.
pub fn clopper_pearson_upper(k: u64, n: u64, alpha: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    Beta::new(k as f64 + 1.0, (n - k) as f64).map_or(1.0, |b| b.inverse_cdf(1.0 - alpha))
}

/// The lower bound on epsilon at `delta` from a test's false positives `fp`
/// of `n0` world-0 trials and false negatives `fn_` of `n1` world-1 trials,
/// holding with probability `confidence` (see the module docs); 0 when the
/// test shows nothing.
pub fn epsilon_lower_bound(fp: u64, n0: u64, fn_: u64, n1: u64, delta: f64, confidence: f64) -> f64 {
    let a = (1.0 - confidence) / 2.0;
    let fpr = clopper_pearson_upper(fp, n0, a);
    let fnr = clopper_pearson_upper(fn_, n1, a);
    let side = |num: f64, den: f64| if num > 0.0 { (num / den).ln() } else { 0.0 };
    side(1.0 - delta - fnr, fpr).max(side(1.0 - delta - fpr, fnr)).max(0.0)
}

/// What an audit found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AuditOutcome {
    /// Trials per world in the evaluation half.
    pub trials: u64,
    /// Threshold chosen on the calibration half.
    pub threshold: f64,
    /// False positives and negatives of the evaluation half.
    pub false_positives: u64,
    /// False negatives.
    pub false_negatives: u64,
    /// The empirical lower bound on epsilon at the audit's delta.
    pub epsilon_lb: f64,
    /// Its confidence.
    pub confidence: f64,
    /// Distinguishing advantage TPR - FPR of the evaluation half.
    pub advantage: f64,
}

/// Audits a test statistic `stat(trial, world_1)` (larger means "world 1"):
/// trials 0..`trials` calibrate the threshold, `trials`..2 `trials` are
/// evaluated (each trial index once per world). Runs on rayon's pool.
pub fn audit(trials: u64, delta: f64, confidence: f64, stat: impl Fn(u64, bool) -> f64 + Sync) -> AuditOutcome {
    let sample = |from: u64, world: bool| -> Vec<f64> {
        let mut v: Vec<f64> = (from..from + trials).into_par_iter().map(|t| stat(t, world)).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (c0, c1) = (sample(0, false), sample(0, true));
    // Candidate thresholds: quantiles of both calibration samples.
    let mut candidates: Vec<f64> = (0..=400)
        .flat_map(|q| {
            let i = ((q as f64 / 400.0) * (trials.saturating_sub(1)) as f64) as usize;
            [c0.get(i).copied(), c1.get(i).copied()]
        })
        .flatten()
        .collect();
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    let counts = |s0: &[f64], s1: &[f64], tau: f64| {
        let fp = (s0.len() - s0.partition_point(|&v| v <= tau)) as u64;
        let fn_ = s1.partition_point(|&v| v <= tau) as u64;
        (fp, fn_)
    };
    let threshold = candidates
        .iter()
        .map(|&tau| {
            let (fp, fn_) = counts(&c0, &c1, tau);
            (epsilon_lower_bound(fp, trials, fn_, trials, delta, confidence), tau)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(0.0, |(_, tau)| tau);
    let (e0, e1) = (sample(trials, false), sample(trials, true));
    let (fp, fn_) = counts(&e0, &e1, threshold);
    let n = trials.max(1) as f64;
    AuditOutcome {
        trials,
        threshold,
        false_positives: fp,
        false_negatives: fn_,
        epsilon_lb: epsilon_lower_bound(fp, trials, fn_, trials, delta, confidence),
        confidence,
        advantage: (1.0 - fn_ as f64 / n) - fp as f64 / n,
    }
}

/// Inverse-variance weights of a linear (Gaussian likelihood-ratio)
/// statistic: `shift[c] / var[c]` with var[c] the sample variance of
/// coordinate c over `samples` world-0 views drawn by `view` from trial
/// indices far from the audit's (2^62 + s), 0 where the shift is 0.
pub fn inverse_variance_weights(shift: &[f64], samples: u64, view: impl Fn(u64, &mut [f64]) + Sync) -> Vec<f64> {
    let n = shift.len();
    let sums = (0..samples)
        .into_par_iter()
        .fold(
            || (vec![0.0; n], vec![0.0; n], vec![0.0; n]),
            |(mut s, mut s2, mut v), i| {
                view((1 << 62) + i, &mut v);
                for c in 0..n {
                    s[c] += v[c];
                    s2[c] += v[c] * v[c];
                }
                (s, s2, v)
            },
        )
        .map(|(s, s2, _)| (s, s2))
        .reduce(
            || (vec![0.0; n], vec![0.0; n]),
            |(mut a, mut a2), (b, b2)| {
                for c in 0..n {
                    a[c] += b[c];
                    a2[c] += b2[c];
                }
                (a, a2)
            },
        );
    let m = samples as f64;
    (0..n)
        .map(|c| {
            let var = (sums.1[c] - sums.0[c] * sums.0[c] / m) / (m - 1.0);
            if shift[c] == 0.0 || var <= 0.0 {
                0.0
            } else {
                shift[c] / var
            }
        })
        .collect()
}

/// A tree node's noise: fills the node's flat (Gram, bias) noise from its key.
pub type NodeNoise = Box<dyn Fn(&mut [f64], u64) + Send + Sync>;

/// A mechanism's one noisy release: writes the release of `data` with the
/// noise keyed by the key into `out` (the mechanism's own code).
pub type Release = Box<dyn Fn(&[f64], u64, &mut [f64]) + Send + Sync>;

/// A mechanism set up for an audit: neighbouring inputs and the view the
/// test sees.
pub enum Harness {
    /// The binary-counter tree with Gaussian node noise (Private-FedLinUCB's
    /// `ldp`, `alt`, `sdp_amp`; FedUCB's PRIVATIZER): one agent's tree of
    /// `levels` levels, leaf 1 holding `p0` or `p1` (flat d x d Gram then d
    /// bias), later leaves empty; `noise(z, key)` is the mechanism's node
    /// noise (its scale included). View: the upper triangle and bias of the
    /// releases after leaves 1, 2, 4, ....
    GaussianTree {
        /// d.
        d: usize,
        /// Tree levels.
        levels: usize,
        /// Leaf 1 in world 0 and world 1.
        p: [Vec<f64>; 2],
        /// Node noise.
        noise: NodeNoise,
    },
    /// Zhu et al.'s partial sums with Laplace block noise of scale `scale`
    /// (Fed_UCB): one agent's one arm pulled every round of 2^(levels-1),
    /// round 1's observation `x[0]` or `x[1]`, the others 0. View: the
    /// releases after rounds 1, 2, 4, ....
    LaplacePartialSum {
        /// Blocks an observation enters.
        levels: u32,
        /// Laplace scale of each block.
        scale: f64,
        /// Round 1's observation in world 0 and world 1.
        x: [f64; 2],
    },
    /// One Gaussian release of a vector (P-FCB's message (w~, y~) about one
    /// producer in one communication round): data `p[0]` or `p[1]`. View:
    /// the release.
    GaussianRelease {
        /// The data in world 0 and world 1.
        p: [Vec<f64>; 2],
        /// The mechanism.
        release: Release,
    },
    /// The shuffle vector-summation protocol in its tree (`sdp_vecsum`):
    /// batches of `points` points, the first point of batch 1 `(x, y)` of
    /// world 0 or 1, every other point 0. View: the analyzer's outputs
    /// (upper triangle and bias) after batches 1, 2, 4, ....
    VecSum {
        /// The protocol's initial state.
        proto: Box<VecSum>,
        /// Points per batch (B M).
        points: u64,
        /// (x, y) in world 0 and world 1.
        point: [(Vec<f64>, f64); 2],
    },
}

/// Index pairs (i, j), i <= j, of the upper triangle of a d x d matrix,
/// then the d bias entries, as flat indices into a (d x d, d) vector.
fn view_coords(d: usize) -> Vec<usize> {
    let mut c: Vec<usize> = (0..d).flat_map(|i| (i..d).map(move |j| i * d + j)).collect();
    c.extend(d * d..d * d + d);
    c
}

/// The (x x^T, x y) leaf of one observation.
pub fn leaf_of(x: &[f64], y: f64) -> Vec<f64> {
    let d = x.len();
    let mut leaf = vec![0.0; d * d + d];
    for i in 0..d {
        for j in 0..d {
            leaf[i * d + j] = x[i] * x[j];
        }
        leaf[d * d + i] = x[i] * y;
    }
    leaf
}

impl Harness {
    /// What the harness drives, in words: every view runs the engine's own
    /// release code on data the harness assembles (one agent, one
    /// observation in its first leaf or round), not a whole run.
    pub fn source(&self) -> &'static str {
        match self {
            Harness::GaussianTree { .. } => {
                "the engine's tree release (AgentTrees::contribute) with the cell's node noise, on one agent's \
                 leaves assembled by the auditor (the observation in leaf 1)"
            }
            Harness::LaplacePartialSum { .. } => {
                "the engine's partial-sum release (PartialSum) with the cell's Laplace scale, one agent's arm \
                 pulled every round, assembled by the auditor"
            }
            Harness::GaussianRelease { .. } => {
                "the backend's P-FCB message (p_fcb_message, or p_fcb_lattice_message under sampler: discrete) for \
                 one producer in round 1, assembled by the auditor"
            }
            Harness::VecSum { .. } => {
                "the engine's vector-summation protocol (VecSum) with the cell's parameters, one agent's points \
                 assembled by the auditor"
            }
        }
    }

    /// The audit statistic of trial `trial` (noise keyed by `key` and the
    /// trial) in world 1 or 0, given the linear statistic's weights.
    fn stat(&self, key: u64, trial: u64, world: bool, weights: &[f64]) -> f64 {
        match self {
            Harness::LaplacePartialSum { levels, scale, x } => {
                let k = fold_more(key, trial);
                let mut ps = PartialSum::default();
                let mut s = 0.0;
                let x_w = x[usize::from(world)];
                for t in 1..=1u64 << (levels - 1) {
                    ps.push(t, Some(if t == 1 { x_w } else { 0.0 }));
                    if t.is_power_of_two() {
                        // The likelihood ratio of the real-valued mechanism,
                        // on the release rounded to 2^-20: the test looks at
                        // the noise law, not at the floating-point low bits
                        // (which do differ between the worlds: Mironov 2012).
                        let r = (ps.release(t, k, *scale) * 1048576.0).round() / 1048576.0;
                        s += ((r - x[0]).abs() - (r - x[1]).abs()) / scale;
                    }
                }
                s
            }
            _ => {
                let mut v = vec![0.0; weights.len()];
                self.linear_view(key, trial, world, &mut v);
                v.iter().zip(weights).map(|(a, w)| a * w).sum()
            }
        }
    }

    /// The selected releases of a tree-shaped mechanism (see the variants).
    fn linear_view(&self, key: u64, trial: u64, world: bool, out: &mut [f64]) {
        match self {
            Harness::GaussianTree { d, levels, p, noise } => {
                let coords = view_coords(*d);
                let width = d * d + d;
                let mut trees = AgentTrees::with_keys(vec![fold_more(key, trial)], width, *levels);
                let (zero, mut rel) = (vec![0.0; width], vec![0.0; width]);
                let mut at = 0;
                for k in 1..=1u64 << (levels - 1) {
                    rel.fill(0.0);
                    let leaf = if k == 1 { &p[usize::from(world)] } else { &zero };
                    // Sized for the leaves given: never full.
                    let _ = trees.contribute(0, leaf, &mut rel, |z, nk| noise(z, nk));
                    if k.is_power_of_two() {
                        for &c in &coords {
                            out[at] = rel[c];
                            at += 1;
                        }
                    }
                }
            }
            Harness::VecSum { proto, points, point } => {
                let d = point[0].0.len();
                let coords = view_coords(d);
                let mut vs = proto.clone();
                let agent = fold_key(&[key, trial, 0]);
                let shuffler = fold_key(&[key, trial, 1]);
                let mut index = 0u64;
                let (zx, mut rel) = (vec![0.0; d], vec![0.0; d * d + d]);
                let (x, y) = &point[usize::from(world)];
                let mut at = 0;
                for batch in 1..=1u64 << (proto.levels() - 1) {
                    for i in 0..*points {
                        index += 1;
                        if batch == 1 && i == 0 {
                            vs.add_point(x, *y, fold_more(agent, index));
                        } else {
                            vs.add_point(&zx, 0.0, fold_more(agent, index));
                        }
                    }
                    rel.fill(0.0);
                    vs.close_batch(shuffler, &mut rel);
                    if batch.is_power_of_two() {
                        for &c in &coords {
                            out[at] = rel[c];
                            at += 1;
                        }
                    }
                }
            }
            Harness::GaussianRelease { p, release } => release(&p[usize::from(world)], fold_more(key, trial), out),
            Harness::LaplacePartialSum { .. } => {}
        }
    }

    /// Length of the linear view and its mean shift between the worlds.
    fn shift(&self) -> Vec<f64> {
        let (d, levels, p) = match self {
            Harness::GaussianTree { d, levels, p, .. } => (*d, *levels, [p[0].clone(), p[1].clone()]),
            Harness::VecSum { proto, point, .. } => (
                point[0].0.len(),
                proto.levels(),
                [leaf_of(&point[0].0, point[0].1), leaf_of(&point[1].0, point[1].1)],
            ),
            Harness::GaussianRelease { p, .. } => return p[1].iter().zip(&p[0]).map(|(a, b)| a - b).collect(),
            Harness::LaplacePartialSum { .. } => return Vec::new(),
        };
        let coords = view_coords(d);
        (0..levels)
            .flat_map(|_| coords.iter().map(|&c| p[1][c] - p[0][c]))
            .collect()
    }

    /// Audits the mechanism with `trials` trials per world and half
    /// (noise keyed by `key`), at `delta` and `confidence`.
    pub fn run(&self, key: u64, trials: u64, delta: f64, confidence: f64) -> AuditOutcome {
        let shift = self.shift();
        let weights = if shift.is_empty() {
            Vec::new()
        } else {
            let wkey = fold_key(&[key, 1]);
            inverse_variance_weights(&shift, 4096, |t, v| self.linear_view(wkey, t, false, v))
        };
        audit(trials, delta, confidence, |t, w| self.stat(key, t, w, &weights))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clopper_pearson_matches_closed_forms() {
        // k = 0: the upper bound solves (1 - p)^n = alpha.
        let p = clopper_pearson_upper(0, 1000, 0.01);
        assert!((p - (1.0 - 0.01f64.powf(1.0 / 1000.0))).abs() < 1e-12, "{p}");
        // k = n - 1: 1 - p^n ... the (1 - alpha) quantile of Beta(n, 1) is
        // (1 - alpha)^(1/n).
        let p = clopper_pearson_upper(9, 10, 0.05);
        assert!((p - 0.95f64.powf(0.1)).abs() < 1e-12, "{p}");
        assert_eq!(clopper_pearson_upper(10, 10, 0.05), 1.0);
    }

    #[test]
    fn the_bound_follows_the_hypothesis_testing_inequality() {
        // No errors in 10^5 trials each: FPR, FNR <= 1 - 0.0025^(1e-5)
        // (5.99e-5), so epsilon >= ln((1 - 0.1 - 5.99e-5) / 5.99e-5).
        let u = 1.0 - 0.0025f64.powf(1e-5);
        let want = ((1.0 - 0.1 - u) / u).ln();
        let got = epsilon_lower_bound(0, 100_000, 0, 100_000, 0.1, 0.995);
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        // A coin flip shows nothing.
        assert_eq!(epsilon_lower_bound(50_000, 100_000, 50_000, 100_000, 0.0, 0.99), 0.0);
    }

    /// Randomized response with parameter epsilon has exactly
    /// FPR = FNR = 1 / (1 + e^eps): the audit's bound is below eps, and
    /// within 0.1 of it with 10^5 trials.
    #[test]
    fn the_audit_is_nearly_tight_on_randomized_response() {
        let eps: f64 = 1.5;
        let keep = eps.exp() / (1.0 + eps.exp());
        let out = audit(100_000, 0.0, 0.99, |t, w| {
            let u = crate::rng::uniform_at(fold_key(&[9, u64::from(w)]), t);
            let bit = if u < keep { w } else { !w };
            f64::from(u8::from(bit))
        });
        assert!(out.epsilon_lb <= eps && out.epsilon_lb > eps - 0.1, "{out:?}");
    }
}
