// fedbandits: kernels of the linear contextual family. The step, sync and
// factorization kernels use one thread per federation-agent or per
// federation; fb_score_coop is the first cooperative kernel (lanes over
// actions, shared memory, barriers and warp shuffles), which the host
// emulation runs phase by phase between barriers (emulation.hpp).
//
// Agent g = f * m + i of federation f. Matrices are row-major d x d, f64.
// Each agent has a private scratch row in `work` (stride wstride doubles) and
// in `gbuf` (stride gstride floats) for its decision set.
#include "common.cuh"

#define FB_NEG_INF (-1.0 / 0.0)

// linear_sphere decision set (src/env/linear_sphere.rs). Returns the best mean.
FB_DEV double fb_draw_sphere(const double* theta, int reward_raw, int d, int k, int kp, fb_u64* lanes, float* g,
                             double* x, double* mean, double* inv) {
    const double inv_sqrt2 = 0.7071067811865476;
    const double sqrt2 = 1.4142135623730951;
    int last = d - 1;
    int fixed = d < k ? d : k;
    double best = FB_NEG_INF;
    for (int a = 0; a < fixed; ++a) {
        for (int j = 0; j < d; ++j) x[j * kp + a] = 0.0;
        double raw_mean = a < last ? theta[a] + theta[last] : theta[last];
        double norm = a < last ? sqrt2 : 1.0;
        if (a < last) x[a * kp + a] = 1.0 / norm;
        x[last * kp + a] = 1.0 / norm;
        double mv = reward_raw ? raw_mean : raw_mean / norm;
        mean[a] = mv;
        best = fmax(best, mv);
    }
    int nr = k - fixed;
    if (nr > 0) {
        fb_fill_normals_f32(lanes, g, nr * last);
        for (int a = 0; a < nr; ++a) inv[a] = 0.0;
        for (int j = 0; j < last; ++j)
            for (int a = 0; a < nr; ++a) {
                double v = (double)g[j * nr + a];
                inv[a] += v * v;
            }
        for (int a = 0; a < nr; ++a) {
            double n2 = inv[a];
            double y0 = (double)(1.0f / sqrtf((float)n2));
            inv[a] = y0 * (1.5 - 0.5 * n2 * y0 * y0);
        }
        for (int a = 0; a < nr; ++a) mean[fixed + a] = theta[last];
        for (int j = 0; j < last; ++j) {
            double tj = theta[j];
            for (int a = 0; a < nr; ++a) {
                double z = (double)g[j * nr + a] * inv[a];
                mean[fixed + a] += tj * z;
                x[j * kp + fixed + a] = z * inv_sqrt2;
            }
        }
        for (int a = 0; a < nr; ++a) x[last * kp + fixed + a] = inv_sqrt2;
        double scale = reward_raw ? 1.0 : inv_sqrt2;
        for (int a = 0; a < nr; ++a) {
            mean[fixed + a] *= scale;
            best = fmax(best, mean[fixed + a]);
        }
    }
    return best;
}

// The UCB scorer (backend/cpu.rs score_argmax): argmax of
// <theta, x> + beta sqrt(x^T A x), lowest index on ties.
FB_DEV int fb_score_argmax(int d, int k, int kp, const double* x, const double* a, const double* th, double beta,
                           double* quad_out) {
    int arm = 0;
    double bs = FB_NEG_INF, bq = 0.0;
    for (int c = 0; c < k; ++c) {
        double mean = 0.0, quad = 0.0;
        for (int i = 0; i < d; ++i) {
            double t = 0.0;
            for (int j = i + 1; j < d; ++j) t = fma(a[i * d + j], x[j * kp + c], t);
            double xi = x[i * kp + c];
            double inner = fma(a[i * d + i], xi, 2.0 * t);
            quad = fma(xi, inner, quad);
            mean = fma(th[i], xi, mean);
        }
        double s = fma(beta, sqrt(fmax(quad, 0.0)), mean);
        if (s > bs) {
            bs = s;
            arm = c;
            bq = quad;
        }
    }
    *quad_out = bq;
    return arm;
}

