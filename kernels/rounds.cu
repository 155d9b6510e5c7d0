// fedbandits: the multi-round kernels of the linear family. One warp per
// agent, four agents per block, many rounds per launch:
// fb_linear_rounds_coop steps every agent of every federation (a launch
// ends where a refactorization, sync, checkpoint or progress report needs
// other kernels), and fb_feducb_rounds runs FedUCB, whose syncs depend on
// the data, with its events inside the launch (feducb.cu), and
// fb_peer_rounds its decentralized form, each agent's exchange, test and
// broadcasts inside the launch (peer.cu): a federation's agents in
// consecutive blocks that meet at group barriers. All run one body
// (fb_rounds_body), so their steps are the same bits. The host
// emulation runs them phase by phase between barriers, a grouped kernel's
// federation at once (emulation.hpp).
#include "common.cuh"

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
// (env/linear_gap.rs, the Householder construction) from the action's
// scalars: the scale cc = `cs`[c], sp = <h, theta> = `un`[c] and the mean v
// = `un`[k + c], with hb = 1 / (1 + |theta_0|): x_0 = v theta_0 - cc (sign
// theta_0) sp, and x_j = fma(cc, h_j, alpha theta_j) for j >= 1, alpha = v
// - cc hb sp, from the round's f32 normals `g` (h's coordinates 1..d:
// [coordinate - 1][action]), with the CPU's operations, so the set is
// never stored.
FB_DEV double fb_gap_x(int j, int c, int k, const double* th, const float* g, const double* cs, const double* un,
                       double hb) {
    double cc = cs[c], sp = un[c], v = un[k + c];
    if (j == 0) return fma(v, th[0], -(cc * (th[0] < 0.0 ? -sp : sp)));
    return fma(cc, (double)g[(j - 1) * k + c], (v - cc * (hb * sp)) * th[j]);
}

// Doubles of dynamic shared memory one agent of fb_linear_rounds_coop uses
// (src/algo/linear/cuda/mod.rs coop_step_shape repeats this): V^{-1} (d*d),
// theta_hat, w, x_chosen, b (d each), 4 scalars, the per-action region
// (on linear_sphere the means and inverse norms, kp each; on linear_gap
// the scales, kp, and the round's uniforms, 2 kp, which become each
// action's <h, theta> and mean; at least 64 doubles, which hold the
// normals pass's xoshiro words while the region is dead), then the f32
// normals (sphere (K - d)(d - 1), gap K (d - 1)), rounded up to whole
// doubles. No per-lane scratch: scoring evaluates each coordinate where it
// is used (fb_lane_argmax_direct), which is what lets six (FedUCB) to
// eight blocks share an SM (kernels/README.md's occupancy table).
FB_DEV long long fb_coop_region_doubles(int gap, int kp) {
    long long r = (gap ? 3LL : 2LL) * kp;
    return r < 64 ? 64 : r;
}
FB_DEV long long fb_coop_agent_doubles(int gap, int d, int k, int kp) {
    int fixed = d < k ? d : k;
    long long normals = gap ? (long long)k * (d - 1) : (long long)(k - fixed) * (d - 1);
    return (long long)d * d + 4LL * d + 4 + fb_coop_region_doubles(gap, kp) + (normals + 1) / 2;
}

