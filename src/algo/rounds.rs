//! The round loop of the families whose agents interact every round:
//! rounds go to the backend ([`RoundOps`]) in chunks that end at
//! checkpoints, where every federation is observed. Written once for every
//! such family and every backend, with the glue that makes such a family a
//! family of the engine ([`RoundsFamily`]); it names no family.

use crate::algo::curve::CurvePoint;
use crate::backend::{Backend, BatchError};

/// The batched operations a round-based family's backends implement (its
/// CPU state, its CUDA host code), as the loop sees them.
pub trait RoundOps {
    /// What one federation reports at a checkpoint.
    type Obs: Copy;
    /// Runs rounds `t0 .. t0 + count` of every federation.
    fn rounds(&mut self, t0: u64, count: u64) -> Result<(), BatchError>;
    /// Each federation's state, in batch order, into `out` (cleared first).
    fn observe(&mut self, out: &mut Vec<Self::Obs>) -> Result<(), BatchError>;
}

/// One federation's state at one checkpoint (snapshotted with the
/// repetition).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint<O> {
    /// Round.
    pub t: u64,
    /// The federation's state.
    pub obs: O,
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
        |t0, count| ops.borrow_mut().rounds(t0, count),
        |t| {
            ops.borrow_mut().observe(&mut obs)?;
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

/// A family run by this loop (gossip, combinatorial), as the glue both
/// share needs it: implementing it gives the family's batch its
/// [`crate::algo::FamilyBatch`] and [`crate::backend::Placeable`], and its
/// CPU repetition ([`RoundsRep`]) its [`crate::algo::FamilyRep`], written
/// once here.
pub trait RoundsFamily: Sized + Send + Sync + 'static {
    /// What one federation reports at a checkpoint.
    type Obs: Copy + serde::Serialize + serde::de::DeserializeOwned + Send;
    /// Its CPU operations: a repetition's state, snapshotted.
    type Cpu: RoundOps<Obs = Self::Obs> + serde::Serialize + serde::de::DeserializeOwned + Send;
    /// Its kind, as placement and the calibration name it.
    const KIND: &'static str;

    /// Federations in the batch.
    fn federations(&self) -> usize;
    /// Agents per federation.
    fn agents(&self) -> usize;
    /// Its CPU operations at round 0.
    fn cpu(&self) -> Result<Self::Cpu, BatchError>;
    /// Its CUDA operations at round 0 on the device behind `launcher`.
    fn cuda_ops<'a>(
        &self,
        launcher: crate::backend::cuda::LauncherGuard<'a>,
    ) -> Result<Box<dyn RoundOps<Obs = Self::Obs> + 'a>, BatchError>;

    /// Its batched operations on `backend`'s device, at round 0: the CPU's
    /// or the CUDA device's.
    fn ops<'a>(&self, backend: &'a dyn Backend) -> Result<Box<dyn RoundOps<Obs = Self::Obs> + 'a>, BatchError> {
        Ok(match backend.device() {
            crate::backend::Device::Cpu => Box::new(self.cpu()?),
            crate::backend::Device::Cuda(dev) => self.cuda_ops(dev.launcher()?)?,
        })
    }
    /// Why the CUDA device cannot run the batch, if it cannot.
    fn cuda_supports(&self) -> Result<(), crate::backend::Unsupported>;
    /// Federation `federation`'s curve as output points.
    fn curve(&self, federation: usize, points: &[Checkpoint<Self::Obs>]) -> Vec<CurvePoint>;

    /// Runs `ops` from round `from + 1` to `until`, observing every
    /// federation at each checkpoint in that range.
    fn run<O: RoundOps<Obs = Self::Obs> + ?Sized>(
        &self,
        ops: &mut O,
        from: u64,
        until: u64,
        checkpoints: &[u64],
        points: &mut [Vec<Checkpoint<Self::Obs>>],
    ) -> Result<(), BatchError> {
        let federations = RoundsFamily::federations(self);
        run_curves(ops, federations, from, until, checkpoints, points, |t, obs| {
            Checkpoint { t, obs }
        })
    }
}

impl<F: RoundsFamily> crate::backend::Placeable for F {
    fn kind(&self) -> &'static str {
        F::KIND
    }

    fn federations(&self) -> usize {
        RoundsFamily::federations(self)
    }

    fn cuda_supports(&self, _dev: &crate::backend::cuda::CudaBackend) -> Result<(), crate::backend::Unsupported> {
        RoundsFamily::cuda_supports(self)
    }
}

impl<F: RoundsFamily> crate::algo::FamilyBatch for F {
    fn run(
        &self,
        checkpoints: &[u64],
        backend: &dyn Backend,
        progress: &dyn Fn(u64),
    ) -> Result<Vec<Vec<CurvePoint>>, BatchError> {
        let mut ops = self.ops(backend)?;
        let federations = RoundsFamily::federations(self);
        let curves =
            crate::algo::cell::in_progress_steps(federations, self.agents(), checkpoints, progress, |t, u, c| {
                RoundsFamily::run(self, ops.as_mut(), t, u, checkpoints, c)
            })?;
        Ok(curves.iter().enumerate().map(|(f, c)| self.curve(f, c)).collect())
    }

    fn start_rep(&self) -> Result<Box<dyn crate::algo::cell::RepObject>, BatchError> {
        crate::algo::cell::start_rep::<RoundsRep<F>>(self)
    }

    fn resume_rep(&self, bytes: &[u8]) -> Result<Box<dyn crate::algo::cell::RepObject>, bincode::Error> {
        crate::algo::cell::resume_rep::<RoundsRep<F>>(bytes)
    }
}

/// A repetition in flight on the CPU of a family run by this loop
/// (snapshotted): its CPU operations, the rounds done and the checkpoints
/// so far.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct RoundsRep<F: RoundsFamily> {
    /// The CPU's batch state.
    pub ops: F::Cpu,
    /// Rounds done.
    pub t: u64,
    /// Checkpoints so far (one federation).
    pub points: Vec<Vec<Checkpoint<F::Obs>>>,
}

impl<F: RoundsFamily> crate::algo::FamilyRep for RoundsRep<F> {
    type Batch = F;

    fn start(b: &F) -> Result<Self, BatchError> {
        Ok(Self {
            ops: b.cpu()?,
            t: 0,
            points: vec![Vec::new()],
        })
    }

    fn t(&self) -> u64 {
        self.t
    }

    fn advance(&mut self, b: &F, until: u64, checkpoints: &[u64]) -> Result<(), BatchError> {
        b.run(&mut self.ops, self.t, until, checkpoints, &mut self.points)?;
        self.t = until.max(self.t);
        Ok(())
    }

    fn into_points(self, b: &F) -> Vec<CurvePoint> {
        b.curve(0, &crate::algo::cell::first(self.points))
    }
}
