//! The kernels' table of `fedbandits calibrate --report`: for every bench
//! workload, each kernel it launches, how often per round, its launch shape
//! (threads and dynamic shared memory per block), ptxas' registers, spills
//! and static shared memory, and the theoretical occupancy they give
//! ([`crate::backend::cuda::occupancy`]). On a machine with a device the
//! workloads run on it; without one, through the host emulation shaped as
//! an H100 (its 227 KiB of shared memory per block) when g++ and the
//! repository's `kernels/` are at hand; so the table is measured with a GPU
//! or without. The `cuda_events` tests print the same table.

use super::bench::{On, measure, min_rounds, workloads};
use crate::backend::cuda::CudaBackend;
use crate::backend::cuda::nvrtc::{self, KernelSource, KernelStats};
use crate::backend::cuda::occupancy::{self, Arch, Row};

/// One workload's kernels.
pub struct WorkloadKernels {
    /// The bench workload.
    pub workload: &'static str,
    /// Rounds it ran.
    pub rounds: u64,
    /// Its kernels, most launched first.
    pub rows: Vec<Row>,
    /// Launches, bytes uploaded and bytes downloaded in the run.
    pub traffic: (u64, u64, u64),
}

/// Shared memory per block an H100 lets a kernel opt into (bytes).
pub const H100_SHARED_PER_BLOCK: usize = 227 * 1024;

/// ptxas' statistics of the kernels `sources` compiled for `arch` (each
/// kernel is compiled on its own, so a kernel's figures do not depend on
/// which other sources are compiled with it).
pub fn stats(arch: &Arch, sources: &[KernelSource]) -> Result<Vec<KernelStats>, nvrtc::NvrtcError> {
    let c = nvrtc::compile(arch.name, &["--ptxas-options=-v"], sources)?;
    Ok(nvrtc::ptxas_stats(&c.log))
}

/// The kernel sources of the families with a bench workload whose name
/// contains `only` (every family's: None), so that `calibrate --only`
/// compiles (NVRTC, g++) only the kernels its workloads can launch.
pub fn sources(only: Option<&str>) -> Vec<KernelSource> {
    crate::algo::family::FAMILIES
        .iter()
        .filter(|f| only.is_none_or(|o| f.workloads.iter().any(|(name, _, _)| name.contains(o))))
        .flat_map(|f| f.kernels.iter().copied())
        .collect()
}

/// Runs every bench workload whose name contains `only` (every one: None)
/// once on `dev` (2 federations, 128 rounds or its minimum) and tables its
/// kernels with `stats` on `arch`; the workloads the device refuses, with
/// the reason.
pub fn tables(
    dev: &CudaBackend,
    stats: &[KernelStats],
    arch: &Arch,
    only: Option<&str>,
) -> (Vec<WorkloadKernels>, Vec<String>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for (name, _, yaml) in workloads() {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let rounds = min_rounds(yaml).max(128);
        dev.take_shapes();
        match measure(name, yaml, 2, rounds, On::Cuda(dev)) {
            Ok(m) => out.push(WorkloadKernels {
                workload: name,
                rounds,
                rows: occupancy::rows(stats, &dev.take_shapes(), arch),
                traffic: m.traffic.unwrap_or_default(),
            }),
            Err(e) => refused.push(format!("{name}: {e}")),
        }
    }
    (out, refused)
}

/// The tables as Markdown, one per workload.
pub fn markdown(tables: &[WorkloadKernels], refused: &[String]) -> String {
    let mut md = String::new();
    for t in tables {
        let (launches, up, down) = t.traffic;
        let per = t.rounds as f64;
        md += &format!(
            "\n**{}**: {:.3} launches, {:.0} bytes up and {:.0} down per round ({} rounds, 2 federations)\n\n{}",
            t.workload,
            launches as f64 / per,
            up as f64 / per,
            down as f64 / per,
            t.rounds,
            occupancy::markdown(&t.rows, t.rounds)
        );
    }
    for r in refused {
        md += &format!("\nnot run: {r}\n");
    }
    md
}

/// The architecture a device description names (`... (sm_80)`), if its
/// limits are known ([`occupancy::KNOWN`]).
fn arch_of(description: &str) -> Option<Arch> {
    occupancy::KNOWN
        .into_iter()
        .find(|a| description.contains(&format!("({})", a.name)))
}

