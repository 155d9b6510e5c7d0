//! What a run may allocate, checked before it computes: the memory estimate
//! `validate` prints (the largest federation's state x worker threads,
//! plus about 400 bytes per output row) against the memory the process may
//! use: the smallest of its cgroup limit (v2 `memory.max`, v1
//! `memory.limit_in_bytes`), its address-space limit (`RLIMIT_AS`, from
//! `/proc/self/limits`; a Slurm `--mem` may impose either) and the
//! machine's physical memory (`MemTotal`). Linux only; elsewhere nothing is
//! known and nothing is refused.

use crate::job::Job;

/// Bytes per output row in the estimate (the part's assembly).
pub const BYTES_PER_ROW: u64 = 400;

/// The memory a run of `job` on `threads` worker threads needs, about.
pub fn estimate(job: &Job, threads: usize) -> u64 {
    let rows = job.cells.len() as u64 * u64::from(job.repetitions) * job.checkpoint_rounds().len() as u64;
    super::max_memory_per_federation(job)
        .saturating_mul(threads as u64)
        .saturating_add(rows.saturating_mul(BYTES_PER_ROW))
}

/// The smallest memory limit of this process and where it comes from; None
/// when none can be read.
pub fn limit() -> Option<(u64, &'static str)> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let mut found: Vec<(u64, &'static str)> = Vec::new();
    for (path, what) in [
        ("/sys/fs/cgroup/memory.max", "the cgroup's memory.max"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "the cgroup's memory limit",
        ),
    ] {
        if let Some(v) = read(path).and_then(|t| t.trim().parse::<u64>().ok()) {
            found.push((v, what));
        }
    }
    if let Some(v) = read("/proc/self/limits").and_then(|t| address_space(&t)) {
        found.push((v, "the address-space limit (ulimit -v)"));
    }
    if let Some(v) = read("/proc/meminfo").and_then(|t| mem_total(&t)) {
        found.push((v, "the machine's physical memory"));
    }
    found.into_iter().min_by_key(|f| f.0)
}

/// The soft `Max address space` of `/proc/self/limits` (None: unlimited).
fn address_space(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Why a run of `job` on `threads` threads cannot fit in this process's
/// memory (None: it fits, or no limit is known).
pub fn too_big(job: &Job, threads: usize) -> Option<String> {
    let need = estimate(job, threads);
    let (have, what) = limit()?;
    (need > have).then(|| {
        format!(
            "the job needs about {} ({} per federation x {threads} thread(s), plus its output), more than the {} \
             this process may use ({what}); run with fewer --threads, shrink the largest cell (d, k, m or the \
             horizon's tree), or ask for more memory (Slurm --mem)",
            human(need),
            human(super::max_memory_per_federation(job)),
            human(have)
        )
    })
}

/// Bytes in the largest binary unit that keeps the number above 1.
pub fn human(b: u64) -> String {
    let b = b as f64;
    if b >= 1024f64.powi(3) {
        format!("{:.2} GiB", b / 1024f64.powi(3))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_from_the_kernel_texts() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         6000000000           unlimited            bytes\n";
        assert_eq!(address_space(limits), Some(6_000_000_000));
        assert_eq!(
            address_space("Max address space         unlimited            unlimited            bytes"),
            None
        );
        assert_eq!(
            mem_total("MemTotal:       24683656 kB\nMemFree: 1 kB\n"),
            Some(24_683_656 * 1024)
        );
        assert_eq!(human(46 * 1024 * 1024 * 1024), "46.00 GiB");
    }
}
