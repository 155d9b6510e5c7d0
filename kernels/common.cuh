// fedbandits: shared device code for the CUDA kernels.
//
// Everything here reproduces the CPU backend's arithmetic operation for
// operation (same order, fused multiply-adds exactly where the CPU uses
// `mul_add`, plain multiply-then-add elsewhere: compile with --fmad=false), so
// that a kernel run under the host emulation (kernels/emulation.hpp, g++
// -ffp-contract=off) matches the CPU backend bit for bit. Transcendental
// functions are our own (fb_ln, fb_sincos_kernel; src/math.rs), never libm's
// or libdevice's, whose roundings differ: so a real GPU matches too.
//
// The random streams are the CPU's: xoshiro256++ (scalar and 8-lane), the
// 16-pair f32 Box-Muller of src/rng/normal.rs and the f64 Box-Muller of
// src/rng/mod.rs (Stream::normal, with its cached second value), and the
// counter-based normals of rng::normal_at (privacy noise regenerated from keys).
#pragma once

#ifndef FB_HOST_EMULATION
#define FB_DEV __device__ __forceinline__
#define FB_F32_BITS(x) __float_as_uint(x)
#define FB_BITS_F32(u) __uint_as_float(u)
// Warp shuffles (every lane of the warp takes part) and dynamic shared
// memory; the host emulation defines the same names (emulation.hpp).
#define FB_SHFL_XOR_F64(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define FB_SHFL_XOR_I32(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
extern __shared__ __align__(16) unsigned char fb_dyn_smem[];
#define FB_DYN_SHARED(type, name) type* name = reinterpret_cast<type*>(fb_dyn_smem)
#define FB_MULHI(a, b) __umul64hi((a), (b))
#define FB_CTZ64(x) (__ffsll((long long)(x)) - 1)
#define FB_ATOMIC_ADD_U64(p, v) atomicAdd((unsigned long long*)(p), (unsigned long long)(v))
#define FB_ATOMIC_ADD_I32(p, v) atomicAdd((int*)(p), (int)(v))
// A kernel's register budget: at most `threads` per block and at least
// `blocks` resident per SM (ptxas caps the registers to fit them).
#define FB_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#define FB_SYNC_OR(pred) __syncthreads_or(pred)
// A load of data another block wrote before a group barrier (bypasses the
// SM's L1, which is not coherent across SMs).
#define FB_LDCG(p) __ldcg(p)
#else
#define FB_LDCG(p) (*(p))
#define FB_LAUNCH_BOUNDS(threads, blocks)
// The emulation runs the threads of a grid one after another.
#define FB_ATOMIC_ADD_U64(p, v) (*(p) += (v))
#define FB_ATOMIC_ADD_I32(p, v) (*(p) += (v))
#define FB_MULHI(a, b) ((unsigned long long)(((unsigned __int128)(a) * (unsigned __int128)(b)) >> 64))
#define FB_CTZ64(x) __builtin_ctzll(x)
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

// One xoshiro256++ step of one lane held in four words.
FB_DEV fb_u64 fb_lane_step(fb_u64* s0, fb_u64* s1, fb_u64* s2, fb_u64* s3) {
    fb_u64 out = fb_rotl(*s0 + *s3, 23) + *s0;
    fb_u64 t = *s1 << 17;
    *s2 ^= *s0;
    *s3 ^= *s1;
    *s1 ^= *s2;
    *s0 ^= *s3;
    *s2 ^= t;
    *s3 = fb_rotl(*s3, 45);
    return out;
}

