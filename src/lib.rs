//! fedbandits: a batched engine for differentially private federated bandits.
//!
//! The layers, bottom up (src/tests/layers.rs checks that no lower one names
//! a higher one and that there is no cycle):
//! - lower: [`math`] (portable elementary functions), [`cache`] (the
//!   cache folder), [`input`] (only regular files read as inputs), [`named`] (enums
//!   whose variants job files name), [`rng`] (seeded
//!   streams, counter-based normals), [`linalg`] (small dense algebra),
//!   [`env`] (environments), [`graph`] (communication graphs), [`privacy`]
//!   (tree mechanism, vector summation, accountant), [`backend`] (per-step
//!   operations on the CPU, faer for large d, the batched CUDA path);
//! - higher: [`algo`] (one file per algorithm), [`job`] (YAML job files:
//!   schema, validation, grid expansion, sharding), [`output`] (result types,
//!   Parquet), [`sim`] (running federations, the job runner), [`cli`] (the
//!   `fedbandits` command).

pub mod algo;
pub mod backend;
pub mod cache;
pub mod cli;
pub mod env;
pub mod graph;
pub mod input;
pub mod job;
pub mod linalg;
pub mod math;
pub mod named;
pub mod output;
pub mod privacy;
pub mod rng;
pub mod sim;
