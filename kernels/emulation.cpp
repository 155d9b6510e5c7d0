// fedbandits: the kernels compiled for the host, with a launcher that runs
// every (block, thread) of a grid in order. Loaded by the test suite
// (src/backend/cuda/emulation.rs) through `fb_emu_launch`, whose parameter
// array has the layout of cuLaunchKernel's kernelParams.
#define FB_HOST_EMULATION 1
#include "emulation.hpp"
#include "linear.cu"

template <typename... A, std::size_t... I>
static void fb_call(void (*f)(A...), void** p, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_reference<A>::type*>(p[I])...);
}

template <typename... A>
static void fb_run(void (*f)(A...), unsigned grid, unsigned block, void** p) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned bx = 0; bx < grid; ++bx) {
        for (unsigned tx = 0; tx < block; ++tx) {
            blockIdx = {bx, 0, 0};
            threadIdx = {tx, 0, 0};
            fb_call(f, p, std::index_sequence_for<A...>{});
        }
    }
}

#define FB_KERNEL(name)                         \
    if (std::strcmp(kernel, #name) == 0) {      \
        fb_run(name, grid, block, params);      \
        return 0;                               \
    }

// Runs `kernel` over grid x block threads. Returns 0, or 1 for an unknown name.
extern "C" int fb_emu_launch(const char* kernel, unsigned grid, unsigned block, void** params) {
    FB_KERNEL(fb_linear_step)
    FB_KERNEL(fb_round_reduce)
    FB_KERNEL(fb_refactor)
    FB_KERNEL(fb_tree_insert)
    FB_KERNEL(fb_sync_reduce)
    FB_KERNEL(fb_sync_factor)
    FB_KERNEL(fb_sync_broadcast)
    return 1;
}
