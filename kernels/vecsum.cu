// fedbandits: the shuffle vector-summation protocol (`sdp_vecsum`,
// src/privacy/vecsum.rs) on the device. Its randomness is keyed, so a
// lane per coordinate draws the CPU's bits: inside fb_linear_rounds_coop,
// after each round's step, every agent's warp randomizes its point into
// its federation's per-level accumulators (fb_vecsum_add_coordinate;
// integer sums, order free) and counts a point whose coordinates the
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

// What fb_linear_rounds_coop needs to randomize each round's points into
// the accumulators (src/algo/linear/cuda/vecsum.rs uploads it: every field
// 8 bytes).
struct fb_vecsum_args {
    long long levels;
    double l;             // the protocol's coordinate bound
    const double* glev;   // per level: its granularity
    const fb_u64* akeys;  // per agent: its key
    fb_u64* acc;          // per federation, level and coordinate: the sums
};

// Coordinate c of agent g's point of the round (action x, reward y) into
// federation f's per-level accumulators (VecSum::add_value, keyed by
// `key` = fold_more(agent key, round): level j's rounding compares
// uniform_at(key, c * levels + j); integer sums, order free). Returns
// whether the protocol clipped the coordinate.
FB_DEV int fb_vecsum_add_coordinate(const fb_vecsum_args& vs, long long f, int d, int c, const double* x, double y,
                                    fb_u64 key) {
    int coords = d * (d + 1) / 2 + d, levels = (int)vs.levels;
    double l = vs.l;
    double v = fb_vecsum_coordinate(x, y, d, c);
    double shifted = (v < -l ? -l : (v > l ? l : v)) + l;
    for (int j = 0; j < levels; ++j) {
        double w = shifted * vs.glev[j] / l;
        w = w > 2.0 * vs.glev[j] ? 2.0 * vs.glev[j] : w;  // the cap of VecSum's round_level
        double fl = floor(w);
        fb_u64 bern = fb_uniform_at(key, (fb_u64)(c * levels + j)) < w - fl ? 1ull : 0ull;
        FB_ATOMIC_ADD_U64(vs.acc + (f * levels + j) * coords + c, (fb_u64)fl + bern);
    }
    return fabs(v) > l;
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
