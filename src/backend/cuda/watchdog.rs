//! The watchdog on every launch: a kernel that spins at a group barrier
//! (`fb_group_barrier`, kernels/common.cuh) for a block the device never
//! schedules (another process on the device, an MPS or MIG slice smaller
//! than the host assumed) cannot be cancelled through the CUDA API, so the
//! host bounds its wait.
//!
//! **How.** The host waits for a launch's work where it waits anyway (the
//! copy back that follows it) by polling an event against a deadline: a
//! generous floor plus the work the launches since the last copy declared
//! ([`super::launcher::Launcher::expect_work`], agent-steps) at
//! [`SECONDS_PER_AGENT_STEP`], a rate 25 times slower than the slowest
//! measured on a device. Past the deadline it sets the abort word, host
//! memory mapped into the device that every spin loop polls; a block that
//! gave up marks the launch, the kernel runs on to its end without waiting
//! again, and the launch is an error ([`super::CudaError::Watchdog`]): the
//! batch writes nothing, the units finished before it are kept, and the
//! device takes no further launch in this process. A kernel that returns
//! past its deadline without giving up was only slow: its results stand
//! and a warning says so. A kernel still running [`GRACE`] after the abort
//! is beyond the host's reach: the process prints what hung and exits with
//! [`EXIT_HUNG`], which makes the driver free the context.
//!
//! Under the host emulation the same words are passed to each emulated
//! launch (kernels/emulation.hpp: its scheduler polls the abort word where
//! a device spins), and a thread of the emulator plays the host's part
//! ([`Alarm`]); a fault of the emulator (a group's last block never runs)
//! lets the test suite drive the whole path without a GPU.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The floor of every deadline unless `FEDBANDITS_WATCHDOG_SECONDS` says
/// otherwise: far above any launch the engine makes (a chunk is at most 64
/// rounds) on any device it has met.
pub const DEFAULT_FLOOR: Duration = Duration::from_secs(120);

/// Seconds of deadline per declared agent-step: 1 microsecond, 25 times
/// the slowest device rate measured (FedUCB, 2.46e7 agent-steps/s on an
/// H100; analysis/gpu/).
pub const SECONDS_PER_AGENT_STEP: f64 = 1e-6;

/// How long a kernel may take to return once asked to abort.
pub const GRACE: Duration = Duration::from_secs(10);

/// The process's exit status when a kernel did not return after the abort.
pub const EXIT_HUNG: i32 = 70;

/// The environment variable that sets the deadline's floor, in seconds.
pub const FLOOR_VAR: &str = "FEDBANDITS_WATCHDOG_SECONDS";

/// What to do, said in every watchdog message.
pub const ADVICE: &str = "run the cells with `--backend cpu`, or report it with the device, the kernel and `fedbandits \
                          --version`; `fedbandits calibrate` records this device's parity check and `auto` then \
                          leaves a device that failed it";

/// A watchdog's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// The smallest deadline.
    pub floor: Duration,
    /// How long a kernel may take to return once asked to abort.
    pub grace: Duration,
}

impl Settings {
    /// The floor from `FEDBANDITS_WATCHDOG_SECONDS` (a positive number of
    /// seconds), else [`DEFAULT_FLOOR`]; a value that is not a positive
    /// number is named on stderr and ignored.
    pub fn from_env() -> Self {
        let floor = match std::env::var(FLOOR_VAR) {
            Ok(v) => match v.trim().parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
                _ => {
                    eprintln!(
                        "fedbandits: {FLOOR_VAR}={v:?} is not a positive number of seconds; the watchdog's floor \
                         stays {} s",
                        DEFAULT_FLOOR.as_secs()
                    );
                    DEFAULT_FLOOR
                }
            },
            Err(_) => DEFAULT_FLOOR,
        };
        Self { floor, grace: GRACE }
    }

    /// The deadline of launches that declared `agent_steps` of work.
    pub fn deadline(&self, agent_steps: u64) -> Duration {
        self.floor + Duration::from_secs_f64(agent_steps as f64 * SECONDS_PER_AGENT_STEP)
    }
}

/// The words a launch shares with the device (or the emulation): `[0]` the
/// abort word the host sets, `[1]` set by a block that gave up waiting,
/// `[2]` the emulator's fault (a group's last block never runs).
pub type Words = [AtomicU32; 3];

/// What the watchdog says when a launch gave up: the kernel, the device,
/// the launches since the last copy and their deadline, what happened to
/// the results and what to do.
pub fn gave_up_message(kernel: &str, device: &str, window: &str, deadline: Duration) -> String {
    format!(
        "{kernel} on {device} did not finish within its deadline of {:.1} s ({window}): the watchdog asked it to \
         abort and a block that was waiting for another gave up, so this batch's results were discarded (nothing \
         of it is written; the units finished before it are kept) and the device takes no further launch in this \
         process; a block the device never scheduled (another process on it, an MPS or MIG slice smaller than \
         assumed) is the likely cause; {ADVICE}",
        deadline.as_secs_f64()
    )
}

