//! The privacy accountant: what a private run
//! actually provides, next to the target (epsilon, delta) the user asked for.
//! Every figure it writes is an upper bound on the privacy loss of the
//! released view, or null with the reason in [`Accounting::warnings`].
//!
//! **Neighbouring relation** ([`Neighbours`]): two histories of one agent
//! differing in one (x, y) observation, either by adding or removing it
//! (`add_remove`) or by replacing it with another (`substitute`, the relation
//! Zhou & Chowdhury's slides define: "a sequence of T users that differs in
//! only one user"). Sensitivities assume ||x|| <= L and |y| <= 1; where the
//! environment's rewards are unbounded and nothing clips them (linear_sphere's
//! Gaussian rewards), no finite sensitivity exists and every figure but the
//! noise multiplier is null.
//!
//! For every Gaussian tree mechanism an observation enters exactly one node
//! per tree level, so it touches `levels` noisy releases. Per node:
//! * Private-FedLinUCB (ldp, alt, sdp_amp): the node adds (Z + Z^T)/2 to the
//!   Gram sum and N(0, sigma^2) to the bias sum; over the upper-triangle
//!   parameters this is a Gaussian mechanism with Delta^2 = ||x x^T||_F^2 +
//!   ||x y||^2 <= L^4 + L^2 (add/remove) or ||x x^T - x' x'^T||_F^2 +
//!   ||x y - x' y'||^2 <= 2 L^4 + 4 L^2 (substitute). For sdp_amp the view
//!   is each agent's message (the shuffler hides only the sender): the
//!   per-message noise sigma, not the sum's sigma sqrt(M).
//! * FedUCB's PRIVATIZER: Q = [x; y][x; y]^T plus (N_hat + N_hat^T)/sqrt(2):
//!   Delta = ||Q||_F <= L^2 + 1 (add/remove), sqrt(2) (L^2 + 1) (substitute).
//!
//! zCDP composes additively: rho = levels x Delta^2 / (2 sigma^2), and
//! epsilon = rho + 2 sqrt(rho log(1/delta)) at the job's delta (Bun & Steinke
//! 2016, Prop. 1.3). Mechanisms whose noise is not Gaussian (the
//! vector-summation protocol's Binomial noise) have no zCDP pair.
//!
//! **The exact figure** ([`Accounting::epsilon`], the `acct_epsilon`
//! column) is the tightest upper bound the accountant can justify for the
//! mechanisms as run. A composition of Gaussian mechanisms with
//! sensitivities Delta_i and noise sigma_i is exactly mu-GDP with mu^2 =
//! sum (Delta_i / sigma_i)^2 (Dong, Roth & Su 2022, Cor. 3.3; adaptive
//! composition included), whose privacy curve is delta(epsilon) =
//! Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2) (their Cor.
//! 2.13, the analytic Gaussian mechanism of Balle & Wang 2018): the figure is
//! the smallest epsilon with delta(epsilon) <= delta ([`gdp_epsilon`]),
//! computed by bisection and rounded up. For k Laplace releases of scale b
//! and sensitivity Delta (the gossip family's partial sums) the pure-DP
//! epsilon k Delta / b is exact (the privacy loss reaches it with positive
//! probability). The vector-summation protocol's Binomial noise is
//! dominated by mu-GDP up to a small tail probability, computed numerically
//! ([`crate::privacy::vecsum_account`]); its figure is mu-GDP's at delta
//! minus that tail. The zCDP conversion and basic composition stay
//! as their own, looser columns.
//!
//! The claimed figure ([`PaperClaim`], the `paper_claimed_epsilon` column) is
//! what the paper's own theorem claims for the noise actually used: for
//! Private-FedLinUCB the slides' Theorem 1 solved for epsilon; for
//! calibrations that follow their paper's formula, the target; null where no
//! stated theorem covers the configuration or its preconditions fail (a
//! warning names them). It is a claim, not a bound: where it is below
//! `acct_epsilon` the paper's argument does not hold for this configuration.
//!
//! **Reals, not doubles.** Every figure of a floating-point sampler
//! (`sampler: float`) is for the mechanism over the real numbers, the
//! convention of the papers and of DP libraries' analyses. Its low-order
//! bits can differ between neighbouring inputs (Mironov 2012): most float
//! Laplace releases cannot come from the neighbour at all
//! ([`crate::privacy::bits`], `fedbandits audit --bits`). A mechanism on the
//! lattice with exact integer noise ([`crate::privacy::lattice`], `sampler:
//! discrete`) has figures that hold for the bits released, and says so
//! ([`Accounting::lattice_step`]).
//!
//! The accountant knows no algorithm: each private algorithm describes what
//! it releases as a [`Mechanism`] (`algo::linear::mechanism`), and the
//! accountant turns that description into the figures.

