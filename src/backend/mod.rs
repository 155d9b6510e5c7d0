//! Backends: the devices the engine runs on, the CPU and CUDA devices,
//! offering device operations only: threads, SIMD, the CPU's dense kernels
//! ([`dense`]), the CUDA context, compiler, launcher and emulation
//! ([`cuda`]). What runs on them is each family's, in its folder (the
//! linear family's fused UCB step and scorer: `algo::linear::step`).
//!
//! Whole batches (many federations of one cell in lockstep) run on the
//! device a backend names ([`Backend::device`]): each family builds its own
//! batched operations for it (`algo::<family>::ops`, its CPU rounds and its
//! CUDA host code in its own folder), using the CPU's dense kernels here and
//! the CUDA launcher ([`cuda::launcher`]). Which backend runs a cell is
//! decided per cell by [`Selection::place`], asking the batch itself
//! ([`Placeable`]). This layer knows no family and imports no algorithm,
//! job or simulation code (checked by src/tests/layers.rs).

pub mod calibration;
pub mod cpu;
pub mod cuda;
pub mod dense;
pub mod error;
pub mod gate;

pub use error::{BatchError, DeviceFailure, Unsupported};

/// A device the engine runs on: the CPU or a CUDA device; each family
/// builds its batched operations for it ([`Backend::device`]).
pub trait Backend: Send + Sync {
    /// Short name written to the output (`cpu`, `cuda`).
    fn name(&self) -> &'static str;

    /// The device a family's batched operations run on.
    fn device(&self) -> Device<'_>;

    /// Approximate device peaks (FP64 GFLOP/s, memory GB/s), where known.
    fn device_peaks(&self) -> Option<(f64, f64)> {
        None
    }
}

/// Where a family's batched operations run: each family builds its own
/// operations for the device ([`Backend::device`]).
#[derive(Clone, Copy)]
pub enum Device<'a> {
    /// The CPU: threads and SIMD.
    Cpu,
    /// A CUDA device (or its host emulation): its launcher.
    Cuda(&'a cuda::CudaBackend),
}

/// A batch as placement sees it, whatever its family (the algorithm
/// layer implements it for its batches): the workload kind a calibration
/// measures ([`calibration`]; batches of one kind run the same operations
/// at the same relative cost on a backend), its size, and whether the CUDA
/// device can run it.
pub trait Placeable {
    /// The workload kind: `linear`, `linear_gap`, `feducb`,
    /// `feducb_decentralized`, `sdp_vecsum` (each with `_large_d` from a
    /// large d on, and `linear_large_d`; the linear family's, in
    /// `algo::linear`),
    /// `gossip`, `combinatorial`.
    fn kind(&self) -> &'static str;

    /// Federations in the batch.
    fn federations(&self) -> usize;

    /// Whether `dev`'s batched operations can run the batch (the reason
    /// when not).
    fn cuda_supports(&self, dev: &cuda::CudaBackend) -> Result<(), Unsupported>;
}

/// Which backend the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// Per cell, the backend this machine's calibration (`fedbandits
    /// calibrate`, [`calibration`]) measured fastest for the cell's workload
    /// and size; without one, the CPU.
    Auto,
    /// CPU (SIMD + rayon).
    Cpu,
    /// CUDA for every cell; a cell that cannot run there is an error.
    Cuda,
}

/// Error choosing a backend.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// CUDA was requested but cannot be used.
    #[error("--backend cuda: {0}")]
    CudaUnavailable(String),
}

/// The backends a run may use and the user's choice; [`Selection::place`]
/// decides per cell.
pub struct Selection {
    choice: BackendChoice,
    cuda: Option<cuda::CudaBackend>,
    /// This machine's calibration (`auto` with a device).
    calibration: Option<calibration::Calibration>,
    /// One line on what was found (device or why none).
    pub note: String,
}

/// Where one cell runs, and why.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// Federation by federation on the CPU backend.
    Cpu(String),
    /// As one batch on the CUDA backend.
    Cuda(String),
}

impl Placement {
    /// `cpu` or `cuda`.
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Cpu(_) => "cpu",
            Placement::Cuda(_) => "cuda",
        }
    }

    /// Why this placement.
    pub fn reason(&self) -> &str {
        match self {
            Placement::Cpu(r) | Placement::Cuda(r) => r,
        }
    }
}

impl Selection {
    /// CPU only.
    pub fn cpu() -> Self {
        Self {
            choice: BackendChoice::Cpu,
            cuda: None,
            calibration: None,
            note: "backend cpu (requested)".into(),
        }
    }

    /// A selection with a given CUDA backend (e.g. the host emulation) and,
    /// for `auto`, the calibration that decides where cells run.
    pub fn with_cuda(
        choice: BackendChoice,
        cuda: cuda::CudaBackend,
        calibration: Option<calibration::Calibration>,
    ) -> Self {
        let note = format!("backend {choice:?} with CUDA device {}", cuda.description()).to_lowercase();
        Self {
            choice,
            cuda: Some(cuda),
            calibration,
            note,
        }
    }

    /// The CPU backend (per-federation path of every cell placed on the CPU).
    pub fn cpu_backend(&self) -> &dyn Backend {
        &cpu::CpuBackend
    }

    /// The CUDA backend, if one was opened.
    pub fn cuda_backend(&self) -> Option<&cuda::CudaBackend> {
        self.cuda.as_ref()
    }

