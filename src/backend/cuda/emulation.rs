//! Host emulation of the CUDA kernels: the families' `.cu` sources (those
//! the emulator is built with, [`super::nvrtc::KernelSource`]) compiled as
//! C++ with `kernels/emulation.hpp` and the launcher of
//! `kernels/emulation.cpp`, in one generated translation unit, built by g++
//! into a shared library and called through its `fb_emu_launch`, which runs the
//! blocks of a grid in order and the threads of a block as fibers, phase by
//! phase between barriers (shared memory, warp shuffles; see
//! kernels/emulation.hpp). Memory is host memory; pointers are
//! host addresses. Used by the parity tests, so that every kernel's logic is
//! executed and checked against the CPU backend on machines without a GPU.
//!
//! Every launch runs under the watchdog ([`super::watchdog::Alarm`]): its
//! words go to the launch, a thread sets the abort word past the deadline,
//! and a group barrier that gave up makes the launch a
//! [`CudaError::Watchdog`], after which the emulator takes no further
//! launch (as a device). [`Emulator::withhold_last_block`] is the fault the
//! watchdog's test drives: a grouped kernel's last block of every group
//! never runs, as a block a device never schedules.

use super::CudaError;
use super::launcher::{Arg, DevPtr, Launcher};
use super::watchdog;
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

type LaunchFn = unsafe extern "C" fn(*const c_char, c_uint, c_uint, c_uint, *mut *mut c_void, *mut c_uint) -> c_int;

/// The emulated device.
pub struct Emulator {
    _lib: libloading::Library,
    launch_fn: LaunchFn,
    buffers: Vec<Vec<u64>>,
    shared_limit: usize,
    settings: watchdog::Settings,
    alarm: watchdog::Alarm,
    /// Work declared since the last copy ([`Launcher::expect_work`]).
    work: u64,
    /// Why the emulator takes no further launch (a launch gave up).
    poisoned: Option<String>,
}

/// The emulator's watchdog: the floor of `FEDBANDITS_WATCHDOG_SECONDS` (or
/// the default) and a grace of ten minutes: an emulated kernel cannot spin
/// except at a withheld block's barrier, which returns on the abort word
/// at once, so a launch that is merely slow (a loaded test machine) is
/// never ended.
fn emulation_settings() -> watchdog::Settings {
    watchdog::Settings {
        grace: std::time::Duration::from_secs(600),
        ..watchdog::Settings::from_env()
    }
}

/// The translation unit of the emulation library: the families' sources
/// and the launch table of their kernels, then the launcher.
fn translation_unit(sets: &[super::nvrtc::KernelSource]) -> String {
    let mut s = String::from("#define FB_HOST_EMULATION 1\n#include \"emulation.hpp\"\n");
    for k in sets {
        s += &format!("#include \"{}\"\n", k.file);
    }
    s += "#define FB_EMU_TABLE";
    for k in sets {
        for name in k.kernels {
            let how = if k.grouped.contains(name) {
                "FB_GROUP_KERNEL"
            } else if k.coop.contains(name) {
                "FB_COOP_KERNEL"
            } else {
                "FB_KERNEL"
            };
            s += &format!(" \\\n    {how}({name})");
        }
    }
    s += "\n#include \"emulation.cpp\"\n";
    s
}