pub use super::gdp::*;
pub use super::sensitivity::{Neighbours, dubey_sensitivity, zhou_sensitivity_sq};

/// What every figure leaves out, said once: the figures treat the other
/// observations and the agent's later actions as fixed data. In a bandit a
/// changed observation changes the agent's later estimates, so its later
/// actions and their contributions change too (an adaptive adversary changed
/// 25 of 25 later batch terms of Private-FedLinUCB in a toy run); no figure
/// here is shown to hold for that adaptive relation.
pub const NON_ADAPTIVE: &str = "every other observation and every later action held fixed (the non-adaptive \
     relation); not shown to hold when the change also changes the agent's later actions (adaptive relation)";

/// Solves the slides' Theorem 1 calibration sigma^2 = 8 kappa (log(2/delta) +
/// epsilon) / epsilon^2 (unit sensitivity) for epsilon: the positive root of
/// sigma^2 epsilon^2 - 8 kappa epsilon - 8 kappa log(2/delta) = 0.
pub fn zhou_theorem1_epsilon(sigma: f64, kappa: f64, delta: f64) -> f64 {
    let s2 = sigma * sigma;
    let c = 8.0 * kappa * (2.0 / delta).ln();
    (8.0 * kappa + (64.0 * kappa * kappa + 4.0 * s2 * c).sqrt()) / (2.0 * s2)
}

/// The precondition of amplification by shuffling (Feldman, McMillan &
/// Talwar 2021, Thm 3.1, the result the slides cite): n messages of an
/// epsilon_0-DP randomizer are amplified only when epsilon_0 <= ln(n / (16
/// ln(2/delta))). None when it holds, else the violated condition in words.
pub fn amplification_precondition(epsilon0: f64, n: u64, delta: f64) -> Option<String> {
    let limit = (n as f64 / (16.0 * (2.0 / delta).ln())).ln();
    (epsilon0.is_nan() || epsilon0 > limit).then(|| {
        format!(
            "amplification by shuffling needs each message's epsilon_0 <= ln(M / (16 ln(2/delta))) = {limit:.3} \
             (M = {n}, delta = {delta}); each message here is {epsilon0:.3e}-DP at that delta"
        )
    })
}

/// rho of a Gaussian mechanism with L2 sensitivity `sensitivity` and noise
/// standard deviation `sigma`: Delta^2 / (2 sigma^2).
pub fn gaussian_rho(sensitivity: f64, sigma: f64) -> f64 {
    sensitivity * sensitivity / (2.0 * sigma * sigma)
}

