// fedbandits: the kernels compiled for the host, with a launcher that runs
// every (block, thread) of a grid in order. Loaded by the test suite
// (src/backend/cuda/emulation.rs) through `fb_emu_launch`, whose parameter
// array has the layout of cuLaunchKernel's kernelParams.
//
// Not compiled alone: src/backend/cuda/emulation.rs generates the
// translation unit from the kernel sources the families list (each family's
// `KERNELS`): it defines FB_HOST_EMULATION, includes emulation.hpp and
// every source, defines FB_EMU_TABLE (one FB_KERNEL or FB_COOP_KERNEL per
// kernel), then includes this file.

// A deliberately broken kernel for the emulator's own test: thread 0 returns
// while the others wait at a barrier.
extern "C" __global__ void fb_emu_selftest_barrier_divergence(int* out) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

// Grouped kernels for the emulator's own test (first parameter: blocks per
// group). Each block writes its mark, then reads its right neighbour's in
// the group: correct only with the group barrier between (`barrier` 1;
// without, one of the two block orders reads a mark not yet written).
extern "C" __global__ void fb_emu_selftest_group(int group, int barrier, int* mark, int* seen) {
    int b = blockIdx.x, first = b - b % group;
    if (threadIdx.x == 0) mark[b] = b + 1;
    if (barrier)
        fb_group_barrier(nullptr, group);
    else
        __syncthreads();
    if (threadIdx.x == 0) seen[b] = mark[first + (b - first + 1) % group];
}
// Block 0 of each group returns while the others wait at a group barrier.
extern "C" __global__ void fb_emu_selftest_group_divergence(int group, int* out) {
    if (blockIdx.x % group == 0) return;
    fb_group_barrier(nullptr, group);
    out[blockIdx.x] = 1;
}

// The exact discrete samplers (common.cuh) for the emulator's test against
// src/rng/discrete.rs: draw i of release key fb_fold_more(key, i), the
// discrete Gaussian (sigma2 > 0) or the discrete Laplace of scale t / s
// (sigma2 = 0); rc[i] the sampler's status.
extern "C" __global__ void fb_emu_selftest_discrete(fb_u64 key, fb_u64 sigma2, fb_u64 s, fb_u64 t, int n,
                                                    long long* out, int* rc) {
    for (int i = 0; i < n; ++i) {
        fb_keyed_bits b = {fb_fold_more(key, (fb_u64)i), 0};
        rc[i] = sigma2 > 0 ? fb_discrete_gaussian(&b, sigma2, out + i) : fb_discrete_laplace(&b, s, t, out + i);
    }
}

template <typename... A, std::size_t... I>
static void fb_call(void (*f)(A...), void** p, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_reference<A>::type*>(p[I])...);
}

// A sequential kernel: every (block, thread) in order. Returns 0, or 3 when
// the kernel reached a barrier or shuffle (it must be FB_COOP_KERNEL).
template <typename... A>
static int fb_run_seq(void (*f)(A...), unsigned grid, unsigned block, void** p) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    fb_blk = nullptr;
    fb_seq_barrier = 0;
    for (unsigned bx = 0; bx < grid; ++bx) {
        for (unsigned tx = 0; tx < block; ++tx) {
            blockIdx = {bx, 0, 0};
            threadIdx = {tx, 0, 0};
            fb_call(f, p, std::index_sequence_for<A...>{});
        }
    }
    return fb_seq_barrier ? 3 : 0;
}

// A cooperative kernel: every group of `group` consecutive blocks of the
// grid in order (group 1: block by block), each group's threads together
// through the fiber scheduler. Returns 0, 2 when threads diverged at a
// barrier, or 4 when a group barrier gave up on the watchdog's abort word
// (the other groups still run, as a device's would).
template <typename... A>
static int fb_run(void (*f)(A...), unsigned grid, unsigned block, unsigned shared_bytes, void** p,
                  unsigned group = 1) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    if (group < 1) group = 1;
    static thread_local fb_block_state state;
    std::function<void()> body = [&]() { fb_call(f, p, std::index_sequence_for<A...>{}); };
    int rc = 0;
    for (unsigned bx = 0; bx < grid && (rc == 0 || rc == 4); bx += group) {
        unsigned blocks = grid - bx < group ? grid - bx : group;
        state.shared_bytes = shared_bytes;
        state.dyn_shared.assign((size_t)shared_bytes * blocks, 0);
        // The watchdog's fault (fb_emu_ctl[2]): a group's last block never runs.
        unsigned present = blocks > 1 && fb_emu_ctl != nullptr && fb_emu_ctl[2] != 0u ? blocks - 1 : blocks;
        int r = fb_run_blocks(state, body, bx, blocks, present);
        if (r == 4) {
            rc = 4;
            continue;
        }
        if (r != 0) rc = 2;
    }
    fb_blk = nullptr;
    return rc;
}

#define FB_KERNEL(name)                               \
    if (std::strcmp(kernel, #name) == 0) {            \
        return fb_run_seq(name, grid, block, params); \
    }
#define FB_COOP_KERNEL(name)                                     \
    if (std::strcmp(kernel, #name) == 0) {                       \
        return fb_run(name, grid, block, shared_bytes, params);  \
    }
// A grouped kernel's first parameter is its blocks per group (an int).
#define FB_GROUP_KERNEL(name)                                                                     \
    if (std::strcmp(kernel, #name) == 0) {                                                        \
        return fb_run(name, grid, block, shared_bytes, params, (unsigned)*static_cast<int*>(params[0])); \
    }

// Runs `kernel` over grid x block threads with `shared_bytes` of dynamic
// shared memory per block; `control`: the launch's watchdog words
// (fb_emu_ctl in emulation.hpp; may be null). Returns 0; 1 for an unknown
// name; 2 when the threads of a block diverged at a barrier; 3 when a
// kernel registered as sequential reached a barrier; 4 when a group
// barrier gave up on the watchdog's abort word (the kernel ran on to its
// end without waiting; its results are not to be used).
static int fb_emu_dispatch(const char* kernel, unsigned grid, unsigned block, unsigned shared_bytes,
                           void** params) {
    FB_EMU_TABLE
    FB_COOP_KERNEL(fb_emu_selftest_barrier_divergence)
    FB_GROUP_KERNEL(fb_emu_selftest_group)
    FB_GROUP_KERNEL(fb_emu_selftest_group_divergence)
    FB_KERNEL(fb_emu_selftest_discrete)
    return 1;
}
extern "C" int fb_emu_launch(const char* kernel, unsigned grid, unsigned block, unsigned shared_bytes,
                             void** params, volatile unsigned* control) {
    fb_emu_ctl = control;
    int rc = fb_emu_dispatch(kernel, grid, block, shared_bytes, params);
    fb_emu_ctl = nullptr;
    return rc;
}
