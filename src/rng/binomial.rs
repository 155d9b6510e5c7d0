//! Keyed binomial draws: Binomial(n, p) as a pure function of (key, index),
//! so that a GPU thread computes the same draw as the CPU (`fb_binomial_at`
//! in `kernels/common.cuh`) and noise that can be regenerated need not be
//! stored.
//!
//! The uniforms are [`super::uniform_at`]`(key, index + j)`, j = 0, 1, ...
//! (as many as the method consumes; a caller spaces its indices by
//! [`STRIDE`]). p > 1/2 draws n - Binomial(n, 1 - p). Where n p < 10 the
//! draw is by inversion (BINV, Kachitvichyanukul & Schmeiser 1988: a
//! sequential search from 0 with the pmf's recurrence, restarted with the
//! next uniform past 110 successes, whose probability at n p < 10 is below
//! 1e-40); elsewhere by BTRD, Hörmann's transformed rejection with
//! decomposition (1993), exact. Every step is IEEE double arithmetic with the
//! engine's own logarithm ([`crate::math::ln`]) and an explicit power by
//! squaring, so the CUDA port has the same bits.
//!
//! [`super::small_binomial`] draws small n from one uniform each.

/// Indices one draw may use: a caller keys draw i at `i * STRIDE`.
pub const STRIDE: u64 = 1 << 20;

/// Binomial(n, p) from the keyed uniforms at `index`, `index + 1`, ....
/// Invalid p (outside [0, 1] or NaN) or n = 0 give 0.
pub fn binomial_at(key: u64, index: u64, n: u64, p: f64) -> u64 {
    if n == 0 || p.is_nan() || p <= 0.0 || p > 1.0 {
        return 0;
    }
    if p >= 1.0 {
        return n;
    }
    if p > 0.5 {
        return n - binomial_at(key, index, n, 1.0 - p);
    }
    if (n as f64) * p < 10.0 {
        inversion(key, index, n, p)
    } else {
        btrd(key, index, n, p)
    }
}

/// x^k by squaring (a fixed order of multiplications, reproducible).
pub fn pow_u64(x: f64, mut k: u64) -> f64 {
    let (mut base, mut out) = (x, 1.0);
    while k > 0 {
        if k & 1 == 1 {
            out *= base;
        }
        base *= base;
        k >>= 1;
    }
    out
}

/// BINV for n p < 10, p <= 1/2.
fn inversion(key: u64, index: u64, n: u64, p: f64) -> u64 {
    let q = 1.0 - p;
    let s = p / q;
    let a = (n as f64 + 1.0) * s;
    let r0 = pow_u64(q, n);
    let mut j = 0;
    loop {
        let mut u = super::uniform_at(key, index + j);
        j += 1;
        let mut r = r0;
        let mut x = 0u64;
        loop {
            if u <= r {
                return x;
            }
            u -= r;
            x += 1;
            if x > 110 || x > n {
                break;
            }
            r *= a / x as f64 - s;
        }
    }
}

/// Stirling's correction ln(k!) - ((k + 1/2) ln(k + 1) - (k + 1) +
/// ln sqrt(2 pi)): a table to k = 9, the series beyond (Hörmann 1993).
fn fc(k: u64) -> f64 {
    const TABLE: [f64; 10] = [
        0.08106146679532726,
        0.04134069595540929,
        0.02767792568499834,
        0.02079067210376509,
        0.01664469118982119,
        0.01387612882307075,
        0.01189670994589177,
        0.01041126526197209,
        0.009255462182712733,
        0.008_330_563_433_362_87,
    ];
    if k < 10 {
        return TABLE[k as usize];
    }
    let k1 = k as f64 + 1.0;
    let k2 = k1 * k1;
    (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / 1260.0 / k2) / k2) / k1
}

