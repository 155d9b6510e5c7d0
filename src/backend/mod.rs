//! Backends: where the per-step linear algebra runs.
//!
//! Algorithms never name faer, SIMD or CUDA: they call a [`Backend`]. A step
//! of a UCB agent is one fused operation ([`Backend::ucb_step`]): draw the
//! decision set from the agent's streams, estimate theta_hat = V^{-1} b, score
//! every action with <theta_hat, x> + beta ||x||_{V^{-1}}, pick the argmax
//! (ties: lowest index), draw the reward, and apply the Sherman-Morrison update
//! of V^{-1}, the determinant-lemma update of log det V and b += y x. Fusing
//! keeps the decision set in L1 on a CPU and in registers/shared memory on a
//! GPU. Refactorizations ([`Backend::spd_inverse`]) are the other operation.

pub mod cpu;
pub mod cuda;

use crate::env::{AgentStreams, DecisionSet, LinearEnv};
use crate::linalg::LltError;

/// Outcome of one agent's step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult {
    /// Chosen action.
    pub arm: usize,
    /// Its true mean reward.
    pub mean: f64,
    /// Best true mean of the round.
    pub best: f64,
    /// Observed reward.
    pub y: f64,
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

/// The mutable UCB state of one agent: V^{-1}, log det V and b (so that
/// theta_hat = V^{-1} b).
pub struct AgentState<'a> {
    /// V^{-1}, row-major d x d, both triangles.
    pub vinv: &'a mut [f64],
    /// log det V.
    pub logdet: &'a mut f64,
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
        }
    }
}

/// Batched linear algebra for the bandit engine.
pub trait Backend: Send + Sync {
    /// Short name written to the output (`cpu`, `cuda`).
    fn name(&self) -> &'static str;

    /// One fused UCB step of one agent (see the module docs). The chosen
    /// action is left in `ws.x`.
    fn ucb_step(
        &self,
        env: &LinearEnv,
        streams: &mut AgentStreams,
        ws: &mut Workspace,
        agent: AgentState<'_>,
        beta: f64,
    ) -> StepResult;

    /// Inverse and log det of a symmetric matrix that should be positive
    /// definite; on failure retries with growing jitter and reports the jitter
    /// used (0 when none). `inv` receives the inverse.
    fn spd_inverse(&self, v: &[f64], d: usize, inv: &mut [f64], ws: &mut Workspace) -> Result<(f64, f64), LltError>;

    /// Approximate device peaks (FP64 GFLOP/s, memory GB/s), where known.
    fn device_peaks(&self) -> Option<(f64, f64)> {
        None
    }

    /// Runs repetitions `reps` of a whole cell at once, when this backend has
    /// a batched path for the cell's algorithm and environment (`None`: use
    /// the per-agent path, on the CPU).
    fn run_cell_batched(
        &self,
        _cell: &crate::job::Cell,
        _seed: u64,
        _reps: &[u32],
        _checkpoints: &[u64],
        _progress: &dyn Fn(u64),
    ) -> Option<Result<Vec<crate::sim::RepResult>, String>> {
        None
    }
}

/// Which backend the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a working device is present, else CPU.
    Auto,
    /// CPU (SIMD + rayon).
    Cpu,
    /// CUDA; fails when no device works.
    Cuda,
}

/// Error choosing a backend.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// CUDA was requested but cannot be used.
    #[error("--backend cuda: {0}")]
    CudaUnavailable(String),
}

/// Resolves a choice to a backend, with a one-line explanation of the choice.
pub fn select(choice: BackendChoice) -> Result<(Box<dyn Backend>, String), BackendError> {
    match choice {
        BackendChoice::Cpu => Ok((Box::new(cpu::CpuBackend), "backend cpu (requested)".into())),
        BackendChoice::Auto => match cuda::CudaBackend::open() {
            Ok(b) => {
                let why = format!(
                    "backend cuda (auto: {}; unsupported cells run on the CPU)",
                    b.description()
                );
                Ok((Box::new(b), why))
            }
            Err(e) => Ok((
                Box::new(cpu::CpuBackend),
                format!("backend cpu (auto: CUDA unavailable: {e})"),
            )),
        },
        BackendChoice::Cuda => match cuda::CudaBackend::open() {
            Ok(b) => {
                let why = format!("backend cuda ({}; unsupported cells run on the CPU)", b.description());
                Ok((Box::new(b), why))
            }
            Err(e) => Err(BackendError::CudaUnavailable(e.to_string())),
        },
    }
}
