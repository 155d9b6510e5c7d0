// fedbandits: shared device code for the CUDA kernels.
//
// Everything here reproduces the CPU backend's arithmetic operation for
// operation (same order, fused multiply-adds exactly where the CPU uses
// `mul_add`, plain multiply-then-add elsewhere: compile with --fmad=false), so
// that a kernel run under the host emulation (kernels/emulation.hpp, g++
// -ffp-contract=off) matches the CPU backend bit for bit, and a real GPU run
// matches it except where CUDA's log/sin/cos round differently from glibc's.
//
// The random streams are the CPU's: xoshiro256++ (scalar and 8-lane), the
// 16-pair f32 Box-Muller of src/rng/normal.rs and the f64 Box-Muller of
// src/rng/mod.rs (Stream::normal, with its cached second value).
#pragma once

#ifndef FB_HOST_EMULATION
#define FB_DEV __device__ __forceinline__
#define FB_F32_BITS(x) __float_as_uint(x)
#define FB_BITS_F32(u) __uint_as_float(u)
#else
#define FB_DEV static inline
#endif

typedef unsigned long long fb_u64;
typedef unsigned int fb_u32;

#define FB_LANES 8
#define FB_NORMALS_PER_BLOCK 32

// ---------------------------------------------------------------- xoshiro256++

FB_DEV fb_u64 fb_rotl(fb_u64 x, int k) { return (x << k) | (x >> (64 - k)); }

// One scalar xoshiro256++ step on state s[0..4].
FB_DEV fb_u64 fb_xoshiro_next(fb_u64* s) {
    fb_u64 result = fb_rotl(s[0] + s[3], 23) + s[0];
    fb_u64 t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = fb_rotl(s[3], 45);
    return result;
}

// One step of the 8 lanes; state layout [word][lane] (32 words).
FB_DEV void fb_lanes_next(fb_u64* s, fb_u64* out) {
    for (int l = 0; l < FB_LANES; ++l) {
        fb_u64 s0 = s[l], s1 = s[8 + l], s2 = s[16 + l], s3 = s[24 + l];
        out[l] = fb_rotl(s0 + s3, 23) + s0;
        fb_u64 t = s1 << 17;
        s2 ^= s0;
        s3 ^= s1;
        s1 ^= s2;
        s0 ^= s3;
        s2 ^= t;
        s3 = fb_rotl(s3, 45);
        s[l] = s0; s[8 + l] = s1; s[16 + l] = s2; s[24 + l] = s3;
    }
}

// ------------------------------------------------------------- f32 normals

FB_DEV float fb_ln_f32(float x) {
    fb_u32 bits = FB_F32_BITS(x);
    int e = (int)((bits >> 23) & 0xffu) - 126;
    float m = FB_BITS_F32((bits & 0x007fffffu) | 0x3f000000u);
    bool small = m < 0.70710677f;
    e = small ? e - 1 : e;
    m = small ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = 7.0376836e-2f;
    y = fmaf(y, m, -1.151461e-1f);
    y = fmaf(y, m, 1.1676999e-1f);
    y = fmaf(y, m, -1.2420141e-1f);
    y = fmaf(y, m, 1.4249323e-1f);
    y = fmaf(y, m, -1.6668058e-1f);
    y = fmaf(y, m, 2.0000714e-1f);
    y = fmaf(y, m, -2.4999994e-1f);
    y = fmaf(y, m, 3.333333e-1f);
    y = y * m * z;
    float fe = (float)e;
    y += -2.1219444e-4f * fe;
    y += -0.5f * z;
    float r = m + y;
    r += 0.6933594f * fe;
    return r;
}

FB_DEV void fb_box_muller(fb_u32 a, fb_u32 b, float* cos_out, float* sin_out) {
    float u1 = ((float)a + 0.5f) * (1.0f / 4294967296.0f);
    float r = sqrtf(-2.0f * fb_ln_f32(u1));
    fb_u32 q = b >> 30;
    float f = (float)(b & 0x3fffffffu) * (1.0f / 1073741824.0f);
    float x = (f - 0.5f) * 1.5707964f;
    float z = x * x;
    float s = fmaf(fmaf(fmaf(-1.9515296e-4f, z, 8.332161e-3f), z, -1.6666655e-1f) * z, x, x);
    float c = fmaf(fmaf(fmaf(2.4433157e-5f, z, -1.3887316e-3f), z, 4.1666646e-2f) * z, z, fmaf(-0.5f, z, 1.0f));
    bool swap = (q & 1u) == 1u;
    float cos_v = swap ? s : c;
    float sin_v = swap ? c : s;
    fb_u32 neg_cos = ((q ^ (q >> 1)) & 1u) << 31;
    fb_u32 neg_sin = (q >> 1) << 31;
    *cos_out = r * FB_BITS_F32(FB_F32_BITS(cos_v) ^ neg_cos);
    *sin_out = r * FB_BITS_F32(FB_F32_BITS(sin_v) ^ neg_sin);
}

