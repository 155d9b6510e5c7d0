//! Gaussian-DP of a unit shift of Binomial noise, computed numerically: the
//! building block of the vector-summation protocol's exact figure
//! ([`crate::privacy::vecsum_account`]).
//!
//! For Y ~ Binomial(s, p) (p = 1/4, the protocol's) the pair (Y + 1, Y) is
//! not mu-GDP for any mu (Y + 1 = s + 1 has no counterpart), but it is
//! *dominated up to a tail* eta: for every epsilon >= 0 and both orders,
//! H_{e^epsilon}(P || Q) <= delta_mu(epsilon) + eta, where H is the
//! hockey-stick divergence and delta_mu the privacy curve of mu-GDP
//! ([`gdp_delta`]). Such a pair is dominated (in the sense of Zhu, Dong &
//! Wang 2022: a hockey-stick curve at least as large at every epsilon, both
//! orders) by the mixture ((1 - eta') N(0, 1) + eta' A, (1 - eta')
//! N(mu, 1) + eta' B) with A, B disjoint atoms and eta' = eta / (1 -
//! delta_mu(0)):
//! its curve is (1 - eta') delta_mu + eta' >= delta_mu + eta. Products of
//! such mixtures (composition, adaptive included) are dominated by
//! sqrt(sum mu_i^2)-GDP plus a catastrophe of probability sum eta'_i, so
//! their figure at delta is the Gaussian one at delta - sum eta'_i.
//!
//! [`unit_shift_mu`] finds the smallest such mu for given (s, eta):
//! 1. The pmf on a window [lo, hi] around the mean, where Chernoff's bound
//!    exp(-s KL(k/s || p)) puts at most eta / 100 outside each end; computed
//!    by the ratio recurrence from the mode and normalized over the window,
//!    so each value is at most the true pmf / (1 - outside) and at least the
//!    true pmf: P's values are taken as computed (high), Q's times
//!    (1 - outside) (low), and the outside mass is added to H: every H here
//!    is an upper bound on the true one.
//! 2. The privacy loss log(y (1 - p) / ((s - y + 1) p)) is monotone in y, so
//!    the optimal set at each epsilon is a tail, found in closed form (the
//!    neighbouring thresholds are tried too, against rounding).
//! 3. On a grid of epsilon (steps of max(1, z) / 512 in z = epsilon sigma,
//!    sigma^2 = s p (1 - p); about 0.25% of mu at most lost to the steps),
//!    up to where the window's largest loss is passed, the condition
//!    H(epsilon_i) <= delta_mu(epsilon_{i+1}) + eta covers [epsilon_i,
//!    epsilon_{i+1}] (H falls, delta_mu falls, both in epsilon), and past the
//!    grid H <= eta is checked. mu is bisected (delta_mu rises with mu) to
//!    1e-7 relative, the upper end returned.
//!
//! For large s, mu sigma tends to 1 (the Gaussian limit): 1.046 at s =
//! 10^4, 1.004 at 10^6 (eta = 1e-30; tested). The data-processing
//! inequality makes mu non-increasing in s (Bin(s + 1) = Bin(s) + an
//! independent Bernoulli), which [`crate::privacy::vecsum_account`] uses to
//! round sizes down to a grid. Results are cached per (s, eta) for the
//! process, and on disk across processes ([`disk`]): `validate`, `run`,
//! every shard and every growth of a study compute each (s, eta) once per
//! machine.

use std::collections::BTreeMap;
use std::sync::Mutex;

mod disk;

/// From now on this process writes no figure to the accountant's cache
/// file (`validate`, which writes nothing); it still reads it.
pub fn cache_read_only() {
    disk::read_only();
}

/// The accountant's cache file (None when caching is off).
pub fn cache_file() -> Option<std::path::PathBuf> {
    disk::file()
}

use crate::privacy::accountant::gdp_delta;

/// The Binomial's success probability (the protocol's p).
const P: f64 = crate::privacy::vecsum::P;

/// A unit shift of Binomial(s, p) noise dominated by mu-GDP up to a tail
/// eta; `mu` is infinite where no mu up to 50 does (s too small for eta).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnitShift {
    /// The Gaussian-DP parameter.
    pub mu: f64,
    /// The catastrophe probability of the dominating mixture, eta / (1 -
    /// delta_mu(0)).
    pub tail: f64,
}

