// fedbandits: host emulation of the CUDA execution model, for running the
// kernels' code on a CPU (tests, machines without a GPU).
//
// The kernels use one thread per work item, no shared memory, no barriers and
// no warp intrinsics, so a sequential executor over (block, thread) is exact.
// Build: g++ -std=c++17 -O2 -ffp-contract=off -fno-fast-math -fPIC -shared
//        -DFB_HOST_EMULATION emulation.cpp
#pragma once
#include <math.h>
#include <cstring>
#include <cstdint>

struct fb_dim3 {
    unsigned x, y, z;
};
// Thread-local: several host threads may run emulated launches at once.
static thread_local fb_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline

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