/// BTRD for n p >= 10, p <= 1/2 (Hörmann 1993, algorithm BTRD).
fn btrd(key: u64, index: u64, n: u64, p: f64) -> u64 {
    let ln = crate::math::ln;
    let nf = n as f64;
    let m = ((nf + 1.0) * p).floor();
    let r = p / (1.0 - p);
    let nr = (nf + 1.0) * r;
    let npq = nf * p * (1.0 - p);
    let spq = npq.sqrt();
    let b = 1.15 + 2.53 * spq;
    let a = -0.0873 + 0.0248 * b + 0.01 * p;
    let c = nf * p + 0.5;
    let alpha = (2.83 + 5.1 / b) * spq;
    let vr = 0.92 - 4.2 / b;
    let urvr = 0.86 * vr;
    let mut j = 0;
    loop {
        let mut v = super::uniform_at(key, index + j);
        let w = super::uniform_at(key, index + j + 1);
        j += 2;
        let mut u;
        if v <= urvr {
            u = v / vr - 0.43;
            return (((2.0 * a) / (0.5 - u.abs()) + b) * u + c).floor() as u64;
        }
        if v >= vr {
            u = w - 0.5;
        } else {
            u = v / vr - 0.93;
            u = if u < 0.0 { -0.5 } else { 0.5 } - u;
            v = w * vr;
        }
        let us = 0.5 - u.abs();
        let kf = (((2.0 * a) / us + b) * u + c).floor();
        if kf < 0.0 || kf > nf {
            continue;
        }
        let k = kf as u64;
        v = v * alpha / (a / (us * us) + b);
        let km = (kf - m).abs();
        if km <= 15.0 {
            // The pmf ratio f(k) / f(m) by its recurrence.
            let mut f = 1.0;
            if m < kf {
                let mut i = m + 1.0;
                while i <= kf {
                    f *= nr / i - r;
                    i += 1.0;
                }
            } else if m > kf {
                let mut i = kf + 1.0;
                while i <= m {
                    v *= nr / i - r;
                    i += 1.0;
                }
            }
            if v <= f {
                return k;
            }
            continue;
        }
        // Squeeze, then the final acceptance test on ln f(k) / f(m).
        let lv = ln(v);
        let rho = (km / npq) * (((km / 3.0 + 0.625) * km + 1.0 / 6.0) / npq + 0.5);
        let t = -km * km / (2.0 * npq);
        if lv < t - rho {
            return k;
        }
        if lv > t + rho {
            continue;
        }
        let mi = m as u64;
        let nm = nf - m + 1.0;
        let h = (m + 0.5) * ln((m + 1.0) / (r * nm)) + fc(mi) + fc(n - mi);
        let nk = nf - kf + 1.0;
        if lv <= h + (nf + 1.0) * ln(nm / nk) + (kf + 0.5) * ln(nk * r / (kf + 1.0)) - fc(k) - fc(n - k) {
            return k;
        }
    }
}

/// Test references shared by the binomial samplers' tests.
#[cfg(test)]
pub(crate) mod reference {
    /// The binomial pmf from ln C(n, k) in f64 (test reference, not the
    /// samplers' recurrence).
    pub fn pmf(n: u64, p: f64) -> Vec<f64> {
        let mut out = vec![0.0; n as usize + 1];
        let lnp = p.ln();
        let lnq = (1.0 - p).ln();
        let mut lc = 0.0f64; // ln C(n, k)
        for k in 0..=n {
            if k > 0 {
                lc += ((n - k + 1) as f64).ln() - (k as f64).ln();
            }
            out[k as usize] = (lc + k as f64 * lnp + (n - k) as f64 * lnq).exp();
        }
        out
    }

    /// Chi-square of observed `counts` of 0..=n against Binomial(n, p), cells
    /// of expected count below 5 pooled into their neighbours; returns
    /// (statistic, degrees of freedom).
    pub fn chi_square(counts: &[u64], n: u64, p: f64) -> (f64, usize) {
        let draws: u64 = counts.iter().sum();
        let pm = pmf(n, p);
        let (mut stat, mut cells) = (0.0, 0usize);
        let (mut obs, mut exp) = (0.0, 0.0);
        for k in 0..=n as usize {
            obs += counts[k] as f64;
            exp += pm[k] * draws as f64;
            if exp >= 5.0 {
                stat += (obs - exp) * (obs - exp) / exp;
                cells += 1;
                obs = 0.0;
                exp = 0.0;
            }
        }
        if exp > 0.0 {
            stat += (obs - exp) * (obs - exp) / exp.max(1e-300);
            cells += 1;
        }
        (stat, cells.saturating_sub(1))
    }

