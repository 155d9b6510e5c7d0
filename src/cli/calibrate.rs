//! `fedbandits calibrate`: measures every bench workload on every backend
//! that works on this machine (the CPU; CUDA when a device opens) at several
//! batch sizes, prints the table, and records it as this machine's
//! calibration ([`crate::backend::calibration`]), which `--backend auto`
//! then follows cell by cell. A device is measured only after it passed the
//! parity check ([`crate::sim::parity`]: every algorithm on both linear
//! environments and the other families, bit for bit against the CPU); a
//! device that disagrees is recorded as rejected, with the reason, and not
//! measured; either way the verdict is recorded per engine and device
//! ([`crate::backend::gate`]), which `auto` and `--backend cuda` read. `--report FILE` also writes the table as Markdown with the
//! machine, driver and engine versions.

use super::CliError;
use super::bench::{On, measure_for, workloads};
use crate::backend::Backend;
use crate::backend::calibration::{Calibration, MachineKey, Row, cache_dir};
use crate::backend::cuda::CudaBackend;
use crate::backend::gate::{ParityRecord, Verdict};
use std::path::PathBuf;

/// What to measure.
#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    /// Worker threads of the CPU measurements (and of the key).
    pub threads: usize,
    /// Batch sizes.
    pub federations: Vec<u32>,
    /// Seconds per measurement (at least one round).
    pub seconds: f64,
    /// Only workloads whose name contains this.
    pub only: Option<String>,
    /// Markdown report.
    pub report: Option<PathBuf>,
    /// Time the shapes of `plan`'s time model instead of the workloads
    /// ([`super::shapes`]).
    pub shapes: bool,
}

