//! The CUDA backend: kernels in `kernels/*.cu`, compiled at run time by NVRTC
//! ([`nvrtc`]), launched through cudarc with dynamic loading ([`device`]), so
//! the binary builds and runs without any CUDA installation. Each family's
//! CUDA host code (its folder's `cuda.rs`) runs every repetition of a cell in
//! lockstep on a [`launcher::Launcher`]; the same code runs under the host
//! emulation ([`emulation`]) in the test suite, where its output is checked
//! against the CPU backend.

pub mod device;
pub mod emulation;
pub mod launcher;
pub mod nvrtc;
pub mod occupancy;
pub mod watchdog;

use thiserror::Error;

/// CUDA backend failures.
#[derive(Debug, Error)]
pub enum CudaError {
    /// NVRTC failed or is missing.
    #[error(transparent)]
    Nvrtc(#[from] nvrtc::NvrtcError),
    /// No usable device.
    #[error("no usable CUDA device: {0}")]
    NoDevice(String),
    /// A driver call failed.
    #[error("CUDA driver error: {0}")]
    Driver(String),
    /// The configuration has no kernels (runs on the CPU instead).
    #[error("not supported on CUDA: {0}")]
    Unsupported(String),
    /// The host emulation failed.
    #[error("CUDA host emulation: {0}")]
    Emulation(String),
    /// A launch passed its deadline and gave up ([`watchdog`]).
    #[error("watchdog: {0}")]
    Watchdog(String),
}

impl From<CudaError> for super::BatchError {
    /// `Unsupported` stays a reason to run elsewhere; anything else failed.
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Unsupported(why) => super::BatchError::Unsupported(super::Unsupported(why)),
            e => super::BatchError::Device(super::DeviceFailure(e.to_string())),
        }
    }
}

/// The CUDA backend: batches the driver supports run on a [`launcher::Launcher`]
/// (a GPU, or the host emulation in tests); the per-agent operations run on
/// the CPU backend.
pub struct CudaBackend {
    launcher: std::sync::Mutex<Box<dyn launcher::Launcher + Send>>,
    description: String,
    traffic: std::sync::Arc<launcher::Traffic>,
}

impl CudaBackend {
    /// Opens the first device, compiling the families' `kernels` with
    /// NVRTC.
    pub fn open(kernels: &[nvrtc::KernelSource]) -> Result<Self, CudaError> {
        let dev = device::CudaDevice::open(kernels)?;
        let description = dev.description.clone();
        Ok(Self::with_launcher(Box::new(dev), &description))
    }

    /// A backend over any launcher (the host emulation in tests); its
    /// launches and copies are counted ([`CudaBackend::traffic`]).
    pub fn with_launcher(launcher: Box<dyn launcher::Launcher + Send>, description: &str) -> Self {
        let traffic = std::sync::Arc::new(launcher::Traffic::default());
        Self {
            launcher: std::sync::Mutex::new(Box::new(launcher::Counted::new(launcher, traffic.clone()))),
            description: description.to_string(),
            traffic,
        }
    }

    /// Kernel launches, bytes uploaded and bytes downloaded so far.
    pub fn traffic(&self) -> (u64, u64, u64) {
        self.traffic.get()
    }

    /// Each kernel's launches and largest launch shape since the last call
    /// ([`launcher::Traffic::take_shapes`]).
    pub fn take_shapes(&self) -> Vec<(String, launcher::Shape)> {
        self.traffic.take_shapes()
    }

    /// Device name and compute capability.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The device's launcher, held for a family's batched operations (one
    /// batch at a time).
    pub fn launcher(&self) -> Result<LauncherGuard<'_>, super::BatchError> {
        self.launcher.lock().map_err(|_| super::BatchError::Poisoned)
    }

    /// Shared memory a block may use on this device (bytes), or why it
    /// cannot be read.
    pub fn max_shared_per_block(&self) -> Result<usize, super::Unsupported> {
        self.launcher
            .lock()
            .map(|l| l.max_shared_per_block())
            .map_err(|_| super::Unsupported("the CUDA device lock was poisoned by an earlier failure".into()))
    }
}

/// The device's launcher while a batch holds it.
pub type LauncherGuard<'a> = std::sync::MutexGuard<'a, Box<dyn launcher::Launcher + Send>>;

/// The device as one batch's operations hold it: the launcher's lock, and
/// every allocation freed when they are dropped (or when building them
/// fails part-way).
pub struct Lease<'a>(LauncherGuard<'a>);

impl<'a> Lease<'a> {
    /// The launcher held until the lease is dropped.
    pub fn new(guard: LauncherGuard<'a>) -> Self {
        Lease(guard)
    }
}

impl std::ops::Deref for Lease<'_> {
    type Target = Box<dyn launcher::Launcher + Send>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.0.free_all();
    }
}

/// Runs rounds `t0 .. t0 + count` as launches of at most `chunk` rounds
/// each (`launch(first round, rounds)`), which bounds a launch's duration.
pub fn in_chunks(
    t0: u64,
    count: u64,
    chunk: u64,
    mut launch: impl FnMut(u64, u64) -> Result<(), CudaError>,
) -> Result<(), CudaError> {
    let mut done = 0;
    while done < count {
        let c = (count - done).min(chunk.max(1));
        launch(t0 + done, c)?;
        done += c;
    }
    Ok(())
}

impl super::Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn device_peaks(&self) -> Option<(f64, f64)> {
        self.launcher.lock().ok()?.peaks()
    }

    fn device(&self) -> super::Device<'_> {
        super::Device::Cuda(self)
    }
}

/// A size as the kernels' `int`, or why it does not fit.
pub(crate) fn i32_of(v: usize) -> Result<i32, CudaError> {
    i32::try_from(v).map_err(|_| CudaError::Unsupported(format!("size {v} exceeds i32")))
}
