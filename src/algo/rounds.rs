//! The round loop of the families whose agents interact every round (gossip,
//! combinatorial): rounds go to the backend in chunks that end at
//! checkpoints, where every federation is observed. Written once for both
//! families and every backend.

use crate::backend::BatchError;

/// The operations both families' backends implement, seen by the loop.
pub trait RoundOps {
    /// What one federation reports.
    type Obs: Copy;
    /// Runs rounds `t0 .. t0 + count`.
    fn run_rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError>;
    /// Every federation's state into `out`.
    fn observe_all(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError>;
}

impl RoundOps for dyn crate::algo::gossip::batch::GossipOps + '_ {
    type Obs = crate::algo::gossip::batch::GossipObservation;
    fn run_rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError> {
        self.rounds(t0, count)
    }
    fn observe_all(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError> {
        self.observe(out)
    }
}

impl RoundOps for dyn crate::algo::combinatorial::batch::CombOps + '_ {
    type Obs = crate::algo::combinatorial::batch::CombObservation;
    fn run_rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError> {
        self.rounds(t0, count)
    }
    fn observe_all(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError> {
        self.observe(out)
    }
}

/// Runs `ops` from round `from + 1` to `until`, pushing `point(t, obs)` of
/// every federation onto its curve at each checkpoint t.
pub fn run_curves<O: RoundOps + ?Sized, P>(
    ops: &mut O,
    federations: usize,
    from: u64,
    until: u64,
    checkpoints: &[u64],
    points: &mut [Vec<P>],
    point: impl Fn(u64, O::Obs) -> P,
) -> Result<(), BatchError> {
    let mut obs = Vec::with_capacity(federations);
    let ops = std::cell::RefCell::new(ops);
    run_to_checkpoints(
        from,
        until,
        checkpoints,
        |t0, count| ops.borrow_mut().run_rounds(t0, count),
        |t| {
            ops.borrow_mut().observe_all(&mut obs)?;
            for (curve, o) in points.iter_mut().zip(&obs) {
                curve.push(point(t, *o));
            }
            Ok(())
        },
    )
}

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

/// A repetition in flight on the CPU of a family run by this loop
/// (snapshotted): its CPU operations, the rounds done and the checkpoints
/// so far.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RoundsRep<O, P> {
    /// The CPU's batch state.
    pub ops: O,
    /// Rounds done.
    pub t: u64,
    /// Checkpoints so far (one federation).
    pub points: Vec<Vec<P>>,
}

impl<O, P> RoundsRep<O, P> {
    /// Round 0 over `ops`.
    pub fn new(ops: O) -> Self {
        Self {
            ops,
            t: 0,
            points: vec![Vec::new()],
        }
    }

    /// Runs the family's loop `run(ops, from, until, points)` and moves the
    /// round count to `until`.
    pub fn run_until(
        &mut self,
        until: u64,
        run: impl FnOnce(&mut O, u64, u64, &mut [Vec<P>]) -> Result<(), BatchError>,
    ) -> Result<(), BatchError> {
        run(&mut self.ops, self.t, until, &mut self.points)?;
        self.t = until.max(self.t);
        Ok(())
    }
}
