//! `procurement` (Solanki et al.): m producers, n agents
//! (manufacturers). Producer i has a common quality q_i (each procured unit
//! is good with probability q_i); agent j has a cost c_{ij} and a capacity
//! k_{ij} per producer and chooses quantities l_{ij} in {0..k_{ij}}. The
//! per-unit revenue is r_{ij} = rho q_i - c_{ij}; a choice meets the quality
//! constraint when sum_i l_i q_i >= alpha sum_i l_i.
//!
//! Instances (`uniform`: q_i, c_{ij} ~ U[0,1]; `normal`: N(alpha, 0.1)
//! clipped to [0, 1], 0.1 the standard deviation; k_{ij} ~ U{1..50}) are
//! drawn from an instance key. The oracles ([`greedy`], the paper's GSS, and
//! [`exact`], exhaustive search for small m) live here because they define
//! the benchmark s* every regret is measured against.

use crate::rng::{Purpose, Stream};

crate::named_enum! {
    /// How an instance's qualities and costs are drawn.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum InstanceKind {
        /// q_i, c_{ij} ~ U[0, 1].
        Uniform = "uniform",
        /// q_i, c_{ij} ~ N(alpha, 0.1^2) clipped to [0, 1].
        Normal = "normal",
    }
}

/// Shape of a procurement environment.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcurementSpec {
    /// Instance distribution.
    pub kind: InstanceKind,
    /// Agents n.
    pub agents: usize,
    /// Producers m.
    pub producers: usize,
    /// Quality threshold alpha.
    pub alpha: f64,
    /// Revenue per unit of quality rho.
    pub rho: f64,
    /// Largest capacity (k_{ij} ~ U{1..max_capacity}).
    pub max_capacity: u32,
}

/// One instance.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Instance {
    /// Its specification.
    pub spec: ProcurementSpec,
    /// q_i.
    pub quality: Vec<f64>,
    /// c_{ij}, agent-major (n x m).
    pub cost: Vec<f64>,
    /// k_{ij}, agent-major.
    pub capacity: Vec<u32>,
}

impl Instance {
    /// Draws the instance of `key` (job seed, environment scope, instance).
    pub fn new(spec: &ProcurementSpec, key: &[u64]) -> Self {
        let mut k = key.to_vec();
        k.push(Purpose::EnvParameter as u64);
        let mut s = Stream::new(&k);
        let (n, m) = (spec.agents, spec.producers);
        let draw = |s: &mut Stream| match spec.kind {
            InstanceKind::Uniform => s.uniform(),
            InstanceKind::Normal => (spec.alpha + 0.1 * s.normal()).clamp(0.0, 1.0),
        };
        let quality = (0..m).map(|_| draw(&mut s)).collect();
        let cost = (0..n * m).map(|_| draw(&mut s)).collect();
        let capacity = (0..n * m)
            .map(|_| 1 + s.below(u64::from(spec.max_capacity.max(1))) as u32)
            .collect();
        Self {
            spec: spec.clone(),
            quality,
            cost,
            capacity,
        }
    }

    /// Agent j's per-unit revenues r_{ij} = rho q_i - c_{ij} under qualities
    /// `q`, into `out`.
    pub fn revenues(&self, j: usize, q: &[f64], out: &mut [f64]) {
        let m = self.spec.producers;
        for ((o, &qi), &c) in out.iter_mut().zip(q).zip(&self.cost[j * m..(j + 1) * m]) {
            *o = self.spec.rho * qi - c;
        }
    }

    /// Agent j's costs.
    pub fn costs(&self, j: usize) -> &[f64] {
        let m = self.spec.producers;
        &self.cost[j * m..(j + 1) * m]
    }

    /// Agent j's capacities.
    pub fn capacities(&self, j: usize) -> &[u32] {
        let m = self.spec.producers;
        &self.capacity[j * m..(j + 1) * m]
    }
}

/// Revenue of a choice: sum_i l_i r_i.
pub fn revenue(l: &[u32], r: &[f64]) -> f64 {
    l.iter().zip(r).map(|(&li, &ri)| f64::from(li) * ri).sum()
}

/// Whether a choice meets the quality constraint under qualities `q`:
/// sum_i l_i q_i >= alpha sum_i l_i (an empty choice meets it).
pub fn feasible(l: &[u32], q: &[f64], alpha: f64) -> bool {
    let (mut good, mut units) = (0.0, 0.0);
    for (&li, &qi) in l.iter().zip(q) {
        good += f64::from(li) * qi;
        units += f64::from(li);
    }
    good >= alpha * units - 1e-12 * units.max(1.0)
}

