//! The exact figure of the vector-summation protocol
//! ([`crate::privacy::vecsum`]): a Gaussian-DP parameter mu and a tail
//! probability that together dominate everything the protocol releases
//! about one observation, and `calibration: exact`'s solution for its
//! Binomial trials.
//!
//! **One release.** The observation is one data point v in [-L, L]^C (C =
//! d(d + 1)/2 + d coordinates, the upper triangle of x x^T and x y, clipped)
//! and enters one node per tree level. At level j every coordinate is
//! mapped to w = (v + L) g_j / L, rounded at random to floor(w) or ceil(w),
//! and the shuffler releases the sum over the node's points plus one
//! Binomial(t_j, p) per coordinate (t_j the level's trials). The other
//! points' rounded values are common to both neighbouring histories and
//! independent of the rest, so they are a post-processing; what remains is
//! r + N against r' + N with r, r' the differing point's rounded vectors.
//! Coupling the two roundings through one uniform per coordinate (r_c =
//! floor(w_c + U_c)) and using the joint convexity of the hockey-stick
//! divergence, the release is dominated by the worst shift k = r' - r over
//! the coupling's outcomes: integers with |k_c| <= ceil(|w_c - w'_c|), so
//! (|k_c| - 1)_+ < |w_c - w'_c|, and ||w - w'||_2 <= g_j Delta / L =: G_j
//! where Delta is the L2 sensitivity of the (unclipped) point, which
//! clipping per coordinate does not increase ([`zhou_sensitivity_sq`]'s,
//! a bound for the upper triangle too). Hence ||k||_2 <= G_j + sqrt(C) and
//! |k_c| <= K_j = ceil(min(G_j, 2 g_j)).
//!
//! **A shift of k.** Binomial(t, p) is the sum of k independent
//! Binomial(t_i, p) with t_i >= floor(t / k); Y + k is the same sum with 1
//! added to each part. So (Y + k, Y) is a post-processing of k unit shifts
//! of Binomial(floor(t / k)) (or larger: a larger count is at least as
//! private, see [`crate::privacy::binomial_gdp`]), each dominated by
//! mu_u-GDP up to a tail. A coordinate shifted by k then contributes k
//! mu_u(floor(t / k))^2 <= beta_j k^2 to mu^2, with beta_j = max over 1 <= k
//! <= K_j of mu_u(s(k))^2 / k, s(k) = floor(t / k) rounded down to the grid
//! floor(2^(i/64)) (exact below 4096; capped at 2^40). Over the
//! coordinates mu_j^2 <= beta_j ||k||^2 <= beta_j (G_j + sqrt(C))^2, and the
//! unit shifts number at most ||k||_1 <= C + sqrt(C) G_j, each adding its
//! tail.
//!
//! **The run.** The levels compose (one node each, independent noise and
//! rounding): mu^2 = sum_j mu_j^2, tail = sum of every unit shift's tail;
//! the figure at delta is mu-GDP's at delta - tail ([`gdp_epsilon`]). The
//! tail level eta per unit shift is the largest power of ten from 1e-6 down
//! (1e-6, 1e-8, ..., 1e-16, then 1e-24, 1e-32) that keeps the tail below
//! delta / 1000 (no figure if none does).
//!
//! **Floating point.** The engine rounds a coordinate it computed in
//! doubles: v = fl(x_i x_j) (or fl(x_i y)) within 2^-53 |v| of the real
//! product, clipped (1-Lipschitz), shifted, s = fl(v + L) (2^-52 L), then
//! w = fl(fl(s g_j) / L) (two roundings of a value at most 2 g_j), capped
//! at 2 g_j ([`crate::privacy::vecsum`]); it rounds up when a 53-bit
//! uniform u = i 2^-53 is below w - floor(w), which it does with a
//! probability at most 2^-53 above w - floor(w). So the engine's rounding is
//! the coupled rounding above of a point w^ within s_j = 2^-48 g_j + 2^-52
//! of the real w (2^-49 g_j + 2^-53 suffices), in [0, 2 g_j] up to the
//! last step (its rounded values lie in [0, ceil(2 g_j)]). The figure
//! therefore uses G_j^+ = G_j + 2 sqrt(C) s_j for G_j (the L2 distance of
//! the neighbours' w^, and its L1 distance over sqrt(C)) and K_j =
//! min(ceil(2 g_j), ceil(G_j + 2 s_j)): about 1e-14 relative, invisible in
//! every figure the row prints, and an upper bound on the engine as it
//! computes. The analyzer's doubles are a post-processing of the integer
//! sums. The Binomial draws are integers from `rng::binomial` (BTRD and
//! inversion in doubles); the figure
//! takes their law as Binomial(t, 1/4), and the doubles' deviation from it
//! inside the acceptance tests is not charged (analysis/PRIVACY.md, "Exact
//! bits").
//!
//! For a Gaussian of the same variance the figure would be (G_j + sqrt(C))
//! / sqrt(t_j p (1 - p)) per level: the binomial's excess is mu_u's at the
//! smallest part t_j / K_j, plus the grids' 0.5%: about 1-3% where that part
//! holds 10^4 trials or more (Fig. 2b's sizes: 1.3%), 10% at 10^3 and up to
//! 40% at a few hundred (small counts at large epsilon: the Binomial's tails
//! are heavier than the Gaussian's there, and the decomposition into unit
//! shifts is not tight). The figure stays an upper bound; it is only
//! looser.

