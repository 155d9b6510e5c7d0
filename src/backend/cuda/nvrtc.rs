//! Compiling the kernels with NVRTC (loaded at run time: the binary runs and
//! builds on machines without CUDA).
//!
//! The kernel sources are embedded in the binary (`include_str!`) and joined
//! into one translation unit. Options always include `--fmad=false` (the CPU
//! backend never contracts a*b+c; explicit `fma` is used where it does) and
//! `--std=c++17` and `--device-int128` (the exact discrete samplers'
//! integers). A compile error carries NVRTC's log.

use cudarc::nvrtc::{result, sys};
use std::ffi::{CStr, CString};
use thiserror::Error;

/// `kernels/common.cuh`.
pub const COMMON: &str = include_str!("../../../kernels/common.cuh");
/// A family's kernels: one source file of `kernels/` (embedded by the
/// family with `include_str!`) and the kernels it defines. Each family lists
/// its own (`KERNELS` in its folder, [`crate::backend`] knows none); the
/// device compiles the ones it is opened with.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    /// The file's name under `kernels/`.
    pub file: &'static str,
    /// Its text.
    pub source: &'static str,
    /// The kernels it defines (loaded by name).
    pub kernels: &'static [&'static str],
    /// Those of them that synchronize a block (barriers, warp shuffles):
    /// the host emulation runs their threads as fibers, the others in
    /// order.
    pub coop: &'static [&'static str],
    /// Those of them whose blocks also synchronize in groups of
    /// consecutive blocks (`fb_group_barrier`; the kernel's first parameter
    /// is the blocks per group): the emulation runs each group's threads
    /// together as fibers.
    pub grouped: &'static [&'static str],
}

/// The single translation unit NVRTC compiles: `common.cuh`, then each
/// source without its include of it.
pub fn kernel_source(sets: &[KernelSource]) -> String {
    let mut s = String::from(COMMON);
    s.push('\n');
    for line in sets.iter().flat_map(|k| k.source.lines()) {
        if line.trim_start().starts_with("#include \"common.cuh\"") {
            continue;
        }
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// NVRTC failures.
#[derive(Debug, Error)]
pub enum NvrtcError {
    /// libnvrtc could not be loaded.
    #[error(
        "NVRTC (libnvrtc.so.12) is not available: install the CUDA toolkit or `pip install nvidia-cuda-nvrtc-cu12` and put its lib directory on LD_LIBRARY_PATH"
    )]
    Missing,
    /// The kernels did not compile.
    #[error("NVRTC failed to compile the kernels ({code:?}) with options {options:?}:\n{log}")]
    Compile {
        /// NVRTC's result code.
        code: sys::nvrtcResult,
        /// Options used.
        options: Vec<String>,
        /// NVRTC's log.
        log: String,
    },
    /// Another NVRTC call failed.
    #[error("NVRTC call failed: {0:?}")]
    Call(sys::nvrtcResult),
}

/// A compiled program: PTX or CUBIN, and NVRTC's log (ptxas statistics with
/// `--ptxas-options=-v`).
#[derive(Clone, Debug)]
pub struct Compiled {
    /// PTX text (for a virtual architecture `compute_XX`).
    pub ptx: Option<String>,
    /// CUBIN size in bytes (for a real architecture `sm_XX`).
    pub cubin_bytes: Option<usize>,
    /// The compile log.
    pub log: String,
}

/// Whether libnvrtc can be loaded (cudarc panics on a missing library, so
/// this is checked before any call).
pub fn available() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { sys::is_culib_present() }
}

/// Compiles the kernel sources `sets` for `arch` (`compute_90` gives PTX,
/// `sm_90` a CUBIN).
pub fn compile(arch: &str, extra: &[&str], sets: &[KernelSource]) -> Result<Compiled, NvrtcError> {
    compile_source(&kernel_source(sets), arch, extra)
}

/// Compiles CUDA C++ source text with the project's options.
pub fn compile_source(source: &str, arch: &str, extra: &[&str]) -> Result<Compiled, NvrtcError> {
    if !available() {
        return Err(NvrtcError::Missing);
    }
    let src = CString::new(source).map_err(|_| NvrtcError::Call(sys::nvrtcResult::NVRTC_ERROR_INVALID_INPUT))?;
    let name = c"fedbandits_kernels.cu";
    let mut options: Vec<String> = vec![
        format!("--gpu-architecture={arch}"),
        "--fmad=false".into(),
        "--std=c++17".into(),
        // The exact discrete samplers' 128-bit integers (common.cuh).
        "--device-int128".into(),
    ];
    options.extend(extra.iter().map(|s| s.to_string()));
    let prog = result::create_program(&src, Some(name)).map_err(|e| NvrtcError::Call(e.0))?;
    // SAFETY: `prog` was just created and is destroyed exactly once below;
    // `src` and `name` outlive it.
    unsafe {
        let compiled = result::compile_program(prog, &options);
        let log = result::get_program_log(prog)
            .map(|raw| CStr::from_ptr(raw.as_ptr()).to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = match compiled {
            Err(e) => Err(NvrtcError::Compile {
                code: e.0,
                options: options.clone(),
                log,
            }),
            Ok(()) if arch.starts_with("sm_") => {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| NvrtcError::Call(e.0))?;
                Ok(Compiled {
                    ptx: None,
                    cubin_bytes: Some(size),
                    log,
                })
            }
            Ok(()) => result::get_ptx(prog)
                .map(|raw| Compiled {
                    ptx: Some(CStr::from_ptr(raw.as_ptr()).to_string_lossy().into_owned()),
                    cubin_bytes: None,
                    log,
                })
                .map_err(|e| NvrtcError::Call(e.0)),
        };
        let _ = result::destroy_program(prog);
        out
    }
}

/// What ptxas reports of one kernel (`--ptxas-options=-v`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelStats {
    /// The kernel's name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes spilled to local memory (stores, loads).
    pub spills: (u32, u32),
    /// Static shared memory per block, bytes (`__shared__` arrays; the
    /// launch adds its dynamic shared memory).
    pub static_shared: u32,
}

/// Registers, spills and static shared memory per kernel, parsed from a
/// `--ptxas-options=-v` log, in the log's order.
pub fn ptxas_stats(log: &str) -> Vec<KernelStats> {
    // Lines look like:
    //   ptxas info    : Compiling entry function 'fb_linear_step' for 'sm_90'
    //   ptxas info    : Function properties for fb_linear_step
    //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    //   ptxas info    : Used 72 registers, used 1 barriers, 96 bytes smem, 400 bytes cmem[0]
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut spills = (0, 0);
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            current = rest.split('\'').next().map(str::to_owned);
            spills = (0, 0);
        } else if line.contains("spill stores") {
            let nums: Vec<u32> = line
                .split(',')
                .filter_map(|p| p.split_whitespace().next().and_then(|n| n.parse().ok()))
                .collect();
            if nums.len() >= 3 {
                spills = (nums[1], nums[2]);
            }
        } else if let Some(rest) = line.split("Used ").nth(1)
            && let (Some(name), Some(registers)) = (
                current.take(),
                rest.split_whitespace().next().and_then(|n| n.parse().ok()),
            )
        {
            let static_shared = rest
                .split(',')
                .find(|p| p.trim_end().ends_with("bytes smem"))
                .and_then(|p| p.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            out.push(KernelStats {
                name,
                registers,
                spills,
                static_shared,
            });
        }
    }
    out
}
