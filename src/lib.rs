//! fedbandits: a batched engine for differentially private federated bandits.
//!
//! The layers, bottom up: [`math`] (portable elementary functions), [`rng`] (seeded xoshiro streams), [`linalg`] (tiny
//! dense algebra), [`env`] (environments), [`backend`] (the fused per-step
//! operations, CPU now), [`privacy`] (tree mechanism), [`algo`] (one file per
//! algorithm), [`job`] (YAML job files: schema, validation, grid expansion,
//! sharding), [`sim`] (running federations, regret curves), [`output`]
//! (Parquet), [`cli`] (the `fedbandits` command).

pub mod algo;
pub mod backend;
pub mod cli;
pub mod env;
pub mod graph;
pub mod job;
pub mod linalg;
pub mod math;
pub mod output;
pub mod privacy;
pub mod rng;
pub mod sim;
