// fedbandits: the decentralized multi-armed family's rounds (Zhu et al.;
// src/algo/gossip/batch.rs, the CPU form in src/algo/gossip/cpu.rs).
//
// One block per federation, one thread per agent (blockDim a multiple of 32
// >= N; threads >= N only take part in the barriers), `count` rounds per
// launch: the agents interact every round (oracle means, network-count
// estimates, the gossip edge), so a round is a sequence of phases separated
// by barriers, and a launch needs no host round trip between rounds.
// Arrays are federation-major, then agent-major rows of M arms:
// element e = (f * N + i) * M + k.
#include "common.cuh"

#define FB_GOSSIP 0
#define FB_LOCAL 1
#define FB_ORACLE 2
#define FB_LN2 0.6931471805599453

// privacy::partial_sum::block_key and laplace.
FB_DEV double fb_laplace_block(fb_u64 key, fb_u64 end, int level, double scale) {
    fb_u64 k = fb_fold_more(fb_fold_more(key, end), (fb_u64)level);
    double v = fb_uniform_at(k, 0) - 0.5;
    double mag = -scale * fb_ln(1.0 - 2.0 * fabs(v));
    return v < 0.0 ? -mag : mag;
}

// PartialSum::push then release, for one (agent, arm) at round t.
FB_DEV double fb_partial_sum(double* sum, fb_u64* mask, fb_u64 t, int pulled, double x, fb_u64 key, double scale) {
    int j = FB_CTZ64(t);
    fb_u64 below = (1ull << j) - 1ull;
    int merged = pulled || ((*mask & below) != 0ull);
    fb_u64 keep = ~((below << 1) | 1ull);
    *mask = (*mask & keep) | ((fb_u64)merged << j);
    if (pulled) *sum += x;
    double out = *sum;
    fb_u64 bits = t & *mask;
    while (bits != 0ull) {
        int l = FB_CTZ64(bits);
        out += fb_laplace_block(key, (t >> l) << l, l, scale);
        bits &= bits - 1ull;
    }
    return out;
}

// privacy::lattice::DiscreteLaplace::draw: the block's discrete Laplace
// draw (P(z) proportional to exp(-|z| s / t)) from its own keyed words; a
// draw beyond 64 bits (never, in practice) saturates as on the CPU.
FB_DEV long long fb_lattice_block(fb_u64 key, fb_u64 end, int level, fb_u64 s, fb_u64 t) {
    fb_keyed_bits b;
    b.key = fb_fold_more(fb_fold_more(key, end), (fb_u64)level);
    b.next = 0;
    long long z = 0;
    if (fb_discrete_laplace(&b, s, t, &z) != 0) return 0x7FFFFFFFFFFFFFFFll;
    return z;
}

// DiscretePartialSum::push then release (sampler: discrete), in lattice
// steps: the blocks round t closes leave the running noise sum, the block
// it forms (when it holds an observation) enters it.
FB_DEV long long fb_lattice_partial_sum(long long* sum, long long* noise, fb_u64* mask, fb_u64 t, int pulled,
                                        long long x, fb_u64 key, fb_u64 s, fb_u64 tt) {
    int j = FB_CTZ64(t);
    fb_u64 below = (1ull << j) - 1ull;
    fb_u64 closed = *mask & below;
    while (closed != 0ull) {
        int l = FB_CTZ64(closed);
        *noise -= fb_lattice_block(key, ((t - 1ull) >> l) << l, l, s, tt);
        closed &= closed - 1ull;
    }
    int merged = pulled || ((*mask & below) != 0ull);
    fb_u64 keep = ~((below << 1) | 1ull);
    *mask = (*mask & keep) | ((fb_u64)merged << j);
    if (merged) *noise += fb_lattice_block(key, t, j, s, tt);
    if (pulled) *sum += x;
    return *sum + *noise;
}

// The confidence width of a count (Fed::round's `width`).
FB_DEV double fb_gossip_width(fb_u64 cnt, double c, double lt, double log2_t, int priv, double c_priv, double log2_h,
                              double eps) {
    double nn = (double)cnt;
    double base = sqrt(2.0 * c * lt / nn);
    if (priv) return base + c_priv * log2_h * log2_t * fb_ln(nn) / (eps * nn);
    return base;
}

