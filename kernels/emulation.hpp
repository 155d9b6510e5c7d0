// fedbandits: host emulation of the CUDA execution model, for running the
// kernels' code on a CPU (tests, machines without a GPU).
//
// Model: the blocks of a grid run one after another. Kernels registered as
// sequential (FB_KERNEL: one thread per work item, no barriers) run their
// threads one after another; reaching a barrier there is an error.
// Cooperative kernels (FB_COOP_KERNEL): inside a block every
// CUDA thread is a fiber (ucontext) on one host thread, and the scheduler
// runs the block phase by phase: each fiber runs until it reaches a barrier
// (__syncthreads, __syncwarp, or a warp shuffle, which exchanges values
// through the block's exchange buffer between two barriers) or returns; the
// next phase starts when every fiber has arrived. A barrier that some
// threads of the block reach while others have returned is reported as an
// error (it would hang or be undefined on a device). Shared memory:
// `__shared__` arrays are per host thread (blocks run one at a time) and
// dynamic shared memory (FB_DYN_SHARED) is a per-block buffer of the size the
// launch asked for. Warp-level barriers synchronize the whole block here, a
// stricter order than a device's, which any correct kernel also satisfies.
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

// ------------------------------------------------------ fiber scheduler

struct fb_block_state {
    ucontext_t scheduler;
    std::vector<ucontext_t> fibers;
    std::vector<std::vector<char>> stacks;
    std::vector<int> state;  // 0 running, 1 at barrier, 2 returned
    std::vector<long long> exchange_i64;
    std::vector<unsigned char> dyn_shared;
    std::function<void()> body;
    unsigned current = 0;
    int error = 0;  // 1: barrier divergence
};
static thread_local fb_block_state* fb_blk = nullptr;
// Set when a kernel registered as sequential (FB_KERNEL) reaches a barrier.
static thread_local int fb_seq_barrier = 0;

static void fb_fiber_entry() {
    fb_blk->body();
    fb_blk->state[fb_blk->current] = 2;
    // Returning ends this fiber and resumes the scheduler (uc_link).
}

// A barrier: this fiber waits until every thread of the block arrives.
static inline void fb_barrier() {
    fb_block_state* b = fb_blk;
    if (b == nullptr) {
        fb_seq_barrier = 1;
        return;
    }
    unsigned me = b->current;
    b->state[me] = 1;
    swapcontext(&b->fibers[me], &b->scheduler);
}
static inline void __syncthreads() { fb_barrier(); }
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
    unsigned me = threadIdx.x;
    long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    b->exchange_i64[me] = bits;
    fb_barrier();
    unsigned lane = me & 31u, base = me - lane;
    bits = b->exchange_i64[base + (lane ^ (unsigned)lane_mask)];
    fb_barrier();
    T got;
    std::memcpy(&got, &bits, sizeof(T));
    return got;
}
#define FB_SHFL_XOR_F64(v, m) fb_shfl_xor<double>((v), (m))
#define FB_SHFL_XOR_I32(v, m) fb_shfl_xor<int>((v), (m))
#define FB_DYN_SHARED(type, name) type* name = reinterpret_cast<type*>(fb_blk->dyn_shared.data())

// Runs one block of `body` with blockDim.x fibers; returns 0, or 1 when a
// barrier was reached by only part of the block.
static inline int fb_run_block(fb_block_state& b, const std::function<void()>& body) {
    unsigned n = blockDim.x;
    const size_t stack_bytes = 64 * 1024;
    b.fibers.resize(n);
    b.stacks.resize(n);
    b.state.assign(n, 0);
    b.exchange_i64.assign(n, 0);
    b.body = body;
    fb_blk = &b;
    for (unsigned t = 0; t < n; ++t) {
        if (b.stacks[t].size() != stack_bytes) b.stacks[t].assign(stack_bytes, 0);
        getcontext(&b.fibers[t]);
        b.fibers[t].uc_stack.ss_sp = b.stacks[t].data();
        b.fibers[t].uc_stack.ss_size = stack_bytes;
        b.fibers[t].uc_link = &b.scheduler;
        makecontext(&b.fibers[t], fb_fiber_entry, 0);
    }
    for (;;) {
        for (unsigned t = 0; t < n; ++t) {
            if (b.state[t] == 2) continue;
            b.state[t] = 0;
            b.current = t;
            threadIdx = {t, 0, 0};
            swapcontext(&b.scheduler, &b.fibers[t]);
        }
        unsigned at_barrier = 0, returned = 0;
        for (unsigned t = 0; t < n; ++t) {
            at_barrier += b.state[t] == 1;
            returned += b.state[t] == 2;
        }
        if (returned == n) return 0;
        if (returned > 0) return 1;  // some threads wait at a barrier others never reach
        (void)at_barrier;
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