use crate::privacy::accountant::{gdp_epsilon, gdp_mu};
use crate::privacy::binomial_gdp::unit_shift_mu;
use crate::privacy::vecsum::VecSum;

/// What the protocol provides about one observation: mu-GDP up to a
/// catastrophe of probability `tail`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dominating {
    /// The Gaussian-DP parameter of the whole run.
    pub mu: f64,
    /// The probability of the dominating pair's catastrophe (spent from
    /// delta).
    pub tail: f64,
}

impl Dominating {
    /// The figure at delta: mu-GDP's epsilon at delta - tail.
    pub fn epsilon(&self, delta: f64) -> f64 {
        gdp_epsilon(self.mu, delta - self.tail)
    }
}

/// The tail levels a unit shift may have, largest first (a larger tail
/// allows a smaller mu).
const ETAS: [f64; 8] = [1e-6, 1e-8, 1e-10, 1e-12, 1e-14, 1e-16, 1e-24, 1e-32];

/// Largest piece size the figure computes (larger counts use it: the
/// bound still holds, looser).
const SIZE_CAP: u64 = 1 << 40;

/// `x` rounded down to the grid floor(2^(i / 64)) (exact below 4096).
fn grid_floor(x: u64) -> u64 {
    let x = x.min(SIZE_CAP);
    if x <= 4096 {
        return x;
    }
    let mut i = (64.0 * (x as f64).log2()).floor() as i32 + 1;
    loop {
        let v = 2f64.powf(f64::from(i) / 64.0).floor() as u64;
        if v <= x {
            return v;
        }
        i -= 1;
    }
}

/// A bound on how far the engine's rounding point lies from the real one,
/// per coordinate at level j (see the module doc, "Floating point"):
/// 2^-48 g_j + 2^-52.
fn float_slack(gj: f64) -> f64 {
    gj * 2f64.powi(-48) + 2f64.powi(-52)
}

/// Level j's spread: (G_j^+, K_j), the bound on the L2 distance of the two
/// neighbours' rounding points with the floating-point slack of both
/// (G_j + 2 sqrt(C) s_j) and the largest shift of one coordinate
/// (min(ceil(2 g_j), ceil(G_j + 2 s_j)), at least 1).
fn spread(proto: &VecSum, gj: f64, sensitivity: f64) -> (f64, u64) {
    let big_g = gj * sensitivity / proto.bound();
    let slack = 2.0 * float_slack(gj);
    let c = proto.coords() as f64;
    let k = (2.0 * gj).ceil().min((big_g + slack).ceil()).max(1.0);
    (big_g + c.sqrt() * slack, k as u64)
}

/// The dominating (mu, tail) of a protocol whose data points have L2
/// sensitivity `sensitivity`, at tail level `eta` per unit shift.
fn dominating_at(proto: &VecSum, sensitivity: f64, eta: f64) -> Dominating {
    let (g, trials, _) = proto.levels_params();
    let c = proto.coords() as f64;
    let (mut mu2, mut tail) = (0.0, 0.0);
    for (&gj, &tj) in g.iter().zip(trials) {
        let (big_g, kmax) = spread(proto, gj, sensitivity);
        // k from the largest (the smallest parts, where the Binomial is
        // furthest from Gaussian) down: a part at least as large as one
        // fitted has at most its mu (more trials are a post-processing), so
        // a size whose bound by the last fitted size cannot raise beta is
        // not fitted. Only this level's own sequence decides (never what an
        // earlier call left in the cache), so the figure is the same in
        // every process, shard and thread count.
        let (mut beta, mut piece_tail) = (0.0f64, 0.0f64);
        let mut last: Option<(u64, f64)> = None;
        for k in (1..=kmax).rev() {
            let s = grid_floor(tj / k);
            if s == 0 {
                return Dominating {
                    mu: f64::INFINITY,
                    tail: f64::INFINITY,
                };
            }
            let kf = k as f64;
            match last {
                Some((ls, m2)) if ls == s => beta = beta.max(m2 / kf),
                Some((_, m2)) if m2 / kf <= beta => {}
                _ => {
                    // The fitted tail of the pruned sizes is at most that
                    // of the last fitted (smaller) size, which is counted.
                    let u = unit_shift_mu(s, eta);
                    let m2 = u.mu * u.mu;
                    beta = beta.max(m2 / kf);
                    piece_tail = piece_tail.max(u.tail);
                    last = Some((s, m2));
                }
            }
        }
        mu2 += beta * (big_g + c.sqrt()).powi(2);
        tail += (c + c.sqrt() * big_g) * piece_tail;
    }
    Dominating { mu: mu2.sqrt(), tail }
}