/// (epsilon, delta)-DP implied by rho-zCDP: rho + 2 sqrt(rho log(1/delta)).
pub fn zcdp_epsilon(rho: f64, delta: f64) -> f64 {
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

/// What a configuration's mechanism provides.
#[derive(Clone, Debug, PartialEq)]
pub struct Accounting {
    /// Noisy releases one observation touches.
    pub releases_per_observation: u64,
    /// Noise standard deviation over L2 sensitivity, per release (None:
    /// no finite sensitivity).
    pub noise_multiplier: Option<f64>,
    /// The L2 sensitivity of each release to one observation under the
    /// relation, the one the noise multiplier divides by
    /// (`acct_sensitivity`): with the noise multiplier, the release count
    /// and the relation, every Gaussian figure can be recomputed from the
    /// row. Where rewards are unbounded it is the sensitivity at |y| <= 1,
    /// which no figure can use.
    pub sensitivity: Option<f64>,
    /// The tightest upper bound on epsilon the accountant can justify (at
    /// the target delta; pure DP for the Laplace mechanisms) for everything
    /// the agent releases; the `acct_epsilon` column. None: no bound
    /// (`epsilon_null` says why).
    pub epsilon: Option<f64>,
    /// Why `epsilon` is null (None where it is not).
    pub epsilon_null: Option<String>,
    /// The mu-GDP parameter of the whole run, mu = sqrt(sum (Delta_i /
    /// sigma_i)^2) over the Gaussian releases one observation enters; the
    /// `acct_mu` column (None: not Gaussian, or `epsilon` is null).
    pub mu: Option<f64>,
    /// The exact figure of the noisy statistics alone where the agent also
    /// releases something no figure covers (FedUCB's data-dependent sync
    /// schedule); the `acct_epsilon_sums` column. Not a bound on the run.
    pub epsilon_sums: Option<f64>,
    /// What the paper's own theorem claims for the noise used (None: no
    /// theorem applies; see `warnings`). A claim, not a bound.
    pub paper_claimed: Option<f64>,
    /// Total rho (zCDP), where the accountant can state it.
    pub rho: Option<f64>,
    /// epsilon at the target delta from rho.
    pub epsilon_zcdp: Option<f64>,
    /// Pure (delta = 0) epsilon by basic composition, for Laplace
    /// mechanisms (the gossip family's partial sums).
    pub epsilon_pure: Option<f64>,
    /// (epsilon, delta) by basic composition of per-release guarantees.
    pub basic: Option<(f64, f64)>,
    /// The neighbouring relation of the figures (None: the family's own,
    /// stated in its docs).
    pub neighbours: Option<Neighbours>,
    /// What a neighbour is for this mechanism, in words, and whether the
    /// figures hold when the change adapts the agent's later actions
    /// ([`NON_ADAPTIVE`]); written to the Parquet metadata.
    pub relation: String,
    /// Why a figure is null, or a precondition that fails.
    pub warnings: Vec<String>,
    /// The lattice step of a mechanism that releases lattice points with
    /// exact integer noise (`sampler: discrete`,
    /// [`crate::privacy::lattice`]): its figures hold for the bits
    /// released. None: a floating-point sampler, whose figures hold over
    /// the reals only.
    pub lattice_step: Option<f64>,
    /// The probability spent from delta before the Gaussian-DP figure
    /// (`acct_tail`): the vector-summation protocol's Binomial noise is
    /// dominated by `mu`-GDP up to it, so `epsilon` is mu-GDP's at delta -
    /// tail. None elsewhere.
    pub tail: Option<f64>,
    /// The per-level Binomial counts the vector-summation protocol's figure
    /// is computed from (`acct_binomial_trials`; level 0 first). None
    /// elsewhere.
    pub binomial_trials: Option<Vec<u64>>,
    /// The pure epsilon-DP release composed with the Gaussian releases
    /// (`acct_epsilon_composed`: FedUCB's private schedule), by
    /// [`composed_epsilon`] with the sums' mu (sqrt(releases) / noise
    /// multiplier). None where there is none.
    pub pure_part: Option<f64>,
}

/// Why every figure of a cell that draws no noise is null
/// ([`Accounting::without_noise`]).
pub const NO_NOISE: &str = "noise: false draws no noise: the cell releases its statistics exactly and provides no \
     differential privacy (it measures the private algorithm's cost apart from its noise)";

impl Accounting {
    /// The accounting of the same mechanism run without its noise (`noise:
    /// false`): every figure null with [`NO_NOISE`] as the reason, the
    /// noise multiplier 0, no lattice step (no noise is drawn on one); the
    /// releases, sensitivity and relation kept.
    pub fn without_noise(self) -> Self {
        Self {
            noise_multiplier: Some(0.0),
            epsilon: None,
            epsilon_null: Some(NO_NOISE.to_string()),
            mu: None,
            epsilon_sums: None,
            paper_claimed: None,
            rho: None,
            epsilon_zcdp: None,
            epsilon_pure: None,
            basic: None,
            warnings: vec![format!("every privacy figure is null: {NO_NOISE}")],
            lattice_step: None,
            ..self
        }
    }

    /// A per-horizon figure by output column name, where the accountant
    /// states one per point as well (`acct_epsilon_basic`,
    /// `acct_delta_basic`: basic composition).
    pub fn figure(&self, column: &str) -> Option<f64> {
        match column {
            "acct_epsilon_basic" => self.basic.map(|b| b.0),
            "acct_delta_basic" => self.basic.map(|b| b.1),
            _ => None,
        }
    }
}

/// How an algorithm's noise enters the releases, as the algorithm states it.
#[derive(Clone, Debug, PartialEq)]
pub enum NoiseModel {
    /// Gaussian node noise: the observer's view of each node adds noise of
    /// standard deviation `sigma` per parameter to a statistic of L2
    /// sensitivity `sensitivity` (one observation).
    Gaussian {
        /// Noise standard deviation in the observer's view.
        sigma: f64,
        /// L2 sensitivity of the node's statistic to one observation.
        sensitivity: f64,
    },
    /// Noise dominated by mu-GDP up to a catastrophe of probability `tail`
    /// (the vector-summation protocol's Binomial noise,
    /// [`crate::privacy::vecsum_account`]), for the whole run: the figure
    /// is mu-GDP's at delta - tail (`acct_mu` and `acct_tail`); no
    /// zCDP pair.
    Dominated {
        /// The dominating Gaussian-DP parameter of the whole run.
        mu: f64,
        /// The catastrophe's probability, spent from delta.
        tail: f64,
        /// The Binomial counts per level (what the figure is computed from).
        trials: Vec<u64>,
        /// The noise's standard deviation per parameter (as added).
        sigma: f64,
        /// L2 sensitivity.
        sensitivity: f64,
    },
    /// Noise this accountant has no figure for; the noise multiplier is
    /// still reported.
    Unaccounted {
        /// The noise's standard deviation per parameter (as added).
        sigma: f64,
        /// L2 sensitivity.
        sensitivity: f64,
        /// Why no figure.
        why: String,
    },
}

/// What the paper's own theorem says about the noise used.
#[derive(Clone, Debug, PartialEq)]
pub enum PaperClaim {
    /// The calibration follows the paper's formula, whose theorem claims the
    /// target.
    Target,
    /// The slides' Theorem 1 (unit sensitivity) solved for epsilon with the
    /// noise `unit_sigma` (sigma over the sensitivity ratio to L = 1).
    ZhouTheorem1 {
        /// kappa = 1 + log(T/B).
        kappa: f64,
        /// sigma per unit of the theorem's sensitivity.
        unit_sigma: f64,
    },
    /// The paper's own argument, applied to the noise actually used, gives
    /// this epsilon (computed by the algorithm that states it).
    Value(f64),
    /// No stated theorem covers this configuration (why).
    Unavailable(String),
}

/// What a private algorithm releases about one observation.
#[derive(Clone, Debug, PartialEq)]
pub struct Mechanism {
    /// Noisy releases (tree nodes) one observation enters.
    pub releases_per_observation: u64,
    /// Noise of each release.
    pub noise: NoiseModel,
    /// The target (epsilon, delta) the user asked for.
    pub target: (f64, f64),
    /// The paper's claim for this noise.
    pub paper: PaperClaim,
    /// (epsilon, delta) by basic composition of the releases' own
    /// guarantees, where the algorithm states one (P-FCB: the sum over its
    /// communication rounds of each message's exact epsilon).
    pub basic: Option<(f64, f64)>,
    /// The neighbouring relation of the sensitivity.
    pub neighbours: Neighbours,
    /// The relation in words ([`Accounting::relation`]).
    pub relation: String,
    /// Why the sensitivity does not exist (unbounded, unclipped rewards):
    /// then every figure but the noise multiplier is null.
    pub unbounded: Option<String>,
    /// Other warnings the algorithm states (preconditions).
    pub warnings: Vec<String>,
    /// What the agent releases beyond the noisy statistics that depends on
    /// its data and that no figure covers (FedUCB's determinant-test sync
    /// schedule): then every figure of the run is null and the exact figure
    /// of the statistics alone is `epsilon_sums`.
    pub uncovered: Option<String>,
    /// A pure epsilon-DP release composed with the Gaussian ones (FedUCB's
    /// private schedule, the sparse vector technique): (epsilon, what). The run's
    /// figure is the Gaussian part's at delta plus epsilon (basic
    /// composition of (e1, delta)- and (e2, 0)-DP), its zCDP rho gains
    /// epsilon^2 / 2 (pure DP implies that zCDP, Bun & Steinke 2016, Prop.
    /// 1.4), and it has no mu (not Gaussian-DP).
    pub pure: Option<PureRelease>,
    /// Gaussian releases drawn on a lattice with exact discrete Gaussian
    /// noise (`sampler: discrete`): the figure is the lattice bound
    /// ([`crate::privacy::lattice_gdp`]) at the noise's mu, whose
    /// sensitivity the algorithm states for the rounded statistic. None: a
    /// float sampler.
    pub lattice: Option<LatticeGaussian>,
}

/// The lattice of Gaussian releases ([`Mechanism::lattice`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatticeGaussian {
    /// The lattice step.
    pub step: f64,
    /// The smallest per-entry noise variance, in steps^2.
    pub min_sigma2: f64,
    /// Entries each release draws.
    pub entries: u64,
}

