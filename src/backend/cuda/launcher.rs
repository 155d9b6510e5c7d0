//! The launcher abstraction: device memory and kernel launches, implemented
//! by a real GPU ([`super::device::CudaDevice`]) and by the host emulation
//! ([`super::emulation::Emulator`]), so that the batched driver
//! ([`super::driver`]) is one piece of code exercised with and without a GPU.

use super::CudaError;

/// A device address (under emulation: a host address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevPtr(pub u64);

/// One kernel argument (the kernel's parameter must have this type).
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    /// `int`.
    I32(i32),
    /// `unsigned long long`.
    U64(u64),
    /// `double`.
    F64(f64),
    /// Any pointer.
    Ptr(DevPtr),
}

/// Device memory and kernel launches.
pub trait Launcher {
    /// Short name (`cuda`, `emulation`).
    fn name(&self) -> &'static str;
    /// A zeroed allocation.
    fn alloc_zeroed(&mut self, bytes: usize) -> Result<DevPtr, CudaError>;
    /// Copies host bytes to the start of an allocation.
    fn upload(&mut self, dst: DevPtr, bytes: &[u8]) -> Result<(), CudaError>;
    /// Copies the start of an allocation to host bytes (waits for prior work).
    fn download(&mut self, src: DevPtr, out: &mut [u8]) -> Result<(), CudaError>;
    /// Runs `kernel` on `grid` blocks of `block` threads with `shared_bytes`
    /// of dynamic shared memory per block.
    fn launch_grid(
        &mut self,
        kernel: &str,
        grid: usize,
        block: usize,
        shared_bytes: usize,
        args: &[Arg],
    ) -> Result<(), CudaError>;
    /// Runs `kernel` with at least `threads` threads (1-D grid of [`BLOCK`]-
    /// thread blocks, no shared memory).
    fn launch(&mut self, kernel: &str, threads: usize, args: &[Arg]) -> Result<(), CudaError> {
        self.launch_grid(kernel, threads.div_ceil(BLOCK).max(1), BLOCK, 0, args)
    }
    /// Declares the work of the launches that follow, until the next copy
    /// back: `agent_steps` (a chunk's rounds times its agents), from which
    /// the watchdog sets their deadline ([`super::watchdog`]).
    fn expect_work(&mut self, _agent_steps: u64) {}
    /// Frees every allocation (after a batch).
    fn free_all(&mut self);
    /// Approximate device peaks (FP64 GFLOP/s, memory GB/s), where known.
    fn peaks(&self) -> Option<(f64, f64)> {
        None
    }
    /// Dynamic shared memory one block may use (the device's opt-in limit;
    /// 48 KiB, the limit without opting in, where unknown).
    fn max_shared_per_block(&self) -> usize {
        DEFAULT_SHARED_PER_BLOCK
    }
    /// How many blocks of `kernel` (`block` threads, `shared` bytes of
    /// dynamic shared memory) the device holds at once: its SMs times the
    /// blocks one SM holds. None where unknown or unbounded (the
    /// emulation runs a group's blocks together).
    fn resident_blocks(&self, _kernel: &str, _block: usize, _shared: usize) -> Option<usize> {
        None
    }
}

/// Launches and host-device copies so far (shared by a [`Counted`]
/// launcher and whoever reads the counts).
#[derive(Debug, Default)]
pub struct Traffic {
    /// Kernel launches.
    pub launches: std::sync::atomic::AtomicU64,
    /// Bytes copied host to device.
    pub uploaded: std::sync::atomic::AtomicU64,
    /// Bytes copied device to host.
    pub downloaded: std::sync::atomic::AtomicU64,
    /// Each kernel's launches and largest launch shape since the last
    /// [`Traffic::take_shapes`].
    shapes: std::sync::Mutex<std::collections::BTreeMap<String, Shape>>,
}

/// How a kernel was launched: its launches and its largest block, dynamic
/// shared memory and grid (what its occupancy depends on, with its
/// registers and static shared memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Launches.
    pub launches: u64,
    /// Threads per block (the largest launched).
    pub block: usize,
    /// Dynamic shared memory per block, bytes (the largest launched).
    pub shared: usize,
    /// Blocks per launch (the largest launched).
    pub grid: usize,
}