/// Fits so far, by (eta's bits, s): each with whether it was read from the
/// cache file (not computed by this process).
static CACHE: Mutex<disk::Figures> = Mutex::new(BTreeMap::new());

/// The figures this process used, by key (what a part records).
static USED: Mutex<disk::Figures> = Mutex::new(BTreeMap::new());

/// The dominating (mu, tail) of the pair (Binomial(s, 1/4) + 1,
/// Binomial(s, 1/4)) for tail level `eta` (see the module doc), cached.
pub fn unit_shift_mu(s: u64, eta: f64) -> UnitShift {
    let key = (eta.to_bits(), s);
    disk::load_once(&CACHE);
    let hit = CACHE.lock().ok().and_then(|c| c.get(&key).copied());
    let entry = hit.unwrap_or_else(|| {
        let got = compute(s.max(1), eta);
        if let Ok(mut c) = CACHE.lock() {
            c.insert(key, (got, false));
        }
        disk::append(key, got);
        progress_tick();
        (got, false)
    });
    if let Ok(mut u) = USED.lock() {
        u.insert(key, entry);
    }
    entry.0
}

/// What this process's figures were: (used, read from the cache file,
/// computed here and not stored in it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FiguresUsed {
    /// Figures used so far.
    pub used: usize,
    /// Of them, read from the cache file.
    pub from_cache: usize,
    /// Of them, computed here and not stored (no cache, a read-only
    /// process, or a failed write): another process computes them again.
    pub not_stored: usize,
}

/// The counts of the figures this process used so far.
pub fn figures_used() -> FiguresUsed {
    let used = USED
        .lock()
        .map(|u| u.values().map(|e| e.1).collect::<Vec<_>>())
        .unwrap_or_default();
    FiguresUsed {
        used: used.len(),
        from_cache: used.iter().filter(|&&c| c).count(),
        not_stored: disk::not_stored(),
    }
}

/// The record of the figures this process read from the cache file, for
/// a part's metadata (`fedbandits.accountant_figures`; None when it read
/// none): the cache file's name, then each figure's cache line (its key,
/// value and check), so that a cache forged or damaged with valid checks
/// can be found after the fact ([`recheck`]). Figures computed by the
/// process itself are counted, not listed (they are what [`recheck`]
/// would compute).
pub fn cached_record() -> Option<String> {
    let used = USED.lock().ok()?;
    let lines: String = used
        .iter()
        .filter(|(_, e)| e.1)
        .map(|(&k, e)| disk::line(k, e.0))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let computed = used.values().filter(|e| !e.1).count();
    let file = disk::file().map_or_else(|| "-".to_string(), |p| p.display().to_string());
    Some(format!("cache {file}\ncomputed {computed}\n{lines}"))
}

/// One figure of a record that [`recheck`] computed to another value.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The record's line.
    pub line: String,
    /// The figure computed now.
    pub computed: UnitShift,
}

/// Computes every figure a [`cached_record`] lists and returns those that
/// differ from their line (bit for bit) or whose line does not read back;
/// `Err` with the line when the record is not one (a line that does not
/// parse). Costs what the figures cost (up to seconds each).
pub fn recheck(record: &str) -> Result<(usize, Vec<Mismatch>), String> {
    let mut checked = 0;
    let mut bad = Vec::new();
    for l in record
        .lines()
        .filter(|l| !l.starts_with("cache ") && !l.starts_with("computed "))
    {
        let Some((key, got)) = disk::parse_unchecked(l) else {
            return Err(l.to_string());
        };
        let now = compute(key.1.max(1), f64::from_bits(key.0));
        checked += 1;
        if disk::parse(l).is_none() || now.mu.to_bits() != got.mu.to_bits() || now.tail.to_bits() != got.tail.to_bits()
        {
            bad.push(Mismatch {
                line: l.to_string(),
                computed: now,
            });
        }
    }
    Ok((checked, bad))
}

