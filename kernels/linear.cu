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

// Per (agent, entry): leaf `leaf` of every agent's tree (privacy/tree.rs,
// AgentTrees::contribute). The exact running sum `tsum` takes the local sums
// (gram, bias); the running sum of the live nodes' noise `nsum` loses the
// nodes leaf `leaf` closes (lowest level first) and gains node `leaf`'s own
// (a power of two closes every node: nsum restarts as node `leaf`'s noise).
// Each node's noise is regenerated from its key, fold_more(akey, node).
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
    tsum[t] += e < dd ? gram[g * dd + e] : bias[g * d + (e - dd)];
    double fresh = fb_node_noise_entry(dubey, fb_fold_more(akey[g], leaf), d, e, sigma);
    if ((leaf & (leaf - 1)) == 0) {
        nsum[t] = fresh;
        return;
    }
    double v = nsum[t];
    int level = FB_CTZ64(leaf);
    for (int j = 0; j < level; ++j) {
        fb_u64 node = ((leaf - 1) >> j) << j;
        v -= fb_node_noise_entry(dubey, fb_fold_more(akey[g], node), d, e, sigma);
    }
    nsum[t] = v + fresh;
}

// Per (federation, entry), for the federations in `mask` (null: all): the
// server's output at a sync. Mode 1 (a tree release): the sum over agents
// (in order) of each agent's release, its exact running sum plus its live
// nodes' noise sum, exactly the CPU's AgentTrees::contribute order; base =
// lambda I + Gram part, u_syn = bias part. Mode 2 (cumulative): the running
// total of every agent's local sums. Mode 0 (exact): base += sum of the
// agents' local sums.
extern "C" __global__ void fb_sync_reduce(int nfed, int m, int d, int mode, const int* mask, double lambda,
                                          const double* tsum, const double* nsum, double* total,
                                          const double* gram, const double* bias, double* base, double* usyn) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int dd = d * d, width = dd + d;
    if (t >= (long long)nfed * width) return;
    long long f = t / width;
    int e = (int)(t % width);
    if (mask && !mask[f]) return;
    if (mode == 2) {
        // Release::Cumulative: the federation's running total of every leaf,
        // agents in order, then lambda I + its Gram part.
        double s = total[t];
        for (int i = 0; i < m; ++i) {
            long long g = f * m + i;
            s += e < dd ? gram[g * dd + e] : bias[g * d + (e - dd)];
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
            s += tsum[g * width + e];
            s += nsum[g * width + e];
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
        for (int i = 0; i < m; ++i) out += gram[(f * m + i) * dd + e];
        base[f * dd + e] = out;
    } else {
        out = usyn[f * d + (e - dd)];
        for (int i = 0; i < m; ++i) out += bias[(f * m + i) * d + (e - dd)];
        usyn[f * d + (e - dd)] = out;
    }
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
#define FB_COOP_MIN_BLOCKS 6

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

// ------------------------------------------- cooperative fused step

// Coordinate j of action c of an agent's linear_sphere decision set,
// computed from the round's normals `g` ([coordinate][random action], f32)
// and inverse norms `inv` exactly as fb_draw_sphere / linear_sphere::draw
// write it, so the set is never stored.
FB_DEV double fb_sphere_x(int j, int c, int d, int fixed, int nr, const float* g, const double* inv) {
    const double inv_sqrt2 = 0.7071067811865476;
    int last = d - 1;
    if (c < fixed) {
        double norm = c < last ? 1.4142135623730951 : 1.0;
        if ((c < last && j == c) || j == last) return 1.0 / norm;
        return 0.0;
    }
    int a = c - fixed;
    if (j == last) return inv_sqrt2;
    double z = (double)g[j * nr + a] * inv[a];
    return z * inv_sqrt2;
}

// 1 / sqrt(n2) for n2 > 0 as env::inv_norm computes it: the exactly
// rounded f32 estimate and one Newton step in f64.
FB_DEV double fb_inv_norm(double n2) {
    double y0 = (double)(1.0f / sqrtf((float)n2));
    return y0 * (1.5 - 0.5 * n2 * y0 * y0);
}

// Coordinate j of action c of an agent's linear_gap decision set
// (env/linear_gap.rs, the Householder construction):
// x_0 = `x0`[c], and x_j = fma(c, h_j, alpha theta_j) for j >= 1 from the
// round's f32 normals `g` (h's coordinates 1..d: [coordinate - 1][action]),
// `alpha` and the scale `cs`, with the CPU's operations, so the set is
// never stored.
FB_DEV double fb_gap_x(int j, int c, int k, const double* th, const float* g, const double* alpha, const double* cs,
                       const double* x0) {
    return j == 0 ? x0[c] : fma(cs[c], (double)g[(j - 1) * k + c], alpha[c] * th[j]);
}

// Doubles of dynamic shared memory one agent of fb_linear_rounds_coop uses
// (src/algo/linear/cuda/mod.rs coop_step_shape repeats this): V^{-1} (d*d),
// mean (kp), aux (kp: inverse norms or projections), theta_hat, w,
// x_chosen, b (d each), 4 scalars, the lanes' x scratch (FB_COOP_LANES d); linear_gap
// adds the scales (kp) and the
// round's uniforms (2 kp); then the f32 normals (sphere (K - d)(d - 1),
// gap K (d - 1)), rounded up to whole doubles.
FB_DEV long long fb_coop_agent_doubles(int gap, int d, int k, int kp) {
    int fixed = d < k ? d : k;
    long long normals = gap ? (long long)k * (d - 1) : (long long)(k - fixed) * (d - 1);
    return (long long)d * d + 2LL * kp + (4LL + FB_COOP_LANES) * d + 4 + (gap ? 3LL * kp : 0) + (normals + 1) / 2;
}

// `rounds` consecutive rounds of every agent with FB_COOP_LANES threads per
// agent (the cooperative, multi-round form of fb_linear_step; the same
// results bit for bit). The driver ends a launch at every event that needs
// other kernels (refactorization, sync, checkpoint), so the rounds of one
// launch touch only the agent's own state: V^{-1} and b stay in shared
// memory for all of them, and log det and the regret in registers. Per
// round: lane l < FB_LANES draws the normals of xoshiro lane l (the 8 lanes
// of a decision set's stream are independent); all FB_COOP_LANES lanes split
// the inverse norms and means over actions, theta_hat and the
// Sherman-Morrison update over rows, and the UCB scores over actions (lane
// l: actions l, l + FB_COOP_LANES, ...; combined by warp shuffles, lowest
// index on ties). Blocks of FB_COOP_BLOCK threads (4 agents), registers
// budgeted for FB_COOP_MIN_BLOCKS blocks per SM. The decision set is never
// written to global memory (its coordinates are recomputed from the normals
// when scored). Round r's regret of agent g goes to rr[r * n + g] for
// fb_rounds_reduce. Every thread reaches every barrier and shuffle.
extern "C" __global__ void FB_LAUNCH_BOUNDS(FB_COOP_BLOCK, FB_COOP_MIN_BLOCKS) fb_linear_rounds_coop(int n, int m, int d, int k, int kp, int reward_raw,
                                                 double noise_std, double reward_bound, int gap, fb_u64* ustate,
                                                 int random_policy, fb_u64* pstate, int rounds,
                                                 const double* betas, const double* widths, double wscale,
                                                 double wsigma, fb_u64* clamps, double* xlast, double* ylast,
                                                 const double* theta_star, fb_u64* lanes,
                                                 fb_u64* rstate, double* rspare, int* rhas, double* vinv,
                                                 double* logdet, double* b, double* gram, double* bias,
                                                 double* regret, fb_u64* clipped, double* rr) {
    int lane = threadIdx.x % FB_COOP_LANES;
    int local = threadIdx.x / FB_COOP_LANES;
    int per_block = blockDim.x / FB_COOP_LANES;
    long long g = (long long)blockIdx.x * per_block + local;
    bool live = g < n;
    long long gg = live ? g : 0;
    int dd = d * d, last = d - 1;
    int fixed = d < k ? d : k;
    int nr = k - fixed;
    long long per = fb_coop_agent_doubles(gap, d, k, kp);
    FB_DYN_SHARED(double, smem);
    double* A = smem + local * per;
    double* mean = A + dd;
    double* inv = mean + kp;  // sphere: inverse norms; gap: alpha = v - c beta <h, theta>
    double* that = inv + kp;
    double* w = that + d;
    double* xs = w + d;
    double* bs_ = xs + d;
    double* sc = bs_ + d;                 // [0] y, [1] mu, [2] optimal index, [3] random pick
    double* xc = sc + 4 + lane * d;       // this lane's x scratch (FB_COOP_LANES x d)
    double* cs = sc + 4 + FB_COOP_LANES * d;  // gap: scales (kp), then uniforms (2 kp)
    double* un = cs + kp;  // gap: v's offsets (then x_0, once v is formed) and r
    float* gn = (float*)(gap ? un + 2 * kp : cs);
    int total = gap ? k * last : nr * last;  // normals per round
    const double* th = theta_star + (gg / m) * d;
    fb_u64* st = lanes + gg * 32;
    fb_u64 s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    bool draws = lane < FB_LANES;  // this lane holds xoshiro lane `lane`
    double ld = 0.0, reg = 0.0;
    if (live) {
        for (int e = lane; e < dd; e += FB_COOP_LANES) A[e] = vinv[gg * dd + e];
        for (int e = lane; e < d; e += FB_COOP_LANES) bs_[e] = b[gg * d + e];
        if (draws) {
            s0 = st[lane];
            s1 = st[8 + lane];
            s2 = st[16 + lane];
            s3 = st[24 + lane];
        }
        ld = logdet[gg];
        reg = regret[gg];
    }
    for (int r = 0; r < rounds; ++r) {
        double beta = widths ? 0.0 : betas[r];
        if (widths && live) {
            // Proposition 2's width from the agent's own log det V
            // (backend::logdet_width): a negative argument is clamped and
            // counted (lane 0).
            const double* w3 = widths + gg * 3;
            double arg = w3[0] + ld;
            beta = wscale * (wsigma * sqrt(fmax(arg, 0.0)) + w3[1] + w3[2]);
            if (lane == 0 && arg < 0.0) clamps[gg] += 1;
        }
        __syncthreads();
        // This lane's share of the round's normals (then, for linear_gap, the
        // optimal index from the scalar stream and this lane's uniforms).
        if (total > 0) {
            // Two blocks of FB_NORMALS_PER_BLOCK normals at a time: lane l <
            // FB_LANES steps its xoshiro lane twice per block, in order, and
            // leaves the words in the agent's x scratch (word q of lane l at
            // 8 q + l; two halves, alternating, so one barrier a pass
            // suffices); lane L then transforms word L / 8 of lane L % 8,
            // which holds positions p = 8 h + l of block L / 16 (h = L / 8 %
            // 2), as that lane itself would: the same normals, bit for bit,
            // with every lane doing Box-Muller. Block-uniform (agents past n
            // take part and write nothing): every thread reaches every barrier.
            fb_u64* words = (fb_u64*)(sc + 4);  // 2 x 32 words (FB_COOP_LANES d >= 64 doubles)
            int blocks = (total + FB_NORMALS_PER_BLOCK - 1) / FB_NORMALS_PER_BLOCK;
            for (int b0 = 0; b0 < blocks; b0 += 2) {
                int nb = blocks - b0 < 2 ? blocks - b0 : 2;
                fb_u64* half = words + ((b0 >> 1) & 1) * 32;
                if (live && draws)
                    for (int step = 0; step < 2 * nb; ++step) half[step * FB_LANES + lane] = fb_lane_step(&s0, &s1, &s2, &s3);
                __syncthreads();
                int blk = lane >> 4;
                if (live && blk < nb) {
                    fb_u64 mine = half[lane];  // word lane / 8 of lane lane % 8
                    int base = (b0 + blk) * FB_NORMALS_PER_BLOCK;
                    int p = ((lane >> 3) & 1) * FB_LANES + (lane & 7);
                    float c, s;
                    fb_box_muller((fb_u32)(mine >> 32), (fb_u32)mine, &c, &s);
                    if (base + p < total) gn[base + p] = c;
                    if (base + 2 * FB_LANES + p < total) gn[base + 2 * FB_LANES + p] = s;
                }
            }
        }
        if (live && gap) {
            if (lane == 0) {
                fb_u64 word = fb_xoshiro_next(ustate + gg * 4);
                sc[2] = (double)FB_MULHI(word, (fb_u64)k);
            }
            for (int c0 = 0; draws && c0 < 2 * k; c0 += FB_LANES) {
                fb_u64 word = fb_lane_step(&s0, &s1, &s2, &s3);
                if (c0 + lane < 2 * k) un[c0 + lane] = (double)(word >> 11) * 1.1102230246251565e-16;
            }
        }
        __syncthreads();
        // Per action: the decision set's scalars and true means; theta_hat by row.
        double best = FB_NEG_INF;
        if (live && gap) {
            // The reflection's constants (linear_gap::Householder).
            int opt = (int)sc[2];
            double t0 = th[0];
            bool negative = t0 < 0.0;
            double hb = 1.0 / (1.0 + fabs(t0));
            for (int c = lane; c < k; c += FB_COOP_LANES) {
                double v = (c == opt ? 0.7 : 0.5) + 0.1 * un[c];
                double sp = 0.0, h2 = 0.0;
                for (int j = 1; j < d; ++j) {
                    double hv = (double)gn[(j - 1) * k + c];
                    sp = fma(th[j], hv, sp);
                    h2 = fma(hv, hv, h2);
                }
                double s = 1.0 - v * v;
                double cc = h2 > 1e-24 ? un[k + c] * (s * fb_inv_norm(s)) * fb_inv_norm(h2) : 0.0;
                double ss = negative ? -sp : sp;
                mean[c] = v;
                un[c] = fma(v, t0, -(cc * ss));  // x_0 (this lane's own entry, read above)
                inv[c] = v - cc * (hb * sp);
                cs[c] = cc;
                best = fmax(best, v);
            }
        }
        if (live && !gap) {
            for (int c = lane; c < k; c += FB_COOP_LANES) {
                double mv;
                if (c < fixed) {
                    double raw_mean = c < last ? th[c] + th[last] : th[last];
                    double norm = c < last ? 1.4142135623730951 : 1.0;
                    mv = reward_raw ? raw_mean : raw_mean / norm;
                } else {
                    int a = c - fixed;
                    double n2 = 0.0;
                    for (int j = 0; j < last; ++j) {
                        double v = (double)gn[j * nr + a];
                        n2 += v * v;
                    }
                    double y0 = (double)(1.0f / sqrtf((float)n2));
                    double iv = y0 * (1.5 - 0.5 * n2 * y0 * y0);
                    inv[a] = iv;
                    double mm = th[last];
                    for (int j = 0; j < last; ++j) {
                        double z = (double)gn[j * nr + a] * iv;
                        mm += th[j] * z;
                    }
                    mv = reward_raw ? mm : mm * 0.7071067811865476;
                }
                mean[c] = mv;
                best = fmax(best, mv);
            }
        }
        if (live) {
            for (int i = lane; i < d; i += FB_COOP_LANES) {
                double s = 0.0;
                for (int j = 0; j < d; ++j) s += A[i * d + j] * bs_[j];
                that[i] = s;
            }
        }
        for (int msk = 1; msk < FB_COOP_LANES; msk <<= 1) best = fmax(best, FB_SHFL_XOR_F64(best, msk));
        __syncthreads();
        // UCB scores by action, argmax across lanes.
        double bsc = FB_NEG_INF, bq = 0.0;
        int bi = 0;
        if (live && !random_policy) {
            fb_lane_argmax(A, that, d, k, lane, beta,
                           [=](int j, int c) {
                               return gap ? fb_gap_x(j, c, k, th, gn, inv, cs, un)
                                          : fb_sphere_x(j, c, d, fixed, nr, gn, inv);
                           },
                           xc, &bsc, &bi, &bq);
        }
        fb_lanes_combine(&bsc, &bi, &bq);
        if (random_policy) {
            // `random`: a uniform action from the agent's policy stream.
            if (live && lane == 0) sc[3] = (double)FB_MULHI(fb_xoshiro_next(pstate + gg * 4), (fb_u64)k);
            __syncthreads();
            bi = (int)sc[3];
        }
        // The chosen action; the reward (lane 0).
        if (live) {
            for (int j = lane; j < d; j += FB_COOP_LANES)
                xs[j] = gap ? fb_gap_x(j, bi, k, th, gn, inv, cs, un) : fb_sphere_x(j, bi, d, fixed, nr, gn, inv);
            if (lane == 0) {
                double mu = mean[bi];
                sc[1] = mu;
                // linear_gap: Bernoulli(mu) (Stream::bernoulli); sphere: Gaussian noise.
                double y0 = gap ? (fb_uniform(rstate + gg * 4) < mu ? 1.0 : 0.0)
                                : mu + noise_std * fb_normal(rstate + gg * 4, rspare + gg, rhas + gg);
                sc[0] = fb_clip_reward(y0, reward_bound);
                if (sc[0] != y0) clipped[gg] += 1;
                // The round's reward and whether clipping changed it (the
                // vector-summation protocol's point, fb_vecsum_add).
                if (ylast) {
                    ylast[2 * gg] = sc[0];
                    ylast[2 * gg + 1] = sc[0] != y0 ? 1.0 : 0.0;
                }
            }
        }
        __syncthreads();
        // Sherman-Morrison: w = A x by row; q (every lane, same order); A by
        // row (`random` does not learn).
        if (live && !random_policy) {
            for (int i = lane; i < d; i += FB_COOP_LANES) {
                double s = 0.0;
                for (int j = 0; j < d; ++j) s += A[i * d + j] * xs[j];
                w[i] = s;
            }
        }
        __syncthreads();
        if (live && !random_policy) {
            double q = 0.0;
            for (int i = 0; i < d; ++i) q += w[i] * xs[i];
            double c = -1.0 / (1.0 + q);
            double y = sc[0];
            for (int i = lane; i < d; i += FB_COOP_LANES) {
                double cwi = c * w[i];
                for (int j = 0; j < d; ++j) {
                    A[i * d + j] += cwi * w[j];
                    gram[gg * dd + i * d + j] += xs[i] * xs[j];
                }
                bs_[i] += y * xs[i];
                bias[gg * d + i] += y * xs[i];
            }
            ld += fb_ln_1p(q);
        }
        if (live) {
            double rg = best - sc[1];
            reg += rg;
            if (lane == 0) rr[(long long)r * n + gg] = rg;
            // The round's action, for the determinant test (fb_det_test).
            if (xlast)
                for (int j = lane; j < d; j += FB_COOP_LANES) xlast[gg * d + j] = xs[j];
        }
    }
    __syncthreads();
    if (live) {
        for (int e = lane; e < dd; e += FB_COOP_LANES) vinv[gg * dd + e] = A[e];
        for (int e = lane; e < d; e += FB_COOP_LANES) b[gg * d + e] = bs_[e];
        if (draws) {
            st[lane] = s0;
            st[8 + lane] = s1;
            st[16 + lane] = s2;
            st[24 + lane] = s3;
        }
        if (lane == 0) {
            logdet[gg] = ld;
            regret[gg] = reg;
        }
    }
}

// Per federation: group += the agents' regret (summed in agent order) of
// each of `rounds` rounds in turn (fb_round_reduce over a chunk of rounds).
extern "C" __global__ void fb_rounds_reduce(int nfed, int m, int rounds, const double* rr, double* group) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= nfed) return;
    long long n = (long long)nfed * m;
    double gsum = group[f];
    for (int r = 0; r < rounds; ++r) {
        double s = 0.0;
        for (int i = 0; i < m; ++i) s += rr[(long long)r * n + (long long)f * m + i];
        gsum += s;
    }
    group[f] = gsum;
}