// `rounds` consecutive rounds of every agent with FB_COOP_LANES threads per
// agent (the cooperative, multi-round form of fb_linear_step; the same
// results bit for bit). V^{-1} and b stay in shared memory for all of them,
// and log det and the regret in registers. Per round: lane l < FB_LANES
// draws the normals of xoshiro lane l (the 8 lanes of a decision set's
// stream are independent); all FB_COOP_LANES lanes split the inverse norms
// and means over actions, theta_hat and the Sherman-Morrison update over
// rows, and the UCB scores over actions (lane l: actions l, l +
// FB_COOP_LANES, ...; combined by warp shuffles, lowest index on ties).
// Blocks of FB_COOP_BLOCK threads (4 agents). The decision set is never
// written to global memory (its coordinates are recomputed from the normals
// when scored). Round r's regret of agent g goes to rr[r * n + g] for
// fb_rounds_reduce. Every thread reaches every barrier and shuffle.
// MODE FB_CENTRAL (fb_feducb_rounds) and FB_PEER (fb_peer_rounds): block
// `ticket` is block j = ticket % group of federation ticket / group (agents
// 4 j .. 4 j + 3 of it, those below m), every agent's width is its own from
// its log det, and round t = t0 + r is FedUCB's: FB_CENTRAL runs the
// federation's events after it (fb_fed_after_round; its state held alike
// by all its threads), FB_PEER plays slot t mod gamma of the per-slot
// arrays, with the exchange before it and the test and broadcasts after
// (fb_peer_before_round, fb_peer_after_round). FB_PLAIN
// (fb_linear_rounds_coop): block b holds agents 4 b .. 4 b + 3 of the
// batch and the widths are betas[r] or each agent's own.
#define FB_PLAIN 0
#define FB_CENTRAL 1
#define FB_PEER 2
template <int MODE>
FB_DEV void fb_rounds_body(int group, int n, int m, int d, int k, int kp, int reward_raw, double noise_std,
                           double reward_bound, int gap, fb_u64* ustate, int random_policy, fb_u64* pstate,
                           int rounds, const double* betas, const double* widths, double wscale, double wsigma,
                           fb_u64* clamps, const fb_vecsum_args* vs, const double* theta_star, fb_u64* lanes,
                           fb_u64* rstate, double* rspare, int* rhas, double* vinv, double* logdet, double* b,
                           double* gram, double* bias, double* regret, fb_u64* clipped, double* rr,
                           const fb_fed_args* ev, const fb_peer_args* pv, fb_u64 t0) {
    int lane = threadIdx.x % FB_COOP_LANES;
    int local = threadIdx.x / FB_COOP_LANES;
    int per_block = blockDim.x / FB_COOP_LANES;
    int dd = d * d, last = d - 1;
    int fixed = d < k ? d : k;
    int nr = k - fixed;
    long long per = fb_coop_agent_doubles(gap, d, k, kp);
    FB_DYN_SHARED(double, smem);
    // The scalars of the block's first agent (its last one holds the
    // ticket on a device).
    double* sc0 = smem + dd + 4 * d;
    const bool FED = MODE != FB_PLAIN;
    long long g = (long long)blockIdx.x * per_block + local, f = 0;
    int fj = 0;  // FED: the block's place in its federation
    unsigned* tickets = MODE == FB_CENTRAL ? ev->tickets : MODE == FB_PEER ? pv->tickets : nullptr;
    if (FED) {
        unsigned ticket = fb_block_ticket(tickets, (unsigned*)(sc0 + 3));
        f = ticket / group;
        fj = ticket % group;
        g = fj * per_block + local;
    }
    bool live = FED ? g < m : g < n;
    if (FED) g += f * m;
    long long gg = live ? g : f * m;
    double* A = smem + local * per;
    double* that = A + dd;
    double* w = that + d;
    double* xs = w + d;
    double* bs_ = xs + d;
    double* sc = bs_ + d;  // [0] y, [1] mu, [2] optimal index, [3] random pick
    double* region = sc + 4;  // the per-action region (fb_coop_region_doubles)
    double* mean = region;      // sphere: means
    double* inv = region + kp;  // sphere: inverse norms
    double* cs = region;        // gap: scales (kp), then uniforms (2 kp)
    double* un = cs + kp;       // gap: v's offsets and r (then <h, theta> and v)
    float* gn = (float*)(region + fb_coop_region_doubles(gap, kp));
    int total = gap ? k * last : nr * last;  // normals per round
    const double* th = theta_star + (gg / m) * d;
    fb_u64* st = lanes + gg * 32;
    fb_u64 s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    bool draws = lane < FB_LANES;  // this lane holds xoshiro lane `lane`
    double ld = 0.0, reg = 0.0;
    double hb = 1.0 / (1.0 + fabs(th[0]));  // linear_gap: the reflection's constant
    if (live) {
        // FB_PEER: each round loads its slot's.
        for (int e = lane; MODE != FB_PEER && e < dd; e += FB_COOP_LANES) A[e] = vinv[gg * dd + e];
        for (int e = lane; MODE != FB_PEER && e < d; e += FB_COOP_LANES) bs_[e] = b[gg * d + e];
        if (draws) {
            s0 = st[lane];
            s1 = st[8 + lane];
            s2 = st[16 + lane];
            s3 = st[24 + lane];
        }
        ld = logdet[gg];
        reg = regret[gg];
    }
    // FED: the federation's state, and the agent's shifted log det.
    fb_fed_state fs = {0, 0, 0, 0.0, 0.0};
    double* gram_r = gram;  // the played slot's local sums (FB_PEER)
    double* bias_r = bias;
    fb_fed_agent ag = {f, gg, n, fj, (int)(gg - f * m), lane, local, live, A, bs_, xs, w, sc, smem, sc0};
    double ldc = 0.0;
    if (MODE == FB_CENTRAL) {
        fs.dt = ev->dt[f];
        fs.leaves = ev->leaves[f];
        fs.since = ev->since[f];
        fs.logdets = ev->logdets[f];
        if (ev->svt) fs.sens = ev->ssens[f];
        if (live) ldc = ev->logdetc[gg];
    }
    for (int r = 0; r < rounds; ++r) {
        fb_u64 t = t0 + (fb_u64)r;
        int sg = MODE == FB_PEER ? (int)(t % (fb_u64)pv->G) : 0;
        long long so = (long long)sg * n + gg;  // the played slot
        if (MODE == FB_PEER) {
            fb_peer_before_round(*pv, ag, t, sg, vinv, logdet, b, gram, bias);
            if (live) {
                for (int e = lane; e < dd; e += FB_COOP_LANES) A[e] = vinv[so * dd + e];
                for (int e = lane; e < d; e += FB_COOP_LANES) bs_[e] = b[so * d + e];
                ld = logdet[so];
            }
            gram_r = gram + (long long)sg * n * dd;
            bias_r = bias + (long long)sg * n * d;
        }
        double beta = widths ? 0.0 : betas[r];
        int rclip = 0;  // lane 0: the round's reward was clipped
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
            // 2 x 32 words in the per-action region (dead until the pass
            // ends: the last round read it before a barrier).
            fb_u64* words = (fb_u64*)region;
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
            // linear_gap's uniforms go where the words were.
            if (gap) __syncthreads();
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
                // This lane's own entries, read above: what fb_gap_x needs.
                un[c] = sp;
                un[k + c] = v;
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
            fb_lane_argmax_direct(A, that, d, k, lane, beta,
                                  [=](int j, int c) {
                                      return gap ? fb_gap_x(j, c, k, th, gn, cs, un, hb)
                                                 : fb_sphere_x(j, c, d, fixed, nr, gn, inv);
                                  },
                                  &bsc, &bi, &bq);
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
                xs[j] = gap ? fb_gap_x(j, bi, k, th, gn, cs, un, hb) : fb_sphere_x(j, bi, d, fixed, nr, gn, inv);
            if (lane == 0) {
                double mu = gap ? un[k + bi] : mean[bi];
                sc[1] = mu;
                // linear_gap: Bernoulli(mu) (Stream::bernoulli); sphere: Gaussian noise.
                double y0 = gap ? (fb_uniform(rstate + gg * 4) < mu ? 1.0 : 0.0)
                                : mu + noise_std * fb_normal(rstate + gg * 4, rspare + gg, rhas + gg);
                sc[0] = fb_clip_reward(y0, reward_bound);
                rclip = sc[0] != y0;
                if (rclip) clipped[gg] += 1;
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
                    gram_r[gg * dd + i * d + j] += xs[i] * xs[j];
                }
                bs_[i] += y * xs[i];
                bias_r[gg * d + i] += y * xs[i];
            }
            ld += fb_ln_1p(q);
        }
        if (live) {
            double rg = best - sc[1];
            reg += rg;
            if (lane == 0) rr[(long long)r * n + gg] = rg;
        }
        if (vs) {
            // sdp_vecsum: the round's point (x, y) into the federation's
            // accumulators, lanes over coordinates; a point the protocol
            // clipped counts once unless its reward was clipped already
            // (Fed::round, VecSum::add_point).
            int any = 0;
            if (live) {
                fb_u64 key = fb_fold_more(vs->akeys[gg], t);
                int coords = d * (d + 1) / 2 + d;
                for (int c = lane; c < coords; c += FB_COOP_LANES)
                    any |= fb_vecsum_add_coordinate(*vs, gg / m, d, c, xs, sc[0], key);
            }
            for (int msk = 1; msk < FB_COOP_LANES; msk <<= 1) any |= FB_SHFL_XOR_I32(any, msk);
            if (live && lane == 0 && any && !rclip) clipped[gg] += 1;
        }
        if (MODE == FB_CENTRAL) fb_fed_after_round(*ev, fs, ag, t, vinv, logdet, gram, bias, &ld, &ldc);
        if (MODE == FB_PEER) {
            __syncthreads();
            if (live) {
                for (int e = lane; e < dd; e += FB_COOP_LANES) vinv[so * dd + e] = A[e];
                for (int e = lane; e < d; e += FB_COOP_LANES) b[so * d + e] = bs_[e];
                if (lane == 0) logdet[so] = ld;
            }
            fb_peer_after_round(*pv, ag, t, sg, logdet, gram, bias);
        }
    }
    __syncthreads();
    if (live) {
        for (int e = lane; MODE != FB_PEER && e < dd; e += FB_COOP_LANES) vinv[gg * dd + e] = A[e];
        for (int e = lane; MODE != FB_PEER && e < d; e += FB_COOP_LANES) b[gg * d + e] = bs_[e];
        if (draws) {
            st[lane] = s0;
            st[8 + lane] = s1;
            st[16 + lane] = s2;
            st[24 + lane] = s3;
        }
        if (lane == 0) {
            if (MODE != FB_PEER) logdet[gg] = ld;
            regret[gg] = reg;
            if (MODE == FB_CENTRAL) ev->logdetc[gg] = ldc;
        }
    }
    // FB_CENTRAL: the federation's first block keeps its state for the next
    // launch (every block holds the same).
    if (MODE == FB_CENTRAL && fj == 0 && threadIdx.x == 0) {
        ev->dt[f] = fs.dt;
        ev->leaves[f] = fs.leaves;
        ev->since[f] = fs.since;
        ev->logdets[f] = fs.logdets;
        if (ev->svt) ev->ssens[f] = fs.sens;
    }
    if (FED) fb_block_done(tickets);
}

