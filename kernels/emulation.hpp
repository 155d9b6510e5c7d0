// fedbandits: host emulation of the CUDA execution model, for running the
// kernels' code on a CPU (tests, machines without a GPU).
//
// Model: the blocks of a grid run one after another. Kernels registered as
// sequential (FB_KERNEL: one thread per work item, no barriers) run their
// threads one after another; reaching a barrier there is an error.
// Cooperative kernels (FB_COOP_KERNEL): inside a block every
// CUDA thread is a fiber (fb_context below) on one host thread, and the scheduler
// runs the block phase by phase: each fiber runs until it reaches a barrier
// (__syncthreads, __syncwarp, FB_SYNC_OR, or a warp shuffle, which exchanges
// values through the block's exchange buffer between two barriers) or
// returns; the next phase starts when every fiber has arrived. A barrier
// that some threads reach while others have returned is reported as an
// error (it would hang or be undefined on a device). Grouped kernels
// (FB_GROUP_KERNEL, whose first parameter is the blocks per group) run the
// blocks of each group of consecutive blocks as one fiber set: each block
// runs on its own through its block barriers until it waits at a group
// barrier (fb_group_barrier in common.cuh: a federation that spans blocks),
// the blocks in turn, forwards and backwards at alternate group barriers,
// so that data read across blocks without a group barrier between shows.
// Shared memory: `__shared__` arrays are per host thread (so a grouped
// kernel must not use them: its blocks run at once) and dynamic shared
// memory (FB_DYN_SHARED) is a per-block buffer of the size the launch asked
// for. Warp-level barriers synchronize the whole block here, a stricter
// order than a device's, which any correct kernel also satisfies.
// Transcendental libm functions are poisoned below (see there).
// Build: src/backend/cuda/emulation.rs generates the translation unit (this
// header, the families' sources, their launch table, emulation.cpp) and runs
// g++ -std=c++17 -O2 -ffp-contract=off -fno-fast-math -fPIC -shared on it.
#pragma once
#include <math.h>
#include <cstring>
#include <cstdint>
#include <utility>
#include <ucontext.h>
#include <time.h>
#include <vector>
#include <functional>

// libm's transcendental functions round differently from CUDA's libdevice, so
// a kernel that used one would pass here and diverge on a device (as the
// reward normals once did). Kernels use the portable fb_ln / fb_ln_1p /
// fb_sincos_kernel (common.cuh, src/math.rs) instead; any other use is a
// compile error of the emulation and fails the test suite. sqrt, fma, fmax
// and fabs are correctly rounded everywhere and stay allowed.
#pragma GCC poison log log1p log2 log10 exp exp2 expm1 pow sin cos tan sincos asin acos atan atan2 sinh cosh tanh
#pragma GCC poison logf log1pf expf powf sinf cosf tanf sincosf erf erfc lgamma tgamma cbrt hypot

struct fb_dim3 {
    unsigned x, y, z;
};
// Thread-local: several host threads may run emulated launches at once.
static thread_local fb_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static thread_local

// ------------------------------------------------------ fiber contexts

// A fiber's saved context. On x86-64 a switch saves the callee-saved
// registers, MXCSR and the x87 control word on the fiber's stack and swaps
// stack pointers (fb_ctx_switch below): what a function call may not
// change, so the compiler's code around the call keeps every other
// register. ucontext's swapcontext does the same and also saves and
// restores the signal mask, a system call at every switch, which made the
// kernel-level barriers the emulation's main cost; other hosts use it.
#if defined(__x86_64__) && !defined(FB_EMU_UCONTEXT)
struct fb_context {
    void* sp = nullptr;
};
extern "C" void fb_ctx_switch(void** save_sp, void* load_sp);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl fb_ctx_switch\n"
    ".hidden fb_ctx_switch\n"
    ".type fb_ctx_switch,@function\n"
    "fb_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size fb_ctx_switch, .-fb_ctx_switch\n");