// The rounds, once: LATTICE selects the lattice partial sums (sampler:
// discrete) at compile time, so the float kernel keeps its registers.
template <int LATTICE>
FB_DEV void fb_gossip_rounds_t(
    int n, int m, int policy, int priv, double c, double c_priv, double log2_h, double eps, double scale, double lo,
    double hi, fb_u64 lap_s, fb_u64 lap_t, fb_u64 t0, int count, const double* local_means, const double* means, const double* best,
    int records, const fb_u64* rec_total, const fb_u64* rec_ones, double noise_std, const int* adj_off,
    const int* adj, const int* edges, const int* edge_off, fb_u64* nstate, double* nspare, int* nhas,
    fb_u64* estate, const fb_u64* nkeys, fb_u64* cnt, fb_u64* nt, fb_u64* ntp, double* sum, double* pssum,
    fb_u64* psmask, long long* lsum, long long* lnoise, double* xbar, double* xold, double* theta, double* regret, double* group, fb_u64* forced,
    fb_u64* clipped, double* rr) {
    const int discrete = LATTICE;
    int f = blockIdx.x;
    int i = threadIdx.x;
    int active = i < n;
    fb_u64 row = ((fb_u64)f * n + i) * m;  // this agent's first element
    fb_u64 fed = (fb_u64)f * n * m;        // the federation's first element
    for (int r = 0; r < count; ++r) {
        fb_u64 t = t0 + (fb_u64)r;
        double lt = fb_ln((double)t);
        double log2_t = lt / FB_LN2;
        int init = t <= (fb_u64)m;
        // 1. Choose, from the previous round's state.
        int arm = 0;
        if (active) {
            if (init) {
                arm = (int)(t - 1);
            } else if (policy == FB_ORACLE) {
                double bv = -1.0 / 0.0;
                for (int k = 0; k < m; ++k) {
                    double s = 0.0;
                    fb_u64 ct = 0;
                    for (int a = 0; a < n; ++a) {
                        s += xbar[fed + (fb_u64)a * m + k];
                        ct += cnt[fed + (fb_u64)a * m + k];
                    }
                    double v = s / (double)n + sqrt(2.0 * c * lt / (double)ct);
                    if (v > bv) {
                        bv = v;
                        arm = k;
                    }
                }
            } else {
                int lag = -1;
                if (policy == FB_GOSSIP) {
                    for (int k = 0; k < m; ++k) {
                        fb_u64 e = row + k;
                        if (cnt[e] + (fb_u64)n < nt[e] && (lag < 0 || cnt[e] < cnt[row + lag])) lag = k;
                    }
                }
                if (lag >= 0) {
                    arm = lag;
                    forced[(fb_u64)f * n + i] += 1;
                } else {
                    const double* est = policy == FB_GOSSIP ? theta : xbar;
                    double bv = -1.0 / 0.0;
                    for (int k = 0; k < m; ++k) {
                        double v = est[row + k] + fb_gossip_width(cnt[row + k], c, lt, log2_t, priv, c_priv, log2_h, eps);
                        if (v > bv) {
                            bv = v;
                            arm = k;
                        }
                    }
                }
            }
        }
        __syncthreads();
        // 2. Observe and update the agent's own counts and estimates.
        if (active) {
            fb_u64 g = (fb_u64)f * n + i;
            fb_u64 e = row + arm;
            for (int k = 0; k < m; ++k) xold[row + k] = xbar[row + k];
            double x;
            if (records) {
                fb_u64 idx = (fb_u64)(fb_uniform(nstate + 4 * g) * (double)rec_total[e]);
                x = idx < rec_ones[e] ? 1.0 : 0.0;
            } else {
                x = local_means[e] + noise_std * fb_normal(nstate + 4 * g, nspare + g, nhas + g);
            }
            double rg = best[f] - means[(fb_u64)f * m + arm];
            regret[g] += rg;
            rr[g] = rg;
            cnt[e] += 1;
            if (priv) {
                double xc = x < lo ? lo : (x > hi ? hi : x);
                if (xc != x) clipped[g] += 1;
                // privacy::lattice::to_lattice: to nearest, ties to even.
                long long xl = (long long)rint(xc * 1048576.0);
                for (int k = 0; k < m; ++k) {
                    fb_u64 ek = row + k;
                    fb_u64 key = fb_fold_more(nkeys[g], (fb_u64)k);
                    double rel;
                    if (discrete) {
                        long long r = fb_lattice_partial_sum(lsum + ek, lnoise + ek, psmask + ek, t, k == arm, xl, key,
                                                             lap_s, lap_t);
                        rel = (double)r * (1.0 / 1048576.0);
                    } else {
                        rel = fb_partial_sum(pssum + ek, psmask + ek, t, k == arm, xc, key, scale);
                    }
                    xbar[ek] = cnt[ek] == 0 ? 0.0 : rel / (double)cnt[ek];
                }
            } else {
                sum[e] += x;
                xbar[e] = sum[e] / (double)cnt[e];
            }
        }
        __syncthreads();
        if (i == 0) {
            double total = 0.0;
            for (int a = 0; a < n; ++a) total += rr[(fb_u64)f * n + a];
            group[f] += total;
        }
        if (policy != FB_GOSSIP) {
            __syncthreads();
            continue;
        }
        // 3. Network-count estimates from the neighbours' previous values.
        if (active) {
            for (int k = 0; k < m; ++k) {
                fb_u64 e = row + k;
                fb_u64 v = cnt[e];
                if (!init) {
                    for (int q = adj_off[f * (n + 1) + i]; q < adj_off[f * (n + 1) + i + 1]; ++q) {
                        fb_u64 w = ntp[fed + (fb_u64)adj[q] * m + k];
                        v = w > v ? w : v;
                    }
                }
                nt[e] = v;
            }
        }
        __syncthreads();
        if (active)
            for (int k = 0; k < m; ++k) ntp[row + k] = nt[row + k];
        // 4. Gossip: theta = X_bar after the initial pulls; then one random
        // edge averages its endpoints and every agent adds its mean's change.
        if (init) {
            if (active)
                for (int k = 0; k < m; ++k) theta[row + k] = xbar[row + k];
            __syncthreads();
            continue;
        }
        if (i == 0) {
            int ne = edge_off[f + 1] - edge_off[f];
            int q = edge_off[f] + (int)fb_below(estate + 4 * (fb_u64)f, (fb_u64)ne);
            fb_u64 u = fed + (fb_u64)edges[2 * q] * m;
            fb_u64 v = fed + (fb_u64)edges[2 * q + 1] * m;
            for (int k = 0; k < m; ++k) {
                double avg = 0.5 * (theta[u + k] + theta[v + k]);
                theta[u + k] = avg;
                theta[v + k] = avg;
            }
        }
        __syncthreads();
        if (active)
            for (int k = 0; k < m; ++k) theta[row + k] += xbar[row + k] - xold[row + k];
        __syncthreads();
    }
}