// A reward clipped to [-bound, bound] (backend::clip_reward's comparisons).
FB_DEV double fb_clip_reward(double y, double bound) { return y < -bound ? -bound : (y > bound ? bound : y); }

// One round of every agent: decision set, UCB choice, reward, Sherman-Morrison
// update of V^{-1}, log det, b, the agent's exact local sums and its regret.
extern "C" __global__ void fb_linear_step(int n, int m, int d, int k, int kp, int reward_raw, double noise_std,
                                          double reward_bound, double beta, const double* theta_star, fb_u64* lanes,
                                          fb_u64* rstate, double* rspare, int* rhas, double* vinv, double* logdet,
                                          double* b, double* gram, double* bias, double* regret, fb_u64* clipped,
                                          double* round_regret,
                                          float* gbuf, int gstride, double* work, int wstride) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    int f = g / m;
    const double* th = theta_star + (long long)f * d;
    double* x = work + (long long)g * wstride;
    double* mean = x + (long long)d * kp;
    double* inv = mean + kp;
    double* that = inv + kp;
    double* w = that + d;
    double* xs = w + d;
    double* A = vinv + (long long)g * d * d;
    double* bb = b + (long long)g * d;
    double best = fb_draw_sphere(th, reward_raw, d, k, kp, lanes + (long long)g * 32, gbuf + (long long)g * gstride,
                                 x, mean, inv);
    fb_matvec(A, bb, that, d);
    double quad;
    int arm = fb_score_argmax(d, k, kp, x, A, that, beta, &quad);
    for (int j = 0; j < d; ++j) xs[j] = x[j * kp + arm];
    double mu = mean[arm];
    double y0 = mu + noise_std * fb_normal(rstate + (long long)g * 4, rspare + g, rhas + g);
    double y = fb_clip_reward(y0, reward_bound);
    if (y != y0) clipped[g] += 1;
    double q = fb_sherman_morrison(A, xs, w, d);
    logdet[g] += fb_ln_1p(q);
    for (int j = 0; j < d; ++j) bb[j] += y * xs[j];
    double* G = gram + (long long)g * d * d;
    for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) G[i * d + j] += xs[i] * xs[j];
    double* u = bias + (long long)g * d;
    for (int j = 0; j < d; ++j) u[j] += y * xs[j];
    double r = best - mu;
    regret[g] += r;
    round_regret[g] = r;
}

// Per federation: group += sum over agents (in order) of this round's regret.
extern "C" __global__ void fb_round_reduce(int nfed, int m, const double* round_regret, double* group) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= nfed) return;
    double s = 0.0;
    for (int i = 0; i < m; ++i) s += round_regret[(long long)f * m + i];
    group[f] += s;
}

// Per agent: V^{-1}, log det from V = base_f + gram_g (refactorization).
extern "C" __global__ void fb_refactor(int n, int m, int d, const int* mask, const double* base,
                                       const double* gram, double* vinv, double* logdet, double* scratch,
                                       int* failures) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    int f = g / m;
    if (mask && !mask[f]) return;
    int dd = d * d;
    double* v = scratch + (long long)g * 3 * dd;
    for (int e = 0; e < dd; ++e) v[e] = base[(long long)f * dd + e] + gram[(long long)g * dd + e];
    double ld;
    double jitter = fb_spd_inverse_jitter(v, d, vinv + (long long)g * dd, v + dd, v + 2 * dd, &ld);
    if (jitter >= 0.0) logdet[g] = ld;
    if (jitter != 0.0) FB_ATOMIC_ADD_I32(failures + f, 1);
}