// Saves the running context in `from` and resumes `to`.
static inline void fb_ctx_swap(fb_context& from, fb_context& to) { fb_ctx_switch(&from.sp, to.sp); }
// A context that starts `entry` (which never returns) on `stack`: the frame
// fb_ctx_switch pops (the control words of now, six zeroed registers, then
// `entry` as the return address, 16-byte aligned as after a call).
static inline void fb_ctx_start(fb_context& c, std::vector<char>& stack, void (*entry)()) {
    uintptr_t top = reinterpret_cast<uintptr_t>(stack.data() + stack.size()) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(entry);
    for (int i = 0; i < 6; ++i) *--sp = nullptr;
    --sp;
    unsigned mxcsr;
    unsigned short fpcw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpcw));
    std::memcpy(reinterpret_cast<char*>(sp), &mxcsr, 4);
    std::memcpy(reinterpret_cast<char*>(sp) + 4, &fpcw, 2);
    c.sp = sp;
}
#else
struct fb_context {
    ucontext_t uc;
};
static inline void fb_ctx_swap(fb_context& from, fb_context& to) { swapcontext(&from.uc, &to.uc); }
static inline void fb_ctx_start(fb_context& c, std::vector<char>& stack, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack.data();
    c.uc.uc_stack.ss_size = stack.size();
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
#endif

// ------------------------------------------------------ fiber scheduler

// The fibers of one block, or of a group of consecutive blocks (fiber t is
// thread t % blockDim.x of block first_block + t / blockDim.x).
struct fb_block_state {
    fb_context scheduler;
    std::vector<fb_context> fibers;
    std::vector<std::vector<char>> stacks;
    std::vector<int> state;  // 0 ready, 1 at a block barrier, 2 returned, 3 at a group barrier
    std::vector<long long> exchange_i64;
    std::vector<unsigned char> dyn_shared;  // blocks x shared_bytes
    size_t shared_bytes = 0;
    std::function<void()> body;
    unsigned current = 0;
    int error = 0;  // 1: barrier divergence
};
static thread_local fb_block_state* fb_blk = nullptr;
// Set when a kernel registered as sequential (FB_KERNEL) reaches a barrier.
static thread_local int fb_seq_barrier = 0;

static void fb_fiber_entry() {
    fb_blk->body();
    fb_block_state* b = fb_blk;
    b->state[b->current] = 2;
    // This fiber ends: back to the scheduler, which never resumes it.
    fb_ctx_swap(b->fibers[b->current], b->scheduler);
    __builtin_unreachable();
}

// This fiber waits in `state` (1: at a block barrier, until every thread of
// the block arrives; 3: at a group barrier, until every thread of every
// block of its group arrives). In a sequential kernel: flagged as an error.
static inline void fb_wait(int state) {
    fb_block_state* b = fb_blk;
    if (b == nullptr) {
        fb_seq_barrier = 1;
        return;
    }
    unsigned me = b->current;
    b->state[me] = state;
    fb_ctx_swap(b->fibers[me], b->scheduler);
}
static inline void fb_barrier() { fb_wait(1); }
static inline void __syncthreads() { fb_barrier(); }
// A group barrier (fb_group_barrier in common.cuh).
static inline void fb_group_wait() { fb_wait(3); }
static inline void __syncwarp(unsigned = 0xffffffffu) { fb_barrier(); }

// Shuffles through the block's exchange buffer: publish, barrier, read,
// barrier (so the buffer can be reused by the next shuffle). Values travel
// as their bits.
template <typename T>
static inline T fb_shfl_xor(T v, int lane_mask) {
    static_assert(sizeof(T) <= sizeof(long long), "shuffle of a wide type");
    fb_block_state* b = fb_blk;
    if (b == nullptr) {
        fb_seq_barrier = 1;
        return v;
    }
    unsigned me = b->current;
    long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    b->exchange_i64[me] = bits;
    fb_barrier();
    unsigned lane = threadIdx.x & 31u, base = me - lane;
    bits = b->exchange_i64[base + (lane ^ (unsigned)lane_mask)];
    fb_barrier();
    T got;
    std::memcpy(&got, &bits, sizeof(T));
    return got;
}
#define FB_SHFL_XOR_F64(v, m) fb_shfl_xor<double>((v), (m))
#define FB_SHFL_XOR_I32(v, m) fb_shfl_xor<int>((v), (m))
// __syncthreads_or: every thread of the block publishes its predicate;
// each gets whether any was non-zero.
static inline int fb_sync_or(int pred) {
    fb_block_state* b = fb_blk;
    if (b == nullptr) {
        fb_seq_barrier = 1;
        return pred;
    }
    b->exchange_i64[b->current] = pred != 0;
    fb_barrier();
    unsigned first = b->current - threadIdx.x;
    int any = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) any |= (int)b->exchange_i64[first + t];
    fb_barrier();
    return any;
}
#define FB_SYNC_OR(pred) fb_sync_or(pred)
#define FB_DYN_SHARED(type, name) \
    type* name = reinterpret_cast<type*>(fb_blk->dyn_shared.data() + (fb_blk->current / blockDim.x) * fb_blk->shared_bytes)

