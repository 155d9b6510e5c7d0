//! The privacy curves the accountant states its figures with: mu-GDP's
//! (the composition of Gaussian releases, Dong, Roth & Su 2022), the same
//! composed with a pure epsilon-DP release (FedUCB's private schedule, as
//! randomized response), their inversions for a figure at delta and for
//! the noise a target needs, and the figure's text.

/// The standard normal CDF Phi(x), accurate in both tails.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)
}

/// ln Phi(x): from Phi itself where it does not underflow, else from the
/// asymptotic series of the Mills ratio (relative error below 1e-9 for
/// x < -30).
pub fn ln_normal_cdf(x: f64) -> f64 {
    if x > -30.0 {
        return normal_cdf(x).ln();
    }
    let x2 = x * x;
    let series = 1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2);
    -0.5 * x2 - (-x).ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() + series.ln()
}

/// The privacy curve of mu-GDP: the smallest delta for which it is
/// (epsilon, delta)-DP, Phi(-epsilon/mu + mu/2) - e^epsilon
/// Phi(-epsilon/mu - mu/2) (Dong, Roth & Su 2022, Cor. 2.13); the hockey-stick divergence
/// of the pair N(0, 1), N(mu, 1) at e^epsilon for every real epsilon
/// (negative ones too, as [`composed_delta`] needs; mu = 0: the identical
/// pair, (1 - e^epsilon)_+).
pub fn gdp_delta(mu: f64, epsilon: f64) -> f64 {
    if mu <= 0.0 {
        return (-epsilon.exp_m1()).max(0.0);
    }
    let a = normal_cdf(-epsilon / mu + mu / 2.0);
    let b = (epsilon + ln_normal_cdf(-epsilon / mu - mu / 2.0)).exp();
    (a - b).max(0.0)
}

/// The privacy curve of mu-GDP composed with a pure `pure`-DP release
/// (FedUCB's private schedule): pure epsilon-DP is dominated by randomized
/// response with e^epsilon odds (Kairouz, Oh & Viswanath 2015; in f-DP
/// terms its trade-off curve is above f_{epsilon, 0}), and composition
/// preserves dominance (Dong, Roth & Su 2022, Thm 3.2, adaptive), so the
/// pair's curve is that of G_mu x RR_e: with p = e^e / (1 + e^e) the
/// response's privacy loss is +e with probability p and -e otherwise, and
/// delta(E) = p delta_mu(E - e) + (1 - p) delta_mu(E + e): the tightest
/// bound that knows only the release's epsilon (an epsilon-DP release can
/// have exactly randomized response's curve). `pure` = 0 gives
/// [`gdp_delta`].
pub fn composed_delta(mu: f64, pure: f64, epsilon: f64) -> f64 {
    if pure <= 0.0 {
        return gdp_delta(mu, epsilon);
    }
    let p = 1.0 / (1.0 + (-pure).exp());
    (p * gdp_delta(mu, epsilon - pure) + (1.0 - p) * gdp_delta(mu, epsilon + pure)).min(1.0)
}

/// The largest target epsilon a Gaussian mechanism can be calibrated to and
/// its figure stated for: [`composed_epsilon`]'s search covers figures up
/// to 2^21 (above twice this), and the job loader refuses a finite epsilon
/// above it, naming it (an epsilon of 1e7 was written as an infinite
/// figure, and at 1e12 the noise was calibrated for a far smaller one). At
/// 1e6 the noise is already about 1/1400 of the sensitivity.
pub const MAX_EPSILON: f64 = 1e6;

/// Why a target epsilon is refused (above [`MAX_EPSILON`]), for the job
/// loader's message; None where the accountant can calibrate it.
pub fn epsilon_beyond(e: f64) -> Option<String> {
    (e.is_finite() && e > MAX_EPSILON).then(|| {
        format!(
            "= {e} is above {MAX_EPSILON}, the largest epsilon the accountant can calibrate its noise for and state \
             (privacy::gdp::MAX_EPSILON); allowed: a number in (0, {MAX_EPSILON}]"
        )
    })
}

/// The smallest epsilon >= 0 at which mu-GDP is (epsilon, delta)-DP (an
/// upper bound: bisection to 1e-10 relative, the upper end returned).
/// mu = sqrt(sum over the composed Gaussian releases of (Delta_i /
/// sigma_i)^2).
pub fn gdp_epsilon(mu: f64, delta: f64) -> f64 {
    composed_epsilon(mu, 0.0, delta)
}

/// The smallest epsilon >= 0 at which mu-GDP composed with a pure
/// `pure`-DP release is (epsilon, delta)-DP ([`composed_delta`]; an upper
/// bound, bisected to 1e-10 relative, the upper end returned). Never above
/// basic composition's gdp_epsilon(mu, delta) + pure.
pub fn composed_epsilon(mu: f64, pure: f64, delta: f64) -> f64 {
    if mu <= 0.0 && pure <= 0.0 {
        return 0.0;
    }
    epsilon_of(|e| composed_delta(mu, pure, e), delta)
}

