//! A real GPU as a [`Launcher`]: cudarc's driver API with dynamic loading.
//!
//! Opening a device checks that libcuda can be loaded first (cudarc panics
//! rather than erring when the library is absent), compiles the kernels with
//! NVRTC for the device's compute capability (once per process: the module is
//! cached by the backend), and uses one stream, so launches and copies are
//! ordered without events.
//!
//! Every launch runs under the watchdog ([`super::watchdog`]): a copy back
//! first waits for the launches before it by polling an event against
//! their deadline, sets the abort word (mapped host memory whose device
//! address the module's `fb_abort_word` holds) past it, and ends the
//! process when a kernel does not return a grace later.

use super::CudaError;
use super::launcher::{Arg, DevPtr, Launcher};
use super::nvrtc;
use super::watchdog;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use std::collections::HashMap;
use std::sync::Arc;

/// An open GPU with the kernels loaded.
pub struct CudaDevice {
    /// First, so that it is dropped while the context lives.
    watch: Watch,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
    buffers: Vec<CudaSlice<u8>>,
    /// Device name and compute capability, for messages.
    pub description: String,
    /// Dynamic shared memory per block with opt-in (read from the device).
    shared_optin: usize,
}

/// The watchdog's side of a device: its words in mapped host memory, its
/// settings, the event a copy waits on, and the launches since the last
/// copy (their work, the last kernel, the first launch's time).
struct Watch {
    /// Host address of the words (`[0]` abort, `[1]` gave up); null when the
    /// mapping failed (no abort: the deadline still ends the process).
    words: *mut u32,
    ctx: Arc<CudaContext>,
    settings: watchdog::Settings,
    event: Option<cudarc::driver::CudaEvent>,
    launches: u64,
    work: u64,
    last: &'static str,
    started: Option<std::time::Instant>,
    /// Why the device takes no further launch (a launch gave up).
    poisoned: Option<String>,
}

// SAFETY: `words` is page-locked host memory owned by the device for its
// whole life (freed in Drop); it is only read and written through volatile
// accesses by the thread that holds the device (the backend's mutex).
unsafe impl Send for Watch {}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.words.is_null() && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc in `map_words`, freed once.
            let _ = unsafe { cudarc::driver::sys::cuMemFreeHost(self.words.cast()) };
        }
    }
}

fn drv(e: impl std::fmt::Debug) -> CudaError {
    CudaError::Driver(format!("{e:?}"))
}