impl Traffic {
    /// (launches, bytes up, bytes down).
    pub fn get(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.launches.load(Relaxed),
            self.uploaded.load(Relaxed),
            self.downloaded.load(Relaxed),
        )
    }

    /// Each kernel's launch shape since the last call, by name (and starts
    /// afresh).
    pub fn take_shapes(&self) -> Vec<(String, Shape)> {
        self.shapes
            .lock()
            .map(|mut m| std::mem::take(&mut *m).into_iter().collect())
            .unwrap_or_default()
    }

    fn record(&self, kernel: &str, grid: usize, block: usize, shared: usize) {
        if let Ok(mut m) = self.shapes.lock() {
            // No allocation once a kernel has launched (launches are per
            // round of a batch).
            if !m.contains_key(kernel) {
                m.insert(kernel.to_string(), Shape::default());
            }
            if let Some(s) = m.get_mut(kernel) {
                s.launches += 1;
                s.block = s.block.max(block);
                s.shared = s.shared.max(shared);
                s.grid = s.grid.max(grid);
            }
        }
    }
}

/// A launcher that counts what it is asked to do ([`Traffic`]) and passes
/// everything to the one it wraps.
pub struct Counted {
    inner: Box<dyn Launcher + Send>,
    traffic: std::sync::Arc<Traffic>,
}

impl Counted {
    /// Wraps `inner`, counting into `traffic`.
    pub fn new(inner: Box<dyn Launcher + Send>, traffic: std::sync::Arc<Traffic>) -> Self {
        Self { inner, traffic }
    }
}

impl Launcher for Counted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn alloc_zeroed(&mut self, bytes: usize) -> Result<DevPtr, CudaError> {
        self.inner.alloc_zeroed(bytes)
    }
    fn upload(&mut self, dst: DevPtr, bytes: &[u8]) -> Result<(), CudaError> {
        let t = &self.traffic.uploaded;
        t.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.inner.upload(dst, bytes)
    }
    fn download(&mut self, src: DevPtr, out: &mut [u8]) -> Result<(), CudaError> {
        let t = &self.traffic.downloaded;
        t.fetch_add(out.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.inner.download(src, out)
    }
    fn launch_grid(
        &mut self,
        kernel: &str,
        grid: usize,
        block: usize,
        shared_bytes: usize,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        self.traffic.launches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.traffic.record(kernel, grid, block, shared_bytes);
        self.inner.launch_grid(kernel, grid, block, shared_bytes, args)
    }
    fn expect_work(&mut self, agent_steps: u64) {
        self.inner.expect_work(agent_steps);
    }
    fn free_all(&mut self) {
        self.inner.free_all();
    }
    fn peaks(&self) -> Option<(f64, f64)> {
        self.inner.peaks()
    }
    fn max_shared_per_block(&self) -> usize {
        self.inner.max_shared_per_block()
    }
    fn resident_blocks(&self, kernel: &str, block: usize, shared: usize) -> Option<usize> {
        self.inner.resident_blocks(kernel, block, shared)
    }
}

/// Dynamic shared memory a block may use on any CUDA device without opting in.
pub const DEFAULT_SHARED_PER_BLOCK: usize = 48 * 1024;

/// Threads per block for every launch.
pub const BLOCK: usize = 128;

/// Allocates and fills a buffer of plain values.
pub fn upload_slice<T: bytemuck_like::Pod>(l: &mut dyn Launcher, data: &[T]) -> Result<DevPtr, CudaError> {
    let bytes = bytemuck_like::as_bytes(data);
    let p = l.alloc_zeroed(bytes.len().max(8))?;
    l.upload(p, bytes)?;
    Ok(p)
}

/// Downloads `out.len()` values.
pub fn download_slice<T: bytemuck_like::Pod>(
    l: &mut dyn Launcher,
    src: DevPtr,
    out: &mut [T],
) -> Result<(), CudaError> {
    l.download(src, bytemuck_like::as_bytes_mut(out))
}

/// Byte views of plain numeric slices (f64, f32, u64, i32): the few lines of
/// `bytemuck` this crate needs.
pub mod bytemuck_like {
    /// Plain numeric types whose every bit pattern is valid.
    ///
    /// # Safety
    /// Implementors must have no padding and accept any bit pattern.
    pub unsafe trait Pod: Copy {}
    // SAFETY: primitive numbers have no padding and no invalid bit patterns.
    unsafe impl Pod for f64 {}
    // SAFETY: as above.
    unsafe impl Pod for f32 {}
    // SAFETY: as above.
    unsafe impl Pod for u64 {}
    // SAFETY: as above.
    unsafe impl Pod for i32 {}

    /// The bytes of a slice.
    pub fn as_bytes<T: Pod>(s: &[T]) -> &[u8] {
        // SAFETY: T is Pod (no padding), the length covers exactly the slice.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
    }

    /// The bytes of a mutable slice.
    pub fn as_bytes_mut<T: Pod>(s: &mut [T]) -> &mut [u8] {
        // SAFETY: T is Pod, so any bytes written form valid values.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
    }
}