/// What the watchdog says before the process exits because a kernel did
/// not return after the abort.
pub fn hung_message(kernel: &str, device: &str, window: &str, deadline: Duration, grace: Duration) -> String {
    format!(
        "fedbandits: {kernel} on {device} did not finish within its deadline of {:.1} s ({window}) and did not \
         return {:.0} s after the watchdog asked it to abort: exiting with status {EXIT_HUNG} so that the driver \
         frees the device (nothing of the running batch is written; the units finished before it are kept); \
         {ADVICE}",
        deadline.as_secs_f64(),
        grace.as_secs_f64()
    )
}

/// A thread that sets the abort word of launches that pass their
/// deadline, and ends the process when one does not return after the
/// grace (the emulator's watchdog; a device's host polls instead).
pub struct Alarm {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<Armed>,
    wake: Condvar,
    words: Words,
}

enum Armed {
    Idle,
    /// A launch (generation, what hung, its deadline, when it started).
    Launch(u64, String, Duration, Instant),
    Quit,
}

impl Alarm {
    /// A watchdog thread with `settings`, not yet armed.
    pub fn start(settings: Settings) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(Armed::Idle),
            wake: Condvar::new(),
            words: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fedbandits-watchdog".into())
            .spawn(move || watch(&s, settings))
            .ok();
        Self { shared, thread }
    }

    /// The words to pass to the launch.
    pub fn words(&self) -> &Words {
        &self.shared.words
    }

    /// Arms the alarm for a launch `what` with `deadline` (clears the
    /// abort and gave-up words); [`Alarm::disarm`] when it returns.
    pub fn arm(&self, what: String, deadline: Duration) {
        self.shared.words[0].store(0, Ordering::SeqCst);
        self.shared.words[1].store(0, Ordering::SeqCst);
        if let Ok(mut st) = self.shared.state.lock() {
            let generation = match &*st {
                Armed::Launch(g, ..) => g + 1,
                _ => 0,
            };
            *st = Armed::Launch(generation, what, deadline, Instant::now());
        }
        self.shared.wake.notify_all();
    }

    /// The launch returned; whether a barrier gave up on the abort word.
    pub fn disarm(&self) -> bool {
        if let Ok(mut st) = self.shared.state.lock() {
            *st = Armed::Idle;
        }
        self.shared.wake.notify_all();
        self.shared.words[1].load(Ordering::SeqCst) != 0
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        if let Ok(mut st) = self.shared.state.lock() {
            *st = Armed::Quit;
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The alarm's thread: sleeps until the armed launch's deadline (or a
/// change), sets the abort word past it, and exits the process when the
/// launch is still armed a grace later.
fn watch(s: &Shared, settings: Settings) {
    let Ok(mut st) = s.state.lock() else { return };
    loop {
        let (generation, deadline, started) = match &*st {
            Armed::Quit => return,
            Armed::Idle => {
                st = match s.wake.wait(st) {
                    Ok(g) => g,
                    Err(_) => return,
                };
                continue;
            }
            Armed::Launch(g, _, d, t) => (*g, *d, *t),
        };
        let same = |a: &Armed| matches!(a, Armed::Launch(g, ..) if *g == generation);
        let past = started.elapsed();
        if past < deadline {
            st = match s.wake.wait_timeout(st, deadline - past) {
                Ok((g, _)) => g,
                Err(_) => return,
            };
            continue;
        }
        s.words[0].store(1, Ordering::SeqCst);
        let until = Instant::now() + settings.grace;
        while same(&st) && Instant::now() < until {
            st = match s.wake.wait_timeout(st, until.saturating_duration_since(Instant::now())) {
                Ok((g, _)) => g,
                Err(_) => return,
            };
        }
        if let Armed::Launch(g, what, ..) = &*st
            && *g == generation
        {
            eprintln!("{what}");
            std::process::exit(EXIT_HUNG);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deadline grows with the declared work from the floor; an alarm
    /// past its deadline sets the abort word, and a launch that returns in
    /// time leaves it clear.
    #[test]
    fn deadlines_and_the_abort_word() {
        let s = Settings {
            floor: Duration::from_millis(50),
            grace: Duration::from_secs(600),
        };
        assert_eq!(s.deadline(0), Duration::from_millis(50));
        assert_eq!(s.deadline(2_000_000), Duration::from_millis(2050));
        let a = Alarm::start(s);
        a.arm("quick".into(), s.deadline(0));
        assert!(!a.disarm());
        assert_eq!(a.words()[0].load(Ordering::SeqCst), 0);
        a.arm("slow".into(), s.deadline(0));
        let t = Instant::now();
        while a.words()[0].load(Ordering::SeqCst) == 0 {
            // A bound on the wait, not a measurement: the word must come.
            assert!(t.elapsed() < Duration::from_secs(60), "the abort word was never set");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Nothing gave up (no barrier was waiting): the launch was only slow.
        assert!(!a.disarm());
    }
}