/// The greedy oracle GSS (Deva et al. 2021), the paper's: (1) every producer
/// with r_i > 0 and q_i >= alpha at full capacity, slack s = sum l_i (q_i -
/// alpha); (2) the remaining profitable producers (q_i < alpha) by r_i /
/// (alpha - q_i), largest first (ties: lower index), each l_i = min(k_i,
/// floor(s / (alpha - q_i))) (without dividing where
/// the slack buys none, s < alpha - q_i, or all, s >= k_i (alpha - q_i), so
/// a quotient rounded across an integer cannot decide), s reduced by l_i
/// (alpha - q_i). Writes the
/// choice into `l`; `order` is workspace.
#[inline(always)]
pub fn greedy(q: &[f64], r: &[f64], k: &[u32], alpha: f64, l: &mut [u32], order: &mut GreedyOrder) {
    let mut slack = 0.0;
    order.clear();
    for i in 0..q.len() {
        l[i] = 0;
        if r[i] > 0.0 && q[i] >= alpha {
            l[i] = k[i];
            slack += f64::from(k[i]) * (q[i] - alpha);
        } else if r[i] > 0.0 {
            order.push((r[i] / (alpha - q[i]), i));
        }
    }
    // (ratio, index) pairs are distinct, so the unstable sort's order is
    // the one order: ratio descending, then index ascending.
    order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in order.iter() {
        let gap = alpha - q[i];
        // Slack below one unit's gap buys none (without the division,
        // whose quotient can round up to 1 there).
        if slack < gap {
            continue;
        }
        // Slack covering the whole capacity buys it (again without the
        // division); else floor(s / gap) units.
        let cap = f64::from(k[i]);
        let take = if slack >= cap * gap {
            k[i]
        } else {
            (slack / gap).floor().clamp(0.0, cap) as u32
        };
        l[i] = take;
        slack -= f64::from(take) * gap;
    }
}

/// [`greedy`]'s workspace: the candidates' (ratio r_i / (alpha - q_i),
/// index), m entries at most.
pub type GreedyOrder = Vec<(f64, usize)>;

crate::named_enum! {
    /// Which oracle solves an agent's integer program (its choice on the upper
    /// confidence qualities and the benchmark s* on the true ones).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum Oracle {
        /// [`greedy`] (GSS, the paper's).
        Greedy = "greedy",
        /// [`exact_into`] (exhaustive; small instances only).
        Exact = "exact",
    }
}

impl Oracle {
    /// Agent choice `l` for qualities `q`, revenues `r`, capacities `k`;
    /// `order` and `cur` are workspace (m entries each).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn solve(
        self,
        q: &[f64],
        r: &[f64],
        k: &[u32],
        alpha: f64,
        l: &mut [u32],
        order: &mut GreedyOrder,
        cur: &mut [u32],
    ) {
        match self {
            Oracle::Greedy => greedy(q, r, k, alpha, l, order),
            Oracle::Exact => exact_into(q, r, k, alpha, l, cur),
        }
    }
}

/// Most choices `oracle: exact` may search per agent and round.
pub const EXACT_LIMIT: u64 = 100_000;

/// The number of choices prod_i (k_i + 1), None on overflow.
pub fn search_space(k: &[u32]) -> Option<u64> {
    k.iter().try_fold(1u64, |acc, &ki| acc.checked_mul(u64::from(ki) + 1))
}

/// The exact optimum of the integer program by exhaustive search over every
/// choice (prod_i (k_i + 1) of them; for tests and small studies) into `l`,
/// without allocating: a depth-first search whose partial sums over
/// producers 0..i are the same left-to-right sums [`feasible`] and
/// [`revenue`] compute, so the optimum's revenue is theirs bit for bit.
/// Choices are visited in lexicographic order (the last producer fastest);
/// ties go to the first found. `cur` is workspace (m entries). The empty
/// choice is always feasible, so an optimum always exists.
pub fn exact_into(q: &[f64], r: &[f64], k: &[u32], alpha: f64, l: &mut [u32], cur: &mut [u32]) {
    struct Search<'a> {
        q: &'a [f64],
        r: &'a [f64],
        k: &'a [u32],
        alpha: f64,
        best: f64,
    }
    fn visit(s: &mut Search<'_>, i: usize, good: f64, units: f64, rev: f64, cur: &mut [u32], l: &mut [u32]) {
        if i == s.q.len() {
            if good >= s.alpha * units - 1e-12 * units.max(1.0) && rev > s.best {
                s.best = rev;
                l.copy_from_slice(cur);
            }
            return;
        }
        for li in 0..=s.k[i] {
            cur[i] = li;
            let x = f64::from(li);
            visit(s, i + 1, good + x * s.q[i], units + x, rev + x * s.r[i], cur, l);
        }
    }
    let mut s = Search {
        q,
        r,
        k,
        alpha,
        best: f64::NEG_INFINITY,
    };
    l.fill(0);
    visit(&mut s, 0, 0.0, 0.0, 0.0, cur, l);
}