// Entry e of the Zhou & Chowdhury node noise of the node with key `key`
// (privacy::tree::symmetric_gaussian): sigma normal_entry per entry, Gram
// part (Z + Z^T)/2 (upper entry first, as the CPU adds them).
FB_DEV double fb_zhou_noise_entry(fb_u64 key, int d, int e, double sigma) {
    int dd = d * d;
    if (e >= dd) return sigma * fb_normal_entry(key, (fb_u64)e);
    int i = e / d, j = e % d;
    if (i == j) return sigma * fb_normal_entry(key, (fb_u64)e);
    int lo = i < j ? i : j, hi = i < j ? j : i;
    return 0.5 * (sigma * fb_normal_entry(key, (fb_u64)(lo * d + hi)) + sigma * fb_normal_entry(key, (fb_u64)(hi * d + lo)));
}

// Entry e of Dubey & Pentland's node noise (privacy::tree::dubey_noise):
// sigma normal_entry per entry, Gram part (Z_ij + Z_ji) / sqrt(2) on both
// triangles and the diagonal (upper entry first, as the CPU adds them).
FB_DEV double fb_dubey_noise_entry(fb_u64 key, int d, int e, double sigma) {
    int dd = d * d;
    if (e >= dd) return sigma * fb_normal_entry(key, (fb_u64)e);
    int i = e / d, j = e % d;
    int lo = i < j ? i : j, hi = i < j ? j : i;
    return (sigma * fb_normal_entry(key, (fb_u64)(lo * d + hi)) + sigma * fb_normal_entry(key, (fb_u64)(hi * d + lo))) *
           0.7071067811865476;
}

FB_DEV double fb_node_noise_entry(int dubey, fb_u64 key, int d, int e, double sigma) {
    return dubey ? fb_dubey_noise_entry(key, d, e, sigma) : fb_zhou_noise_entry(key, d, e, sigma);
}

// Entry e of leaf `leaf` of agent g's tree (privacy/tree.rs,
// AgentTrees::contribute). The exact running sum `tsum` takes the local sums
// (gram, bias); the running sum of the live nodes' noise `nsum` loses the
// nodes leaf `leaf` closes (lowest level first) and gains node `leaf`'s own
// (a power of two closes every node: nsum restarts as node `leaf`'s noise).
// Each node's noise is regenerated from its key, fold_more(akey, node).
FB_DEV void fb_tree_insert_entry(long long g, int d, int e, fb_u64 leaf, int dubey, double sigma, fb_u64 akey,
                                 const double* gram, const double* bias, double* tsum, double* nsum) {
    int dd = d * d;
    long long t = g * (dd + d) + e;
    tsum[t] += e < dd ? gram[g * dd + e] : bias[g * d + (e - dd)];
    double fresh = fb_node_noise_entry(dubey, fb_fold_more(akey, leaf), d, e, sigma);
    if ((leaf & (leaf - 1)) == 0) {
        nsum[t] = fresh;
        return;
    }
    double v = nsum[t];
    int level = FB_CTZ64(leaf);
    for (int j = 0; j < level; ++j) {
        fb_u64 node = ((leaf - 1) >> j) << j;
        v -= fb_node_noise_entry(dubey, fb_fold_more(akey, node), d, e, sigma);
    }
    nsum[t] = v + fresh;
}

// Per (agent, entry): leaf `leaf` (or each federation's from `leaves`) of
// every agent's tree in the federations of `mask` (null: all).
extern "C" __global__ void fb_tree_insert(int n, int m, int d, fb_u64 leaf, const fb_u64* leaves, const int* mask,
                                          int dubey, double sigma, const fb_u64* akey, const double* gram,
                                          const double* bias, double* tsum, double* nsum) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int dd = d * d, width = dd + d;
    if (t >= (long long)n * width) return;
    long long g = t / width;
    int e = (int)(t % width);
    if (mask && !mask[g / m]) return;
    if (leaves) leaf = leaves[g / m];
    fb_tree_insert_entry(g, d, e, leaf, dubey, sigma, akey[g], gram, bias, tsum, nsum);
}