/// The protocol's figure for data of L2 sensitivity `sensitivity` at
/// `delta`: None where no tail level leaves delta / 1000 or the counts are
/// too small for any mu.
pub fn dominating(proto: &VecSum, sensitivity: f64, delta: f64) -> Option<Dominating> {
    // The unit shifts number at most sum_j (C + sqrt(C) G_j), each with a
    // tail of at most eta / (1 - delta_mu(0)) < 1.62 eta (mu < 1 for any
    // part worth having): start from the largest eta that fits.
    let (g, _, _) = proto.levels_params();
    let c = proto.coords() as f64;
    let pieces: f64 = g
        .iter()
        .map(|&gj| c + c.sqrt() * spread(proto, gj, sensitivity).0)
        .sum();
    ETAS.iter()
        .filter(|&&eta| pieces * 1.62 * eta <= delta / 1000.0)
        .map(|&eta| dominating_at(proto, sensitivity, eta))
        .find(|f| f.mu.is_finite() && f.tail <= delta / 1000.0)
}

/// The most memory [`dominating`] (and, with `exact`, [`exact_tau`] and
/// [`exact_floor`], whose counts reach [`SIZE_CAP`]) allocates for `proto`
/// while it computes figures no cache holds: the unit-shift figure of its
/// largest count at the first tail level it tries.
pub fn work_bytes(proto: &VecSum, sensitivity: f64, delta: f64, exact: bool) -> u64 {
    let (g, trials, _) = proto.levels_params();
    let c = proto.coords() as f64;
    let pieces: f64 = g
        .iter()
        .map(|&gj| c + c.sqrt() * spread(proto, gj, sensitivity).0)
        .sum();
    let Some(&eta) = ETAS.iter().find(|&&eta| pieces * 1.62 * eta <= delta / 1000.0) else {
        return 0;
    };
    let largest = if exact {
        SIZE_CAP
    } else {
        grid_floor(trials.iter().copied().max().unwrap_or(1))
    };
    crate::privacy::binomial_gdp::work_bytes(largest, eta)
}

/// `calibration: exact`: the smallest tau (trials max(1, ceil(tau g_j^2))
/// at level j, [`VecSum::exact`]) whose figure is at most `epsilon` at
/// `delta`, by bisection on tau (the figure falls as tau grows: more trials
/// are a post-processing of fewer) to 1e-4 relative, the upper end
/// returned. `build(tau)` makes the protocol for a tau.
pub fn exact_tau(build: impl Fn(f64) -> VecSum, sensitivity: f64, epsilon: f64, delta: f64) -> f64 {
    // Memoized per (the protocol at tau = 1, sensitivity, target): every
    // batch, accountant and lambda of a cell asks for the same tau.
    let unit = build(1.0);
    let (g, t, n) = unit.levels_params();
    let mut key: Vec<u64> = vec![unit.coords() as u64, unit.bound().to_bits(), sensitivity.to_bits()];
    key.extend([epsilon.to_bits(), delta.to_bits()]);
    key.extend(
        g.iter()
            .map(|v| v.to_bits())
            .chain(t.iter().copied())
            .chain(n.iter().copied()),
    );
    if let Some(tau) = TAU_CACHE
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|m| m.get(&key).copied()))
    {
        return tau;
    }
    let tau = solve_tau(&build, sensitivity, epsilon, delta);
    if let Ok(mut c) = TAU_CACHE.lock() {
        c.get_or_insert_with(std::collections::HashMap::new).insert(key, tau);
    }
    tau
}

/// The least figure `calibration: exact` can reach at `delta`, when it is
/// above `epsilon` (None: the target is reachable): as the Binomial counts
/// grow, every part reaches the largest size the figure computes
/// ([`SIZE_CAP`]), and the bound stops falling there.
pub fn exact_floor(build: impl Fn(f64) -> VecSum, sensitivity: f64, epsilon: f64, delta: f64) -> Option<f64> {
    // tau = 1e30 saturates every count (1e18 trials), so every part is
    // capped: the bound's floor.
    let floor = dominating(&build(1e30), sensitivity, delta).map_or(f64::INFINITY, |f| f.epsilon(delta));
    (floor > epsilon).then_some(floor)
}