impl CudaDevice {
    /// Opens device 0 and loads the kernels.
    pub fn open(kernels: &[super::nvrtc::KernelSource]) -> Result<Self, CudaError> {
        // SAFETY: only tries to dlopen libcuda by its usual names.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(CudaError::NoDevice(
                "the CUDA driver library (libcuda.so) is not installed".into(),
            ));
        }
        let count = CudaContext::device_count().map_err(|e| CudaError::NoDevice(format!("{e:?}")))?;
        if count < 1 {
            return Err(CudaError::NoDevice("the driver reports no device".into()));
        }
        let ctx = CudaContext::new(0).map_err(|e| CudaError::NoDevice(format!("{e:?}")))?;
        let (major, minor) = ctx.compute_capability().map_err(drv)?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let compiled = nvrtc::compile(&format!("compute_{major}{minor}"), &[], kernels)?;
        let ptx = compiled
            .ptx
            .ok_or_else(|| CudaError::Driver("NVRTC returned no PTX".into()))?;
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)).map_err(drv)?;
        let mut functions = HashMap::new();
        for &k in kernels.iter().flat_map(|s| s.kernels) {
            functions.insert(k, module.load_function(k).map_err(drv)?);
        }
        let stream = ctx.default_stream();
        let words = match map_words(&ctx, &module, &stream) {
            Ok(w) => w,
            Err(e) => {
                eprintln!(
                    "fedbandits: the watchdog's abort word could not be mapped into {name} ({e}); a launch past its \
                     deadline ends the process instead of being asked to abort"
                );
                std::ptr::null_mut()
            }
        };
        Ok(Self {
            watch: Watch {
                words,
                ctx: ctx.clone(),
                settings: watchdog::Settings::from_env(),
                event: None,
                launches: 0,
                work: 0,
                last: "",
                started: None,
                poisoned: None,
            },
            description: format!("{name} (sm_{major}{minor})"),
            shared_optin: ctx
                .attribute(
                    cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                )
                .ok()
                .and_then(|v| usize::try_from(v).ok())
                .filter(|&v| v > 0)
                .unwrap_or(super::launcher::DEFAULT_SHARED_PER_BLOCK),
            ctx,
            stream,
            _module: module,
            functions,
            buffers: Vec::new(),
        })
    }

    fn slice_of(&self, p: DevPtr, bytes: usize) -> Result<&CudaSlice<u8>, CudaError> {
        self.buffers
            .iter()
            .find(|b| {
                let (start, _sync) = b.device_ptr(&self.stream);
                p.0 == start && bytes <= b.len()
            })
            .ok_or_else(|| CudaError::Driver(format!("{bytes} bytes at {:#x}: not the start of an allocation", p.0)))
    }

    /// Approximate peaks: (FP64 GFLOP/s, memory GB/s). FP64 units per SM
    /// come from a table by compute capability (32 FMA/clock on sm_60/70/80,
    /// 64 on sm_90, 2 on consumer parts); memory from clock x bus width x 2.
    fn device_peaks(&self) -> Option<(f64, f64)> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let get = |a| self.ctx.attribute(a).ok().map(f64::from);
        let sms = get(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let clock_khz = get(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?;
        let mem_khz = get(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?;
        let bus_bits = get(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
        let (major, minor) = self.ctx.compute_capability().ok()?;
        let fma_per_sm = match (major, minor) {
            (9, 0) => 64.0,
            (6, 0) | (7, 0) | (8, 0) => 32.0,
            _ => 2.0,
        };
        let gflops = sms * fma_per_sm * 2.0 * clock_khz * 1e3 / 1e9;
        let gbs = mem_khz * 1e3 * 2.0 * bus_bits / 8.0 / 1e9;
        Some((gflops, gbs))
    }
}

/// Page-locked host memory for the watchdog's two words, mapped into the
/// device, its device address written into the module's `fb_abort_word`.
fn map_words(
    ctx: &Arc<CudaContext>,
    module: &Arc<CudaModule>,
    stream: &Arc<CudaStream>,
) -> Result<*mut u32, CudaError> {
    use cudarc::driver::sys;
    ctx.bind_to_thread().map_err(drv)?;
    let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: a fresh 8-byte allocation; the flags map it into the device.
    unsafe {
        sys::cuMemHostAlloc(
            &mut host,
            8,
            sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
        )
    }
    .result()
    .map_err(drv)?;
    let words = host.cast::<u32>();
    // SAFETY: the allocation holds two u32.
    unsafe {
        words.write_volatile(0);
        words.add(1).write_volatile(0);
    }
    let mut dev: sys::CUdeviceptr = 0;
    let set = (|| {
        // SAFETY: `host` is a mapped allocation of this context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) }.result()?;
        let mut global = module.get_global("fb_abort_word", stream)?;
        stream.memcpy_htod(&dev.to_le_bytes()[..], &mut global)?;
        stream.synchronize()
    })();
    if let Err(e) = set {
        // SAFETY: allocated above, not shared with the device yet.
        let _ = unsafe { sys::cuMemFreeHost(host) };
        return Err(drv(e));
    }
    Ok(words)
}

impl Watch {
    /// Waits for the launches since the last copy: polls their event
    /// against their deadline, asks them to abort past it, and ends the
    /// process when they do not return a grace later ([`watchdog`]).
    fn wait(&mut self, stream: &Arc<CudaStream>, device: &str) -> Result<(), CudaError> {
        if let Some(why) = &self.poisoned {
            return Err(CudaError::Watchdog(why.clone()));
        }
        let Some(started) = self.started.take() else {
            return Ok(());
        };
        let deadline = self.settings.deadline(self.work);
        // Described only past the deadline: a copy allocates nothing.
        let (launches, work, kernel) = (self.launches, self.work, self.last);
        let window =
            || format!("{launches} launch(es) since the last copy, {work} agent-step(s) declared, the last {kernel}");
        self.launches = 0;
        self.work = 0;
        if self.event.is_none() {
            self.event = Some(self.ctx.new_event(None).map_err(drv)?);
        }
        let Some(event) = self.event.as_ref() else {
            return Ok(());
        };
        event.record(stream).map_err(drv)?;
        // Polled as the driver's default synchronization spins (one
        // device per host thread): no sleep that would delay the copy.
        while !event.try_is_complete().map_err(drv)? {
            if started.elapsed() >= deadline {
                return self.abort(kernel, device, &window(), deadline);
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Past the deadline: sets the abort word and waits a grace for the
    /// kernel to return; exits the process when it does not.
    fn abort(
        &mut self,
        kernel: &str,
        device: &str,
        window: &str,
        deadline: std::time::Duration,
    ) -> Result<(), CudaError> {
        if !self.words.is_null() {
            // SAFETY: the mapped words live as long as `self`.
            unsafe { self.words.write_volatile(1) };
        }
        let until = std::time::Instant::now() + self.settings.grace;
        let event = self.event.as_ref();
        while !event.is_some_and(|e| e.try_is_complete().unwrap_or(false)) {
            if std::time::Instant::now() >= until {
                eprintln!(
                    "{}",
                    watchdog::hung_message(kernel, device, window, deadline, self.settings.grace)
                );
                std::process::exit(watchdog::EXIT_HUNG);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // SAFETY: as above; the kernel has returned.
        let gave_up = !self.words.is_null() && unsafe { self.words.add(1).read_volatile() } != 0;
        if !self.words.is_null() {
            // SAFETY: as above.
            unsafe {
                self.words.write_volatile(0);
                self.words.add(1).write_volatile(0);
            }
        }
        if gave_up {
            let why = watchdog::gave_up_message(kernel, device, window, deadline);
            self.poisoned = Some(why.clone());
            return Err(CudaError::Watchdog(why));
        }
        eprintln!(
            "fedbandits: {kernel} on {device} finished after its deadline of {:.1} s ({window}) without any block \
             giving up: its results stand (raise {} if such launches are expected)",
            deadline.as_secs_f64(),
            watchdog::FLOOR_VAR
        );
        Ok(())
    }
}

impl Launcher for CudaDevice {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn free_all(&mut self) {
        self.buffers.clear();
    }

    fn peaks(&self) -> Option<(f64, f64)> {
        self.device_peaks()
    }

    fn max_shared_per_block(&self) -> usize {
        self.shared_optin
    }

    fn resident_blocks(&self, kernel: &str, block: usize, shared: usize) -> Option<usize> {
        use cudarc::driver::sys::{CUdevice_attribute as A, CUfunction_attribute as F};
        let f = self.functions.get(kernel)?;
        if shared > super::launcher::DEFAULT_SHARED_PER_BLOCK {
            // The occupancy of an opted-in size counts only once opted in.
            f.set_attribute(
                F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(shared).ok()?,
            )
            .ok()?;
        }
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(u32::try_from(block).ok()?, shared, None)
            .ok()?;
        let sms = self.ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).ok()?;
        Some(per_sm as usize * usize::try_from(sms).ok()?)
    }

    fn alloc_zeroed(&mut self, bytes: usize) -> Result<DevPtr, CudaError> {
        let s = self.stream.alloc_zeros::<u8>(bytes.max(8)).map_err(drv)?;
        let p = {
            let (p, _sync) = s.device_ptr(&self.stream);
            DevPtr(p)
        };
        self.buffers.push(s);
        Ok(p)
    }

    fn upload(&mut self, dst: DevPtr, bytes: &[u8]) -> Result<(), CudaError> {
        let idx = self
            .buffers
            .iter()
            .position(|b| b.device_ptr(&self.stream).0 == dst.0 && bytes.len() <= b.len())
            .ok_or_else(|| CudaError::Driver(format!("upload to {:#x}: not an allocation", dst.0)))?;
        let stream = self.stream.clone();
        let mut view = self.buffers[idx].slice_mut(..bytes.len());
        stream.memcpy_htod(bytes, &mut view).map_err(drv)
    }

    fn expect_work(&mut self, agent_steps: u64) {
        self.watch.work = self.watch.work.saturating_add(agent_steps);
    }

    fn download(&mut self, src: DevPtr, out: &mut [u8]) -> Result<(), CudaError> {
        self.watch.wait(&self.stream, &self.description)?;
        let s = self.slice_of(src, out.len())?;
        let view = s.slice(..out.len());
        self.stream.memcpy_dtoh(&view, out).map_err(drv)?;
        self.stream.synchronize().map_err(drv)
    }

    fn launch_grid(
        &mut self,
        kernel: &str,
        grid: usize,
        block: usize,
        shared_bytes: usize,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        if let Some(why) = &self.watch.poisoned {
            return Err(CudaError::Watchdog(why.clone()));
        }
        let (&name, f) = self
            .functions
            .get_key_value(kernel)
            .ok_or_else(|| CudaError::Driver(format!("unknown kernel {kernel}")))?;
        let mut i32s = Vec::new();
        let mut u64s = Vec::new();
        let mut f64s = Vec::new();
        for a in args {
            match *a {
                Arg::I32(v) => i32s.push(v),
                Arg::U64(v) => u64s.push(v),
                Arg::F64(v) => f64s.push(v),
                Arg::Ptr(p) => u64s.push(p.0),
            }
        }
        let mut b = self.stream.launch_builder(f);
        let (mut ii, mut iu, mut iff) = (0, 0, 0);
        for a in args {
            match a {
                Arg::I32(_) => {
                    b.arg(&i32s[ii]);
                    ii += 1;
                }
                Arg::U64(_) | Arg::Ptr(_) => {
                    b.arg(&u64s[iu]);
                    iu += 1;
                }
                Arg::F64(_) => {
                    b.arg(&f64s[iff]);
                    iff += 1;
                }
            }
        }
        let dim = |v: usize| u32::try_from(v).map_err(|_| CudaError::Driver(format!("launch size {v}")));
        if shared_bytes > super::launcher::DEFAULT_SHARED_PER_BLOCK {
            // Beyond 48 KiB a kernel must opt in to its dynamic shared memory.
            f.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(shared_bytes).map_err(|_| CudaError::Driver(format!("shared memory {shared_bytes}")))?,
            )
            .map_err(drv)?;
        }
        let cfg = LaunchConfig {
            grid_dim: (dim(grid.max(1))?, 1, 1),
            block_dim: (dim(block.max(1))?, 1, 1),
            shared_mem_bytes: dim(shared_bytes)?,
        };
        // SAFETY: every kernel's parameter list matches the driver's argument
        // list (src/algo/linear/cuda/mod.rs builds both from one place);
        // pointer arguments are live allocations of this device, and every
        // kernel bounds-checks its thread index.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        let w = &mut self.watch;
        w.launches += 1;
        w.last = name;
        w.started.get_or_insert_with(std::time::Instant::now);
        Ok(())
    }
}
