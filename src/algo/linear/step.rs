//! One agent's step of the linear family, on the CPU: a step of a UCB
//! agent is one fused operation ([`AgentStep::ucb_step`]): draw the
//! decision set from the agent's streams, estimate theta_hat = V^{-1} b,
//! score every action with <theta_hat, x> + beta ||x||_{V^{-1}}
//! ([`super::cpu::score::score_argmax`]), pick the argmax (ties: lowest
//! index), draw the reward, and apply the Sherman-Morrison update of
//! V^{-1}, the determinant-lemma update of log det V and b += y x. Fusing
//! keeps the decision set in L1. Refactorizations
//! ([`AgentStep::spd_inverse`]) are the other operation. The CPU rounds
//! ([`super::cpu`]) step agents through [`AgentStep`], implemented for the
//! backend's [`CpuBackend`]; the privacy audit feeds neighbouring data
//! through its own implementation.

use super::cpu::score::score_argmax;
use crate::backend::cpu::CpuBackend;
use crate::backend::dense;
use crate::env::{AgentStreams, DecisionSet, LinearEnv};
use crate::linalg::{self, LltError};

/// Outcome of one agent's step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult {
    /// Chosen action.
    pub arm: usize,
    /// Its true mean reward.
    pub mean: f64,
    /// Best true mean of the round.
    pub best: f64,
    /// Observed reward, after clipping to the step's reward bound.
    pub y: f64,
    /// Whether clipping changed the observed reward.
    pub clipped: bool,
    /// x^T V^{-1} x of the chosen action before the update.
    pub quad: f64,
}

impl StepResult {
    /// Pseudo-regret of the step.
    #[inline]
    pub fn regret(&self) -> f64 {
        self.best - self.mean
    }
}

/// A reward clipped to [-`bound`, `bound`], by the same comparisons as the
/// kernels (`y < -b ? -b : (y > b ? b : y)`); NaN passes through.
#[inline]
pub fn clip_reward(y: f64, bound: f64) -> f64 {
    if y < -bound {
        -bound
    } else if y > bound {
        bound
    } else {
        y
    }
}

/// The mutable UCB state of one agent: V^{-1}, log det V and b (so that
/// theta_hat = V^{-1} b).
pub struct AgentState<'a> {
    /// V^{-1}, row-major d x d, both triangles.
    pub vinv: &'a mut [f64],
    /// log det V, kept up to date by the step (the determinant lemma), or
    /// `None` where the caller reads it nowhere (no per-agent width, no
    /// determinant test): its `ln` is then skipped (about 2.5% of a
    /// `linear_d10_k100_m100` step).
    pub logdet: Option<&'a mut f64>,
    /// b.
    pub b: &'a mut [f64],
}

/// Per-thread workspace, allocated once per federation: the hot loop never
/// allocates.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Workspace {
    /// Decision set buffers.
    pub ds: DecisionSet,
    /// theta_hat.
    pub theta: Vec<f64>,
    /// The chosen action after a step.
    pub x: Vec<f64>,
    /// Vector workspace (d).
    pub w: Vec<f64>,
    /// Matrix workspaces (d x d).
    pub m1: Vec<f64>,
    /// Matrix workspace (d x d).
    pub m2: Vec<f64>,
    /// faer's workspace, for d at or above the crossover (made on first use,
    /// not part of snapshots).
    #[serde(skip)]
    pub dense: Option<dense::DenseScratch>,
}

impl Workspace {
    /// Workspace for dimension d and K actions.
    pub fn new(d: usize, k: usize) -> Self {
        Self {
            ds: DecisionSet::new(d, k),
            theta: vec![0.0; d],
            x: vec![0.0; d],
            w: vec![0.0; d],
            m1: vec![0.0; d * d],
            m2: vec![0.0; d * d],
            dense: None,
        }
    }
}

/// The CPU's per-agent dense operations, through which the CPU rounds step
/// one agent ([`CpuBackend`]; the privacy audit feeds neighbouring
/// data through its own).
pub trait AgentStep: Send + Sync {
    /// One fused UCB step of one agent (see the module docs). The reward
    /// enters b clipped to [-`reward_bound`, `reward_bound`] (infinity: not
    /// clipped). The chosen action is left in `ws.x`.
    fn ucb_step(
        &self,
        env: &LinearEnv,
        streams: &mut AgentStreams,
        ws: &mut Workspace,
        agent: AgentState<'_>,
        beta: f64,
        reward_bound: f64,
    ) -> StepResult;

    /// Inverse and log det of a symmetric matrix that should be positive
    /// definite; on failure retries with growing jitter and reports the jitter
    /// used (0 when none). `inv` receives the inverse.
    fn spd_inverse(&self, v: &[f64], d: usize, inv: &mut [f64], ws: &mut Workspace) -> Result<(f64, f64), LltError>;
}