/// Runs the calibration; returns the text printed (table, where it was
/// recorded).
pub fn run(opts: &CalibrateOptions) -> Result<String, CliError> {
    if opts.federations.is_empty() || !(opts.seconds.is_finite() && opts.seconds > 0.0) {
        return Err(CliError::Usage(format!(
            "--federations needs at least one size and --seconds {} must be > 0",
            opts.seconds
        )));
    }
    if opts.shapes {
        return shapes(opts);
    }
    let pool = crate::sim::runner::thread_pool(opts.threads)?;
    let mut text = String::new();
    let (device, mut rejected) = open_checked(&mut text);
    let mut rows = Vec::new();
    for (name, _, yaml) in workloads() {
        if opts.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        // Seconds per (federation x round) on the CPU at the last size.
        let mut cpu_cost: Option<f64> = None;
        for &feds in &opts.federations {
            // A size whose shortest run would take over 20 budgets on the
            // CPU (large d at thousands of federations on a small machine)
            // is skipped; `auto` then uses the CPU's rate at a smaller size.
            let min = super::bench::min_rounds(yaml) as f64;
            if let Some(c) = cpu_cost
                && c * min * f64::from(feds) > 20.0 * opts.seconds
            {
                text += &format!(
                    "{name} at {feds} federations: cpu skipped (about {:.0} s for {min} round(s) here)\n",
                    c * min * f64::from(feds)
                );
            } else {
                let cpu = measure_for(name, yaml, feds, opts.seconds, On::Cpu(&pool));
                match cpu {
                    Ok(m) => {
                        eprintln!("calibrate {name} cpu {feds}: {:.3e} agent-steps/s", m.rate);
                        rows.push(row(name, m, "cpu", feds, None, None));
                        cpu_cost = Some(m.seconds / (m.rounds as f64 * f64::from(feds)));
                    }
                    Err(e) => text += &format!("{name} at {feds} federations: cpu failed: {e}\n"),
                }
            }
            let cpu_rate = rows
                .iter()
                .rev()
                .find(|r| r.workload == *name && r.backend == "cpu")
                .map(|r| r.agent_steps_per_s);
            let Some(dev) = device.as_ref() else { continue };
            match measure_for(name, yaml, feds, opts.seconds, On::Cuda(dev)) {
                Ok(m) => {
                    eprintln!("calibrate {name} cuda {feds}: {:.3e} agent-steps/s", m.rate);
                    rows.push(row(name, m, "cuda", feds, cpu_rate, dev.device_peaks()));
                }
                Err(e) => {
                    let why = format!("{name} at {feds} federations: not on cuda: {e}");
                    if !rejected.contains(&why) {
                        text += &format!("{why}\n");
                    }
                    rejected.push(why);
                }
            }
        }
    }
    let key = MachineKey::here(opts.threads, device.as_ref().map(CudaBackend::description));
    let dir = cache_dir().map_err(|e| CliError::Usage(e.to_string()))?;
    // Shapes timed earlier on this key stay (they are `plan`'s model).
    let kept = Calibration::load(&dir, &key).ok().flatten().map(|c| c.shapes);
    let cal = Calibration {
        machine: key,
        measured_at: now(),
        rows,
        rejected,
        shapes: kept.unwrap_or_default(),
    };
    text += &table(&cal);
    let path = cal.save(&dir).map_err(|e| CliError::Usage(e.to_string()))?;
    text += &format!(
        "recorded {} (`--backend auto` follows it on this machine)\n",
        path.display()
    );
    if let Some(report) = &opts.report {
        eprintln!("calibrate: the kernels' table (launches, registers, shared memory, occupancy)");
        let md = markdown(&cal, &text) + &super::kernels::section(device.as_ref(), opts.only.as_deref());
        std::fs::write(report, md).map_err(|e| CliError::Usage(format!("{}: {e}", report.display())))?;
        text += &format!("wrote {}\n", report.display());
    }
    Ok(text)
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `calibrate --shapes`: times the shapes, replaces those of the same name
/// in this machine's one-thread calibration (its workload rows kept: the
/// shapes run on one thread, whatever --threads says), and prints the fit.
fn shapes(opts: &CalibrateOptions) -> Result<String, CliError> {
    let (rows, mut text) = super::shapes::time_shapes(opts.seconds, opts.only.as_deref())?;
    if rows.is_empty() {
        return Err(CliError::Usage(format!(
            "no shape measured{}",
            opts.only
                .as_deref()
                .map_or(String::new(), |o| format!(" (none contains {o:?})"))
        )));
    }
    let key = MachineKey::here(1, None);
    let dir = cache_dir().map_err(|e| CliError::Usage(e.to_string()))?;
    let mut cal = Calibration::load(&dir, &key)
        .map_err(|e| CliError::Usage(e.to_string()))?
        .unwrap_or_else(|| Calibration::empty(key));
    // A shape measured again, or no longer one of its family's (an engine
    // whose model changed), is dropped.
    cal.shapes.retain(|s| {
        !rows.iter().any(|r| r.shape == s.shape)
            && crate::algo::family::FAMILIES
                .iter()
                .any(|f| f.name == s.family && f.shapes.iter().any(|x| x.0 == s.shape))
    });
    cal.shapes.extend(rows);
    cal.measured_at = now();
    text += &super::shapes::shapes_table(&cal.shapes);
    let path = cal.save(&dir).map_err(|e| CliError::Usage(e.to_string()))?;
    text += &format!(
        "recorded {} (`fedbandits plan` prices its cells with this fit)\n",
        path.display()
    );
    Ok(text)
}

/// Opens a CUDA device and checks its parity with the CPU, recording the
/// verdict ([`check_recorded`]); the device when it agrees, and the
/// reasons a device was not used.
fn open_checked(text: &mut String) -> (Option<CudaBackend>, Vec<String>) {
    let dev = match CudaBackend::open(&crate::algo::family::kernel_sources()) {
        Ok(d) => d,
        Err(e) => {
            *text += &format!("no CUDA device opened ({e}): the CPU only\n");
            return (None, Vec::new());
        }
    };
    let (record, path) = check_recorded(&dev, cache_dir().ok().as_deref());
    let recorded = path.map_or_else(
        || " (not recorded: no cache directory)".to_string(),
        |p| format!(" (recorded in {})", p.display()),
    );
    if record.passed() {
        *text += &format!("device {}: {}{recorded}\n", dev.description(), record.detail);
        (Some(dev), Vec::new())
    } else {
        let why = format!(
            "device {} disagrees with the CPU, not measured: {}{recorded}",
            dev.description(),
            record.detail
        );
        *text += &format!("{why}\n");
        (None, vec![why])
    }
}

/// Runs the parity check on `dev` (every family's parity cells under the
/// watchdog, [`crate::sim::parity::check_all`]) and records it in `dir`
/// ([`ParityRecord`]): `running` before the first cell, so that a check the
/// watchdog ended (the process exits when a kernel does not return) or a
/// crash leaves a record saying so, and the verdict after. Returns the
/// record and its file (None without a directory, or when it could not be
/// written: said on stderr).
pub fn check_recorded(dev: &CudaBackend, dir: Option<&std::path::Path>) -> (ParityRecord, Option<PathBuf>) {
    let save = |r: &ParityRecord| {
        dir.and_then(|d| {
            r.save(d)
                .map_err(|e| eprintln!("fedbandits: the parity check's record was not written: {e}"))
                .ok()
        })
    };
    let _ = save(&ParityRecord::new(dev.description(), Verdict::Running, String::new()));
    let record = match crate::sim::parity::check_all(dev) {
        Ok(p) => ParityRecord::new(
            dev.description(),
            Verdict::Passed,
            format!(
                "parity with the CPU bit for bit in {} cells ({} without kernels, skipped)",
                p.equal.len(),
                p.skipped.len()
            ),
        ),
        Err(e) => ParityRecord::new(dev.description(), Verdict::Failed, e.to_string()),
    };
    let path = save(&record);
    (record, path)
}

/// `--backend cuda`'s gate: a device runs cells only with a recorded
/// parity pass of this engine in `dir`; without one, the parity check runs
/// first (seconds on a device) and is recorded, and a device that fails it
/// is an error naming the record.
pub fn gate_cuda(sel: &crate::backend::Selection, dir: Option<&std::path::Path>) -> Result<(), CliError> {
    let Some(dev) = sel.cuda_backend() else { return Ok(()) };
    let recorded = dir.and_then(|d| ParityRecord::load(d, dev.description()).ok().flatten());
    if recorded.as_ref().is_some_and(ParityRecord::passed) {
        return Ok(());
    }
    let before = recorded.map_or_else(|| "none recorded".to_string(), |r| r.describe());
    eprintln!(
        "fedbandits: --backend cuda: device {} has no recorded parity pass with this engine ({before}): running the \
         parity cells first (seconds; `fedbandits calibrate` also records it)",
        dev.description()
    );
    let (record, path) = check_recorded(dev, dir);
    let at = path.map_or_else(|| "not recorded".to_string(), |p| format!("record {}", p.display()));
    if record.passed() {
        eprintln!("fedbandits: device {}: {} ({at})", dev.description(), record.detail);
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "--backend cuda: device {} failed the parity check with the CPU ({at}): {}; run with --backend cpu, or \
         --backend auto, which leaves this device",
        dev.description(),
        record.detail
    )))
}