// Runs each fiber of [lo, hi) that is ready (state 0) until it waits or
// returns.
static inline void fb_run_ready(fb_block_state& b, unsigned first_block, unsigned lo, unsigned hi) {
    for (unsigned t = lo; t < hi; ++t) {
        if (b.state[t] != 0) continue;
        b.current = t;
        threadIdx = {t % blockDim.x, 0, 0};
        blockIdx = {first_block + t / blockDim.x, 0, 0};
        fb_ctx_swap(b.scheduler, b.fibers[t]);
    }
}

// The launch's watchdog words (fb_emu_launch's `control`, owned by
// src/backend/cuda/emulation.rs): [0] the abort word the host's watchdog
// sets past the launch's deadline, [1] set here when a group barrier gave
// up because of it, [2] a fault for the watchdog's test: the last block of
// every group of a grouped kernel is never run (as a block the device
// never schedules), so its group's barriers wait for it.
static thread_local volatile unsigned* fb_emu_ctl = nullptr;

// Waits, as a device's spin does, until the abort word is set; returns 1
// then (the barrier gives up). Sleeps between polls: it waits for another
// host thread.
static inline int fb_emu_wait_for_abort() {
    volatile unsigned* c = fb_emu_ctl;
    if (c == nullptr) return 0;
    while (c[0] == 0u) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, nullptr);
    }
    c[1] = 1u;
    return 1;
}

// Runs blocks first_block .. first_block + blocks - 1 of `body` together,
// blockDim.x fibers each. Each block runs on its own as far as it can
// (through its block barriers) until all its threads wait at a group
// barrier or return; then the group barrier opens. The blocks take turns
// in order, then in reverse order at the next group barrier, so that a
// block reading what another writes before a group barrier, without one
// between, sees the wrong data in one of the two orders. Only the first
// `present` blocks run (all of them but under the watchdog's fault, see
// fb_emu_ctl): a group barrier the others never reach waits for the
// abort word, then opens, and so does every later one. Returns 0; 1 when
// threads diverged: some returned or waited at another barrier while
// others waited; 4 when a group barrier gave up on the abort word.
static inline int fb_run_blocks(fb_block_state& b, const std::function<void()>& body, unsigned first_block,
                                unsigned blocks, unsigned present) {
    unsigned bd = blockDim.x, n = bd * present;
    const size_t stack_bytes = 64 * 1024;
    b.fibers.resize(n);
    b.stacks.resize(n);
    b.state.assign(n, 0);
    b.exchange_i64.assign(n, 0);
    b.body = body;
    fb_blk = &b;
    for (unsigned t = 0; t < n; ++t) {
        if (b.stacks[t].size() != stack_bytes) b.stacks[t].assign(stack_bytes, 0);
        fb_ctx_start(b.fibers[t], b.stacks[t], fb_fiber_entry);
    }
    int gave_up = 0;
    for (unsigned phase = 0;; ++phase) {
        unsigned waiting = 0, done = 0;
        for (unsigned k = 0; k < present; ++k) {
            unsigned blk = phase % 2 == 0 ? k : present - 1 - k;
            unsigned lo = blk * bd, hi = lo + bd;
            for (;;) {
                fb_run_ready(b, first_block, lo, hi);
                unsigned at_block = 0, returned = 0, at_group = 0;
                for (unsigned t = lo; t < hi; ++t) {
                    at_block += b.state[t] == 1;
                    returned += b.state[t] == 2;
                    at_group += b.state[t] == 3;
                }
                if (at_block == bd) {
                    for (unsigned t = lo; t < hi; ++t) b.state[t] = 0;
                    continue;
                }
                if (at_block > 0 || (returned > 0 && at_group > 0)) return 1;
                waiting += at_group == bd;
                done += returned == bd;
                break;
            }
        }
        if (done == present) return gave_up ? 4 : 0;
        if (waiting != present) return 1;  // some blocks returned while others wait
        // A block that never runs never arrives: wait for the abort word.
        if (present < blocks && !gave_up) gave_up = fb_emu_wait_for_abort() ? 1 : 0;
        if (present < blocks && !gave_up) return 1;
        for (unsigned t = 0; t < n; ++t) b.state[t] = 0;
    }
}

static inline unsigned fb_f32_bits(float x) {
    unsigned u;
    std::memcpy(&u, &x, 4);
    return u;
}
static inline float fb_bits_f32(unsigned u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
#define FB_F32_BITS(x) fb_f32_bits(x)
#define FB_BITS_F32(u) fb_bits_f32(u)