/// The paper's epsilon for `m` (null with a warning where the paper gives
/// none), warning where it is below what the mechanism provides
/// (`epsilon`) and where basic composition's delta guarantees nothing.
fn paper_claim(m: &Mechanism, epsilon: Option<f64>, warnings: &mut Vec<String>) -> Option<f64> {
    let delta = m.target.1;
    let paper = match &m.paper {
        PaperClaim::Target => Some(m.target.0),
        PaperClaim::Value(e) => Some(*e),
        PaperClaim::ZhouTheorem1 { kappa, unit_sigma } => Some(zhou_theorem1_epsilon(*unit_sigma, *kappa, delta)),
        PaperClaim::Unavailable(why) => {
            warnings.push(format!("paper_claimed_epsilon is null: {why}"));
            None
        }
    };
    if let (Some(claim), Some(e)) = (paper, epsilon)
        && claim < e * (1.0 - 1e-9)
    {
        warnings.push(format!(
            "the paper's claim ({claim:.4}) is below what the mechanism provides ({e:.4}, acct_epsilon): its \
             argument does not hold here"
        ));
    }
    if let Some((e, d)) = m.basic
        && d >= 1.0
    {
        warnings.push(format!(
            "basic composition gives ({e:.3}, {d:.3}): delta >= 1 guarantees nothing"
        ));
    }
    paper
}

