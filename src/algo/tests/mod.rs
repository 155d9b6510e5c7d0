//! The algorithm layer's tests that run jobs end to end through the
//! generic layers (the job loader, the runner): in a `tests` folder, which
//! the layering check reads as test code.

mod named;
mod noise;