// One step of the 8 lanes; state layout [word][lane] (32 words).
FB_DEV void fb_lanes_next(fb_u64* s, fb_u64* out) {
    for (int l = 0; l < FB_LANES; ++l) out[l] = fb_lane_step(&s[l], &s[8 + l], &s[16 + l], &s[24 + l]);
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

// ------------------------------------------- portable f64 math (src/math.rs)
// log and sin/cos from +, -, *, / and bit operations only (fdlibm's
// polynomials), so that the device, the host emulation and the CPU backend
// agree bit for bit. libm's log/sin/cos/log1p must not be used in kernels:
// the host emulation refuses them at compile time (emulation.hpp).

FB_DEV double fb_bits_f64(fb_u64 u) {
    double x;
#ifdef FB_HOST_EMULATION
    std::memcpy(&x, &u, 8);
#else
    x = __longlong_as_double((long long)u);
#endif
    return x;
}

FB_DEV fb_u64 fb_f64_bits(double x) {
#ifdef FB_HOST_EMULATION
    fb_u64 u;
    std::memcpy(&u, &x, 8);
    return u;
#else
    return (fb_u64)__double_as_longlong(x);
#endif
}

FB_DEV double fb_ln(double x) {
    if (x != x || x < 0.0) return 0.0 / 0.0;
    if (x == 0.0) return -1.0 / 0.0;
    if (x == 1.0 / 0.0) return x;
    fb_u64 bits = fb_f64_bits(x);
    long long k = 0;
    if (bits < 0x0010000000000000ull) {
        bits = fb_f64_bits(x * 18014398509481984.0);
        k -= 54;
    }
    fb_u32 hx = (fb_u32)(bits >> 32);
    k += (long long)(hx >> 20) - 1023;
    fb_u32 hm = hx & 0x000fffffu;
    fb_u32 i = (hm + 0x95f64u) & 0x00100000u;
    double xn = fb_bits_f64(((fb_u64)(hm | (i ^ 0x3ff00000u)) << 32) | (bits & 0xffffffffull));
    k += (long long)(i >> 20);
    double f = xn - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (3.999999999940941908e-1 + w * (2.222219843214978396e-1 + w * 1.531383769920937332e-1));
    double t2 = z * (6.666666666666735130e-1 +
                     w * (2.857142874366239149e-1 + w * (1.818357216161805012e-1 + w * 1.479819860511658591e-1)));
    double r = t2 + t1;
    double hfsq = 0.5 * f * f;
    double dk = (double)k;
    return dk * 6.93147180369123816490e-01 - ((hfsq - (s * (hfsq + r) + dk * 1.90821492927058770002e-10)) - f);
}

FB_DEV double fb_ln_1p(double q) {
    double u = 1.0 + q;
    return u == 1.0 ? q : fb_ln(u) * q / (u - 1.0);
}

// (sin x, cos x) on [-pi/4, pi/4].
FB_DEV void fb_sincos_kernel(double x, double* s_out, double* c_out) {
    double z = x * x;
    double v = z * x;
    double rs = 8.33333333332248946124e-03 +
                z * (-1.98412698298579493134e-04 +
                     z * (2.75573137070700676789e-06 + z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)));
    *s_out = x + v * (-1.66666666666666324348e-01 + z * rs);
    double rc =
        z * (4.16666666666666019037e-02 +
             z * (-1.38888888888741095749e-03 +
                  z * (2.48015872894767294178e-05 +
                       z * (-2.75573143513906633035e-07 + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
    *c_out = 1.0 - (0.5 * z - z * rc);
}

// math::box_muller: two normals from two 64-bit words.
FB_DEV void fb_box_muller_f64(fb_u64 a, fb_u64 b, double* c_out, double* s_out) {
    const double two_m53 = 1.1102230246251565e-16;
    double u1 = ((double)(a >> 11) + 0.5) * two_m53;
    double r = sqrt(-2.0 * fb_ln(u1));
    fb_u64 q = b >> 62;
    double f = (double)((b << 2) >> 11) * two_m53;
    double s, c;
    fb_sincos_kernel((f - 0.5) * 1.5707963267948966, &s, &c);
    double cq = q == 0 ? c : (q == 1 ? -s : (q == 2 ? -c : s));
    double sq = q == 0 ? s : (q == 1 ? c : (q == 2 ? -s : -c));
    *c_out = r * cq;
    *s_out = r * sq;
}

// -------------------------------------------------------- keys (src/rng)

FB_DEV fb_u64 fb_splitmix64(fb_u64* state) {
    *state += 0x9E3779B97F4A7C15ull;
    fb_u64 z = *state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// rng::fold_more: the key extended by one word.
FB_DEV fb_u64 fb_fold_more(fb_u64 h, fb_u64 p) {
    h ^= p;
    return fb_splitmix64(&h);
}

// rng::normal_at: a standard normal as a pure function of (key, index).
FB_DEV double fb_normal_at(fb_u64 key, fb_u64 index) {
    fb_u64 h = key ^ (index * 0xD2B74407B1CE6E93ull);
    fb_u64 a = fb_splitmix64(&h);
    fb_u64 b = fb_splitmix64(&h);
    double c, s;
    fb_box_muller_f64(a, b, &c, &s);
    return c;
}

// rng::keyed::normal_entry: entry e of key's sequence, component e % 2 of the
// Box-Muller pair e / 2 (entry 2p is fb_normal_at(key, p)).
FB_DEV double fb_normal_entry(fb_u64 key, fb_u64 e) {
    fb_u64 h = key ^ ((e >> 1) * 0xD2B74407B1CE6E93ull);
    fb_u64 a = fb_splitmix64(&h);
    fb_u64 b = fb_splitmix64(&h);
    double c, s;
    fb_box_muller_f64(a, b, &c, &s);
    return (e & 1ull) ? s : c;
}

// rng::uniform_at: a uniform on (0, 1) as a pure function of (key, index).
FB_DEV double fb_uniform_at(fb_u64 key, fb_u64 index) {
    fb_u64 h = key ^ (index * 0xD2B74407B1CE6E93ull);
    return ((double)(fb_splitmix64(&h) >> 11) + 0.5) * 1.1102230246251565e-16;
}

// rng::laplace_of_uniform: Laplace(scale) from uniform_at(key, 0),
// -scale sgn(v) ln(1 - 2|v|) with v = u - 1/2 and 1 - 2|v| at least 2^-53
// (u = 1 exactly, probability 2^-53, would give an infinite noise), the
// portable logarithm.
FB_DEV double fb_laplace_at(fb_u64 key, double scale) {
    double v = fb_uniform_at(key, 0) - 0.5;
    double mag = -scale * fb_ln(fmax(1.0 - 2.0 * fabs(v), 1.1102230246251565e-16));
    return v < 0.0 ? -mag : mag;
}

// Svt::request: the noisy test while the agent has requests left and the
// sensitivity is finite (a request counted), else the fallback (the round a
// power of two).
// Svt::sensitivity's bound on lambda_max of a symmetric d x d inverse (the
// largest eigenvalue is below every induced norm and the Frobenius norm):
// min(||a||_F, max over rows of sum |a_ij|), each sum in row-major order.
FB_DEV double fb_spectral_bound(const double* a, int d) {
    double s = 0.0;
    for (int e = 0; e < d * d; ++e) s += a[e] * a[e];
    double frob = sqrt(s);
    double rows = 0.0;
    for (int i = 0; i < d; ++i) {
        double r = 0.0;
        for (int j = 0; j < d; ++j) r += fabs(a[i * d + j]);
        if (r > rows) rows = r;
    }
    return rows < frob ? rows : frob;
}

FB_DEV int fb_svt_request(fb_u64 round, fb_u64 own, double stat, double thr, double sens, double rho, fb_u64 key,
                          double qscale, int cap, int* used) {
    if (*used >= cap || !(sens <= 1.7976931348623157e308)) return own != 0 && (own & (own - 1)) == 0;
    double nu = fb_laplace_at(fb_fold_more(key, round), qscale);
    int fire = stat / sens + nu >= thr / sens + rho;
    if (fire) *used += 1;
    return fire;
}

// -------------------------------------------------------- scalar f64 stream

FB_DEV double fb_uniform(fb_u64* s) { return (double)(fb_xoshiro_next(s) >> 11) * 1.1102230246251565e-16; }

// Stream::below: Lemire's multiply-shift.
FB_DEV fb_u64 fb_below(fb_u64* s, fb_u64 n) { return FB_MULHI(fb_xoshiro_next(s), n); }

// Stream::normal: math::box_muller of the next two words, second value cached.
FB_DEV double fb_normal(fb_u64* s, double* spare, int* has_spare) {
    if (*has_spare) {
        *has_spare = 0;
        return *spare;
    }
    fb_u64 a = fb_xoshiro_next(s);
    fb_u64 b = fb_xoshiro_next(s);
    double c, sn;
    fb_box_muller_f64(a, b, &c, &sn);
    *spare = sn;
    *has_spare = 1;
    return c;
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
        ld += 2.0 * fb_ln(ljj);
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

// ------------------------------------------------------ keyed binomial draws

// rng::binomial::pow_u64: x^k by squaring.
FB_DEV double fb_pow_u64(double x, fb_u64 k) {
    double base = x, out = 1.0;
    while (k > 0) {
        if (k & 1ull) out *= base;
        base *= base;
        k >>= 1;
    }
    return out;
}

// rng::binomial::fc: Stirling's correction.
FB_DEV double fb_binomial_fc(fb_u64 k) {
    const double table[10] = {0.08106146679532726, 0.04134069595540929, 0.02767792568499834, 0.02079067210376509,
                              0.01664469118982119, 0.01387612882307075, 0.01189670994589177, 0.01041126526197209,
                              0.009255462182712733, 0.00833056343336287};
    if (k < 10) return table[k];
    double k1 = (double)k + 1.0;
    double k2 = k1 * k1;
    return (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / 1260.0 / k2) / k2) / k1;
}

// rng::binomial inversion (n p < 10, p <= 1/2).
FB_DEV fb_u64 fb_binomial_inversion(fb_u64 key, fb_u64 index, fb_u64 n, double p) {
    double q = 1.0 - p;
    double s = p / q;
    double a = ((double)n + 1.0) * s;
    double r0 = fb_pow_u64(q, n);
    for (fb_u64 j = 0;; ++j) {
        double u = fb_uniform_at(key, index + j);
        double r = r0;
        fb_u64 x = 0;
        for (;;) {
            if (u <= r) return x;
            u -= r;
            x += 1;
            if (x > 110 || x > n) break;
            r *= a / (double)x - s;
        }
    }
}

// rng::binomial BTRD (n p >= 10, p <= 1/2).
FB_DEV fb_u64 fb_binomial_btrd(fb_u64 key, fb_u64 index, fb_u64 n, double p) {
    double nf = (double)n;
    double m = floor((nf + 1.0) * p);
    double r = p / (1.0 - p);
    double nr = (nf + 1.0) * r;
    double npq = nf * p * (1.0 - p);
    double spq = sqrt(npq);
    double b = 1.15 + 2.53 * spq;
    double a = -0.0873 + 0.0248 * b + 0.01 * p;
    double c = nf * p + 0.5;
    double alpha = (2.83 + 5.1 / b) * spq;
    double vr = 0.92 - 4.2 / b;
    double urvr = 0.86 * vr;
    for (fb_u64 j = 0;; j += 2) {
        double v = fb_uniform_at(key, index + j);
        double w = fb_uniform_at(key, index + j + 1);
        double u;
        if (v <= urvr) {
            u = v / vr - 0.43;
            return (fb_u64)floor(((2.0 * a) / (0.5 - fabs(u)) + b) * u + c);
        }
        if (v >= vr) {
            u = w - 0.5;
        } else {
            u = v / vr - 0.93;
            u = (u < 0.0 ? -0.5 : 0.5) - u;
            v = w * vr;
        }
        double us = 0.5 - fabs(u);
        double kf = floor(((2.0 * a) / us + b) * u + c);
        if (kf < 0.0 || kf > nf) continue;
        fb_u64 k = (fb_u64)kf;
        v = v * alpha / (a / (us * us) + b);
        double km = fabs(kf - m);
        if (km <= 15.0) {
            double f = 1.0;
            if (m < kf) {
                for (double i = m + 1.0; i <= kf; i += 1.0) f *= nr / i - r;
            } else if (m > kf) {
                for (double i = kf + 1.0; i <= m; i += 1.0) v *= nr / i - r;
            }
            if (v <= f) return k;
            continue;
        }
        double lv = fb_ln(v);
        double rho = (km / npq) * (((km / 3.0 + 0.625) * km + 1.0 / 6.0) / npq + 0.5);
        double t = -km * km / (2.0 * npq);
        if (lv < t - rho) return k;
        if (lv > t + rho) continue;
        fb_u64 mi = (fb_u64)m;
        double nm = nf - m + 1.0;
        double h = (m + 0.5) * fb_ln((m + 1.0) / (r * nm)) + fb_binomial_fc(mi) + fb_binomial_fc(n - mi);
        double nk = nf - kf + 1.0;
        if (lv <= h + (nf + 1.0) * fb_ln(nm / nk) + (kf + 0.5) * fb_ln(nk * r / (kf + 1.0)) - fb_binomial_fc(k) -
                      fb_binomial_fc(n - k))
            return k;
    }
}

// rng::binomial::binomial_at: Binomial(n, p) from the keyed uniforms at
// index, index + 1, ... (bit for bit the CPU's draw).
FB_DEV fb_u64 fb_binomial_at(fb_u64 key, fb_u64 index, fb_u64 n, double p) {
    if (n == 0 || p != p || p <= 0.0 || p > 1.0) return 0;
    if (p >= 1.0) return n;
    int flip = p > 0.5;
    double pp = flip ? 1.0 - p : p;
    fb_u64 x = (double)n * pp < 10.0 ? fb_binomial_inversion(key, index, n, pp) : fb_binomial_btrd(key, index, n, pp);
    return flip ? n - x : x;
}

// rng::small_binomial::small_binomial_at: Binomial(n, p) for n <= 128 from
// the one keyed uniform at index, by inversion of the cumulative
// distribution (the least k with u <= C_k, n if rounding left C_n below u),
// the thresholds by the CPU's recurrence in the same order; larger n by
// fb_binomial_at. Bit for bit the CPU's draw.
#define FB_SMALL_N 128ull
FB_DEV fb_u64 fb_small_binomial_at(fb_u64 key, fb_u64 index, fb_u64 n, double p) {
    if (n == 0 || p != p || p <= 0.0 || p > 1.0) return 0;
    if (p >= 1.0) return n;
    if (n > FB_SMALL_N) return fb_binomial_at(key, index, n, p);
    int flip = p > 0.5;
    double pp = flip ? 1.0 - p : p;
    double q = 1.0 - pp;
    double s = pp / q;
    double a = ((double)n + 1.0) * s;
    double r = fb_pow_u64(q, n);
    double c = r;
    double u = fb_uniform_at(key, index);
    fb_u64 x = 0;
    while (x < n && c < u) {
        x += 1;
        r *= a / (double)x - s;
        c += r;
    }
    return flip ? n - x : x;
}

// ------------------------------------------------ groups of blocks

// The block's place in the launch, in the order blocks start: a ticket
// from a counter the launch's last block resets (fb_block_done). Blocks
// that synchronize in groups (fb_group_barrier) take their work by ticket,
// so that every block a started block waits for has started too, and a
// group never waits for a block that cannot become resident while the
// device holds at least a group's blocks at once (the host checks). The
// emulation runs each group's blocks together: the ticket is the block
// index. `slot`: a block-shared int.
FB_DEV unsigned fb_block_ticket(unsigned* counter, unsigned* slot) {
#ifndef FB_HOST_EMULATION
    // Modulo the grid: should a launch ever stop short of resetting the
    // counter, tickets stay a permutation of the blocks.
    if (threadIdx.x == 0) *slot = atomicAdd(counter, 1u) % gridDim.x;
    __syncthreads();
    return *slot;
#else
    (void)counter;
    (void)slot;
    return blockIdx.x;
#endif
}

// At the end of a launch that took tickets: the last block to finish
// resets the counters for the next launch (every block has taken its
// ticket by then). counter[0]: tickets; counter[1]: blocks done.
FB_DEV void fb_block_done(unsigned* counter) {
#ifndef FB_HOST_EMULATION
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(counter + 1, 1u) == gridDim.x - 1) {
            atomicExch(counter, 0u);
            atomicExch(counter + 1, 0u);
        }
    }
#else
    (void)counter;
#endif
}

// The watchdog's abort word (src/backend/cuda/watchdog.rs): host memory
// mapped into the device's address space, whose address the host writes
// into fb_abort_word when it loads the module. word[0]: set by the host
// when a launch passed its deadline; word[1]: set by a block that gave up
// waiting because of it (the host then discards the launch's results).
// Null (no watchdog): spin loops wait as long as it takes.
#ifndef FB_HOST_EMULATION
extern "C" {
__device__ volatile unsigned* fb_abort_word;
}
// Whether the host asked the launch to give up (one read of host memory
// over the bus: spin loops poll it every FB_ABORT_POLL iterations).
FB_DEV int fb_abort_requested() {
    volatile unsigned* w = fb_abort_word;
    return w != nullptr && w[0] != 0u;
}
#define FB_ABORT_POLL 1024u
#endif

// A barrier of the `blocks` blocks of one group (a federation that spans
// blocks): what any of them wrote before it, every one reads after it
// (readers load such data with FB_LDCG). bar[0]: arrivals, bar[1]: the
// generation; both per group, reset by the last arrival, so the barrier
// serves every launch. The pattern of a grid-wide barrier (fence,
// arrive, spin on the generation, fence), scoped to a group. The spin
// polls the watchdog's abort word: a block that waits for one the device
// never schedules (another process holding the SMs, a smaller MPS or MIG
// slice than the host assumed) gives up once the host asks, marks the
// launch as given up, and the kernel runs on to its end without waiting
// again (every later spin also gives up at once), its results discarded.
// Under the emulation the group's blocks run as one fiber set and this is
// the barrier where they meet (each runs on its own between two); the
// emulation's scheduler polls the abort word instead (emulation.hpp).
FB_DEV void fb_group_barrier(unsigned* bar, int blocks) {
#ifndef FB_HOST_EMULATION
    __syncthreads();
    if (blocks > 1 && threadIdx.x == 0) {
        volatile unsigned* gen = bar + 1;
        unsigned g0 = *gen;
        __threadfence();
        if (atomicAdd(bar, 1u) == (unsigned)blocks - 1) {
            atomicExch(bar, 0u);
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            unsigned polls = 0;
            while (*gen == g0) {
                if ((++polls % FB_ABORT_POLL) == 0u && fb_abort_requested()) {
                    fb_abort_word[1] = 1u;
                    __threadfence_system();
                    break;
                }
            }
        }
        __threadfence();
    }
    __syncthreads();
#else
    (void)bar;
    (void)blocks;
    fb_group_wait();
#endif
}

// ------------------------------------------------ exact discrete samplers

// src/rng/discrete.rs in integer arithmetic, operation for operation, so a
// kernel draws the same lattice points as the CPU (the emulation checks it
// bit for bit): the words of one release (KeyedBits), a uniform integer
// below n, Bernoulli(n / d), Bernoulli(exp(-n / d)), the discrete Laplace
// and the discrete Gaussian (Canonne, Kamath and Steinke 2020; the doc
// comment there describes them). The samplers return 0 and write *out, 1
// for a zero scale, 2 where the arithmetic would exceed 128 bits.
typedef unsigned __int128 fb_u128;
struct fb_keyed_bits {
    fb_u64 key;
    fb_u64 next;
};
FB_DEV fb_u64 fb_kb_word(fb_keyed_bits* b) {
    fb_u64 h = b->key ^ (b->next * 0xD2B74407B1CE6E93ull);
    b->next += 1;
    return fb_splitmix64(&h);
}
FB_DEV fb_u128 fb_kb_below(fb_keyed_bits* b, fb_u128 n) {
    if (n <= 1) return 0;
    if ((n & (n - 1)) == 0) {  // a power of two: no rejection, the low bits
        fb_u128 hi = fb_kb_word(b);
        return ((hi << 64) | (fb_u128)fb_kb_word(b)) & (n - 1);
    }
    fb_u128 reject_below = (~(fb_u128)0 - n + 1) % n;
    for (;;) {
        fb_u128 hi = fb_kb_word(b);
        fb_u128 w = (hi << 64) | (fb_u128)fb_kb_word(b);
        if (w >= reject_below) return w % n;
    }
}
FB_DEV int fb_bernoulli_ratio(fb_keyed_bits* b, fb_u128 n, fb_u128 d) { return fb_kb_below(b, d) < n; }
// exp(-n / d) for n <= d: the first k with Bernoulli(gamma / k) = 0, k odd.
FB_DEV int fb_bernoulli_exp_neg_le1(fb_keyed_bits* b, fb_u128 n, fb_u128 d) {
    for (fb_u128 k = 1;; ++k) {
        if (d > ~(fb_u128)0 / k) return (int)(k & 1);
        if (!fb_bernoulli_ratio(b, n, d * k)) return (int)(k & 1);
    }
}
FB_DEV int fb_bernoulli_exp_neg(fb_keyed_bits* b, fb_u128 n, fb_u128 d) {
    if (n > d) {
        fb_u128 whole = n / d;
        for (fb_u128 i = 0; i < whole; ++i)
            if (!fb_bernoulli_exp_neg_le1(b, 1, 1)) return 0;
        return fb_bernoulli_exp_neg_le1(b, n % d, d);
    }
    return fb_bernoulli_exp_neg_le1(b, n, d);
}
FB_DEV int fb_discrete_laplace(fb_keyed_bits* b, fb_u64 s, fb_u64 t, long long* out) {
    if (s == 0 || t == 0) return 1;
    for (;;) {
        fb_u128 u = fb_kb_below(b, t);
        if (!fb_bernoulli_exp_neg(b, u, t)) continue;
        fb_u128 v = 0;
        while (fb_bernoulli_exp_neg(b, 1, 1)) v += 1;
        fb_u128 y = (u + (fb_u128)t * v) / s;
        int negative = (fb_kb_word(b) >> 63) == 1ull;
        if (negative && y == 0) continue;
        if (y > (fb_u128)0x7FFFFFFFFFFFFFFFull) return 2;
        *out = negative ? -(long long)y : (long long)y;
        return 0;
    }
}
// floor(sqrt(n)), exactly.
FB_DEV fb_u64 fb_isqrt(fb_u64 n) {
    fb_u64 r = (fb_u64)sqrt((double)n);
    while ((fb_u128)r * r > n) r -= 1;
    while ((fb_u128)(r + 1) * (r + 1) <= n) r += 1;
    return r;
}
FB_DEV int fb_discrete_gaussian(fb_keyed_bits* b, fb_u64 sigma2, long long* out) {
    if (sigma2 == 0) return 1;
    fb_u64 t = fb_isqrt(sigma2) + 1;
    fb_u128 s2 = sigma2, tt = t, most = ~(fb_u128)0;
    for (;;) {
        long long y = 0;
        int rc = fb_discrete_laplace(b, 1, t, &y);
        if (rc != 0) return rc;
        fb_u128 a = y < 0 ? (fb_u128)(0ull - (fb_u64)y) : (fb_u128)(fb_u64)y;
        fb_u128 at = a * tt;
        fb_u128 diff = at > s2 ? at - s2 : s2 - at;
        if (diff != 0 && diff > most / diff) return 2;
        fb_u128 m = 2 * tt * tt;
        if (s2 > most / m) return 2;
        if (fb_bernoulli_exp_neg(b, diff * diff, s2 * m)) {
            *out = y;
            return 0;
        }
    }
}