/// The largest probability of Binomial(s, p) (at its mode, floor((s + 1)
/// p)): the total variation between it shifted by one and itself (it is
/// unimodal), so the hockey-stick divergence of the unit shift at epsilon =
/// 0, which every dominating (mu, tail) must cover: delta_mu(0) + tail at
/// least this.
pub fn mode_pmf(s: u64) -> f64 {
    let m = ((s + 1) as f64 * P).floor() as u64;
    let ln = statrs::function::factorial::ln_binomial(s, m) + m as f64 * P.ln() + (s - m) as f64 * (1.0 - P).ln();
    ln.exp()
}

/// What to tell the user while figures are computed: called with the
/// figures computed so far (not found in any cache) and the cache file.
pub type Progress = fn(usize, Option<&std::path::Path>);

static PROGRESS: Mutex<Option<(Progress, std::time::Instant, usize)>> = Mutex::new(None);

/// Installs `report`, called at most every two seconds while this process
/// computes unit-shift figures (a cold cache can take a minute on a large
/// `sdp_vecsum` job; the binary prints a line, the library prints nothing).
pub fn on_progress(report: Progress) {
    if let Ok(mut p) = PROGRESS.lock() {
        *p = Some((report, std::time::Instant::now(), 0));
    }
}

fn progress_tick() {
    let Ok(mut guard) = PROGRESS.lock() else { return };
    if let Some((report, last, n)) = guard.as_mut() {
        *n += 1;
        if last.elapsed().as_secs_f64() >= 2.0 {
            *last = std::time::Instant::now();
            report(*n, disk::file().as_deref());
        }
    }
}

/// Chernoff's bound on P(Y >= k) (k >= s p) or P(Y <= k) (k <= s p).
fn chernoff(s: u64, k: f64) -> f64 {
    let sf = s as f64;
    let x = (k / sf).clamp(0.0, 1.0);
    let term = |a: f64, b: f64| if a <= 0.0 { 0.0 } else { a * (a / b).ln() };
    (-sf * (term(x, P) + term(1.0 - x, 1.0 - P))).exp()
}

/// The window [lo, hi] and the mass outside it (an upper bound).
fn window(s: u64, eta: f64) -> (u64, u64, f64) {
    let mean = s as f64 * P;
    let target = eta / 100.0;
    let sigma = (mean * (1.0 - P)).sqrt().max(1.0);
    let mut step = sigma;
    let mut hi = (mean.ceil() as u64).min(s);
    while hi < s && chernoff(s, (hi + 1) as f64) > target {
        hi = (hi + step as u64).min(s);
        step *= 1.5;
    }
    let mut lo = mean.floor() as u64;
    step = sigma;
    while lo > 0 && chernoff(s, (lo - 1) as f64) > target {
        lo = lo.saturating_sub(step as u64);
        step *= 1.5;
    }
    let above = if hi < s { chernoff(s, (hi + 1) as f64) } else { 0.0 };
    let below = if lo > 0 { chernoff(s, (lo - 1) as f64) } else { 0.0 };
    (lo, hi, above + below)
}

/// The pmf of Binomial(s, p) on [lo, hi], normalized over the window.
fn pmf(s: u64, lo: u64, hi: u64) -> Vec<f64> {
    let n = (hi - lo + 1) as usize;
    let mode = (((s + 1) as f64 * P).floor() as u64).clamp(lo, hi);
    // Room for one more: the caller turns it into n + 1 prefix sums in place.
    let mut w = Vec::with_capacity(n + 1);
    w.resize(n, 0.0);
    let r = P / (1.0 - P);
    w[(mode - lo) as usize] = 1.0;
    for y in mode..hi {
        let i = (y - lo) as usize;
        w[i + 1] = w[i] * (s - y) as f64 * r / (y + 1) as f64;
    }
    for y in (lo + 1..=mode).rev() {
        let i = (y - lo) as usize;
        w[i - 1] = w[i] * y as f64 / ((s - y + 1) as f64 * r);
    }
    let total: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= total);
    w
}

/// The hockey-stick curves of both orders on the window, as upper bounds.
struct Curves {
    lo: u64,
    s: u64,
    /// suffix[i] = sum of w over window index >= i (i in 0..=n).
    suffix: Vec<f64>,
    /// prefix[i] = sum of w over window index < i (i in 0..=n), summed from
    /// the low end (no cancellation against the total).
    prefix: Vec<f64>,
    /// The mass outside the window (bound).
    outside: f64,
}

