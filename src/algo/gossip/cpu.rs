//! The CPU's [`crate::algo::rounds::RoundOps`]: struct-of-arrays state per federation (agent x
//! arm), one round of every agent at a time, federations on rayon's pool
//! when the batch has several.

use super::batch::{
    FederationState, GossipBatch, GossipObservation, GossipPolicy, GossipPrivacy, observation,
};
use crate::backend::BatchError;
use crate::env::mab::MabEnv;
use crate::privacy::partial_sum::{DiscretePartialSum, PartialSum, Releases};
use crate::rng::{Stream, fold_more};
use rayon::prelude::*;

/// The CPU state of every federation of a gossip batch (serializable
/// whole, every stream included, for snapshots).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CpuGossip {
    feds: Vec<Fed>,
    policy: GossipPolicy,
    c: f64,
    privacy: Option<GossipPrivacy>,
}

/// One federation: counts, estimates and streams of its N agents x M arms
/// (agent-major).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Fed {
    env: MabEnv,
    /// Neighbours of each agent.
    adj: Vec<Vec<usize>>,
    edges: Vec<(usize, usize)>,
    edge_stream: Stream,
    noise: Vec<Stream>,
    /// n_{i,k}.
    pub n: Vec<u64>,
    /// n~_{i,k} (this round's) and the previous round's.
    pub nt: Vec<u64>,
    nt_prev: Vec<u64>,
    /// Exact sums of own observations (non-private).
    sum: Vec<f64>,
    /// Private partial sums.
    ps: Vec<PartialSum>,
    /// Private partial sums on the lattice (`sampler: discrete`; `ps` is
    /// then empty).
    #[serde(default)]
    dps: Vec<DiscretePartialSum>,
    /// Folded noise key of each agent (private).
    keys: Vec<u64>,
    /// Workspace of the private releases.
    #[serde(skip)]
    releases: Releases,
    /// Each agent's and arm's noise key (private; derived from `keys`).
    #[serde(skip)]
    arm_keys: Vec<u64>,
    /// X_bar_{i,k} (private: the noisy sum over n).
    pub xbar: Vec<f64>,
    /// X_bar before this round's update.
    xbar_old: Vec<f64>,
    /// theta_{i,k}.
    theta: Vec<f64>,
    /// The pulled arm of each agent this round.
    arm: Vec<usize>,
    regret: Vec<f64>,
    group: f64,
    forced: u64,
    clipped: u64,
    /// Oracle index (per arm, workspace).
    pooled: Vec<f64>,
    /// This round's UCB widths (per agent and arm, workspace).
    #[serde(skip)]
    widths: Vec<f64>,
}