/// Compiles the emulation library of the kernel sources `sets` (files of
/// `kernels_dir`) into `out_dir` with g++.
pub fn build(kernels_dir: &Path, out_dir: &Path, sets: &[super::nvrtc::KernelSource]) -> Result<PathBuf, CudaError> {
    std::fs::create_dir_all(out_dir).map_err(|e| CudaError::Emulation(format!("{}: {e}", out_dir.display())))?;
    let pid = std::process::id();
    let lib = out_dir.join(format!("libfedbandits_emu_{pid}.so"));
    let unit = out_dir.join(format!("fedbandits_emu_{pid}.cpp"));
    std::fs::write(&unit, translation_unit(sets))
        .map_err(|e| CudaError::Emulation(format!("{}: {e}", unit.display())))?;
    let out = Command::new("g++")
        .args([
            "-std=c++17",
            "-O2",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-fPIC",
            "-shared",
            "-Wall",
        ])
        .arg("-I")
        .arg(kernels_dir)
        .arg("-o")
        .arg(&lib)
        .arg(&unit)
        .output()
        .map_err(|e| CudaError::Emulation(format!("cannot run g++: {e}")))?;
    if !out.status.success() {
        return Err(CudaError::Emulation(format!(
            "g++ failed on {} (the kernels of {}):\n{}",
            unit.display(),
            kernels_dir.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(lib)
}

impl Emulator {
    /// Loads a library built by [`build`].
    pub fn load(path: &Path) -> Result<Self, CudaError> {
        // SAFETY: the library is ours (built from kernels/emulation.cpp); its
        // initializers only set up static variables.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| CudaError::Emulation(e.to_string()))?;
        // SAFETY: `fb_emu_launch` has exactly the LaunchFn signature in emulation.cpp.
        let launch_fn = unsafe { lib.get::<LaunchFn>(b"fb_emu_launch\0") }
            .map(|s| *s)
            .map_err(|e| CudaError::Emulation(e.to_string()))?;
        let settings = emulation_settings();
        Ok(Self {
            _lib: lib,
            launch_fn,
            buffers: Vec::new(),
            shared_limit: super::launcher::DEFAULT_SHARED_PER_BLOCK,
            settings,
            alarm: watchdog::Alarm::start(settings),
            work: 0,
            poisoned: None,
        })
    }

    /// The same emulator with the watchdog's `settings` (its test: a short
    /// floor).
    pub fn with_watchdog(mut self, settings: watchdog::Settings) -> Self {
        self.settings = settings;
        self.alarm = watchdog::Alarm::start(settings);
        self
    }

    /// The watchdog's fault: from now on, the last block of every group of
    /// a grouped kernel never runs (a block the device never schedules), so
    /// its group waits at its first group barrier until the watchdog's
    /// abort.
    pub fn withhold_last_block(self) -> Self {
        self.alarm.words()[2].store(1, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// Emulates a device whose blocks may use `bytes` of dynamic shared
    /// memory (e.g. an H100's 227 KiB opt-in), so tests can run the shapes
    /// such a device gets.
    pub fn with_shared_limit(mut self, bytes: usize) -> Self {
        self.shared_limit = bytes;
        self
    }

    fn find(&self, p: DevPtr, bytes: usize) -> Result<*mut u8, CudaError> {
        for b in &self.buffers {
            let start = b.as_ptr() as u64;
            if p.0 >= start && p.0 + bytes as u64 <= start + (b.len() * 8) as u64 {
                return Ok(p.0 as *mut u8);
            }
        }
        Err(CudaError::Emulation(format!(
            "{bytes} bytes at {:#x} are outside every allocation",
            p.0
        )))
    }
}

impl Launcher for Emulator {
    fn name(&self) -> &'static str {
        "emulation"
    }

    fn free_all(&mut self) {
        self.buffers.clear();
    }

    fn max_shared_per_block(&self) -> usize {
        self.shared_limit
    }

    fn alloc_zeroed(&mut self, bytes: usize) -> Result<DevPtr, CudaError> {
        let v = vec![0u64; bytes.div_ceil(8).max(1)];
        let p = DevPtr(v.as_ptr() as u64);
        self.buffers.push(v);
        Ok(p)
    }

    fn upload(&mut self, dst: DevPtr, bytes: &[u8]) -> Result<(), CudaError> {
        let p = self.find(dst, bytes.len())?;
        // SAFETY: `find` checked that the range lies inside one live allocation.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        Ok(())
    }

    fn expect_work(&mut self, agent_steps: u64) {
        self.work = self.work.saturating_add(agent_steps);
    }

    fn download(&mut self, src: DevPtr, out: &mut [u8]) -> Result<(), CudaError> {
        if let Some(why) = &self.poisoned {
            return Err(CudaError::Watchdog(why.clone()));
        }
        self.work = 0;
        let p = self.find(src, out.len())?;
        // SAFETY: as in `upload`.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn launch_grid(
        &mut self,
        kernel: &str,
        grid: usize,
        block: usize,
        shared_bytes: usize,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        let mut vals: Vec<u64> = args
            .iter()
            .map(|a| match *a {
                Arg::I32(v) => v as u32 as u64,
                Arg::U64(v) => v,
                Arg::F64(v) => v.to_bits(),
                Arg::Ptr(p) => p.0,
            })
            .collect();
        // Each value sits in its own 8-byte slot; an `int` parameter reads the
        // slot's first 4 bytes (little-endian), as cuLaunchKernel would.
        let mut params: Vec<*mut c_void> = vals.iter_mut().map(|v| (v as *mut u64).cast::<c_void>()).collect();
        let name = CString::new(kernel).map_err(|_| CudaError::Emulation("kernel name has a NUL".into()))?;
        let dims = |v: usize| c_uint::try_from(v).map_err(|_| CudaError::Emulation(format!("launch size {v}")));
        if shared_bytes > self.shared_limit {
            return Err(CudaError::Emulation(format!(
                "{kernel}: {shared_bytes} bytes of shared memory exceed the emulated device's {}",
                self.shared_limit
            )));
        }
        if let Some(why) = &self.poisoned {
            return Err(CudaError::Watchdog(why.clone()));
        }
        let (g, b, sh) = (dims(grid.max(1))?, dims(block.max(1))?, dims(shared_bytes)?);
        let deadline = self.settings.deadline(self.work);
        let window = format!("one emulated launch of {grid} blocks of {block} threads");
        self.alarm.arm(
            watchdog::hung_message(kernel, "the host emulation", &window, deadline, self.settings.grace),
            deadline,
        );
        let words = self.alarm.words().as_ptr().cast::<c_uint>().cast_mut();
        // SAFETY: `params` points at live values laid out as the kernel's
        // parameters; pointer arguments are addresses of our allocations;
        // `words` are three u32 (AtomicU32 has u32's layout) that outlive
        // the call, shared with the alarm's thread.
        let rc = unsafe { (self.launch_fn)(name.as_ptr(), g, b, sh, params.as_mut_ptr(), words) };
        let gave_up = self.alarm.disarm();
        if rc == 4 || gave_up {
            let why = watchdog::gave_up_message(kernel, "the host emulation", &window, deadline);
            self.poisoned = Some(why.clone());
            return Err(CudaError::Watchdog(why));
        }
        match rc {
            0 => Ok(()),
            2 => Err(CudaError::Emulation(format!(
                "{kernel}: the threads of a block diverged at a barrier (some returned while others waited)"
            ))),
            3 => Err(CudaError::Emulation(format!(
                "{kernel} reached a barrier or shuffle but is not listed in its family's KernelSource::coop (the \
                 emulator ran it as sequential)"
            ))),
            _ => Err(CudaError::Emulation(format!("unknown kernel {kernel}"))),
        }
    }
}