impl Curves {
    fn new(s: u64, eta: f64) -> Self {
        let (lo, hi, outside) = window(s, eta);
        let mut w = pmf(s, lo, hi);
        let mut suffix = vec![0.0; w.len() + 1];
        for i in (0..w.len()).rev() {
            suffix[i] = suffix[i + 1] + w[i];
        }
        // The prefix sums in w's own storage (the same additions in the
        // same order as a separate array: prefix[i + 1] = prefix[i] +
        // w[i]): two arrays of the window at once, not three.
        let mut acc = 0.0;
        for v in w.iter_mut() {
            let wi = *v;
            *v = acc;
            acc += wi;
        }
        w.push(acc);
        let prefix = w;
        Self {
            lo,
            s,
            suffix,
            prefix,
            outside,
        }
    }

    /// sum of w(y) for y >= y0 (y0 a Binomial value; clamped to the window).
    fn tail_from(&self, y0: i64) -> f64 {
        let i = (y0 - self.lo as i64).clamp(0, self.suffix.len() as i64 - 1) as usize;
        self.suffix[i]
    }

    /// sum of w(y) for y <= y0.
    fn head_to(&self, y0: i64) -> f64 {
        let i = (y0 + 1 - self.lo as i64).clamp(0, self.prefix.len() as i64 - 1) as usize;
        self.prefix[i]
    }

    /// max over both orders of H_{e^eps}, an upper bound.
    fn h(&self, eps: f64) -> f64 {
        let e = eps.exp();
        let keep = 1.0 - self.outside;
        let sp1 = (self.s + 1) as f64;
        // Order A: P = Y + 1, Q = Y; loss(y) > eps iff y > t.
        let t = e * sp1 * P / ((1.0 - P) + e * P);
        let ya = t.floor() as i64 + 1;
        let a = (ya - 1..=ya + 1)
            .map(|y| self.tail_from(y - 1) - e * keep * self.tail_from(y))
            .fold(0.0f64, f64::max);
        // Order B: P = Y, Q = Y + 1; loss(y) > eps iff y < t'.
        let tb = sp1 * P / ((1.0 - P) * e + P);
        let yb = tb.ceil() as i64 - 1;
        let b = (yb - 1..=yb + 1)
            .map(|y| self.head_to(y) - e * keep * self.head_to(y - 1))
            .fold(0.0f64, f64::max);
        a.max(b) * (1.0 + 1e-9) + self.outside
    }

    /// The largest |privacy loss| inside the window.
    fn max_loss(&self) -> f64 {
        let hi = self.lo + self.suffix.len() as u64 - 2;
        let loss = |y: u64| ((y as f64) * (1.0 - P) / ((self.s - y + 1) as f64 * P)).ln().abs();
        loss(self.lo.max(1)).max(loss(hi.max(1)))
    }
}

/// The memory [`unit_shift_mu`] allocates while it computes the figure of
/// (s, eta) (its window's pmf as two arrays of prefix and suffix sums, and
/// the epsilon grid with its curve): what a job needs beside its run while
/// the accountant computes figures no cache holds.
pub fn work_bytes(s: u64, eta: f64) -> u64 {
    let (lo, hi, _) = window(s.max(1), eta);
    let sigma = (s.max(1) as f64 * P * (1.0 - P)).sqrt().max(1e-3);
    // The grid's points: 512 per unit of z up to 1, then 512 per doubling,
    // up to the window's largest loss (at most a few hundred sigma here).
    let grid = 512.0 * (2.0 + (sigma * 64.0).max(1.0).log2());
    16 * (hi - lo + 2) + (16.0 * grid) as u64
}

/// The epsilon grid: from 0 in steps of max(1, z) / 512 in z = epsilon
/// sigma, past `top`.
fn grid(sigma: f64, top: f64) -> Vec<f64> {
    let mut eps = vec![0.0];
    let mut z = 0.0f64;
    while z / sigma <= top {
        z += z.max(1.0) / 512.0;
        eps.push(z / sigma);
    }
    eps
}