impl CpuGossip {
    /// Every federation of `batch` at round 0.
    pub fn new(batch: &GossipBatch) -> Result<Self, BatchError> {
        let nf = batch.federations();
        if batch.graphs.len() != nf || batch.edge_keys.len() != nf {
            return Err(BatchError::unsupported("one graph and one edge key per federation"));
        }
        let feds = batch
            .envs
            .iter()
            .zip(&batch.graphs)
            .zip(&batch.edge_keys)
            .enumerate()
            .map(|(f, ((env, g), ek))| {
                let (n, m) = (env.spec.agents, env.spec.arms);
                if g.len() != n {
                    return Err(BatchError::unsupported(format!(
                        "a graph on {} agents for {n} agents",
                        g.len()
                    )));
                }
                let keys = match &batch.privacy {
                    Some(p) if p.noise_keys.len() == nf * n => p.noise_keys[f * n..(f + 1) * n].to_vec(),
                    Some(_) => return Err(BatchError::unsupported("one noise key per agent")),
                    None => Vec::new(),
                };
                let z = vec![0.0; n * m];
                let discrete = batch.privacy.as_ref().is_some_and(|p| p.discrete.is_some());
                let private = if keys.is_empty() { 0 } else { n * m };
                let (floats, lattice) = if discrete { (0, private) } else { (private, 0) };
                Ok(Fed {
                    adj: (0..n).map(|i| g.neighbors(i).to_vec()).collect(),
                    edges: g.edges(),
                    edge_stream: Stream::new(ek),
                    noise: (0..n).map(|i| Stream::new(&env.noise_key(i))).collect(),
                    n: vec![0; n * m],
                    nt: vec![0; n * m],
                    nt_prev: vec![0; n * m],
                    sum: z.clone(),
                    ps: vec![PartialSum::default(); floats],
                    dps: vec![DiscretePartialSum::default(); lattice],
                    keys,
                    releases: Releases::default(),
                    arm_keys: Vec::new(),
                    xbar: z.clone(),
                    xbar_old: z.clone(),
                    theta: z,
                    arm: vec![0; n],
                    regret: vec![0.0; n],
                    group: 0.0,
                    forced: 0,
                    clipped: 0,
                    pooled: vec![0.0; m],
                    widths: vec![0.0; n * m],
                    env: env.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            feds,
            policy: batch.policy,
            c: batch.confidence_scale,
            privacy: batch.privacy.clone(),
        })
    }

    /// The federations' state (for tests of invariants).
    pub fn federations(&self) -> &[Fed] {
        &self.feds
    }
}

/// Index of the largest value, lowest index on ties (NaN never wins).
#[inline]
fn argmax(it: impl Iterator<Item = f64>) -> usize {
    let mut best = (f64::NEG_INFINITY, 0);
    for (k, v) in it.enumerate() {
        if v > best.0 {
            best = (v, k);
        }
    }
    best.1
}

/// The UCB width of an arm pulled `cnt` times at round t (`lt` = ln t,
/// `log2_t` = log2 t), with the private term when the federation is
/// private. The portable logarithm ([`crate::math`]), so a GPU computes
/// the same widths bit for bit: `ln_normal_positive` is `ln` for cnt >= 1
/// (a positive normal double), and cnt = 0 takes `ln`'s -inf by a select,
/// so lanes of this vectorize ([`widths`]).
#[inline(always)]
fn width(cnt: u64, c: f64, lt: f64, log2_t: f64, privacy: Option<&GossipPrivacy>) -> f64 {
    let nn = cnt as f64;
    let base = (2.0 * c * lt / nn).sqrt();
    match privacy {
        Some(p) => {
            let ln = crate::math::ln_normal_positive(nn);
            let ln = if cnt == 0 { f64::NEG_INFINITY } else { ln };
            base + p.c_priv * p.log2_horizon * log2_t * ln / (p.epsilon * nn)
        }
        None => base,
    }
}

/// The private [`width`] of every agent and arm, `out[e]` for
/// `counts[e]`, in one pass (the same operations per lane, so the same
/// bits).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn widths(counts: &[u64], at: (f64, f64, f64), p: &GossipPrivacy, out: &mut [f64]) {
    let (c, lt, log2_t) = at;
    for (w, &cnt) in out.iter_mut().zip(counts) {
        *w = width(cnt, c, lt, log2_t, Some(p));
    }
}

impl Fed {
    /// One round of every agent: choose from the previous round's state,
    /// observe and update, then (gossip policies) estimate network counts
    /// and gossip over one random edge.
    fn round(&mut self, t: u64, policy: GossipPolicy, c: f64, privacy: Option<&GossipPrivacy>) {
        self.choose(t, policy, c, privacy);
        self.observe(t, privacy);
        if policy == GossipPolicy::Gossip {
            self.gossip(t);
        }
    }