impl AgentStep for CpuBackend {
    fn ucb_step(
        &self,
        env: &LinearEnv,
        streams: &mut AgentStreams,
        ws: &mut Workspace,
        agent: AgentState<'_>,
        beta: f64,
        reward_bound: f64,
    ) -> StepResult {
        let d = env.spec.d;
        env.draw(streams, &mut ws.ds);
        linalg::matvec(agent.vinv, agent.b, &mut ws.theta, d);
        let (arm, quad) = score_argmax(d, ws.ds.k, &ws.ds.x, agent.vinv, &ws.theta, beta);
        ws.ds.action(arm, &mut ws.x);
        let mean = ws.ds.mean[arm];
        let raw = env.reward(streams, mean);
        let y = clip_reward(raw, reward_bound);
        let q = linalg::sherman_morrison(agent.vinv, &ws.x, &mut ws.w, d);
        if let Some(logdet) = agent.logdet {
            *logdet += crate::math::ln_1p(q);
        }
        for (bi, xi) in agent.b.iter_mut().zip(&ws.x) {
            *bi += y * xi;
        }
        StepResult {
            arm,
            mean,
            best: ws.ds.best,
            y,
            clipped: y != raw,
            quad,
        }
    }

    /// Hand-written Cholesky below [`dense::INVERSE_FAER_MIN_D`],
    /// faer's blocked one from there (`bench --linalg`: 1.7x faster at
    /// d = 32, 6.7x at d = 128).
    fn spd_inverse(&self, v: &[f64], d: usize, inv: &mut [f64], ws: &mut Workspace) -> Result<(f64, f64), LltError> {
        if d >= dense::INVERSE_FAER_MIN_D {
            let kp = ws.ds.kp;
            let scratch = ws.dense.get_or_insert_with(|| dense::DenseScratch::new(d, kp));
            return linalg::with_jitter(v, d, inv, &mut ws.m1, |m, out| dense::spd_inverse(m, d, out, scratch));
        }
        linalg::spd_inverse_with_jitter(v, d, inv, &mut ws.m1, &mut ws.m2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From the same state and streams, a step with reward bound 1 plays
    /// the same action and observes the unclipped step's reward clamped to
    /// [-1, 1], flagged exactly when clamping changed it; b differs by
    /// (y_clipped - y) x.
    #[test]
    fn a_clipped_step_is_the_unclipped_step_with_its_reward_clamped() {
        use crate::env::{LinearEnvKind, LinearEnvSpec};
        let (d, k) = (4, 10);
        let spec = LinearEnvSpec {
            kind: LinearEnvKind::Sphere {
                reward_on_raw: true,
                noise_std: 1.0,
            },
            d,
            k,
        };
        let env = LinearEnv::new(&spec, &[7, 1]);
        let mut streams = env.agent_streams(0);
        let mut ws = Workspace::new(d, k);
        let mut vinv = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut vinv, d, 1.0);
        let (mut logdet, mut b) = (0.0, vec![0.0; d]);
        let mut clipped = 0;
        for _ in 0..2000 {
            let (mut s2, mut ws2, mut vinv2, mut logdet2, mut b2) =
                (streams.clone(), ws.clone(), vinv.clone(), logdet, b.clone());
            let c = CpuBackend.ucb_step(
                &env,
                &mut s2,
                &mut ws2,
                AgentState {
                    vinv: &mut vinv2,
                    logdet: Some(&mut logdet2),
                    b: &mut b2,
                },
                0.5,
                1.0,
            );
            let u = CpuBackend.ucb_step(
                &env,
                &mut streams,
                &mut ws,
                AgentState {
                    vinv: &mut vinv,
                    logdet: Some(&mut logdet),
                    b: &mut b,
                },
                0.5,
                f64::INFINITY,
            );
            assert!(!u.clipped);
            assert_eq!(c.arm, u.arm);
            assert_eq!(c.y, u.y.clamp(-1.0, 1.0));
            assert_eq!(c.clipped, u.y.abs() > 1.0);
            for j in 0..d {
                let want = b[j] + (c.y - u.y) * ws.x[j];
                assert!((b2[j] - want).abs() <= 1e-12 * (1.0 + want.abs()), "b[{j}]");
            }
            clipped += u64::from(c.clipped);
        }
        // Raw means lie in [0, 1], so N(mean, 1) leaves [-1, 1] with
        // probability between 0.317 (mean 0) and 0.523 (mean 1); 25% to 60%
        // of 2000 leaves more than 5 standard deviations either side.
        assert!((500..=1200).contains(&clipped), "{clipped} of 2000 clipped");
    }
}