/// The report's section for the workloads whose name contains `only`
/// (every one: None): on `device` when there is one, else through the host
/// emulation shaped as an H100, else the reason it could not be made.
pub fn section(device: Option<&CudaBackend>, only: Option<&str>) -> String {
    let md = String::from("\n## Kernels: launches, registers, shared memory, occupancy\n\n");
    // The architecture, then ptxas' statistics (NVRTC), before any run.
    let arch = match device {
        Some(d) => match arch_of(d.description()) {
            Some(a) => a,
            None => {
                return md
                    + &format!(
                        "Not measured: the occupancy limits of {} are not known here (sm_80, sm_86, sm_89, sm_90).\n",
                        d.description()
                    );
            }
        },
        None => occupancy::SM_90,
    };
    let sources = sources(only);
    let stats = match stats(&arch, &sources) {
        Ok(s) => s,
        Err(e) => return md + &format!("Not measured: NVRTC could not compile for {}: {e}.\n", arch.name),
    };
    let emulated;
    let (dev, how) = match device {
        Some(d) => (d, format!("as {} launched them", d.description())),
        None => match emulated_h100(&sources) {
            Ok(e) => {
                emulated = e;
                (
                    &emulated,
                    "as an H100 would launch them (no device here: the host emulation with 227 KiB of shared \
                     memory per block)"
                        .to_string(),
                )
            }
            Err(why) => return md + &format!("Not measured: {why}.\n"),
        },
    };
    let (tables, refused) = tables(dev, &stats, &arch, only);
    md + &format!(
        "Each workload's kernels {how}; registers, spills and static shared memory from ptxas for {}; \
         theoretical occupancy by the CUDA occupancy calculator's rule for {} (an upper bound on the \
         achieved occupancy).\n",
        arch.name, arch.name
    ) + &markdown(&tables, &refused)
}

/// Why the host emulation cannot stand in for a device.
#[derive(Debug, thiserror::Error)]
enum NoEmulation {
    /// The checkout's `kernels/` is not where the binary was built.
    #[error("no device, and the kernels' host emulation needs the repository's kernels/ ({0} is missing)")]
    NoKernels(String),
    /// g++ failed.
    #[error("no device, and the host emulation could not be built: {0}")]
    Build(String),
    /// The built library does not load.
    #[error("the host emulation could not be loaded: {0}")]
    Load(String),
}

/// The host emulation of the kernels `sources`, built from the repository's
/// `kernels/` (g++), with an H100's shared memory per block.
fn emulated_h100(sources: &[KernelSource]) -> Result<CudaBackend, NoEmulation> {
    use crate::backend::cuda::emulation::{self, Emulator};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    if !dir.join("emulation.hpp").exists() {
        return Err(NoEmulation::NoKernels(dir.join("emulation.hpp").display().to_string()));
    }
    let out = std::env::temp_dir().join("fedbandits-calibrate-emulation");
    let lib = emulation::build(&dir, &out, sources).map_err(|e| NoEmulation::Build(e.to_string()))?;
    let emu = Emulator::load(&lib).map_err(|e| NoEmulation::Load(e.to_string()))?;
    Ok(CudaBackend::with_launcher(
        Box::new(emu.with_shared_limit(H100_SHARED_PER_BLOCK)),
        "host emulation (H100 shapes)",
    ))
}

#[cfg(test)]
mod tests {
    /// A device's description names its architecture; only known limits
    /// are used (sm_75's would be guessed).
    #[test]
    fn the_architecture_is_read_from_the_device_description() {
        let name = |d: &str| super::arch_of(d).map(|a| a.name);
        assert_eq!(name("NVIDIA H100 80GB HBM3 (sm_90)"), Some("sm_90"));
        assert_eq!(name("NVIDIA A100-SXM4-40GB (sm_80)"), Some("sm_80"));
        assert_eq!(name("NVIDIA A40 (sm_86)"), Some("sm_86"));
        assert_eq!(name("Tesla T4 (sm_75)"), None);
        // sm_86's 48 warp slots: twelve 4-warp blocks fill them.
        let o = crate::backend::cuda::occupancy::occupancy(&crate::backend::cuda::occupancy::SM_86, 32, 128, 0);
        assert_eq!((o.blocks, o.warps, o.fraction), (12, 48, 1.0));
    }
}
