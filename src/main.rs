//! The `fedbandits` binary: a thin shell around [`fedbandits::cli`], with an
//! allocator that turns a failed allocation into a clear error (exit code 1)
//! instead of an abort with a backtrace: `run` refuses jobs whose memory
//! estimate exceeds what the process may use, so this is the last line of
//! defence when an estimate falls short. Under an address-space limit it
//! keeps glibc to one allocator arena ([`one_arena_under_an_address_space_limit`]).

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator; a failed allocation ends the process with a
/// message ([`out_of_memory`]).
struct ClearOnFailure;

// SAFETY: every call is forwarded to `System` with the caller's arguments;
// a null result (a failed allocation) never returns.
unsafe impl GlobalAlloc for ClearOnFailure {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: ClearOnFailure = ClearOnFailure;

/// Writes the error without allocating (the size's digits on the stack) and
/// exits with code 1.
fn out_of_memory(size: usize) -> ! {
    use std::io::Write;
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = size;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"error: out of memory: an allocation of ");
    let _ = err.write_all(&digits[i..]);
    let _ = err.write_all(
        b" bytes failed; the job needs more memory than this process may use (`fedbandits validate` estimates \
          it): run with fewer --threads, a smaller job, or more memory (Slurm --mem)\n",
    );
    std::process::exit(1)
}

/// Under an address-space limit (`ulimit -v`; some clusters turn Slurm's
/// `--mem` into one), keeps glibc's allocator to one arena. Otherwise a
/// thread that meets a busy arena gets a new one, which reserves 64 MiB of
/// address space (untouched, so not memory) when the limit leaves room for
/// it, and later allocations then fail with most of the limit unused:
/// whether that happens depends on thread timing, so the same job passed or
/// failed under the same limit. The run's hot loop allocates nothing, so one
/// arena costs nothing there; without a limit glibc's default stands.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_arena_under_an_address_space_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    if read && limit.rlim_cur != libc::RLIM_INFINITY {
        // SAFETY: mallopt only sets the allocator's parameter; called
        // before any other thread exists.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    }
}

/// Elsewhere the allocator is not glibc's: nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_arena_under_an_address_space_limit() {}

fn main() -> std::process::ExitCode {
    one_arena_under_an_address_space_limit();
    fedbandits::output::install_quiet_decoder_hook();
    fedbandits::cli::main_with_args()
}