/// [`exact_into`] returning the choice; None when the search space exceeds
/// `limit` choices.
pub fn exact(q: &[f64], r: &[f64], k: &[u32], alpha: f64, limit: u64) -> Option<Vec<u32>> {
    if search_space(k)? > limit {
        return None;
    }
    let mut l = vec![0u32; q.len()];
    let mut cur = vec![0u32; q.len()];
    exact_into(q, r, k, alpha, &mut l, &mut cur);
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_follow_their_distributions() {
        let spec = ProcurementSpec {
            kind: InstanceKind::Normal,
            agents: 10,
            producers: 30,
            alpha: 0.4,
            rho: 1.0,
            max_capacity: 50,
        };
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        for i in 0..200u64 {
            let inst = Instance::new(&spec, &[1, i]);
            qs.extend_from_slice(&inst.quality);
            ks.extend_from_slice(&inst.capacity);
        }
        let mean = qs.iter().sum::<f64>() / qs.len() as f64;
        let sd = (qs.iter().map(|q| (q - mean) * (q - mean)).sum::<f64>() / qs.len() as f64).sqrt();
        // N(0.4, 0.1) clipped to [0, 1] barely clips: mean 0.4, sd 0.1.
        assert!((mean - 0.4).abs() < 0.005 && (sd - 0.1).abs() < 0.005, "{mean} {sd}");
        assert!(ks.iter().all(|&k| (1..=50).contains(&k)));
        assert!(ks.contains(&1) && ks.contains(&50));
        let u = Instance::new(
            &ProcurementSpec {
                kind: InstanceKind::Uniform,
                ..spec
            },
            &[2],
        );
        assert!(u.quality.iter().chain(&u.cost).all(|&x| (0.0..1.0).contains(&x)));
    }

    /// Greedy on random instances: always feasible; optimal among choices
    /// of profitable producers (what it can choose from) by exhaustive
    /// search; and the mean revenue ratio to the true optimum, reported.
    #[test]
    fn greedy_is_feasible_and_optimal_over_profitable_producers() {
        let mut s = Stream::new(&[77]);
        let (mut ratios, mut optimal) = (Vec::new(), 0);
        let trials = 400;
        for _ in 0..trials {
            let m = 5;
            let q: Vec<f64> = (0..m).map(|_| s.uniform()).collect();
            let c: Vec<f64> = (0..m).map(|_| s.uniform()).collect();
            let k: Vec<u32> = (0..m).map(|_| 1 + s.below(4) as u32).collect();
            let alpha = 0.3 + 0.4 * s.uniform();
            let r: Vec<f64> = q.iter().zip(&c).map(|(qi, ci)| qi - ci).collect();
            let mut l = vec![0; m];
            greedy(&q, &r, &k, alpha, &mut l, &mut Vec::new());
            assert!(
                feasible(&l, &q, alpha),
                "greedy infeasible: {q:?} {k:?} {alpha} -> {l:?}"
            );
            let g = revenue(&l, &r);
            // Exact over profitable producers only (capacity 0 elsewhere).
            let kp: Vec<u32> = k
                .iter()
                .zip(&r)
                .map(|(&ki, &ri)| if ri > 0.0 { ki } else { 0 })
                .collect();
            let best_p = exact(&q, &r, &kp, alpha, 1 << 20).unwrap();
            assert!(
                (g - revenue(&best_p, &r)).abs() < 1e-9 || g > revenue(&best_p, &r),
                "greedy {g} below the profitable optimum {}",
                revenue(&best_p, &r)
            );
            let best = revenue(&exact(&q, &r, &k, alpha, 1 << 20).unwrap(), &r);
            if best > 0.0 {
                ratios.push(g / best);
            }
            if (g - best).abs() < 1e-9 {
                optimal += 1;
            }
        }
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        println!(
            "greedy optimal on {optimal}/{trials} instances; mean revenue ratio {mean:.4}, worst {:.4}",
            ratios.iter().copied().fold(f64::INFINITY, f64::min)
        );
        assert!(optimal as f64 >= 0.9 * trials as f64, "{optimal}/{trials}");
    }

    #[test]
    fn greedy_follows_the_stated_steps() {
        // alpha 0.5: producer 0 (q 0.9, r 0.5, k 2) at full capacity gives
        // slack 0.8; producer 1 (q 0.3, gap 0.2, r 0.2: ratio 1) before
        // producer 2 (q 0.1, gap 0.4, r 0.2: ratio 0.5): floor(0.8/0.2) = 4
        // capped at k 3 -> slack 0.2; producer 2: floor(0.2/0.4) = 0.
        // Producer 3 is unprofitable and never bought.
        let q = [0.9, 0.3, 0.1, 0.95];
        let r = [0.5, 0.2, 0.2, -0.1];
        let k = [2, 3, 5, 9];
        let mut l = [0u32; 4];
        greedy(&q, &r, &k, 0.5, &mut l, &mut Vec::new());
        assert_eq!(l, [2, 3, 0, 0]);
        // The exact optimum buys the unprofitable high-quality producer 3
        // (each unit costs 0.1 and adds 0.45 of slack, worth 0.225 of
        // producer 2's revenue), which greedy never does.
        let best = exact(&q, &r, &k, 0.5, 1 << 20).unwrap();
        assert!(best[3] > 0, "{best:?}");
        assert!(feasible(&best, &q, 0.5));
        assert!(revenue(&best, &r) > revenue(&l, &r) + 0.5, "{best:?}");
    }
}