// Every agent's rounds (fb_rounds_body), registers budgeted for
// FB_COOP_MIN_BLOCKS blocks per SM.
extern "C" __global__ void FB_LAUNCH_BOUNDS(FB_COOP_BLOCK, FB_COOP_MIN_BLOCKS)
    fb_linear_rounds_coop(int n, int m, int d, int k, int kp, int reward_raw, double noise_std, double reward_bound,
                          int gap, fb_u64* ustate, int random_policy, fb_u64* pstate, int rounds, const double* betas,
                          const double* widths, double wscale, double wsigma, fb_u64* clamps,
                          const fb_vecsum_args* vs, const double* theta_star, fb_u64* lanes, fb_u64* rstate, double* rspare,
                          int* rhas, double* vinv, double* logdet, double* b, double* gram, double* bias,
                          double* regret, fb_u64* clipped, double* rr, fb_u64 t0) {
    fb_rounds_body<FB_PLAIN>(1, n, m, d, k, kp, reward_raw, noise_std, reward_bound, gap, ustate, random_policy, pstate,
                          rounds, betas, widths, wscale, wsigma, clamps, vs, theta_star, lanes, rstate,
                          rspare, rhas, vinv, logdet, b, gram, bias, regret, clipped, rr, nullptr, nullptr, t0);
}