type TauCache = Option<std::collections::HashMap<Vec<u64>, f64>>;
static TAU_CACHE: std::sync::Mutex<TauCache> = std::sync::Mutex::new(None);

fn solve_tau(build: &impl Fn(f64) -> VecSum, sensitivity: f64, epsilon: f64, delta: f64) -> f64 {
    let fits = |tau: f64| dominating(&build(tau), sensitivity, delta).is_some_and(|f| f.epsilon(delta) <= epsilon);
    // The Gaussian answer as a start: (G + sqrt(C))^2 / (tau g^2 p q) per
    // level sums to mu^2.
    let proto = build(1.0);
    let (g, _, _) = proto.levels_params();
    let c = proto.coords() as f64;
    let pq = crate::privacy::vecsum::P * (1.0 - crate::privacy::vecsum::P);
    let per_tau: f64 = g
        .iter()
        .map(|gj| (gj * sensitivity / proto.bound() + c.sqrt()).powi(2) / (gj * gj * pq))
        .sum();
    let mu = gdp_mu(epsilon, delta);
    // The Binomial's bound is a few percent above the Gaussian's: bracket
    // from there in small steps (every new tau fits new part sizes).
    let guess = per_tau / (mu * mu);
    let (mut lo, mut hi) = (guess, guess * 1.1);
    while !fits(hi) {
        lo = hi;
        hi *= 1.1;
        if hi > 1e30 {
            return hi;
        }
    }
    while fits(lo) && lo > 1e-30 {
        hi = lo;
        lo *= 0.9;
    }
    while hi - lo > 1e-4 * hi {
        let mid = 0.5 * (lo + hi);
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_rounds_down_finely() {
        for x in [1u64, 4096, 4097, 10_000, 123_456_789, 1 << 45] {
            let v = grid_floor(x);
            assert!(v <= x);
            assert!(
                v as f64 >= (x.min(SIZE_CAP) as f64) / 2f64.powf(1.0 / 64.0) - 1.0,
                "{x} -> {v}"
            );
        }
    }

    #[test]
    fn the_figure_is_near_the_gaussian_of_the_same_variance_and_above_it() {
        // Fig. 2b's level sizes (M = 100, B = 25, T = 10^4: 9 levels) at
        // epsilon 0.2, delta 0.1, d = 10, the authors' constants.
        let proto = VecSum::new(10, 9, 25, 100, 1.0, 0.2, 0.1, 1.0);
        let sens =
            crate::privacy::accountant::zhou_sensitivity_sq(1.0, crate::privacy::accountant::Neighbours::Substitute)
                .sqrt();
        let f = dominating(&proto, sens, 0.1).unwrap();
        let (g, t, _) = proto.levels_params();
        let c: f64 = proto.coords() as f64;
        let gauss: f64 = g
            .iter()
            .zip(t)
            .map(|(gj, &tj)| (gj * sens + c.sqrt()).powi(2) / (tj as f64 * 0.1875))
            .sum::<f64>()
            .sqrt();
        assert!(f.mu >= gauss && f.mu < 1.08 * gauss, "{} vs {gauss}", f.mu);
        assert!(f.tail < 1e-4 && f.tail > 0.0);
    }

    #[test]
    fn a_second_evaluation_from_the_cache_states_the_same_figure() {
        // The tail must be counted when every part size is already fitted,
        // and what other protocols left in the cache (sizes between this
        // one's) must not change the figure: it is a function of the
        // protocol alone.
        let proto = VecSum::exact(4, 5, 5, 10, 1.0, 300.0);
        let sens = 6f64.sqrt();
        let first = dominating(&proto, sens, 1e-3).unwrap();
        for tau in [301.0, 299.5, 420.0] {
            dominating(&VecSum::exact(4, 5, 5, 10, 1.0, tau), sens, 1e-3).unwrap();
        }
        let again = dominating(&proto, sens, 1e-3).unwrap();
        assert_eq!(first, again);
        assert!(again.tail > 0.0);
    }

    #[test]
    fn exact_calibration_meets_the_target_from_below() {
        let sens = 6f64.sqrt();
        for (eps, delta) in [(0.5, 1e-3), (1.0, 1e-3), (4.0, 1e-3)] {
            let build = |tau: f64| VecSum::exact(4, 5, 5, 10, 1.0, tau);
            let tau = exact_tau(build, sens, eps, delta);
            let got = dominating(&build(tau), sens, delta).unwrap().epsilon(delta);
            assert!(got <= eps && got >= 0.99 * eps, "target {eps}: {got}");
        }
    }
}
