//! The CPU's [`crate::algo::rounds::RoundOps`]: per federation, the agents' counts W, Y (and
//! P-FCB's uncommunicated w, y) as agent-major rows of m producers, one round
//! at a time; federations on rayon's pool when the batch has several.

use super::batch::{
    Benchmarks, CombBatch, CombObservation, CombPolicy, PFcb, p_fcb_lattice_message, p_fcb_message,
};
use crate::backend::BatchError;
use crate::env::procurement::{GreedyOrder, Instance, Oracle};
use crate::rng::binomial::STRIDE;
use crate::rng::small_binomial::CdfTables;
use crate::rng::{fold_more, uniform_at};
use rayon::prelude::*;

/// The CPU state of every federation of a combinatorial batch (serializable
/// whole, for snapshots).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CpuComb {
    feds: Vec<Fed>,
    policy: CombPolicy,
    oracle: Oracle,
    explore: u64,
}

/// One federation.
#[derive(serde::Serialize, serde::Deserialize)]
struct Fed {
    inst: Instance,
    keys: Vec<u64>,
    noise_keys: Vec<u64>,
    /// Units and good units per (agent, producer): f64 because accepted
    /// P-FCB messages add omega2 times noisy counts.
    w_total: Vec<f64>,
    y_total: Vec<f64>,
    /// Units the agent procured itself.
    own: Vec<f64>,
    /// P-FCB: units and good units since the agent's last communication.
    pend_w: Vec<f64>,
    pend_y: Vec<f64>,
    /// Per agent: revenue of s* and the penalty L_j; true revenues (n x m).
    best: Vec<f64>,
    penalty: Vec<f64>,
    r_true: Vec<f64>,
    regret: Vec<f64>,
    obs: CombObservation,
    comm: usize,
    // Workspace.
    q_plus: Vec<f64>,
    r: Vec<f64>,
    l: Vec<u32>,
    order: GreedyOrder,
    cur: Vec<u32>,
    round_w: Vec<f64>,
    round_y: Vec<f64>,
    msg: Vec<f64>,
    snap_w: Vec<f64>,
    snap_y: Vec<f64>,
    /// The good-unit draws' cumulative thresholds per (producer, units),
    /// rebuilt after a snapshot (a pure function of the qualities).
    #[serde(skip)]
    tables: CdfTables,
    /// Workspace: an agent's uniforms of the round, one per producer.
    u: Vec<f64>,
    /// Each agent's last choice (n x m; u32::MAX before the first) and its
    /// regret (None: it violated the constraint).
    last_l: Vec<u32>,
    last_reg: Vec<Option<f64>>,
}

impl CpuComb {
    /// Every federation of `batch` at round 0.
    pub fn new(batch: &CombBatch) -> Result<Self, BatchError> {
        if let CombPolicy::PFcb(p) = &batch.policy
            && (p.eps.len() != p.rounds.len() || p.spent.len() != p.rounds.len())
        {
            return Err(BatchError::unsupported(
                "one epsilon and one spent epsilon per communication round",
            ));
        }
        let feds = batch
            .instances
            .iter()
            .enumerate()
            .map(|(f, inst)| {
                let (n, m) = (inst.spec.agents, inst.spec.producers);
                let keys = batch
                    .quality_keys
                    .get(f * n..(f + 1) * n)
                    .ok_or_else(|| BatchError::unsupported("one quality key per agent"))?
                    .to_vec();
                let noise_keys = match &batch.policy {
                    CombPolicy::PFcb(p) => p
                        .noise_keys
                        .get(f * n..(f + 1) * n)
                        .ok_or_else(|| BatchError::unsupported("one noise key per agent"))?
                        .to_vec(),
                    _ => Vec::new(),
                };
                let Benchmarks { r_true, best, penalty } = Benchmarks::new(inst, batch.oracle);
                let z = vec![0.0; n * m];
                Ok(Fed {
                    keys,
                    noise_keys,
                    w_total: z.clone(),
                    y_total: z.clone(),
                    own: z.clone(),
                    pend_w: z.clone(),
                    pend_y: z.clone(),
                    best,
                    penalty,
                    r_true,
                    regret: vec![0.0; n],
                    obs: CombObservation::default(),
                    comm: 0,
                    q_plus: vec![0.0; m],
                    r: vec![0.0; m],
                    l: vec![0u32; m],
                    order: Vec::with_capacity(m),
                    cur: vec![0u32; m],
                    round_w: vec![0.0; m],
                    round_y: vec![0.0; m],
                    msg: vec![0.0; 2 * n * m],
                    snap_w: z.clone(),
                    snap_y: z,
                    tables: CdfTables::new(&inst.quality, u64::from(inst.spec.max_capacity)),
                    u: vec![0.0; m],
                    last_l: vec![u32::MAX; n * m],
                    last_reg: vec![None; n],
                    inst: inst.clone(),
                })
            })
            .collect::<Result<Vec<_>, BatchError>>()?;
        Ok(Self {
            feds,
            policy: batch.policy.clone(),
            oracle: batch.oracle,
            explore: batch.explore_rounds,
        })
    }
}

