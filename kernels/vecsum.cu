// fedbandits: the shuffle vector-summation protocol (`sdp_vecsum`,
// src/privacy/vecsum.rs) on the device. Its randomness is keyed, so a
// thread per coordinate draws the CPU's bits: a batch with this release
// steps one round per fb_linear_rounds_coop launch (the round's action and
// reward kept in xlast / ylast), then fb_vecsum_add randomizes every agent's
// point into its federation's per-level accumulators (integer sums, order
// free) and fb_vecsum_clipcount counts the points whose coordinates the
// protocol clipped; at a sync fb_vecsum_close releases the batch's node
// (the shuffler's Binomial noise, the analyzer) and writes the server's
// output into every federation's base and u_syn, which fb_sync_factor and
// fb_sync_broadcast then give to the agents.
#include "common.cuh"

// Coordinate c of a point (x x^T upper triangle row-major, then x y).
FB_DEV double fb_vecsum_coordinate(const double* x, double y, int d, int c) {
    int tri = d * (d + 1) / 2;
    if (c >= tri) return x[c - tri] * y;
    int i = 0, start = 0;
    while (start + (d - i) <= c) {
        start += d - i;
        i += 1;
    }
    return x[i] * x[i + (c - start)];
}

// The (row, column) of coordinate c of the upper triangle (c < d(d+1)/2).
FB_DEV void fb_vecsum_position(int d, int c, int* r, int* s) {
    int i = 0, start = 0;
    while (start + (d - i) <= c) {
        start += d - i;
        i += 1;
    }
    *r = i;
    *s = i + (c - start);
}

// Per (agent, coordinate): VecSum::add_value of the round's point, keyed by
// fold_more(agent key, round): level j's rounding compares
// uniform_at(key, c * levels + j).
extern "C" __global__ void fb_vecsum_add(int n, int m, int d, int levels, double l, const double* glev,
                                         const fb_u64* akeys, fb_u64 round, const double* xlast,
                                         const double* ylast, fb_u64* acc, int* pclip) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int coords = d * (d + 1) / 2 + d;
    if (t >= (long long)n * coords) return;
    long long g = t / coords;
    int c = (int)(t % coords);
    long long f = g / m;
    double v = fb_vecsum_coordinate(xlast + g * d, ylast[2 * g], d, c);
    double shifted = (v < -l ? -l : (v > l ? l : v)) + l;
    fb_u64 key = fb_fold_more(akeys[g], round);
    for (int j = 0; j < levels; ++j) {
        double w = shifted * glev[j] / l;
        double fl = floor(w);
        fb_u64 bern = fb_uniform_at(key, (fb_u64)(c * levels + j)) < w - fl ? 1ull : 0ull;
        FB_ATOMIC_ADD_U64(acc + (f * levels + j) * coords + c, (fb_u64)fl + bern);
    }
    if (fabs(v) > l) pclip[g] = 1;
}

// Per agent: a point the protocol clipped counts once, unless its reward was
// clipped already (counted by the step).
extern "C" __global__ void fb_vecsum_clipcount(int n, int* pclip, const double* ylast, fb_u64* clipped) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    if (pclip[g] && ylast[2 * g + 1] == 0.0) clipped[g] += 1;
    pclip[g] = 0;
}

// Per (federation, coordinate): VecSum::close_batch of batch k, then the
// server's output into base (lambda I + the symmetric Gram part) and u_syn.
extern "C" __global__ void fb_vecsum_close(int nfed, int d, int levels, fb_u64 k, double l, const double* glev,
                                           const fb_u64* tlev, const fb_u64* nlev, const fb_u64* shkeys,
                                           fb_u64* acc, double* stored, double lambda, double* base, double* usyn) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int coords = d * (d + 1) / 2 + d;
    if (t >= (long long)nfed * coords) return;
    long long f = t / coords;
    int e = (int)(t % coords);
    int i = FB_CTZ64(k);
    fb_u64* ac = acc + f * levels * coords;
    double* st = stored + f * levels * coords;
    if (i < levels) {
        double gi = glev[i];
        fb_u64 ti = tlev[i], ni = nlev[i];
        fb_u64 noise = fb_binomial_at(fb_fold_more(shkeys[f], k), (fb_u64)e * (1ull << 20), ti, 0.25);
        fb_u64 y = ac[i * coords + e] + noise;
        st[i * coords + e] = (l / gi) * ((double)y - 0.25 * (double)ti) - (double)ni * l;
    }
    int upto = i + 1 < levels ? i + 1 : levels;
    for (int j = 0; j < upto; ++j) ac[j * coords + e] = 0;
    int below = i < levels ? i : levels;
    for (int j = 0; j < below; ++j) st[j * coords + e] = 0.0;
    double out = 0.0;
    for (int j = 0; j < levels; ++j)
        if ((k >> j) & 1ull) out += st[j * coords + e];
    int tri = d * (d + 1) / 2;
    if (e >= tri) {
        usyn[f * d + (e - tri)] = out;
        return;
    }
    int r, s;
    fb_vecsum_position(d, e, &r, &s);
    base[f * d * d + r * d + s] = (r == s ? lambda : 0.0) + out;
    if (r != s) base[f * d * d + s * d + r] = 0.0 + out;
}