/// The discrete Gaussian's bound on the lattice and its step, where a
/// mechanism's Gaussian releases are drawn there (`sampler: discrete`).
fn lattice_curve(m: &Mechanism, mu: Option<f64>) -> Option<(super::lattice_gdp::LatticeCurve, f64)> {
    match (&m.lattice, &m.noise, mu) {
        (Some(l), NoiseModel::Gaussian { .. }, Some(mu)) => Some((
            super::lattice_gdp::LatticeCurve::new(mu, l.min_sigma2, (l.entries * m.releases_per_observation) as f64),
            l.step,
        )),
        _ => None,
    }
}

/// What a lattice figure says about itself.
fn lattice_warning(c: &super::lattice_gdp::LatticeCurve, step: f64) -> String {
    format!(
        "sampler: discrete: the releases are lattice points (step {step:e}) with exact discrete Gaussian noise; \
         acct_epsilon is the discrete mechanism's bound (privacy::lattice_gdp: mu-GDP's at acct_mu widened by eta \
         = {:.1e}), and acct_sensitivity is that of the statistic on the lattice (rounded to it where it is not \
         already a lattice point)",
        c.eta
    )
}

impl Accounting {
    /// Composes the Gaussian releases (mu-GDP, or the lattice bound
    /// `curve`) with a pure `e`-DP release (`what`) by their privacy loss
    /// distributions; the sums' own figure becomes `epsilon_sums`.
    fn compose_pure(
        &mut self,
        pure: &PureRelease,
        delta: f64,
        mu: Option<f64>,
        curve: Option<super::lattice_gdp::LatticeCurve>,
    ) {
        let (e, what) = (pure.epsilon, pure.what.as_str());
        let gaussian = self.epsilon;
        self.epsilon = match curve {
            Some(c) => Some(c.epsilon(e, delta)),
            None => mu.map(|mu| composed_epsilon(mu, e, delta)),
        };
        if curve.is_some() && !pure.on_lattice {
            self.warnings.push(format!(
                "{what} draws floating-point Laplace noise: acct_epsilon holds over the reals for it, so \
                 acct_lattice_step is null though the sums are lattice points"
            ));
        }
        self.rho = self.rho.map(|r| r + e * e / 2.0);
        self.epsilon_zcdp = self.rho.map(|r| zcdp_epsilon(r, delta));
        self.epsilon_sums = gaussian;
        self.mu = None;
        self.pure_part = Some(e);
        self.warnings.push(format!(
            "acct_epsilon composes the Gaussian releases (mu-GDP; acct_epsilon_sums alone: {}) with {what} \
             ({e:.4}-DP) by their privacy loss distributions (summing the two gives {}); acct_mu is null (not \
             Gaussian-DP)",
            fmt_figure(gaussian, delta),
            fmt_figure(gaussian.map(|g| g + e), delta)
        ));
    }
}

/// The accounting of a mechanism: the exact figure (mu-GDP of the composed
/// Gaussian releases, mu = sqrt(releases) Delta / sigma, at the target
/// delta); rho = releases x rho_node (zCDP composition) and its epsilon;
/// the algorithm's basic composition; the paper's claim.
pub fn account(m: &Mechanism) -> Accounting {
    let (_, delta) = m.target;
    let levels = m.releases_per_observation;
    let mut warnings = m.warnings.clone();
    let mut null = None;
    let mut dominated = None;
    let mut binomial_trials = None;
    let (sigma, sens, rho, mu) = match &m.noise {
        NoiseModel::Gaussian { sigma, sensitivity } => (
            *sigma,
            *sensitivity,
            Some(levels as f64 * gaussian_rho(*sensitivity, *sigma)),
            Some((levels as f64).sqrt() * sensitivity / sigma),
        ),
        NoiseModel::Dominated {
            mu,
            tail,
            trials,
            sigma,
            sensitivity,
        } => {
            dominated = Some((*mu, *tail));
            binomial_trials = Some(trials.clone());
            warnings.push(format!(
                "acct_epsilon is {mu:.4}-GDP's at delta - {tail:.2e}: the Binomial noise is dominated by \
                 Gaussian-DP up to that tail (privacy::vecsum_account): acct_mu is that mu and acct_tail that tail; \
                 acct_epsilon_zcdp and acct_rho_zcdp are null (not Gaussian)"
            ));
            (*sigma, *sensitivity, None, Some(*mu))
        }
        NoiseModel::Unaccounted {
            sigma,
            sensitivity,
            why,
        } => {
            null = Some(why.clone());
            (*sigma, *sensitivity, None, None)
        }
    };
    let curve = lattice_curve(m, mu);
    let epsilon = match (dominated, curve) {
        (Some((mu, tail)), _) => Some(gdp_epsilon(mu, delta - tail)),
        (None, Some((c, _))) => Some(c.epsilon(0.0, delta)),
        (None, None) => mu.map(|mu| gdp_epsilon(mu, delta)),
    };
    if let Some((c, step)) = curve {
        warnings.push(lattice_warning(&c, step));
    }
    let paper = paper_claim(m, epsilon, &mut warnings);
    let mut a = Accounting {
        releases_per_observation: levels,
        noise_multiplier: Some(sigma / sens),
        sensitivity: Some(sens),
        epsilon,
        epsilon_null: None,
        mu,
        epsilon_sums: None,
        paper_claimed: paper,
        rho,
        epsilon_zcdp: rho.map(|r| zcdp_epsilon(r, delta)),
        epsilon_pure: None,
        basic: m.basic,
        neighbours: Some(m.neighbours),
        relation: m.relation.clone(),
        warnings,
        lattice_step: curve
            .filter(|_| m.pure.as_ref().is_none_or(|p| p.on_lattice))
            .map(|(_, step)| step),
        tail: dominated.map(|(_, tail)| tail),
        binomial_trials,
        pure_part: None,
    };
    if let Some(pure) = &m.pure {
        a.compose_pure(pure, delta, mu, curve.map(|(c, _)| c));
    }
    if let Some(what) = &m.uncovered {
        a.epsilon_sums = a.epsilon;
        null = Some(format!(
            "{what}, and no figure covers it (acct_epsilon_sums is the exact figure of the noisy sums alone, \
             which a released schedule can beat; `fedbandits audit` measures it)"
        ));
        a.clear_run_figures();
    }
    if let Some(why) = &m.unbounded {
        null = Some(format!("no privacy figure holds: {why}"));
        a.clear_run_figures();
        a.epsilon_sums = None;
        a.paper_claimed = None;
        a.basic = None;
    }
    if let Some(why) = null {
        a.warnings.push(format!("acct_epsilon is null: {why}"));
        a.epsilon_null = Some(why);
    }
    a
}