    /// Where a cell runs. `batch` is the cell as a batch, or why it cannot
    /// be built. Under `--backend cuda` a cell that cannot run on the device
    /// is an error (the reason); under `auto` it runs where this machine's
    /// calibration measured its workload fastest at its size, and on the
    /// CPU where no calibration covers it.
    pub fn place(&self, batch: Result<&dyn Placeable, &crate::graph::GraphError>) -> Result<Placement, Unsupported> {
        match self.choice {
            BackendChoice::Cpu => Ok(Placement::Cpu("requested".into())),
            BackendChoice::Cuda => {
                let b = batch.map_err(|e| Unsupported(e.to_string()))?;
                let dev = self
                    .cuda
                    .as_ref()
                    .ok_or_else(|| Unsupported("no CUDA device was opened".into()))?;
                b.cuda_supports(dev)?;
                Ok(Placement::Cuda("requested".into()))
            }
            BackendChoice::Auto => {
                let (Some(dev), Some(cal)) = (self.cuda.as_ref(), self.calibration.as_ref()) else {
                    return Ok(Placement::Cpu(self.note.clone()));
                };
                let b = match batch {
                    Ok(b) => b,
                    Err(why) => return Ok(Placement::Cpu(format!("auto: {why}"))),
                };
                if let Err(why) = b.cuda_supports(dev) {
                    return Ok(Placement::Cpu(format!("auto: {why}")));
                }
                Ok(match cal.choose(b.kind(), b.federations()) {
                    Some((backend, why)) if backend == "cuda" => Placement::Cuda(format!("auto: {why}")),
                    Some((_, why)) => Placement::Cpu(format!("auto: {why}")),
                    None => Placement::Cpu(format!(
                        "auto: the calibration has no {} row at {} federations or fewer",
                        b.kind(),
                        b.federations()
                    )),
                })
            }
        }
    }
}

/// What `auto` says when this machine has no calibration of a device.
pub const NOT_CALIBRATED: &str =
    "no calibration of a GPU on this machine; `fedbandits calibrate` measures every backend here, then auto uses it";

/// Opens what a choice needs for a run on `threads` worker threads (a CUDA
/// device compiles the families' `kernels`), with a
/// one-line note on what was found. `auto` opens a device only where a
/// calibration of this engine, CPU and thread count names one (so a
/// CPU-only machine never pays for NVRTC), and uses it only if the device
/// that opens is the one calibrated.
pub fn select(
    choice: BackendChoice,
    threads: usize,
    kernels: &[cuda::nvrtc::KernelSource],
) -> Result<Selection, BackendError> {
    match choice {
        BackendChoice::Cpu => Ok(Selection::cpu()),
        BackendChoice::Auto => Ok(select_auto(threads, kernels)),
        BackendChoice::Cuda => match cuda::CudaBackend::open(kernels) {
            Ok(b) => {
                let note = format!("backend cuda ({})", b.description());
                Ok(Selection {
                    choice,
                    cuda: Some(b),
                    calibration: None,
                    note,
                })
            }
            Err(e) => Err(BackendError::CudaUnavailable(e.to_string())),
        },
    }
}

fn select_auto(threads: usize, kernels: &[cuda::nvrtc::KernelSource]) -> Selection {
    match calibration::cache_dir() {
        Ok(dir) => select_auto_in(&dir, threads, || cuda::CudaBackend::open(kernels)),
        Err(e) => Selection {
            choice: BackendChoice::Auto,
            cuda: None,
            calibration: None,
            note: format!("backend cpu (auto: {e}; {NOT_CALIBRATED})"),
        },
    }
}

/// `auto` with the calibrations and parity records of `dir`, opening the
/// device with `open`: a device is used only where a calibration of this
/// engine, CPU and thread count names it, it opens as that device, and
/// its parity check with this engine is recorded as passed
/// ([`gate::ParityRecord`]); otherwise every cell runs on the CPU and the
/// note says why, naming the record that kept the device off.
pub fn select_auto_in(
    dir: &std::path::Path,
    threads: usize,
    open: impl FnOnce() -> Result<cuda::CudaBackend, cuda::CudaError>,
) -> Selection {
    let cpu = |note: String| Selection {
        choice: BackendChoice::Auto,
        cuda: None,
        calibration: None,
        note: format!("backend cpu (auto: {note})"),
    };
    let Some(device) = calibration::Calibration::device_calibrated(dir, threads) else {
        // `calibrate` measures only a device that passed: one that failed
        // has a record and no calibration.
        if let Some((path, r)) = gate::ParityRecord::not_passed(dir).first() {
            return cpu(r.notice(path));
        }
        return cpu(NOT_CALIBRATED.into());
    };
    let dev = match open() {
        Ok(d) => d,
        Err(e) => return cpu(format!("the calibrated device {device} did not open: {e}")),
    };
    if dev.description() != device {
        return cpu(format!(
            "calibrated on {device}, found {}: run `fedbandits calibrate` here",
            dev.description()
        ));
    }
    match gate::ParityRecord::load(dir, dev.description()) {
        Ok(Some(r)) if r.passed() => {}
        Ok(Some(r)) => return cpu(r.notice(&gate::ParityRecord::path(dir, dev.description()))),
        Ok(None) => {
            return cpu(format!(
                "the calibrated device {device} has no recorded parity check with this engine: `fedbandits \
                 calibrate` runs it"
            ));
        }
        Err(e) => return cpu(e.to_string()),
    }
    let key = calibration::MachineKey::here(threads, Some(dev.description()));
    match calibration::Calibration::load(dir, &key) {
        Ok(Some(c)) => {
            let note = format!(
                "backend auto: CUDA device {}, calibration {} (per cell: see below)",
                dev.description(),
                calibration::Calibration::path(dir, &key).display()
            );
            Selection {
                choice: BackendChoice::Auto,
                cuda: Some(dev),
                calibration: Some(c),
                note,
            }
        }
        Ok(None) => cpu(NOT_CALIBRATED.into()),
        Err(e) => cpu(e.to_string()),
    }
}
