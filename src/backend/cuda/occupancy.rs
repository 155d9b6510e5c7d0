//! Theoretical occupancy of a kernel launch: how many blocks and warps of
//! it one SM holds at once, from its registers per thread and static
//! shared memory (ptxas, [`super::nvrtc::ptxas_stats`]) and its launch
//! shape (threads and dynamic shared memory per block, as the host code
//! launches it: [`super::launcher::Traffic::take_shapes`]).
//!
//! The rule is the CUDA Occupancy Calculator's (NVIDIA, CUDA C++
//! Programming Guide, "Occupancy Calculator" and the compute-capability
//! tables): blocks per SM is the least of the limits set by the SM's warp
//! slots, its block slots, its register file (registers are allocated per
//! warp in units of 256: `ceil(registers x 32 / 256) x 256` per warp) and
//! its shared memory (static + dynamic + the 1 KiB the runtime reserves per
//! block, in units of 128 bytes, against the largest carveout); occupancy
//! is the warps those blocks hold over the SM's warp slots. It is an upper
//! bound: what a kernel achieves also depends on how its warps stall
//! (Nsight Compute's achieved occupancy).

/// The per-SM limits of one architecture.
#[derive(Clone, Copy, Debug)]
pub struct Arch {
    /// `sm_80`, `sm_90`.
    pub name: &'static str,
    /// Warp slots per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Shared memory per SM at the largest carveout, bytes.
    pub shared: u32,
}

/// A100 (compute capability 8.0): 64 warps, 32 blocks, 64 K registers,
/// 164 KiB of shared memory per SM.
pub const SM_80: Arch = Arch {
    name: "sm_80",
    max_warps: 64,
    max_blocks: 32,
    registers: 65_536,
    shared: 164 * 1024,
};

/// RTX 30xx / A40 (compute capability 8.6): 48 warps, 16 blocks, 64 K
/// registers, 100 KiB of shared memory per SM.
pub const SM_86: Arch = Arch {
    name: "sm_86",
    max_warps: 48,
    max_blocks: 16,
    registers: 65_536,
    shared: 100 * 1024,
};

/// L4 / RTX 40xx (compute capability 8.9): 48 warps, 24 blocks, 64 K
/// registers, 100 KiB of shared memory per SM.
pub const SM_89: Arch = Arch {
    name: "sm_89",
    max_warps: 48,
    max_blocks: 24,
    registers: 65_536,
    shared: 100 * 1024,
};

/// The architectures whose limits are known here.
pub const KNOWN: [Arch; 4] = [SM_80, SM_86, SM_89, SM_90];

/// H100/H200 (compute capability 9.0): 64 warps, 32 blocks, 64 K
/// registers, 228 KiB of shared memory per SM.
pub const SM_90: Arch = Arch {
    name: "sm_90",
    max_warps: 64,
    max_blocks: 32,
    registers: 65_536,
    shared: 228 * 1024,
};

/// Shared memory the runtime reserves per block (compute capability 8.0
/// and later).
const RESERVED_SHARED: u32 = 1024;
/// Registers are allocated per warp in this many.
const REGISTER_UNIT: u32 = 256;
/// Shared memory is allocated per block in this many bytes.
const SHARED_UNIT: u32 = 128;

/// What bounds the blocks per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limiter {
    /// The SM's warp slots.
    Warps,
    /// The SM's block slots.
    Blocks,
    /// The register file.
    Registers,
    /// Shared memory.
    Shared,
}

impl Limiter {
    /// A word for tables.
    pub fn word(self) -> &'static str {
        match self {
            Limiter::Warps => "warps",
            Limiter::Blocks => "blocks",
            Limiter::Registers => "registers",
            Limiter::Shared => "shared memory",
        }
    }
}

/// The theoretical occupancy of one launch shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    /// Blocks resident per SM (0: the block does not fit at all).
    pub blocks: u32,
    /// Warps resident per SM.
    pub warps: u32,
    /// `warps` over the SM's warp slots.
    pub fraction: f64,
    /// The limit that binds.
    pub limiter: Limiter,
}

/// The theoretical occupancy of blocks of `threads` threads using
/// `registers` registers per thread and `shared` bytes of shared memory
/// (static + dynamic) on `arch`.
pub fn occupancy(arch: &Arch, registers: u32, threads: u32, shared: u32) -> Occupancy {
    let warps_per_block = threads.div_ceil(32).max(1);
    let per_warp = (registers * 32).div_ceil(REGISTER_UNIT) * REGISTER_UNIT;
    let by_registers = arch
        .registers
        .checked_div(per_warp)
        .map_or(u32::MAX, |w| w / warps_per_block);
    let per_block = (shared + RESERVED_SHARED).div_ceil(SHARED_UNIT) * SHARED_UNIT;
    let by_shared = arch.shared / per_block;
    let limits = [
        (arch.max_warps / warps_per_block, Limiter::Warps),
        (arch.max_blocks, Limiter::Blocks),
        (by_registers, Limiter::Registers),
        (by_shared, Limiter::Shared),
    ];
    let (blocks, limiter) = limits
        .iter()
        .copied()
        .min_by_key(|(b, _)| *b)
        .unwrap_or((0, Limiter::Warps));
    let warps = blocks * warps_per_block;
    Occupancy {
        blocks,
        warps,
        fraction: f64::from(warps) / f64::from(arch.max_warps),
        limiter,
    }
}