    /// Step 1: every agent's arm, from the previous round's state: the initial
    /// pulls, then the policy's (a lagging arm is forced under gossip).
    fn choose(&mut self, t: u64, policy: GossipPolicy, c: f64, privacy: Option<&GossipPrivacy>) {
        let (n, m) = (self.env.spec.agents, self.env.spec.arms);
        // log2 t = ln t / ln 2.
        let lt = crate::math::ln(t as f64);
        let log2_t = lt / std::f64::consts::LN_2;
        // Private widths (a logarithm each) in one vectorized pass for every
        // agent and arm; without privacy a width is a division and a root,
        // no cheaper in lanes, so only those the argmax reads are computed.
        let lanes = privacy.is_some() && t > m as u64 && matches!(policy, GossipPolicy::Gossip | GossipPolicy::Local);
        if let (true, Some(p)) = (lanes, privacy) {
            // Workspace, not state: sized again after a resume.
            self.widths.resize(self.n.len(), 0.0);
            widths(&self.n, (c, lt, log2_t), p, &mut self.widths);
        }
        let (counts, lane_widths) = (&self.n, &self.widths);
        let width = |e: usize| {
            if lanes {
                lane_widths[e]
            } else {
                width(counts[e], c, lt, log2_t, privacy)
            }
        };
        if policy == GossipPolicy::Oracle && t > m as u64 {
            for k in 0..m {
                let (mut s, mut cnt) = (0.0, 0u64);
                for i in 0..n {
                    s += self.xbar[i * m + k];
                    cnt += self.n[i * m + k];
                }
                self.pooled[k] = s / n as f64 + (2.0 * c * lt / cnt as f64).sqrt();
            }
        }
        for i in 0..n {
            let row = i * m..(i + 1) * m;
            self.arm[i] = if t <= m as u64 {
                (t - 1) as usize
            } else {
                match policy {
                    GossipPolicy::Gossip => {
                        let lag = (0..m)
                            .filter(|&k| self.n[i * m + k] + (n as u64) < self.nt[i * m + k])
                            .min_by_key(|&k| (self.n[i * m + k], k));
                        match lag {
                            Some(k) => {
                                self.forced += 1;
                                k
                            }
                            None => argmax(self.theta[row.clone()].iter().zip(row).map(|(th, e)| th + width(e))),
                        }
                    }
                    GossipPolicy::Local => argmax(self.xbar[row.clone()].iter().zip(row).map(|(x, e)| x + width(e))),
                    GossipPolicy::Oracle => argmax(self.pooled.iter().copied()),
                }
            };
        }
    }

    /// Step 2: every agent observes its arm and updates its own counts and
    /// estimates (privately: clipped, through its binary partial sums).
    fn observe(&mut self, t: u64, privacy: Option<&GossipPrivacy>) {
        let (n, m) = (self.env.spec.agents, self.env.spec.arms);
        self.xbar_old.copy_from_slice(&self.xbar);
        let private = self.ps.len().max(self.dps.len());
        if privacy.is_some() && self.arm_keys.len() != private {
            // Each agent's and arm's key, fold_more(agent key, arm):
            // constant, derived once (and again after a resume).
            self.arm_keys = (0..private).map(|e| fold_more(self.keys[e / m], (e % m) as u64)).collect();
        }
        let mut total = 0.0;
        for i in 0..n {
            let a = self.arm[i];
            let x = self.env.observe(i, a, &mut self.noise[i]);
            let r = self.env.regret(a);
            self.regret[i] += r;
            total += r;
            self.n[i * m + a] += 1;
            match privacy {
                Some(p) => {
                    let xc = x.clamp(p.lo, p.hi);
                    if xc != x {
                        self.clipped += 1;
                    }
                    match &p.discrete {
                        Some(lap) => {
                            let xl = crate::privacy::lattice::to_lattice(xc);
                            for k in 0..m {
                                let e = i * m + k;
                                self.dps[e].push(t, (k == a).then_some(xl), self.arm_keys[e], lap);
                            }
                        }
                        None => {
                            for k in 0..m {
                                self.ps[i * m + k].push(t, (k == a).then_some(xc));
                            }
                        }
                    }
                }
                None => {
                    let e = i * m + a;
                    self.sum[e] += x;
                    self.xbar[e] = self.sum[e] / self.n[e] as f64;
                }
            }
        }
        self.group += total;
        if let Some(p) = privacy {
            // Every agent's and arm's release at once (their blocks' noises
            // in full vector lanes), then X_bar = release / n.
            if p.discrete.is_some() {
                // The lattice release, an exact integer, times the step
                // (a power of two: exact).
                for (x, d) in self.xbar.iter_mut().zip(&self.dps) {
                    *x = d.release() as f64 * crate::privacy::lattice::STEP;
                }
            } else {
                self.releases
                    .release_all(&self.ps, &self.arm_keys, t, p.scale, &mut self.xbar);
            }
            for (x, &cnt) in self.xbar.iter_mut().zip(&self.n) {
                *x = if cnt == 0 { 0.0 } else { *x / cnt as f64 };
            }
        }
    }