// Entry e of federation f's server output at a sync. Mode 1 (a tree
// release): the sum over agents (in order) of each agent's release, its
// exact running sum plus its live nodes' noise sum, exactly the CPU's
// AgentTrees::contribute order; base = lambda I + Gram part, u_syn = bias
// part. Mode 2 (cumulative): the running total of every agent's local sums.
// Mode 0 (exact): base += sum of the agents' local sums. The agents' sums
// are loaded past the L1 (FB_LDCG): in fb_feducb_rounds other blocks wrote
// them.
FB_DEV void fb_sync_reduce_entry(long long f, int e, int m, int d, int mode, double lambda, const double* tsum,
                                 const double* nsum, double* total, const double* gram, const double* bias,
                                 double* base, double* usyn) {
    int dd = d * d, width = dd + d;
    long long t = f * width + e;
    if (mode == 2) {
        // Release::Cumulative: the federation's running total of every leaf,
        // agents in order, then lambda I + its Gram part.
        double s = total[t];
        for (int i = 0; i < m; ++i) {
            long long g = f * m + i;
            s += e < dd ? FB_LDCG(gram + g * dd + e) : FB_LDCG(bias + g * d + (e - dd));
        }
        total[t] = s;
        if (e < dd) {
            double diag = (e / d == e % d) ? lambda : 0.0;
            base[f * dd + e] = diag + s;
        } else {
            usyn[f * d + (e - dd)] = s;
        }
        return;
    }
    if (mode == 1) {
        double s = 0.0;
        for (int i = 0; i < m; ++i) {
            long long g = f * m + i;
            s += FB_LDCG(tsum + g * width + e);
            s += FB_LDCG(nsum + g * width + e);
        }
        if (e < dd) {
            double diag = (e / d == e % d) ? lambda : 0.0;
            base[f * dd + e] = diag + s;
        } else {
            usyn[f * d + (e - dd)] = s;
        }
        return;
    }
    double out;
    if (e < dd) {
        out = base[f * dd + e];
        for (int i = 0; i < m; ++i) out += FB_LDCG(gram + (f * m + i) * dd + e);
        base[f * dd + e] = out;
    } else {
        out = usyn[f * d + (e - dd)];
        for (int i = 0; i < m; ++i) out += FB_LDCG(bias + (f * m + i) * d + (e - dd));
        usyn[f * d + (e - dd)] = out;
    }
}

// Per (federation, entry), for the federations in `mask` (null: all): the
// server's output at a sync (fb_sync_reduce_entry).
extern "C" __global__ void fb_sync_reduce(int nfed, int m, int d, int mode, const int* mask, double lambda,
                                          const double* tsum, const double* nsum, double* total,
                                          const double* gram, const double* bias, double* base, double* usyn) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int width = d * d + d;
    if (t >= (long long)nfed * width) return;
    long long f = t / width;
    if (mask && !mask[f]) return;
    fb_sync_reduce_entry(f, (int)(t % width), m, d, mode, lambda, tsum, nsum, total, gram, bias, base, usyn);
}

// Per federation: V^{-1} and log det of base_f into agent 0's slots.
extern "C" __global__ void fb_sync_factor(int nfed, int m, int d, const int* mask, const double* base, double* vinv,
                                          double* logdet, double* scratch, int* failures) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= nfed || (mask && !mask[f])) return;
    int dd = d * d;
    long long g0 = (long long)f * m;
    double ld;
    double* s = scratch + (long long)f * 2 * dd;
    double jitter = fb_spd_inverse_jitter(base + (long long)f * dd, d, vinv + g0 * dd, s, s + dd, &ld);
    if (jitter >= 0.0) logdet[g0] = ld;
    if (jitter != 0.0) failures[f] += 1;
}