/// The smallest epsilon >= 0 at which a privacy curve `curve` (delta as a
/// decreasing function of epsilon) is at most `delta`: bisected to 1e-10
/// relative, the upper end returned; infinite beyond twice
/// [`MAX_EPSILON`].
pub fn epsilon_of(curve: impl Fn(f64) -> f64, delta: f64) -> f64 {
    if curve(0.0) <= delta {
        return 0.0;
    }
    let mut hi = 1.0f64;
    while curve(hi) > delta {
        if hi >= 2.0 * MAX_EPSILON {
            return f64::INFINITY;
        }
        hi *= 2.0;
    }
    let mut lo = 0.0;
    while hi - lo > 1e-10 * hi.max(1e-6) {
        let mid = 0.5 * (lo + hi);
        if curve(mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The mu-GDP parameter `calibration: exact` gives a mechanism whose target
/// is (epsilon, delta): the largest mu whose figure is at most epsilon
/// (1 - 1e-9), by bisection on the privacy curve (delta(epsilon) increases
/// with mu) to 1e-13 relative, the lower end returned. The margin keeps
/// the figure [`gdp_epsilon`] states (bisected to 1e-10, its upper end) at
/// or below the target, and the figure is above 0.99 epsilon wherever
/// epsilon > 0.02 (the curve's slope in mu is bounded away from 0 there).
/// Calibrating Gaussian releases of sensitivities Delta_i to noise
/// sigma_i = sqrt(k) Delta_i / mu (k releases per observation) gives
/// exactly this mu.
pub fn gdp_mu(epsilon: f64, delta: f64) -> f64 {
    composed_mu(epsilon, delta, 0.0)
}

/// [`gdp_mu`] beside a pure `pure`-DP release: the largest mu whose
/// composition with it ([`composed_epsilon`]) is at most epsilon (1 -
/// 1e-9); 0 where the pure release alone reaches the target.
pub fn composed_mu(epsilon: f64, delta: f64, pure: f64) -> f64 {
    let eps = epsilon * (1.0 - 1e-9);
    if composed_delta(0.0, pure, eps) > delta {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while composed_delta(hi, pure, eps) <= delta {
        lo = hi;
        hi *= 2.0;
        if hi > 1e6 {
            return lo;
        }
    }
    while hi - lo > 1e-13 * hi {
        let mid = 0.5 * (lo + hi);
        if composed_delta(mid, pure, eps) <= delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The noise standard deviation `calibration: exact` gives each of the
/// `releases` Gaussian releases of L2 sensitivity `sensitivity` one
/// observation enters, for the target (epsilon, delta): sqrt(releases)
/// sensitivity / [`gdp_mu`], so that the composition's figure is at most
/// the target and at least 0.99 times it.
pub fn exact_sigma(releases: u64, sensitivity: f64, epsilon: f64, delta: f64) -> f64 {
    (releases as f64).sqrt() * sensitivity / gdp_mu(epsilon, delta)
}

/// A figure as text with its delta beside it, so that a near-zero epsilon
/// does not read as perfect privacy ("0.0004 at delta 0.1"); "null" for
/// none.
pub fn fmt_figure(epsilon: Option<f64>, delta: f64) -> String {
    match epsilon {
        Some(e) if delta > 0.0 => format!("{} at delta {delta}", fmt_epsilon(e)),
        Some(e) => format!("{} (pure)", fmt_epsilon(e)),
        None => "null".into(),
    }
}

/// An epsilon with the digits that matter: four decimals from 0.01, three
/// significant digits below (0 exactly as "0").
pub fn fmt_epsilon(e: f64) -> String {
    if e == 0.0 || !e.is_finite() || e >= 0.01 {
        format!("{e:.4}")
    } else {
        format!("{e:.3e}")
    }
}
/// A pure epsilon-DP release composed with the Gaussian ones
/// ([`crate::privacy::accountant::Mechanism::pure`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PureRelease {
    /// Its epsilon.
    pub epsilon: f64,
    /// What it is, in words.
    pub what: String,
    /// Whether it draws exact integer noise on a lattice (`sampler:
    /// discrete`): then a lattice figure of the Gaussian releases keeps its
    /// step; a float Laplace holds over the reals only and nulls it.
    pub on_lattice: bool,
}

impl PureRelease {
    /// A pure release drawn with the float Laplace.
    pub fn float(epsilon: f64, what: &str) -> Self {
        Self {
            epsilon,
            what: what.to_string(),
            on_lattice: false,
        }
    }
}
