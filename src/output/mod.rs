//! Parquet output: the long-format schema (one row per cell, repetition and
//! checkpoint), atomic writes and read-back, one file per verb: [`schema`]
//! (what a row is), [`metadata`] (what a file says of itself), [`write`]
//! and [`read`], [`files`] (atomic writes, probes, temporary files),
//! [`lock`] (one job version per directory), [`audit`] (the audit table),
//! [`unit`] (one finished repetition, as small as its data).
//!
//! Every parameter of the registry ([`crate::algo::family::params`]) is its own
//! typed, nullable column (null where the cell's algorithm or environment does
//! not use it). Files carry key-value metadata: the job YAML, crate version,
//! git commit, semantics version. Files are written atomically
//! ([`files::write_bytes_atomic`]), so a reader never sees a partial file
//! under a final name; [`lock`] keeps one job version writing a directory.

use std::path::PathBuf;
use thiserror::Error;

pub mod audit;
pub mod directory;
pub mod files;
pub mod lock;
pub mod metadata;
pub mod read;
pub mod schema;
pub mod unit;
pub mod write;

pub use crate::algo::curve::{CurvePoint, RepResult};
pub use audit::{AuditRow, audit_batch, audit_schema};
pub use files::{SEAL_HEADER, seal, seal_in_place, unseal, write_bytes_atomic};
pub use metadata::{CHECKSUM_KEY, GIT_COMMIT, data_checksum, families_json, metadata, privacy_json};
pub use read::{
    Metadata, canonical_rows, install_quiet_decoder_hook, read_metadata, read_metadata_key, read_parquet,
    read_parquet_checked, read_parquet_stream,
};
pub use schema::{NONDETERMINISTIC_COLUMNS, cell_batch, job_schema, schema};
pub use write::{PartWriter, write_parquet_atomic, write_parquet_atomic_with};

/// Output errors.
#[derive(Debug, Error)]
pub enum OutputError {
    /// Filesystem problem.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Parquet encoding or decoding problem.
    #[error("{path}: parquet: {source}")]
    Parquet {
        /// File.
        path: PathBuf,
        /// Cause.
        source: parquet::errors::ParquetError,
    },
    /// Arrow problem.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A file's content does not match the checksum written into it, or it
    /// has none.
    #[error(
        "{path}: {message}; the file is damaged or was not written by this fedbandits: move it away and rerun to recompute it"
    )]
    Checksum {
        /// File.
        path: PathBuf,
        /// What does not match.
        message: String,
    },
}
