//! Every family's kernels compiled by NVRTC for a real architecture with
//! `--ptxas-options=-v`, once per test process and architecture (about 15
//! s of CPU each on CI's machine; three suites read the sm_90 one), and the
//! ptxas statistics parsed from its log, as `fedbandits::cli::kernels::stats`
//! computes them.

use fedbandits::backend::cuda::nvrtc::{self, Compiled, KernelStats};
use fedbandits::backend::cuda::occupancy::Arch;
use std::sync::OnceLock;

/// The compile of every kernel for `arch` (`sm_80` or `sm_90`): the CUBIN's
/// size and NVRTC's log. A second caller waits for the first's compile.
pub fn compiled(arch: &str) -> &'static Compiled {
    static SM_80: OnceLock<Compiled> = OnceLock::new();
    static SM_90: OnceLock<Compiled> = OnceLock::new();
    let cell = match arch {
        "sm_80" => &SM_80,
        "sm_90" => &SM_90,
        other => panic!("no compile kept for {other}: sm_80 or sm_90"),
    };
    cell.get_or_init(|| {
        assert!(
            nvrtc::available(),
            "libnvrtc.so.12 not found: run the tests through .ci/run (it installs nvidia-cuda-nvrtc-cu12 and sets LD_LIBRARY_PATH)"
        );
        let sources = fedbandits::algo::family::kernel_sources();
        nvrtc::compile(arch, &["--ptxas-options=-v"], &sources).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// ptxas' registers, spills and static shared memory of every kernel at
/// `arch`, from [`compiled`]'s log (what `fedbandits::cli::kernels::stats`
/// returns, without compiling again).
pub fn stats(arch: &Arch) -> Vec<KernelStats> {
    nvrtc::ptxas_stats(&compiled(arch.name).log)
}