/// Regret of choice `l` of an agent whose true revenues are `r_true` and
/// whose benchmark s* earns `best`; None when `l` violates the constraint
/// under the true qualities. One pass for the three sums, each in producer
/// order (the same bits as `procurement::feasible` and `revenue`).
fn choice_regret(inst: &Instance, r_true: &[f64], best: f64, l: &[u32]) -> Option<f64> {
    let (mut good, mut units, mut rev) = (0.0, 0.0, 0.0);
    for ((&li, &qi), &ri) in l.iter().zip(&inst.quality).zip(r_true) {
        let lf = f64::from(li);
        good += lf * qi;
        units += lf;
        rev += lf * ri;
    }
    let alpha = inst.spec.alpha;
    (good >= alpha * units - 1e-12 * f64::max(units, 1.0)).then_some(best - rev)
}

/// One agent's upper confidence qualities q+_i = Y_i / W_i + sqrt(3 ln t /
/// (2 W_i)) (`lt` = ln t), element by element (vectorized in
/// [`run_rounds`]' clones for wider registers; the same bits), computed as
/// (Y_i + sqrt(1.5 ln t W_i)) / W_i, one division where the textbook form
/// has two (the kernel's phase 1 computes the same).
#[inline(always)]
fn ucb(w: &[f64], y: &[f64], lt: f64, q_plus: &mut [f64]) {
    for ((q, &w), &y) in q_plus.iter_mut().zip(w).zip(y) {
        *q = (y + (1.5 * lt * w).sqrt()) / w;
    }
}

/// One agent's revenues r_i = rho q+_i - c_i.
#[inline(always)]
fn revenues(q_plus: &[f64], cost: &[f64], rho: f64, r: &mut [f64]) {
    for ((r, &q), &c) in r.iter_mut().zip(q_plus).zip(cost) {
        *r = rho * q - c;
    }
}

/// FCB's sharing: every agent's row (of m producers) of `total` gains the
/// round's units over all agents, `round`.
#[inline(always)]
fn add_to_every_row(total: &mut [f64], round: &[f64]) {
    for row in total.chunks_exact_mut(round.len()) {
        for (t, x) in row.iter_mut().zip(round) {
            *t += x;
        }
    }
}

/// Rounds t0 .. t0 + count of one federation. Compiled for the CPU's
/// widest registers too (chosen at run time; the default build stays
/// portable): everything a round calls is inlined into each clone, so the
/// UCB and revenue rows, FCB's sharing and the draws' threshold counts use
/// AVX2/AVX-512 where the CPU has them, and `floor` is one instruction.
/// Element-wise operations and sums in a fixed order: every clone computes
/// the same bits.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn run_rounds(f: &mut Fed, t0: u64, count: u64, policy: &CombPolicy, oracle: Oracle, explore: u64) {
    for t in t0..t0 + count {
        f.round(t, policy, oracle, explore);
    }
}