fn compute(s: u64, eta: f64) -> UnitShift {
    let infinite = UnitShift {
        mu: f64::INFINITY,
        tail: f64::INFINITY,
    };
    let curves = Curves::new(s, eta);
    let sigma = (s as f64 * P * (1.0 - P)).sqrt().max(1e-3);
    let eps = grid(sigma, curves.max_loss());
    let hs: Vec<f64> = eps.iter().map(|&e| curves.h(e)).collect();
    if hs[hs.len() - 1] > eta {
        return infinite;
    }
    // Grid points whose condition can bind (H above eta): H(eps_i) against
    // delta_mu(eps_{i+1}).
    let mut active: Vec<usize> = (0..hs.len() - 1).filter(|&i| hs[i] > eta).collect();
    let holds = |mu: f64, i: usize| hs[i] <= gdp_delta(mu, eps[i + 1]) + eta;
    // Checks every active point, the last failure first (early exit).
    let ok = |mu: f64, idx: &mut Vec<usize>| match idx.iter().position(|&i| !holds(mu, i)) {
        Some(at) => {
            idx.swap(0, at);
            false
        }
        None => true,
    };
    let mu0 = 1.0 / sigma;
    let (mut lo, mut hi) = if ok(mu0, &mut active) {
        (0.0, mu0)
    } else {
        // Points that hold at mu0 hold for every larger mu.
        active.retain(|&i| !holds(mu0, i));
        let mut hi = 2.0 * mu0;
        while !ok(hi, &mut active) {
            hi *= 2.0;
            if hi > 50.0 {
                return infinite;
            }
        }
        (mu0, hi)
    };
    while hi - lo > 1e-7 * hi {
        let mid = 0.5 * (lo + hi);
        if ok(mid, &mut active) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    UnitShift {
        mu: hi,
        tail: eta / (1.0 - gdp_delta(hi, 0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_shift_tends_to_the_gaussian_and_is_never_better() {
        // mu sigma: above 1 (the Binomial's tails are heavier at the
        // relevant losses) and falling to 1 as s grows; the values of the
        // Python prototype (scipy's Binomial tails) within 1%.
        let ratio = |s: u64| unit_shift_mu(s, 1e-30).mu * (s as f64 * 0.1875).sqrt();
        let (r4, r6, r8) = (ratio(10_000), ratio(1_000_000), ratio(100_000_000));
        assert!((r4 - 1.046).abs() < 0.01, "{r4}");
        assert!((r6 - 1.004).abs() < 0.005, "{r6}");
        assert!((1.0 - 1e-6..1.003).contains(&r8), "{r8}");
        assert!(r4 > r6 && r6 > r8);
    }

    #[test]
    fn a_larger_tail_allows_a_smaller_mu_and_tiny_counts_have_none() {
        let a = unit_shift_mu(1000, 1e-30);
        let b = unit_shift_mu(1000, 1e-10);
        assert!(b.mu < a.mu);
        assert!(b.tail >= 1e-10 && b.tail < 1.1e-10);
        // Y + 1 = s + 1 has probability p^s = 4^-20 ~ 1e-12 > eta.
        assert!(unit_shift_mu(20, 1e-16).mu.is_infinite());
    }

    #[test]
    fn the_dominating_curve_holds_on_a_direct_sum() {
        // s = 200: every output of the pair summed directly (exact pmfs by
        // lgamma-free products), both orders, at many epsilons.
        let s = 200u64;
        let eta = 1e-12;
        let u = unit_shift_mu(s, eta);
        let mut q = vec![0.0f64; (s + 2) as usize];
        q[0] = (1.0 - P).powi(s as i32);
        for y in 0..s {
            q[y as usize + 1] = q[y as usize] * (s - y) as f64 * P / ((y + 1) as f64 * (1.0 - P));
        }
        let p1: Vec<f64> = (0..s + 2)
            .map(|y| if y == 0 { 0.0 } else { q[y as usize - 1] })
            .collect();
        for k in 0..400 {
            let eps = k as f64 * 0.005;
            let e = eps.exp();
            let ha: f64 = (0..q.len()).map(|y| (p1[y] - e * q[y]).max(0.0)).sum();
            let hb: f64 = (0..q.len()).map(|y| (q[y] - e * p1[y]).max(0.0)).sum();
            let bound = gdp_delta(u.mu, eps) + eta;
            assert!(
                ha <= bound * (1.0 + 1e-9) && hb <= bound * (1.0 + 1e-9),
                "eps {eps}: {ha} {hb} > {bound}"
            );
        }
    }
}
