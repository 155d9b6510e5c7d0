//! Why a batch did not run, whatever its family: the backend cannot run it
//! ([`Unsupported`]), a device call failed ([`DeviceFailure`]), or the
//! batch could not be built ([`BatchError`]).

/// Why a backend cannot run a batch (a reason for the user; the cell runs
/// elsewhere under `--backend auto`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// A device call that failed, with the device's own message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeviceFailure(pub String);

/// Why a batch did not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    /// The backend has no kernels for this batch.
    #[error("not supported: {0}")]
    Unsupported(#[from] Unsupported),
    /// The batch cannot be built: a federation's graph.
    #[error("not supported: {0}")]
    Graph(#[from] crate::graph::GraphError),
    /// The device failed while running it.
    #[error("{0}")]
    Device(#[from] DeviceFailure),
    /// An earlier failure poisoned the device's lock.
    #[error("the CUDA device lock was poisoned by an earlier failure")]
    Poisoned,
    /// A repetition's state does not fit its plan.
    #[error("a repetition's state does not fit its plan")]
    StateMismatch,
}

impl BatchError {
    /// [`BatchError::Unsupported`] with this reason.
    pub fn unsupported(why: impl Into<String>) -> Self {
        BatchError::Unsupported(Unsupported(why.into()))
    }
}