#define FB_GOSSIP_PARAMS \
    int n, int m, int policy, int priv, double c, double c_priv, double log2_h, double eps, double \
    scale, double lo, double hi, fb_u64 lap_s, fb_u64 lap_t, fb_u64 t0, int count, const double* \
    local_means, const double* means, const double* best, int records, const fb_u64* rec_total, const \
    fb_u64* rec_ones, double noise_std, const int* adj_off, const int* adj, const int* edges, const int* \
    edge_off, fb_u64* nstate, double* nspare, int* nhas, fb_u64* estate, const fb_u64* nkeys, fb_u64* \
    cnt, fb_u64* nt, fb_u64* ntp, double* sum, double* pssum, fb_u64* psmask, long long* lsum, long \
    long* lnoise, double* xbar, double* xold, double* theta, double* regret, double* group, fb_u64* \
    forced, fb_u64* clipped, double* rr
#define FB_GOSSIP_ARGS \
    n, m, policy, priv, c, c_priv, log2_h, eps, scale, lo, hi, lap_s, lap_t, t0, count, local_means, \
    means, best, records, rec_total, rec_ones, noise_std, adj_off, adj, edges, edge_off, nstate, nspare, \
    nhas, estate, nkeys, cnt, nt, ntp, sum, pssum, psmask, lsum, lnoise, xbar, xold, theta, regret, \
    group, forced, clipped, rr
extern "C" __global__ void fb_gossip_rounds(FB_GOSSIP_PARAMS) { fb_gossip_rounds_t<0>(FB_GOSSIP_ARGS); }
extern "C" __global__ void fb_gossip_rounds_lattice(FB_GOSSIP_PARAMS) { fb_gossip_rounds_t<1>(FB_GOSSIP_ARGS); }