    /// Steps 3 and 4 (gossip policies): network-count estimates from the
    /// neighbours' previous values, then the gossip step.
    fn gossip(&mut self, t: u64) {
        let m = self.env.spec.arms;
        let n = self.env.spec.agents;
        // 3. Network-count estimates from the neighbours' previous values.
        if t <= m as u64 {
            self.nt.copy_from_slice(&self.n);
        } else {
            for i in 0..n {
                for k in 0..m {
                    let e = i * m + k;
                    self.nt[e] = self.adj[i]
                        .iter()
                        .map(|&j| self.nt_prev[j * m + k])
                        .fold(self.n[e], u64::max);
                }
            }
        }
        self.nt_prev.copy_from_slice(&self.nt);
        // 4. Gossip: the initial pulls set theta = X_bar; afterwards one
        // uniformly random edge averages its endpoints' previous values and
        // every agent adds its own mean's change.
        if t <= m as u64 {
            self.theta.copy_from_slice(&self.xbar);
            return;
        }
        let (u, v) = self.edges[self.edge_stream.below(self.edges.len() as u64) as usize];
        for k in 0..m {
            let (tu, tv) = (self.theta[u * m + k], self.theta[v * m + k]);
            let avg = 0.5 * (tu + tv);
            self.theta[u * m + k] = avg;
            self.theta[v * m + k] = avg;
        }
        for ((th, x), x0) in self.theta.iter_mut().zip(&self.xbar).zip(&self.xbar_old) {
            *th += x - x0;
        }
    }

    fn observation(&self, policy: GossipPolicy) -> GossipObservation {
        observation(
            policy,
            &self.env,
            &FederationState {
                theta: &self.theta,
                xbar: &self.xbar,
                regret: &self.regret,
                group: self.group,
                forced: self.forced,
                clipped: self.clipped,
            },
        )
    }
}

impl crate::algo::rounds::RoundOps for CpuGossip {
    type Obs = GossipObservation;

    fn rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError> {
        let (policy, c, privacy) = (self.policy, self.c, self.privacy.as_ref());
        let run = |f: &mut Fed| {
            for t in t0..t0 + count {
                f.round(t, policy, c, privacy);
            }
        };
        if self.feds.len() == 1 {
            run(&mut self.feds[0]);
        } else {
            self.feds.par_iter_mut().for_each(run);
        }
        Ok(())
    }

    fn observe(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError> {
        out.clear();
        out.extend(self.feds.iter().map(|f| f.observation(self.policy)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The private widths in lanes equal the textbook width with `ln` (its
    /// special case at a count of 0 included), bit for bit, for counts
    /// 0..2000 and rounds from 1 to 10^7.
    #[test]
    fn lane_widths_equal_the_scalar_width_bit_for_bit() {
        let p = GossipPrivacy {
            epsilon: 0.7,
            scale: 3.0,
            lo: -1.0,
            hi: 2.0,
            c_priv: 4.0,
            log2_horizon: 20.0,
            noise_keys: Vec::new(),
            discrete: None,
        };
        let counts: Vec<u64> = (0..2000).collect();
        let mut out = vec![0.0; counts.len()];
        for t in [1u64, 17, 4096, 10_000_000] {
            let lt = crate::math::ln(t as f64);
            let log2_t = lt / std::f64::consts::LN_2;
            widths(&counts, (1.3, lt, log2_t), &p, &mut out);
            for (&cnt, w) in counts.iter().zip(&out) {
                let nn = cnt as f64;
                let base = (2.0 * 1.3 * lt / nn).sqrt();
                let want = base + p.c_priv * p.log2_horizon * log2_t * crate::math::ln(nn) / (p.epsilon * nn);
                assert_eq!(w.to_bits(), want.to_bits(), "t {t} count {cnt}");
            }
        }
    }
}