// FedUCB's rounds t0 .. t0 + rounds - 1 with its events inside
// (fb_rounds_body with FED): `group` blocks per federation, each taking its
// place by ticket; the grid is every federation's blocks.
extern "C" __global__ void FB_LAUNCH_BOUNDS(FB_COOP_BLOCK, FB_FED_MIN_BLOCKS)
    fb_feducb_rounds(int group, int n, int m, int d, int k, int kp, int reward_raw, double noise_std,
                     double reward_bound, int gap, fb_u64* ustate, int random_policy, fb_u64* pstate, int rounds,
                     const double* betas, const double* widths, double wscale, double wsigma, fb_u64* clamps,
                     const fb_vecsum_args* vs, const double* theta_star, fb_u64* lanes, fb_u64* rstate,
                     double* rspare, int* rhas, double* vinv, double* logdet, double* b, double* gram, double* bias,
                     double* regret, fb_u64* clipped, double* rr, const fb_fed_args* ev, fb_u64 t0) {
    fb_rounds_body<FB_CENTRAL>(group, n, m, d, k, kp, reward_raw, noise_std, reward_bound, gap, ustate, random_policy,
                         pstate, rounds, betas, widths, wscale, wsigma, clamps, vs, theta_star, lanes,
                         rstate, rspare, rhas, vinv, logdet, b, gram, bias, regret, clipped, rr, ev, nullptr, t0);
}

// Decentralized FedUCB's rounds t0 .. t0 + rounds - 1 with each agent's
// exchange, test and broadcasts inside (fb_rounds_body with FB_PEER):
// `group` blocks per federation, by ticket; V^{-1}, log det, b and the
// local sums are per slot (slot g x n + agent).
extern "C" __global__ void FB_LAUNCH_BOUNDS(FB_COOP_BLOCK, FB_FED_MIN_BLOCKS)
    fb_peer_rounds(int group, int n, int m, int d, int k, int kp, int reward_raw, double noise_std,
                   double reward_bound, int gap, fb_u64* ustate, int random_policy, fb_u64* pstate, int rounds,
                   const double* betas, const double* widths, double wscale, double wsigma, fb_u64* clamps,
                   const fb_vecsum_args* vs, const double* theta_star, fb_u64* lanes, fb_u64* rstate,
                   double* rspare, int* rhas, double* vinv, double* logdet, double* b, double* gram, double* bias,
                   double* regret, fb_u64* clipped, double* rr, const fb_peer_args* pv, fb_u64 t0) {
    fb_rounds_body<FB_PEER>(group, n, m, d, k, kp, reward_raw, noise_std, reward_bound, gap, ustate, random_policy,
                            pstate, rounds, betas, widths, wscale, wsigma, clamps, vs, theta_star, lanes,
                            rstate, rspare, rhas, vinv, logdet, b, gram, bias, regret, clipped, rr, nullptr, pv, t0);
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