impl Accounting {
    /// Nulls every figure that claims to cover the whole run (the exact
    /// figure, mu, the zCDP pair).
    fn clear_run_figures(&mut self) {
        self.epsilon = None;
        self.mu = None;
        self.rho = None;
        self.epsilon_zcdp = None;
    }
}

/// A Gaussian mechanism of `levels` releases at the target (1, 0.1),
/// add/remove, nothing else stated: a fixture of the tests.
#[cfg(test)]
pub(crate) fn gaussian_mechanism(levels: u64, sigma: f64, sensitivity: f64) -> Mechanism {
    Mechanism {
        releases_per_observation: levels,
        noise: NoiseModel::Gaussian { sigma, sensitivity },
        target: (1.0, 0.1),
        paper: PaperClaim::Target,
        basic: None,
        neighbours: Neighbours::AddRemove,
        relation: String::new(),
        unbounded: None,
        warnings: Vec::new(),
        uncovered: None,
        pure: None,
        lattice: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_mechanism_closed_forms() {
        assert_eq!(gaussian_rho(1.0, 1.0), 0.5);
        assert!((gaussian_rho(2.0, 4.0) - 0.125).abs() < 1e-15);
        let e = zcdp_epsilon(0.5, 1e-5);
        assert!((e - (0.5 + 2.0 * (0.5 * 1e5f64.ln()).sqrt())).abs() < 1e-12);
        // rho = 0 gives epsilon 0; epsilon grows with rho and with 1/delta.
        assert_eq!(zcdp_epsilon(0.0, 0.1), 0.0);
        assert!(zcdp_epsilon(1.0, 1e-6) > zcdp_epsilon(1.0, 1e-3));
    }

    fn gaussian(levels: u64, sigma: f64, sensitivity: f64) -> Mechanism {
        gaussian_mechanism(levels, sigma, sensitivity)
    }

    #[test]
    fn composition_counts_releases() {
        let m = gaussian(9, 3.0, 2f64.sqrt());
        let a = account(&m);
        let rho = 9.0 * 2.0 / (2.0 * 9.0);
        assert!((a.rho.unwrap() - rho).abs() < 1e-12);
        assert!((a.epsilon_zcdp.unwrap() - zcdp_epsilon(rho, 0.1)).abs() < 1e-12);
        assert!((a.noise_multiplier.unwrap() - 3.0 / 2f64.sqrt()).abs() < 1e-15);
        assert_eq!(a.paper_claimed, Some(1.0));
        // mu = sqrt(9) sqrt(2) / 3 = sqrt(2).
        assert!((a.epsilon.unwrap() - gdp_epsilon(2f64.sqrt(), 0.1)).abs() < 1e-12);
        let u = account(&Mechanism {
            noise: NoiseModel::Unaccounted {
                sigma: 3.0,
                sensitivity: 1.0,
                why: "Binomial noise".into(),
            },
            basic: None,
            ..m.clone()
        });
        assert_eq!(
            (u.rho, u.epsilon_zcdp, u.epsilon, u.noise_multiplier),
            (None, None, None, Some(3.0))
        );
        assert!(u.warnings.iter().any(|w| w.contains("acct_epsilon is null: Binomial")));
        // Unbounded rewards: every figure but the noise multiplier is null.
        let n = account(&Mechanism {
            unbounded: Some("rewards are Gaussian".into()),
            ..m
        });
        assert_eq!(
            (n.rho, n.epsilon_zcdp, n.paper_claimed, n.epsilon),
            (None, None, None, None)
        );
        assert!(n.warnings.iter().any(|w| w.contains("Gaussian")));
    }

    /// `calibration: exact` meets every target from below, within 1%.
    #[test]
    fn exact_calibration_meets_the_target() {
        for &delta in &[0.1, 1e-3, 1e-6] {
            for &eps in &[0.05, 0.2, 0.5, 1.0, 4.0, 16.0, 50.0] {
                for releases in [1u64, 9, 17] {
                    let sigma = exact_sigma(releases, 2f64.sqrt(), eps, delta);
                    let a = account(&Mechanism {
                        target: (eps, delta),
                        ..gaussian(releases, sigma, 2f64.sqrt())
                    });
                    let e = a.epsilon.unwrap_or(f64::NAN);
                    assert!(e <= eps && e >= 0.99 * eps, "{eps} {delta} {releases}: {e}");
                }
            }
        }
    }

    /// A release no figure covers (FedUCB's schedule) nulls every figure of
    /// the run, with the reason; the sums' exact figure moves to
    /// `epsilon_sums`. Unbounded rewards null that one too.
    #[test]
    fn an_uncovered_release_nulls_the_run_figures() {
        let m = gaussian(9, 3.0, 2f64.sqrt());
        let whole = account(&m);
        assert!((whole.mu.unwrap() - 2f64.sqrt()).abs() < 1e-15);
        assert_eq!((whole.epsilon_null.as_ref(), whole.epsilon_sums), (None, None));
        let part = account(&Mechanism {
            uncovered: Some("the sync schedule is released".into()),
            ..m.clone()
        });
        assert_eq!(
            (part.epsilon, part.mu, part.rho, part.epsilon_zcdp),
            (None, None, None, None)
        );
        assert_eq!(part.epsilon_sums, whole.epsilon);
        assert_eq!(part.noise_multiplier, whole.noise_multiplier);
        assert!(
            part.epsilon_null
                .as_deref()
                .is_some_and(|w| w.starts_with("the sync schedule is released"))
        );
        assert!(
            part.warnings
                .iter()
                .any(|w| w.starts_with("acct_epsilon is null: the sync schedule"))
        );
        let none = account(&Mechanism {
            uncovered: Some("the sync schedule is released".into()),
            unbounded: Some("rewards are Gaussian".into()),
            ..m
        });
        assert_eq!((none.epsilon, none.epsilon_sums), (None, None));
        assert!(
            none.epsilon_null
                .as_deref()
                .is_some_and(|w| w.contains("rewards are Gaussian"))
        );
    }

    /// A pure epsilon-DP release (FedUCB's private schedule) composes with
    /// the Gaussian part by privacy loss distributions: below the sum of
    /// the two figures (basic composition), above each alone; rho gains
    /// epsilon^2 / 2; the run has no mu, and the sums' figure stays as
    /// `epsilon_sums`. Without the Gaussian part the curve is randomized
    /// response's, whose epsilon at delta = 0 is the pure epsilon itself.
    #[test]
    fn a_pure_release_composes_by_privacy_loss_distributions() {
        let m = gaussian(9, 3.0, 2f64.sqrt());
        let g = account(&m);
        let p = account(&Mechanism {
            pure: Some(PureRelease::float(0.25, "the schedule")),
            ..m
        });
        let (ge, pe) = (g.epsilon.unwrap(), p.epsilon.unwrap());
        assert!(pe < ge + 0.25 && pe > ge, "{pe} vs {ge} + 0.25");
        assert_eq!(p.rho, g.rho.map(|r| r + 0.03125));
        assert_eq!(p.epsilon_zcdp, p.rho.map(|r| zcdp_epsilon(r, 0.1)));
        assert_eq!((p.mu, p.epsilon_null.as_ref(), p.epsilon_sums), (None, None, g.epsilon));
        // Randomized response alone: delta(E) = p (1 - e^(E - e))_+ +
        // (1 - p) (1 - e^(E + e))_+, zero from E = e on.
        for e in [0.1, 1.0, 3.0] {
            assert!(composed_delta(0.0, e, e) == 0.0);
            let at = composed_epsilon(0.0, e, 1e-12);
            assert!(at <= e && at > e * (1.0 - 1e-6), "{e}: {at}");
            let half = e / 2.0;
            let q = 1.0 / (1.0 + (-e).exp());
            assert!((composed_delta(0.0, e, half) - q * (1.0 - (half - e).exp())).abs() < 1e-15);
        }
        // Calibration beside the pure part meets the target from below.
        for (eps, delta, pure) in [(1.0, 0.1, 0.1), (4.0, 1e-5, 0.4), (0.3, 1e-3, 0.03)] {
            let mu = composed_mu(eps, delta, pure);
            let e = composed_epsilon(mu, pure, delta);
            assert!(e <= eps && e >= 0.99 * eps, "{eps} {delta} {pure}: {e}");
            assert!(
                mu > gdp_mu(eps - pure, delta),
                "PLD composition must leave the sums more than basic"
            );
        }
        // The pure part alone above the target: no Gaussian budget left.
        assert_eq!(composed_mu(0.5, 1e-6, 0.6), 0.0);
    }

    /// The Gaussian privacy curve: closed-form values, monotone, and the
    /// figure the issue cites for the quickstart's ldp cell (9 releases,
    /// noise multiplier 2.2257, delta 0.1: 1.954, which dp-accounting's
    /// PLD matches to 1e-4), below its zCDP conversion (3.80).
    #[test]
    fn gaussian_privacy_curve() {
        // delta(0) = 2 Phi(mu / 2) - 1.
        for mu in [0.1, 1.0, 3.0] {
            let want = 2.0 * normal_cdf(mu / 2.0) - 1.0;
            assert!((gdp_delta(mu, 0.0) - want).abs() < 1e-15, "{mu}");
        }
        // The figure inverts the curve, and is an upper end.
        for (mu, delta) in [(0.5, 1e-5), (1.348, 0.1), (5.0, 1e-8), (30.0, 1e-6)] {
            let e = gdp_epsilon(mu, delta);
            assert!(gdp_delta(mu, e) <= delta, "{mu} {delta}");
            assert!(gdp_delta(mu, e * (1.0 - 1e-8)) > delta, "{mu} {delta}");
        }
        let mu = 3.0f64.sqrt() * 3.0f64.sqrt() / 2.2257;
        let e = gdp_epsilon(mu, 0.1);
        assert!((e - 1.9543).abs() < 1e-3, "{e}");
        let rho = 9.0 / (2.0 * 2.2257f64 * 2.2257);
        assert!(zcdp_epsilon(rho, 0.1) > 3.7, "{}", zcdp_epsilon(rho, 0.1));
        // ln Phi's asymptotic branch (x <= -30) meets the direct one.
        assert!((ln_normal_cdf(-30.0) - normal_cdf(-30.0).ln()).abs() < 1e-8);
        assert_eq!(gdp_epsilon(0.0, 0.1), 0.0);
    }

    /// The slides' Theorem 1 inverted: it returns the epsilon a theorem
    /// sigma was calibrated for, and about 3.5 for the authors' code sigma
    /// at T/B = 40, epsilon = 1, delta = 0.1.
    #[test]
    fn theorem1_inversion() {
        for (eps, delta, tb) in [(1.0f64, 0.1f64, 40.0f64), (0.2, 0.1, 400.0), (5.0, 1e-4, 1000.0)] {
            let kappa = 1.0 + f64::ln(tb);
            let sigma = (8.0 * kappa * ((2.0 / delta).ln() + eps)).sqrt() / eps;
            assert!((zhou_theorem1_epsilon(sigma, kappa, delta) - eps).abs() < 1e-12 * eps.max(1.0));
        }
        // Code calibration: N = floor(log2 40) + 1 = 6 levels,
        // sigma = sqrt(6 (ln 10 + 1)) = 4.4515.
        let sigma = (6.0 * (10f64.ln() + 1.0)).sqrt();
        let e = zhou_theorem1_epsilon(sigma, 1.0 + 40f64.ln(), 0.1);
        assert!((e - 3.509).abs() < 0.001, "{e}");
    }

    /// FMT's precondition ln(M / (16 ln(2/delta))): negative at M = 10,
    /// delta = 0.1 (no epsilon_0 qualifies) and at M = 100, delta = 1e-4;
    /// 4.770 at M = 10^4, delta = 0.01.
    #[test]
    fn amplification_preconditions() {
        assert!(amplification_precondition(0.01, 10, 0.1).is_some());
        assert!(amplification_precondition(1e-4, 100, 1e-4).is_some());
        let limit = (1e4 / (16.0 * 200f64.ln())).ln();
        assert!((limit - 4.7704).abs() < 1e-3, "{limit}");
        assert!(amplification_precondition(4.7, 10_000, 0.01).is_none());
        let w = amplification_precondition(4.8, 10_000, 0.01).unwrap();
        assert!(w.contains("4.770") && w.contains("M = 10000"), "{w}");
    }
}
