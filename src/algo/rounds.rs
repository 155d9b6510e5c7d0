//! The round loop of the families whose agents interact every round (gossip,
//! combinatorial): rounds go to the backend in chunks that end at
//! checkpoints, where every federation is observed. Written once for both
//! families and every backend.

use crate::backend::BatchError;

/// Runs rounds `from + 1 ..= until` through `rounds(t0, count)`, calling
/// `observe(t)` at every checkpoint t in that range.
pub fn run_to_checkpoints(
    from: u64,
    until: u64,
    checkpoints: &[u64],
    mut rounds: impl FnMut(u64, u64) -> Result<(), BatchError>,
    mut observe: impl FnMut(u64) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    let mut t = from;
    while t < until {
        let next = checkpoints.get(checkpoints.partition_point(|&c| c <= t)).copied();
        let end = next.map_or(until, |c| c.min(until));
        rounds(t + 1, end - t)?;
        t = end;
        if next == Some(end) {
            observe(end)?;
        }
    }
    Ok(())
}
