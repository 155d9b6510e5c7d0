//! The integration tests, one binary: each suite of `src/tests/` is a
//! module (`cargo test --release --test integration cuda::` runs one), and
//! `support` holds what several suites share and a process builds once.
//!
//! One binary rather than one per suite: the test crate compiles and links
//! once, every test is scheduled on one pool of test threads (so a suite's
//! long last test does not leave the other core idle), and the host
//! emulation's library (g++) and the kernels' ptxas statistics (NVRTC) are
//! built once per run rather than once per suite that needs them.

mod bookings;
mod cli;
mod combinatorial;
mod cuda;
mod cuda_events;
mod directory;
mod faults;
mod fuzz_job;
mod gossip;
mod grow;
mod horizon;
mod lattice;
mod lattice_linear;
mod lattice_pfcb;
mod layers;
mod long_horizon;
mod memory;
mod papers;
mod plan_model;
mod provenance;
mod readme;
mod resume;
mod statistics;
mod watchdog;

mod support {
    pub mod emulated;
    pub mod ptxas;
    pub mod runs;
}
