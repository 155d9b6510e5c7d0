//! A run's progress, with a terminal or without one. Work is counted in
//! predicted thread-seconds (each cell's agent-steps weighted by the cost
//! model `plan` uses, [`super::cost::thread_seconds`]), so a cell ten times
//! costlier per agent-step moves the bar ten times faster and the estimate
//! of the time left holds when the costly cells come last; the estimate
//! scales the remaining predicted cost by the time the finished work took
//! per predicted second (the measured rate corrects the model).
//!
//! With a terminal (and without `--quiet`) a bar on stderr. Without one
//! (a Slurm `.out` file, a redirect) a line on stderr at the start, every
//! `--log-every` seconds (default 60; 0: none) and at the end:
//!
//! ```text
//! fedbandits: [00:01:00] 12/24 units, 3.10e6/6.00e6 agent-steps, 5.17e4 agent-steps/s, ETA 00:00:54 (cost-weighted); computing private_fedlinucb epsilon=0.2 (cell 5e0c91a2)
//! ```

use crate::job::{Cell, Job};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bar units per predicted thread-second.
const SCALE: f64 = 1e6;

/// What the bar and the log lines read.
struct Shared {
    start: Instant,
    units: usize,
    steps: u64,
    /// Predicted thread-seconds of all the units to run, x SCALE.
    cost: u64,
    done_units: AtomicU64,
    done_steps: AtomicU64,
    done_cost: AtomicU64,
    /// Repetitions resumed from snapshots (their steps before the stop are
    /// in `done_steps`, not in the rate).
    resumed: super::Resumed,
    current: Mutex<String>,
    stop: AtomicBool,
}

/// A run's progress: the bar, the log lines and their counters.
pub struct Progress {
    bar: ProgressBar,
    shared: Arc<Shared>,
    /// Per cell: bar units per agent-step.
    weights: Vec<f64>,
    logger: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// The progress of running `units` (cell, repetition) of `job`; a bar
    /// when stderr is a terminal, else log lines every `log_every` (None:
    /// only the first and the last); nothing with `quiet`.
    pub fn new(job: &Job, units: &[(usize, u32)], quiet: bool, log_every: Option<Duration>) -> Self {
        let model = super::cost::TimeModel::model();
        let weights: Vec<f64> = job
            .cells
            .iter()
            .map(|c| super::cost::thread_seconds(&c.config, 1_000_000, &model) / 1e6 * SCALE)
            .collect();
        let steps: u64 = units.iter().map(|&(c, _)| job.cells[c].agent_steps_per_rep()).sum();
        let cost: f64 = units
            .iter()
            .map(|&(c, _)| job.cells[c].agent_steps_per_rep() as f64 * weights[c])
            .sum();
        let shared = Arc::new(Shared {
            start: Instant::now(),
            units: units.len(),
            steps,
            cost: cost as u64,
            done_units: AtomicU64::new(0),
            done_steps: AtomicU64::new(0),
            resumed: super::Resumed::default(),
            done_cost: AtomicU64::new(0),
            current: Mutex::new(String::new()),
            stop: AtomicBool::new(false),
        });
        let terminal = std::io::stderr().is_terminal();
        let bar = if quiet || !terminal {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::with_draw_target(Some(shared.cost.max(1)), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                // About 40 columns besides the bar, so that it fits 80.
                "[{elapsed_precise}] {wide_bar} {percent:>3}% {msg} ETA {eta}",
            ) {
                bar.set_style(style);
            }
            bar.set_message(format!("0/{} units", units.len()));
            bar
        };
        let logger = (!quiet && !terminal).then(|| {
            eprintln!("{}", start_line(&shared));
            let s = Arc::clone(&shared);
            std::thread::spawn(move || log_loop(&s, log_every))
        });
        Self {
            bar,
            shared,
            weights,
            logger,
        }
    }

    /// `n` agent-steps of `cell` done.
    pub fn steps(&self, cell: &Cell, n: u64) {
        let w = (n as f64 * self.weights[cell.index]) as u64;
        self.bar.inc(w);
        self.shared.done_steps.fetch_add(n, Ordering::Relaxed);
        self.shared.done_cost.fetch_add(w, Ordering::Relaxed);
    }

    /// Where resumed repetitions are counted (the rate and the ETA leave
    /// out their work before the stop).
    pub fn resumed(&self) -> &super::Resumed {
        &self.shared.resumed
    }