    /// Asserts that `counts` fit Binomial(n, p) at 99.9%: the chi-square
    /// statistic below df + 3.3 sqrt(2 df) + 10, above the quantile.
    pub fn assert_fits(counts: &[u64], n: u64, p: f64) {
        let (stat, df) = chi_square(counts, n, p);
        let limit = df as f64 + 3.3 * (2.0 * df as f64).sqrt() + 10.0;
        assert!(
            stat < limit,
            "n {n} p {p}: chi-square {stat:.1} on {df} df (limit {limit:.1})"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::reference::{assert_fits, pmf};
    use super::*;

    /// The inversion at small (n, p) assigns each k exactly the mass the
    /// recurrence computes: the thresholds it compares u with are the pmf's
    /// partial sums, so the fraction of a fine grid of u mapped to k is
    /// pmf(k) (to the grid's resolution).
    #[test]
    fn inversion_maps_uniforms_to_the_pmf() {
        for (n, p) in [(1u64, 0.5f64), (7, 0.03), (20, 0.3), (3, 0.45)] {
            let q = 1.0 - p;
            let (s, a) = (p / q, (n as f64 + 1.0) * p / q);
            let pm = pmf(n, p);
            // Walk the recurrence: thresholds are cumulative sums.
            let mut r = pow_u64(q, n);
            let mut cum = 0.0;
            for (k, want) in pm.iter().enumerate() {
                assert!(
                    (r - want).abs() < 1e-12 * want.max(1e-300) + 1e-15,
                    "n {n} p {p} k {k}: {r} vs {want}"
                );
                cum += r;
                r *= a / (k as f64 + 1.0) - s;
            }
            assert!((cum - 1.0).abs() < 1e-12, "{cum}");
        }
    }

    /// Chi-square against the pmf, 10^6 draws each, at 99.9%: (1, 0.5),
    /// (7, 0.03), (50, 0.4) (BTRD: n p = 20), (50, 0.97) (1 - p), (1000, 0.3)
    /// (BTRD, the squeeze region).
    #[test]
    fn draws_follow_the_binomial_pmf() {
        for (i, (n, p)) in [(1u64, 0.5f64), (7, 0.03), (50, 0.4), (50, 0.97), (1000, 0.3)]
            .into_iter()
            .enumerate()
        {
            let key = crate::rng::fold_key(&[31, i as u64]);
            let mut counts = vec![0u64; n as usize + 1];
            for i in 0..1_000_000u64 {
                counts[binomial_at(key, i * STRIDE, n, p) as usize] += 1;
            }
            assert_fits(&counts, n, p);
        }
    }

    /// Mean and variance of 10^6 draws within 4 standard errors at the
    /// vector-summation protocol's sizes (n = 7.6e5, p = 1/4) and at a
    /// large n p with p small.
    #[test]
    fn large_n_mean_and_variance() {
        for (n, p) in [(762_250u64, 0.25f64), (1_000_000, 0.001)] {
            let draws = 1_000_000u64;
            let key = crate::rng::fold_key(&[77, n]);
            let (mut s, mut s2) = (0.0f64, 0.0f64);
            for i in 0..draws {
                let x = binomial_at(key, i * STRIDE, n, p) as f64;
                s += x;
                s2 += x * x;
            }
            let mean = s / draws as f64;
            let var = s2 / draws as f64 - mean * mean;
            let (mu, sigma2) = (n as f64 * p, n as f64 * p * (1.0 - p));
            let se_mean = (sigma2 / draws as f64).sqrt();
            assert!((mean - mu).abs() < 4.0 * se_mean, "n {n}: mean {mean} vs {mu}");
            // The variance's standard error is about sigma^2 sqrt(2 / draws).
            assert!(
                (var - sigma2).abs() < 4.0 * sigma2 * (2.0 / draws as f64).sqrt(),
                "n {n}: variance {var} vs {sigma2}"
            );
        }
    }

    #[test]
    fn edges_and_purity() {
        assert_eq!(binomial_at(1, 0, 0, 0.3), 0);
        assert_eq!(binomial_at(1, 0, 10, 0.0), 0);
        assert_eq!(binomial_at(1, 0, 10, 1.0), 10);
        assert_eq!(binomial_at(1, 0, 10, f64::NAN), 0);
        // A pure function of (key, index).
        assert_eq!(binomial_at(9, 5, 1000, 0.3), binomial_at(9, 5, 1000, 0.3));
        let draws: Vec<u64> = (0..64).map(|i| binomial_at(9, i * STRIDE, 1000, 0.3)).collect();
        assert!(draws.iter().any(|&x| x != draws[0]));
        assert_eq!(pow_u64(0.5, 10), 1.0 / 1024.0);
    }
}