impl Fed {
    /// One round of every agent: choose (the oracle on the upper confidence
    /// qualities; everything during exploration), regret, observe, share.
    #[inline(always)]
    fn round(&mut self, t: u64, policy: &CombPolicy, oracle: Oracle, explore: u64) {
        let (n, m) = (self.inst.spec.agents, self.inst.spec.producers);
        let alpha = self.inst.spec.alpha;
        let exploring = t <= explore;
        let lt = crate::math::ln(t as f64);
        if self.tables.slots() != m {
            // Restored from a snapshot.
            self.tables = CdfTables::new(&self.inst.quality, u64::from(self.inst.spec.max_capacity));
        }
        self.round_w.fill(0.0);
        self.round_y.fill(0.0);
        let mut total = 0.0;
        for j in 0..n {
            let row = j * m..(j + 1) * m;
            if exploring {
                self.l.fill(1);
            } else {
                // Under FCB every agent's counts are the same (each round's
                // units reach every row), so agent 0's q+ serve all.
                if j == 0 || !matches!(policy, CombPolicy::Fcb) {
                    ucb(
                        &self.w_total[row.clone()],
                        &self.y_total[row.clone()],
                        lt,
                        &mut self.q_plus,
                    );
                }
                revenues(&self.q_plus, self.inst.costs(j), self.inst.spec.rho, &mut self.r);
                oracle.solve(
                    &self.q_plus,
                    &self.r,
                    self.inst.capacities(j),
                    alpha,
                    &mut self.l,
                    &mut self.order,
                    &mut self.cur,
                );
            }
            // Regret against the oracle on the true qualities: a function of
            // the choice alone, so an agent repeating its last choice (the
            // common case once estimates settle) repeats its last value.
            let last = &mut self.last_l[row.clone()];
            if last[..] != self.l[..] {
                last.copy_from_slice(&self.l);
                self.last_reg[j] = choice_regret(&self.inst, &self.r_true[row], self.best[j], &self.l);
            }
            let reg = match self.last_reg[j] {
                Some(reg) => reg,
                None => {
                    self.obs.violations += 1;
                    self.penalty[j]
                }
            };
            self.regret[j] += reg;
            total += reg;
            // Observe the units' qualities: how many of the l_i units bought
            // from producer i are good (each with probability q_i) is one
            // keyed Binomial(l_i, q_i) draw, `small_binomial_at(round key,
            // i x STRIDE, l_i, q_i)` (counter-based: common across
            // algorithms; `fb_small_binomial_at` in the kernel draws the
            // same bits; here through the cached tables, the same bits
            // again).
            let key = fold_more(self.keys[j], t);
            // Every producer's uniform at once (in vectors), then the draws.
            for (i, u) in self.u.iter_mut().enumerate() {
                *u = uniform_at(key, i as u64 * STRIDE);
            }
            for i in 0..m {
                let units = self.l[i];
                if units == 0 {
                    continue;
                }
                let index = i as u64 * STRIDE;
                let good = self.tables.draw_with(self.u[i], key, index, i, u64::from(units)) as f64;
                let (w, e) = (f64::from(units), j * m + i);
                self.own[e] += w;
                match policy {
                    CombPolicy::Fcb => {
                        self.round_w[i] += w;
                        self.round_y[i] += good;
                    }
                    CombPolicy::NonFederated => {
                        self.w_total[e] += w;
                        self.y_total[e] += good;
                    }
                    CombPolicy::PFcb(_) => {
                        self.w_total[e] += w;
                        self.y_total[e] += good;
                        self.pend_w[e] += w;
                        self.pend_y[e] += good;
                    }
                }
            }
        }
        self.obs.group_regret += total;
        if !exploring {
            self.obs.regret_after_exploration += total;
        }
        match policy {
            CombPolicy::Fcb => {
                add_to_every_row(&mut self.w_total, &self.round_w);
                add_to_every_row(&mut self.y_total, &self.round_y);
            }
            CombPolicy::PFcb(p) if self.comm < p.rounds.len() && p.rounds[self.comm] == t => self.communicate(t, p),
            _ => {}
        }
    }