fn row(
    name: &str,
    m: super::bench::Measurement,
    backend: &str,
    feds: u32,
    cpu: Option<f64>,
    peaks: Option<(f64, f64)>,
) -> Row {
    let fractions = m.model.zip(peaks).map(|((gf, gb), (pf, pb))| (gf / pf, gb / pb));
    Row {
        speedup: cpu.map(|c| m.rate / c),
        fp64_fraction: fractions.map(|f| f.0),
        bandwidth_fraction: fractions.map(|f| f.1),
        ..Row::measured(name, m.kind, backend, feds, m.rate)
    }
}

/// The table as text.
pub fn table(c: &Calibration) -> String {
    let mut out = format!(
        "calibration: {} | CPU {} | {} threads | device {}\n{:<30} {:<22} {:<5} {:>11} {:>14} {:>9} {:>8} {:>8}\n",
        c.machine.engine,
        c.machine.cpu,
        c.machine.threads,
        c.machine.device.as_deref().unwrap_or("none"),
        "workload",
        "kind",
        "on",
        "federations",
        "agent-steps/s",
        "vs cpu",
        "fp64",
        "bw"
    );
    for r in &c.rows {
        let [w, k, b, f, rate, sp, fp, bw] = cells(r);
        out += &format!("{w:<30} {k:<22} {b:<5} {f:>11} {rate:>14} {sp:>9} {fp:>8} {bw:>8}\n");
    }
    out
}

/// A row's cells as both the table and the report print them.
fn cells(r: &Row) -> [String; 8] {
    let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    [
        r.workload.clone(),
        r.kind.clone(),
        r.backend.clone(),
        r.federations.to_string(),
        format!("{:.4e}", r.agent_steps_per_s),
        opt(r.speedup, 2),
        opt(r.fp64_fraction, 4),
        opt(r.bandwidth_fraction, 4),
    ]
}

/// The report: the machine and the table as Markdown, then the text.
fn markdown(c: &Calibration, text: &str) -> String {
    let mut md = format!(
        "# fedbandits calibration\n\n- engine: {}\n- CPU: {} ({} threads)\n- device: {}\n- measured at: {} (Unix seconds)\n\n\
         | workload | kind | backend | federations | agent-steps/s | vs cpu | fp64 fraction | bandwidth fraction |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        c.machine.engine,
        c.machine.cpu,
        c.machine.threads,
        c.machine.device.as_deref().unwrap_or("none opened"),
        c.measured_at
    );
    for r in &c.rows {
        md += &format!("| {} |\n", cells(r).join(" | "));
    }
    md += "\n```\n";
    md += text;
    md += "```\n";
    md
}