// Per agent: after a sync every agent gets agent 0's V^{-1} and log det,
// b = u_syn, and empty local sums.
extern "C" __global__ void fb_sync_broadcast(int n, int m, int d, const int* mask, const double* usyn, double* vinv,
                                             double* logdet, double* b, double* gram, double* bias) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    int f = g / m, dd = d * d;
    if (mask && !mask[f]) return;
    long long g0 = (long long)f * m;
    if (g != g0) {
        for (int e = 0; e < dd; ++e) vinv[(long long)g * dd + e] = vinv[g0 * dd + e];
        logdet[g] = logdet[g0];
    }
    for (int e = 0; e < d; ++e) b[(long long)g * d + e] = usyn[(long long)f * d + e];
    for (int e = 0; e < dd; ++e) gram[(long long)g * dd + e] = 0.0;
    for (int e = 0; e < d; ++e) bias[(long long)g * d + e] = 0.0;
}

// ------------------------------------------------- cooperative scoring

// Threads per agent of the cooperative kernels: one warp. The first
// FB_LANES of them draw the decision set's xoshiro lanes; all of them split
// the actions (scoring, means) and the rows (theta_hat, Sherman-Morrison).
#define FB_COOP_LANES 32
// Threads per block of fb_linear_rounds_coop (4 agents), and the blocks per
// SM its register budget must allow (src/algo/linear/cuda/mod.rs COOP_BLOCK).
#define FB_COOP_BLOCK 128
#define FB_COOP_MIN_BLOCKS 8
// fb_feducb_rounds' budget: its events need more registers.
#define FB_FED_MIN_BLOCKS 6

// Keeps the better of two (score, index, quad) candidates: higher score,
// lower index on ties (the CPU scorer's Best::finish).
FB_DEV void fb_argmax_combine(double* s, int* i, double* q, double os, int oi, double oq) {
    if (os > *s || (os == *s && oi < *i)) {
        *s = os;
        *i = oi;
        *q = oq;
    }
}

// One lane's share of the UCB argmax: actions lane, lane + FB_COOP_LANES, ... < k, each
// scored <theta, x> + beta sqrt(x^T A x) with exactly the CPU scorer's
// operation order (backend/cpu.rs score_group: symmetric quadratic form, fma
// where it uses mul_add); `x(j, c)` gives coordinate j of action c, read
// once per coordinate into the lane's scratch `xc` (d doubles) so that a
// recomputed decision set costs d evaluations per action, not d^2 / 2. Keeps
// the lane's best (strictly greater score wins, so the lowest index among
// equals); combine lanes with fb_argmax_combine.
template <typename X>
FB_DEV void fb_lane_argmax(const double* A, const double* th, int d, int k, int lane, double beta, X x, double* xc,
                           double* bs, int* bi, double* bq) {
    for (int c = lane; c < k; c += FB_COOP_LANES) {
        for (int j = 0; j < d; ++j) xc[j] = x(j, c);
        double mu = 0.0, quad = 0.0;
        for (int i = 0; i < d; ++i) {
            double t = 0.0;
            for (int j = i + 1; j < d; ++j) t = fma(A[i * d + j], xc[j], t);
            double xi = xc[i];
            double inner = fma(A[i * d + i], xi, 2.0 * t);
            quad = fma(xi, inner, quad);
            mu = fma(th[i], xi, mu);
        }
        double s = fma(beta, sqrt(fmax(quad, 0.0)), mu);
        if (s > *bs) {
            *bs = s;
            *bi = c;
            *bq = quad;
        }
    }
}

