//! What can stop a run ([`RunError`]): results that cannot be written or
//! reused (the directory's own errors,
//! [`crate::output::directory::DirectoryError`], wrapped), a directory
//! another run holds, a backend that cannot run a cell, a signal, a
//! non-finite value.

use crate::output::OutputError;
use std::path::PathBuf;
use thiserror::Error;

/// Errors of a run.
#[derive(Debug, Error)]
pub enum RunError {
    /// Writing or reading results failed.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The thread pool could not be built.
    #[error("cannot start {threads} worker threads: {message}")]
    Threads {
        /// Requested threads.
        threads: usize,
        /// Cause.
        message: String,
    },
    /// `--backend cuda` and a cell the device cannot run.
    #[error("--backend cuda: cell {cell} cannot run on CUDA: {reason}; run it with --backend cpu or auto")]
    CellUnsupported {
        /// The cell (index, id, label).
        cell: String,
        /// Why.
        reason: crate::backend::Unsupported,
    },
    /// The batched backend failed on a cell.
    #[error("backend {backend} failed on cell {cell}: {message}")]
    Backend {
        /// Backend name.
        backend: &'static str,
        /// Cell id.
        cell: String,
        /// Cause.
        message: String,
    },
    /// Stopped by a signal; the repetitions in flight were snapshotted.
    #[error("stopped on request: {stopped} repetition(s) snapshotted in {dir}; rerun the same command to resume")]
    Stopped {
        /// Repetitions snapshotted.
        stopped: usize,
        /// Results directory.
        dir: PathBuf,
    },
    /// A snapshot could not be written or read.
    #[error(transparent)]
    Snapshot(#[from] crate::sim::SnapshotError),
    /// Another process is writing the results directory in a way this run
    /// must not overlap (another version of the job, or the same shard).
    #[error("{dir}: {what}")]
    Busy {
        /// Results directory.
        dir: PathBuf,
        /// Who writes it and what to do.
        what: String,
    },
    /// The results directory cannot be written (found before any work).
    #[error(
        "cannot write results in {dir}: {source}; fix its permissions or free space, or run with --out ANOTHER_DIR"
    )]
    NotWritable {
        /// Results directory.
        dir: PathBuf,
        /// What the write probe met.
        source: OutputError,
    },
    /// A repetition produced a value that is not a finite number.
    #[error(
        "cell {cell} repetition {rep} produced a non-finite {column} at t = {t} (nothing was written for it): its \
         parameters push the arithmetic out of range; change them (`fedbandits validate` prints each cell's)"
    )]
    NonFinite {
        /// The cell (index, label).
        cell: String,
        /// Repetition.
        rep: u32,
        /// Round.
        t: u64,
        /// Column.
        column: &'static str,
    },
    /// The results directory holds another job's results, or a result
    /// that cannot be reused.
    #[error(transparent)]
    Directory(#[from] crate::output::directory::DirectoryError),
}