    /// A unit of `cell` starts (the log names the last one started).
    pub fn started(&self, label: &str, cell: &Cell) {
        if let Ok(mut c) = self.shared.current.lock() {
            // The label and id, not the grid index (which shifts when a
            // grid value is added).
            *c = format!("{label} (cell {})", &cell.id[..cell.id.len().min(8)]);
        }
    }

    /// A unit finished.
    pub fn unit_done(&self) {
        let n = self.shared.done_units.fetch_add(1, Ordering::Relaxed) + 1;
        self.bar.set_message(format!("{n}/{} units", self.shared.units));
    }

    /// The bar cleared, the logger stopped and its last line printed
    /// (once): "done: ", the work having finished.
    pub fn finish(&mut self) {
        self.stop("done: ");
    }

    fn stop(&mut self, word: &str) {
        self.bar.finish_and_clear();
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.logger.take() {
            let _ = h.join();
            eprintln!("{}", line(&self.shared, word));
        }
    }
}

impl Drop for Progress {
    /// Dropped before [`Progress::finish`]: the run stopped (a stop
    /// request or an error, which follows), so the last line says
    /// "stopped: " with what was done, not "done: ".
    fn drop(&mut self) {
        self.stop("stopped: ");
    }
}

/// Sleeps in short steps until `every` has passed (then prints a line) or
/// the run stops.
fn log_loop(s: &Shared, every: Option<Duration>) {
    let mut last = Instant::now();
    while !s.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(e) = every
            && last.elapsed() >= e
            && !s.stop.load(Ordering::Relaxed)
        {
            last = Instant::now();
            eprintln!("{}", line(s, ""));
        }
    }
}

fn hms(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

fn start_line(s: &Shared) -> String {
    format!(
        "fedbandits: [00:00:00] start: {} unit(s), {:.2e} agent-steps to run (progress every --log-every seconds)",
        s.units, s.steps as f64
    )
}

/// A log line: elapsed, units and agent-steps done, the measured rate, the
/// cost-weighted time left and the unit last started.
fn line(s: &Shared, prefix: &str) -> String {
    let elapsed = s.start.elapsed().as_secs_f64();
    let (units, steps, cost) = (
        s.done_units.load(Ordering::Relaxed),
        s.done_steps.load(Ordering::Relaxed),
        s.done_cost.load(Ordering::Relaxed),
    );
    // This run's work: a resumed repetition's steps before its stop are
    // done, not done now (their cost is taken in proportion).
    let before = s.resumed.totals().1.min(steps);
    let now = steps - before;
    let rate = if elapsed > 0.0 { now as f64 / elapsed } else { 0.0 };
    let cost_now = if steps > 0 {
        cost as f64 * now as f64 / steps as f64
    } else {
        0.0
    };
    let eta = if cost_now > 0.0 {
        hms(elapsed / cost_now * s.cost.saturating_sub(cost) as f64)
    } else {
        "unknown".into()
    };
    let current = s.current.lock().map(|c| c.clone()).unwrap_or_default();
    let mut out = format!(
        "fedbandits: [{}] {prefix}{units}/{} units, {:.2e}/{:.2e} agent-steps, {rate:.2e} agent-steps/s",
        hms(elapsed),
        s.units,
        steps as f64,
        s.steps as f64
    );
    if prefix.is_empty() {
        out += &format!(", ETA {eta} (cost-weighted)");
        if !current.is_empty() {
            out += &format!("; computing {current}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_scales_the_remaining_cost_by_the_measured_rate() {
        let s = Shared {
            start: Instant::now() - Duration::from_secs(10),
            units: 4,
            steps: 1000,
            cost: 4_000_000,
            done_units: AtomicU64::new(1),
            done_steps: AtomicU64::new(100),
            done_cost: AtomicU64::new(1_000_000),
            resumed: crate::sim::Resumed::default(),
            current: Mutex::new("fedlinucb (cell 0123abcd)".into()),
            stop: AtomicBool::new(false),
        };
        // A quarter of the cost in 10 s: 30 s left, whatever the steps say.
        let l = line(&s, "");
        assert!(
            l.contains("1/4 units")
                && l.contains("ETA 00:00:30 (cost-weighted)")
                && l.contains("computing fedlinucb (cell 0123abcd)"),
            "{l}"
        );
        assert!(line(&s, "done: ").starts_with("fedbandits: [00:00:10] done: 1/4 units"));
    }
}