// fb_lane_argmax without the lane's scratch (the multi-round kernels):
// `x(j, c)` is evaluated where coordinate j is used, d (d + 1) / 2 + d
// times per action instead of d; the same values in the same operations,
// so the same bits. What it saves is FB_COOP_LANES x d doubles of shared
// memory per agent (2.5 KiB at d = 10), which bounded the blocks per SM
// (kernels/README.md's occupancy table).
template <typename X>
FB_DEV void fb_lane_argmax_direct(const double* A, const double* th, int d, int k, int lane, double beta, X x,
                                  double* bs, int* bi, double* bq) {
    for (int c = lane; c < k; c += FB_COOP_LANES) {
        double mu = 0.0, quad = 0.0;
        for (int i = 0; i < d; ++i) {
            double t = 0.0;
            for (int j = i + 1; j < d; ++j) t = fma(A[i * d + j], x(j, c), t);
            double xi = x(i, c);
            double inner = fma(A[i * d + i], xi, 2.0 * t);
            quad = fma(xi, inner, quad);
            mu = fma(th[i], xi, mu);
        }
        double s = fma(beta, sqrt(fmax(quad, 0.0)), mu);
        if (s > *bs) {
            *bs = s;
            *bi = c;
            *bq = quad;
        }
    }
}

// Combines the candidates of an agent's FB_COOP_LANES lanes through warp
// shuffles; afterwards every lane holds the agent's argmax.
FB_DEV void fb_lanes_combine(double* bs, int* bi, double* bq) {
    for (int msk = 1; msk < FB_COOP_LANES; msk <<= 1) {
        double os = FB_SHFL_XOR_F64(*bs, msk);
        int oi = FB_SHFL_XOR_I32(*bi, msk);
        double oq = FB_SHFL_XOR_F64(*bq, msk);
        fb_argmax_combine(bs, bi, bq, os, oi, oq);
    }
}

// UCB scoring with FB_COOP_LANES threads per agent: lane l scores actions
// l, l + FB_COOP_LANES, ... with exactly the CPU scorer's operation order per
// action (backend/cpu.rs score_argmax; the argmax, lowest index on ties, does
// not depend on how the actions are split),
// then the lanes combine their candidates through warp shuffles, so the
// chosen arm and its x^T A x equal the CPU's bit for bit. Reads of the
// column-major decision set are coalesced across lanes (consecutive
// actions). V^{-1} and theta of the block's agents are staged in dynamic
// shared memory when `stage` is set (blockDim / FB_COOP_LANES agents x (d^2 + d)
// doubles), else read from global memory. Every thread reaches every barrier
// and shuffle (agents past n compute nothing and write nothing).
// x: n x (d x kp); a: n x d x d; theta: n x d. blockDim.x: a multiple of 32.
extern "C" __global__ void fb_score_coop(int n, int d, int k, int kp, int stage, double beta, const double* x,
                                         const double* a, const double* theta, int* arm_out, double* quad_out) {
    int lane = threadIdx.x % FB_COOP_LANES;
    int local = threadIdx.x / FB_COOP_LANES;
    int per_block = blockDim.x / FB_COOP_LANES;
    long long g = (long long)blockIdx.x * per_block + local;
    bool live = g < n;
    int dd = d * d;
    FB_DYN_SHARED(double, smem);
    const double* A = a + (live ? g : 0) * dd;
    const double* th = theta + (live ? g : 0) * d;
    // Per agent: [V^{-1}, theta] when staged, then each lane's x scratch.
    long long per = (stage ? dd + d : 0) + (long long)FB_COOP_LANES * d;
    double* xc = smem + local * per + (stage ? dd + d : 0) + lane * d;
    if (stage) {
        double* As = smem + (long long)local * per;
        if (live) {
            for (int e = lane; e < dd; e += FB_COOP_LANES) As[e] = A[e];
            for (int e = lane; e < d; e += FB_COOP_LANES) As[dd + e] = th[e];
        }
        A = As;
        th = As + dd;
    }
    __syncthreads();
    double bs = FB_NEG_INF, bq = 0.0;
    int bi = 0;
    if (live) {
        const double* xs = x + g * d * kp;
        fb_lane_argmax(A, th, d, k, lane, beta, [=](int j, int c) { return xs[j * kp + c]; }, xc, &bs, &bi, &bq);
    }
    fb_lanes_combine(&bs, &bi, &bq);
    if (live && lane == 0) {
        arm_out[g] = bi;
        quad_out[g] = bq;
    }
}