// n standard normals (f32) into out, consuming whole 32-normal blocks.
FB_DEV void fb_fill_normals_f32(fb_u64* lanes, float* out, int n) {
    fb_u64 a[FB_LANES], b[FB_LANES];
    for (int base = 0; base < n; base += FB_NORMALS_PER_BLOCK) {
        fb_lanes_next(lanes, a);
        fb_lanes_next(lanes, b);
        for (int p = 0; p < 2 * FB_LANES; ++p) {
            fb_u64 w = p < FB_LANES ? a[p] : b[p - FB_LANES];
            float c, s;
            fb_box_muller((fb_u32)(w >> 32), (fb_u32)w, &c, &s);
            if (base + p < n) out[base + p] = c;
            if (base + 2 * FB_LANES + p < n) out[base + 2 * FB_LANES + p] = s;
        }
    }
}

// -------------------------------------------------------- scalar f64 stream

FB_DEV double fb_uniform(fb_u64* s) { return (double)(fb_xoshiro_next(s) >> 11) * 1.1102230246251565e-16; }

FB_DEV double fb_uniform_open(fb_u64* s) {
    return ((double)(fb_xoshiro_next(s) >> 11) + 0.5) * 1.1102230246251565e-16;
}

// Stream::normal: Box-Muller in f64 with the second value cached.
FB_DEV double fb_normal(fb_u64* s, double* spare, int* has_spare) {
    if (*has_spare) {
        *has_spare = 0;
        return *spare;
    }
    double u1 = fb_uniform_open(s);
    double u2 = fb_uniform(s);
    double r = sqrt(-2.0 * log(u1));
    double a = 6.283185307179586 * u2;
    double sn = sin(a), cs = cos(a);
    *spare = r * sn;
    *has_spare = 1;
    return r * cs;
}

// ------------------------------------------------------- small dense algebra

// y = A x (plain multiply-then-add, as linalg::matvec).
FB_DEV void fb_matvec(const double* a, const double* x, double* y, int d) {
    for (int i = 0; i < d; ++i) {
        double s = 0.0;
        for (int j = 0; j < d; ++j) s += a[i * d + j] * x[j];
        y[i] = s;
    }
}

// linalg::sherman_morrison; returns q = x^T A^{-1} x.
FB_DEV double fb_sherman_morrison(double* inv, const double* x, double* w, int d) {
    for (int i = 0; i < d; ++i) {
        double s = 0.0;
        for (int j = 0; j < d; ++j) s += inv[i * d + j] * x[j];
        w[i] = s;
    }
    double q = 0.0;
    for (int i = 0; i < d; ++i) q += w[i] * x[i];
    double c = -1.0 / (1.0 + q);
    for (int i = 0; i < d; ++i) {
        double cwi = c * w[i];
        for (int j = 0; j < d; ++j) inv[i * d + j] += cwi * w[j];
    }
    return q;
}

// linalg::cholesky_in_place; returns 0 on success (log det in *logdet).
FB_DEV int fb_cholesky(double* a, int d, double* logdet) {
    double ld = 0.0;
    for (int j = 0; j < d; ++j) {
        double s = a[j * d + j];
        for (int k = 0; k < j; ++k) s -= a[j * d + k] * a[j * d + k];
        if (s != s || s <= 0.0 || s == 1.0 / 0.0) return 1;
        double ljj = sqrt(s);
        a[j * d + j] = ljj;
        ld += 2.0 * log(ljj);
        double inv = 1.0 / ljj;
        for (int i = j + 1; i < d; ++i) {
            double t = a[i * d + j];
            for (int k = 0; k < j; ++k) t -= a[i * d + k] * a[j * d + k];
            a[i * d + j] = t * inv;
        }
    }
    *logdet = ld;
    return 0;
}

// linalg::spd_inverse: `work` holds d*d values. Returns 0 on success.
FB_DEV int fb_spd_inverse(const double* v, int d, double* inv, double* work, double* logdet) {
    for (int e = 0; e < d * d; ++e) work[e] = v[e];
    double ld;
    if (fb_cholesky(work, d, &ld)) return 1;
    double* l = work;
    for (int j = 0; j < d; ++j) {
        l[j * d + j] = 1.0 / l[j * d + j];
        for (int i = j + 1; i < d; ++i) {
            double s = 0.0;
            for (int k = j; k < i; ++k) s -= l[i * d + k] * l[k * d + j];
            l[i * d + j] = s / l[i * d + i];
        }
    }
    for (int i = 0; i < d; ++i) {
        for (int j = 0; j <= i; ++j) {
            double s = 0.0;
            for (int k = i; k < d; ++k) s += l[k * d + i] * l[k * d + j];
            inv[i * d + j] = s;
            inv[j * d + i] = s;
        }
    }
    *logdet = ld;
    return 0;
}

// linalg::spd_inverse_with_jitter. Returns the jitter used (0: none; -1: failed).
FB_DEV double fb_spd_inverse_jitter(const double* v, int d, double* inv, double* work, double* shifted,
                                    double* logdet) {
    if (!fb_spd_inverse(v, d, inv, work, logdet)) return 0.0;
    double scale = 0.0;
    for (int i = 0; i < d; ++i) scale += fabs(v[i * d + i]);
    scale = scale / (double)d + 1.0;
    double jitter = 1e-10 * scale;
    for (int attempt = 0; attempt < 30; ++attempt) {
        for (int e = 0; e < d * d; ++e) shifted[e] = v[e];
        for (int i = 0; i < d; ++i) shifted[i * d + i] += jitter;
        if (!fb_spd_inverse(shifted, d, inv, work, logdet)) return jitter;
        jitter *= 10.0;
    }
    return -1.0;
}