    /// P-FCB's communication round `self.comm` at round t: every agent's
    /// noisy message, then every receiver's decisions, then the resets.
    /// Each message is tested against the receiver's (W, Y) as it stood
    /// before the round (a snapshot), so the order of senders has no
    /// effect. The paper's text admits this reading and the sequential one
    /// (each acceptance narrowing the window for the next sender); the
    /// paper says neither. The engine takes the snapshot: the round is one
    /// exchange of simultaneous messages, the outcome does not depend on an
    /// arbitrary numbering of the agents, and receivers decide in parallel
    /// (on a GPU, one thread per receiver). The two readings accept about
    /// 10% apart at omega_2 = 10 and do not differ measurably in regret.
    fn communicate(&mut self, t: u64, p: &PFcb) {
        let (n, m) = (self.inst.spec.agents, self.inst.spec.producers);
        let z = self.comm;
        let scale = p.noise_scale(z);
        for j in 0..n {
            let key = fold_more(self.noise_keys[j], z as u64);
            for i in 0..m {
                let e = j * m + i;
                let sigma = f64::from(self.inst.capacities(j)[i]) * scale;
                let (w, y) = (self.pend_w[e], self.pend_y[e]);
                (self.msg[2 * e], self.msg[2 * e + 1]) = match p.lattice {
                    Some(step) => p_fcb_lattice_message(w, y, sigma, step, key, i),
                    None => p_fcb_message(w, y, sigma, key, i),
                };
            }
        }
        self.snap_w.copy_from_slice(&self.w_total);
        self.snap_y.copy_from_slice(&self.y_total);
        let ln_window = if p.prose_window {
            crate::math::ln(t as f64)
        } else {
            crate::math::ln((n as u64 * t) as f64)
        };
        for rcv in 0..n {
            for snd in (0..n).filter(|&s| s != rcv) {
                for i in 0..m {
                    let (wt, yt) = (self.msg[2 * (snd * m + i)], self.msg[2 * (snd * m + i) + 1]);
                    let e = rcv * m + i;
                    let units = if p.prose_window { self.own[e] } else { self.snap_w[e] };
                    let q_hat = self.snap_y[e] / self.snap_w[e];
                    let half = p.omega1 * (3.0 * ln_window / (2.0 * units)).sqrt();
                    if wt > 0.0 && (yt / wt - q_hat).abs() <= half {
                        self.w_total[e] += p.omega2 * wt;
                        self.y_total[e] += p.omega2 * yt;
                        self.obs.accepted += 1;
                    } else {
                        self.obs.rejected += 1;
                    }
                }
            }
        }
        self.pend_w.fill(0.0);
        self.pend_y.fill(0.0);
        self.comm += 1;
        self.obs.communications += 1;
        self.obs.epsilon_spent += p.spent[z];
        self.obs.delta_spent += p.delta;
    }
}

impl CpuComb {
    /// Federation `f`'s totals W and Y (agent-major rows of m producers).
    pub fn counts(&self, f: usize) -> Option<(&[f64], &[f64])> {
        self.feds.get(f).map(|d| (&d.w_total[..], &d.y_total[..]))
    }
}

impl crate::algo::rounds::RoundOps for CpuComb {
    type Obs = CombObservation;

    fn rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError> {
        let (policy, oracle, explore) = (&self.policy, self.oracle, self.explore);
        let run = |f: &mut Fed| run_rounds(f, t0, count, policy, oracle, explore);
        if self.feds.len() == 1 {
            run(&mut self.feds[0]);
        } else {
            self.feds.par_iter_mut().for_each(run);
        }
        Ok(())
    }

    fn observe(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError> {
        out.clear();
        out.extend(self.feds.iter().map(|f| CombObservation {
            agent_regret_max: f.regret.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ..f.obs
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::procurement::{InstanceKind, ProcurementSpec};

    /// An agent given the true qualities (its choice = the oracle on q) has
    /// zero regret and meets the constraint, under both oracles, on 40
    /// instances of each kind.
    #[test]
    fn an_agent_given_the_true_qualities_has_zero_regret() {
        for (oracle, producers, cap) in [(Oracle::Greedy, 30, 50), (Oracle::Exact, 5, 4)] {
            for kind in [InstanceKind::Uniform, InstanceKind::Normal] {
                let spec = ProcurementSpec {
                    kind,
                    agents: 3,
                    producers,
                    alpha: 0.4,
                    rho: 1.0,
                    max_capacity: cap,
                };
                let batch = CombBatch {
                    instances: (0..40).map(|r| Instance::new(&spec, &[5, 1, r])).collect(),
                    quality_keys: vec![0; 40 * 3],
                    explore_rounds: 1,
                    policy: CombPolicy::NonFederated,
                    oracle,
                };
                let comb = CpuComb::new(&batch).unwrap();
                for fed in &comb.feds {
                    let mut l = vec![0u32; producers];
                    let (mut order, mut cur) = (Vec::new(), vec![0u32; producers]);
                    for j in 0..3 {
                        let (q, r) = (&fed.inst.quality, &fed.r_true[j * producers..(j + 1) * producers]);
                        oracle.solve(q, r, fed.inst.capacities(j), 0.4, &mut l, &mut order, &mut cur);
                        assert_eq!(
                            choice_regret(&fed.inst, r, fed.best[j], &l),
                            Some(0.0),
                            "{oracle:?} {kind:?}"
                        );
                        // And a choice that buys one unit less of a bought producer earns less (or the same).
                        if let Some(i) = l.iter().position(|&x| x > 0) {
                            l[i] -= 1;
                            if let Some(reg) = choice_regret(&fed.inst, r, fed.best[j], &l) {
                                assert!(reg >= 0.0 || oracle == Oracle::Greedy, "{reg}");
                            }
                        }
                    }
                }
            }
        }
    }
}