/// One kernel of a run: how it was launched, what ptxas reports of it and
/// the occupancy the two give.
#[derive(Clone, Debug)]
pub struct Row {
    /// The kernel.
    pub kernel: String,
    /// Its launches and largest shape.
    pub shape: super::launcher::Shape,
    /// ptxas' report (None: the log had none for it).
    pub stats: Option<super::nvrtc::KernelStats>,
    /// Its theoretical occupancy on the architecture (None without stats).
    pub occupancy: Option<Occupancy>,
}

/// The rows of the kernels launched (`shapes`), with their ptxas `stats`,
/// on `arch`, most launched first.
pub fn rows(stats: &[super::nvrtc::KernelStats], shapes: &[(String, super::launcher::Shape)], arch: &Arch) -> Vec<Row> {
    let mut out: Vec<Row> = shapes
        .iter()
        .map(|(kernel, shape)| {
            let stats = stats.iter().find(|k| k.name == *kernel).cloned();
            let occupancy = stats.as_ref().map(|k| {
                let shared = k.static_shared as usize + shape.shared;
                occupancy(arch, k.registers, shape.block as u32, shared as u32)
            });
            Row {
                kernel: kernel.clone(),
                shape: *shape,
                stats,
                occupancy,
            }
        })
        .collect();
    out.sort_by(|a, b| b.shape.launches.cmp(&a.shape.launches).then(a.kernel.cmp(&b.kernel)));
    out
}

/// `rows` as a Markdown table (launches per round where `rounds` > 0).
pub fn markdown(rows: &[Row], rounds: u64) -> String {
    let mut out = String::from(
        "| kernel | launches per round | threads per block | registers | spills (bytes) | shared memory per block \
         (static + dynamic) | blocks per SM | warps per SM | occupancy | limited by |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let per_round = if rounds > 0 {
            format!("{:.3}", r.shape.launches as f64 / rounds as f64)
        } else {
            r.shape.launches.to_string()
        };
        let (regs, spills, shared) = match &r.stats {
            Some(k) => (
                k.registers.to_string(),
                format!("{} / {}", k.spills.0, k.spills.1),
                format!("{} + {}", k.static_shared, r.shape.shared),
            ),
            None => ("-".into(), "-".into(), format!("? + {}", r.shape.shared)),
        };
        let occ = match r.occupancy {
            Some(o) => format!(
                "{} | {} | {:.1}% | {}",
                o.blocks,
                o.warps,
                100.0 * o.fraction,
                o.limiter.word()
            ),
            None => "- | - | - | no ptxas report".into(),
        };
        out += &format!(
            "| `{}` | {per_round} | {} | {regs} | {spills} | {shared} | {occ} |\n",
            r.kernel, r.shape.block
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calculator's values for shapes worked by hand.
    #[test]
    fn occupancy_follows_the_calculators_rule() {
        // fb_linear_rounds_coop as Nsight Compute measured it on an H100:
        // 145 registers, 128 threads, 107 KiB of shared memory per block:
        // two blocks (shared memory), 8 warps, 12.5%.
        let o = occupancy(&SM_90, 145, 128, 107 * 1024);
        assert_eq!((o.blocks, o.warps, o.limiter), (2, 8, Limiter::Shared));
        assert!((o.fraction - 0.125).abs() < 1e-12);
        // Without the shared memory, registers bind: 145 x 32 = 4640,
        // allocated as 4864 per warp: 13 warps, 3 blocks of 4.
        let o = occupancy(&SM_90, 145, 128, 0);
        assert_eq!((o.blocks, o.warps, o.limiter), (3, 12, Limiter::Registers));
        // 32 registers, 256 threads, no shared memory: the warp slots bind
        // (8 blocks of 8 warps), full occupancy.
        let o = occupancy(&SM_90, 32, 256, 0);
        assert_eq!((o.blocks, o.warps, o.limiter), (8, 64, Limiter::Warps));
        assert_eq!(o.fraction, 1.0);
        // 32-thread blocks of few registers: the block slots bind (32 x 1 warp).
        let o = occupancy(&SM_90, 16, 32, 0);
        assert_eq!((o.blocks, o.warps, o.limiter), (32, 32, Limiter::Blocks));
        // sm_80's smaller shared memory: 100 KiB blocks fit once there,
        // twice on sm_90.
        assert_eq!(occupancy(&SM_80, 64, 128, 100 * 1024).blocks, 1);
        assert_eq!(occupancy(&SM_90, 64, 128, 100 * 1024).blocks, 2);
        // A block larger than the SM's shared memory does not fit.
        assert_eq!(occupancy(&SM_80, 64, 128, 200 * 1024).blocks, 0);
    }
}
