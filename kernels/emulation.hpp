// fedbandits: host emulation of the CUDA execution model, for running the
// kernels' code on a CPU (tests, machines without a GPU).
//
// The kernels use one thread per work item, no shared memory, no barriers and
// no warp intrinsics, so a sequential executor over (block, thread) is exact.
// Transcendental libm functions are poisoned below (see there).
// Build: g++ -std=c++17 -O2 -ffp-contract=off -fno-fast-math -fPIC -shared
//        -DFB_HOST_EMULATION emulation.cpp
#pragma once
#include <math.h>
#include <cstring>
#include <cstdint>
#include <utility>

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
