//! The UCB state of one federation's agents on the CPU, struct of arrays,
//! and the per-agent operations on it (step, refactorization, the reset
//! after a sync), used by the lockstep operations ([`super::lockstep`]).

use crate::algo::linear::step::{AgentState, AgentStep, StepResult, Workspace};
use crate::env::{AgentStreams, LinearEnv};
use crate::linalg;

/// Struct-of-arrays UCB state of the M agents of one federation.
///
/// `vinv`, `logdet`, `b` describe V_i^{-1}, log det V_i and b_i
/// (theta_hat_i = V_i^{-1} b_i); `gram` and `bias` are the agent's exact
/// local sums (all history for OFUL, since the last sync for federated
/// algorithms) so that V_i can be rebuilt exactly at a refactorization.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct AgentBank {
    /// Dimension.
    pub d: usize,
    /// Agents.
    pub m: usize,
    /// V_i^{-1}, m blocks of d x d.
    pub vinv: Vec<f64>,
    /// log det V_i.
    pub logdet: Vec<f64>,
    /// Whether a step keeps `logdet` up to date (set false by a batch that
    /// reads it nowhere: no per-agent width, no determinant test; it then
    /// holds its value at the last factorization).
    pub track_logdet: bool,
    /// b_i.
    pub b: Vec<f64>,
    /// Exact local Gram sums.
    pub gram: Vec<f64>,
    /// Exact local reward-weighted sums.
    pub bias: Vec<f64>,
    /// Rank-1 updates since the last factorization.
    pub since_factor: Vec<u32>,
    /// Cumulative regret per agent.
    pub regret: Vec<f64>,
    /// Environment streams per agent.
    pub streams: Vec<AgentStreams>,
    /// Workspace.
    pub ws: Workspace,
    /// Spare d x d matrix for refactorizations.
    vtmp: Vec<f64>,
    /// Factorizations that needed jitter or failed.
    pub cholesky_failures: u64,
    /// Rewards enter the sums clipped to [-reward_bound, reward_bound]
    /// (infinity: not clipped).
    pub reward_bound: f64,
    /// Rewards that clipping changed.
    pub clipped: u64,
}

impl AgentBank {
    /// Agents with V_i = c I (c > 0), b_i = 0, whose rewards are clipped to
    /// [-`reward_bound`, `reward_bound`].
    pub fn new(env: &LinearEnv, m: usize, c: f64, reward_bound: f64) -> Self {
        let d = env.spec.d;
        let ws = Workspace::new(d, env.spec.k);
        let mut vinv = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut vinv, d, 1.0 / c);
        let logdet = d as f64 * c.ln();
        Self {
            d,
            m,
            vinv: vinv.repeat(m),
            logdet: vec![logdet; m],
            track_logdet: true,
            b: vec![0.0; m * d],
            gram: vec![0.0; m * d * d],
            bias: vec![0.0; m * d],
            since_factor: vec![0; m],
            regret: vec![0.0; m],
            streams: (0..m).map(|i| env.agent_streams(i)).collect(),
            ws,
            vtmp: vec![0.0; d * d],
            cholesky_failures: 0,
            reward_bound,
            clipped: 0,
        }
    }

    /// One UCB step of agent `i`; also adds the observation to the agent's
    /// exact local sums and its regret.
    #[inline]
    pub fn step<B: AgentStep + ?Sized>(&mut self, i: usize, env: &LinearEnv, backend: &B, beta: f64) -> StepResult {
        let (d, dd) = (self.d, self.d * self.d);
        let st = backend.ucb_step(
            env,
            &mut self.streams[i],
            &mut self.ws,
            AgentState {
                vinv: &mut self.vinv[i * dd..(i + 1) * dd],
                logdet: if self.track_logdet {
                    Some(&mut self.logdet[i])
                } else {
                    None
                },
                b: &mut self.b[i * d..(i + 1) * d],
            },
            beta,
            self.reward_bound,
        );
        self.clipped += u64::from(st.clipped);
        linalg::add_outer(&mut self.gram[i * dd..(i + 1) * dd], &self.ws.x, d);
        for (u, x) in self.bias[i * d..(i + 1) * d].iter_mut().zip(&self.ws.x) {
            *u += st.y * x;
        }
        self.regret[i] += st.regret();
        self.since_factor[i] += 1;
        st
    }

    /// Agent `i`'s exact local sums as a tree leaf: Gram (d x d) then bias (d).
    pub fn local_leaf(&self, i: usize, leaf: &mut [f64]) {
        let (d, dd) = (self.d, self.d * self.d);
        leaf[..dd].copy_from_slice(&self.gram[i * dd..(i + 1) * dd]);
        leaf[dd..dd + d].copy_from_slice(&self.bias[i * d..(i + 1) * d]);
    }

    /// Rebuilds V_i^{-1} and log det V_i from V_i = base + gram_i.
    pub fn refactor<B: AgentStep + ?Sized>(&mut self, i: usize, base: &[f64], backend: &B) {
        let dd = self.d * self.d;
        let mut v = std::mem::take(&mut self.vtmp);
        for ((t, b), g) in v.iter_mut().zip(base).zip(&self.gram[i * dd..(i + 1) * dd]) {
            *t = b + g;
        }
        self.factor_into(i, &v, backend);
        self.vtmp = v;
    }

    /// After a sync: every agent gets V_i = `v` (factorized once), b_i = `b`,
    /// and empty local sums.
    pub fn reset_all<B: AgentStep + ?Sized>(&mut self, v: &[f64], b: &[f64], backend: &B) {
        let (d, dd) = (self.d, self.d * self.d);
        self.factor_into(0, v, backend);
        let (first, rest) = self.vinv.split_at_mut(dd);
        for chunk in rest.chunks_exact_mut(dd) {
            chunk.copy_from_slice(first);
        }
        let ld = self.logdet[0];
        self.logdet.fill(ld);
        for chunk in self.b.chunks_exact_mut(d) {
            chunk.copy_from_slice(b);
        }
        self.gram.fill(0.0);
        self.bias.fill(0.0);
        self.since_factor.fill(0);
    }

    /// Sets agent `i`'s V^{-1} and log det from the full matrix `v`.
    pub fn factor_into<B: AgentStep + ?Sized>(&mut self, i: usize, v: &[f64], backend: &B) {
        let (d, dd) = (self.d, self.d * self.d);
        match backend.spd_inverse(v, d, &mut self.vinv[i * dd..(i + 1) * dd], &mut self.ws) {
            Ok((ld, jitter)) => {
                self.logdet[i] = ld;
                if jitter > 0.0 {
                    self.cholesky_failures += 1;
                }
            }
            Err(_) => self.cholesky_failures += 1,
        }
        self.since_factor[i] = 0;
    }
}
