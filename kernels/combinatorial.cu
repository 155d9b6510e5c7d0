// fedbandits: the combinatorial procurement family's rounds (Solanki et al.;
// src/algo/combinatorial/batch.rs, the CPU form in src/algo/combinatorial/cpu.rs).
//
// One block per federation, `count` rounds per launch. A round is a sequence
// of phases separated by barriers; in each phase the block's threads stride
// over the federation's elements e = j * M + i (agent j, producer i) or over
// its agents:
//   1. (elements) upper confidence quality q+ = (Y + sqrt(1.5 ln t W)) / W
//      and revenue r = rho q+ - c;
//   2. (elements) greedy's order: the rank of each profitable producer below
//      the threshold by r / (alpha - q+), largest first, ties to the lower
//      index (a counting sort: every element counts the ones before it);
//   3. (agents) greedy's slack walk in that order, then the regret of the
//      choice against the oracle on the true qualities;
//   4. (elements) the good units among those bought, one keyed Binomial draw
//      per element (as on the CPU) and the counts; thread 0 adds the agents'
//      regrets in agent order;
//   5. FCB: every element adds the round's units of its producer over all
//      agents; P-FCB in a communication round: (elements) the noisy messages,
//      then (receiver elements) accept or reject every sender's message in
//      sender order against the receiver's estimate before the round.
// Every floating-point sum runs in the CPU's order, so the output equals the
// CPU's bit for bit. Arrays are federation-major, then agent-major rows of M
// producers.
#include "common.cuh"

#define FB_COMB_NONFED 0
#define FB_COMB_FCB 1
#define FB_COMB_PFCB 2

extern "C" __global__ void fb_comb_rounds(
    int n, int m, int policy, double alpha, double rho, fb_u64 explore, fb_u64 t0, int count, int comm0, int ncomm,
    const fb_u64* comm_rounds, const double* comm_scale, double omega1, double omega2, int prose_window,
    const double* quality, const double* cost, const int* cap, const double* r_true, const double* best,
    const double* penalty, const fb_u64* keys, const fb_u64* nkeys, double* w, double* y, double* own, double* pw,
    double* py, double* regret, double* totals, fb_u64* viol, fb_u64* acc, fb_u64* rej, int* l, int* order,
    double* qp, double* r, double* rw, double* ry, double* msg, double* reg) {
    int f = blockIdx.x;
    int tid = threadIdx.x;
    int stride = blockDim.x;
    int nm = n * m;
    fb_u64 base = (fb_u64)f * nm;
    const double* q = quality + (fb_u64)f * m;
    int comm = comm0;
    for (int step = 0; step < count; ++step) {
        fb_u64 t = t0 + (fb_u64)step;
        int exploring = t <= explore;
        double lt = fb_ln((double)t);
        // 1. Upper confidence qualities and their revenues.
        if (!exploring) {
            for (int e = tid; e < nm; e += stride) {
                fb_u64 g = base + e;
                double we = w[g];
                double qe = (y[g] + sqrt(1.5 * lt * we)) / we;
                qp[g] = qe;
                r[g] = rho * qe - cost[g];
            }
        }
        __syncthreads();
        // 2. Greedy's order of the profitable producers below the threshold.
        if (!exploring) {
            for (int e = tid; e < nm; e += stride) {
                fb_u64 g = base + e;
                int i = e % m;
                fb_u64 row = g - (fb_u64)i;
                if (!(r[g] > 0.0) || qp[g] >= alpha) continue;
                double key = r[g] / (alpha - qp[g]);
                int rank = 0;
                for (int k = 0; k < m; ++k) {
                    double rk = r[row + k], qk = qp[row + k];
                    if (!(rk > 0.0) || qk >= alpha) continue;
                    double kk = rk / (alpha - qk);
                    if (kk > key || (kk == key && k < i)) ++rank;
                }
                order[row + rank] = i;
            }
        }
        __syncthreads();
        // 3. Each agent's choice and its regret.
        for (int j = tid; j < n; j += stride) {
            fb_u64 row = base + (fb_u64)j * m;
            if (exploring) {
                for (int i = 0; i < m; ++i) l[row + i] = 1;
            } else {
                double slack = 0.0;
                int candidates = 0;
                for (int i = 0; i < m; ++i) {
                    fb_u64 g = row + i;
                    l[g] = 0;
                    if (r[g] > 0.0 && qp[g] >= alpha) {
                        l[g] = cap[g];
                        slack += (double)cap[g] * (qp[g] - alpha);
                    } else if (r[g] > 0.0) {
                        ++candidates;
                    }
                }
                for (int c = 0; c < candidates; ++c) {
                    int i = order[row + c];
                    fb_u64 g = row + i;
                    double gap = alpha - qp[g];
                    if (slack < gap) continue;  // buys none (procurement::greedy)
                    double capg = (double)cap[g];
                    // All of it where the slack covers it, else floor(s / gap).
                    double take = slack >= capg * gap ? capg : fmin(fmax(floor(slack / gap), 0.0), capg);
                    l[g] = (int)take;
                    slack -= take * gap;
                }
            }
            double good = 0.0, units = 0.0;
            for (int i = 0; i < m; ++i) {
                good += (double)l[row + i] * q[i];
                units += (double)l[row + i];
            }
            double rg;
            if (good >= alpha * units - 1e-12 * fmax(units, 1.0)) {
                double rev = 0.0;
                for (int i = 0; i < m; ++i) rev += (double)l[row + i] * r_true[row + i];
                rg = best[(fb_u64)f * n + j] - rev;
            } else {
                viol[(fb_u64)f * n + j] += 1ull;
                rg = penalty[(fb_u64)f * n + j];
            }
            regret[(fb_u64)f * n + j] += rg;
            reg[(fb_u64)f * n + j] = rg;
        }
        __syncthreads();
        // 4. Observe every unit's quality; the round's group regret.
        for (int e = tid; e < nm; e += stride) {
            fb_u64 g = base + e;
            int j = e / m, i = e % m;
            int units = l[g];
            if (policy == FB_COMB_FCB) {
                rw[g] = 0.0;
                ry[g] = 0.0;
            }
            if (units == 0) continue;
            fb_u64 key = fb_fold_more(keys[(fb_u64)f * n + j], t);
            double qi = q[i];
            // One keyed Binomial(units, q_i) draw (as the CPU's round).
            fb_u64 good = fb_small_binomial_at(key, (fb_u64)i * (1ull << 20), (fb_u64)units, qi);
            double wu = (double)units, gu = (double)good;
            own[g] += wu;
            if (policy == FB_COMB_FCB) {
                rw[g] = wu;
                ry[g] = gu;
            } else {
                w[g] += wu;
                y[g] += gu;
                if (policy == FB_COMB_PFCB) {
                    pw[g] += wu;
                    py[g] += gu;
                }
            }
        }
        if (tid == 0) {
            double total = 0.0;
            for (int j = 0; j < n; ++j) total += reg[(fb_u64)f * n + j];
            totals[2 * f] += total;
            if (!exploring) totals[2 * f + 1] += total;
        }
        __syncthreads();
        // 5. Sharing.
        if (policy == FB_COMB_FCB) {
            for (int e = tid; e < nm; e += stride) {
                int i = e % m;
                double sw = 0.0, sy = 0.0;
                for (int j = 0; j < n; ++j) {
                    sw += rw[base + (fb_u64)j * m + i];
                    sy += ry[base + (fb_u64)j * m + i];
                }
                w[base + e] += sw;
                y[base + e] += sy;
            }
        } else if (policy == FB_COMB_PFCB && comm < ncomm && comm_rounds[comm] == t) {
            double scale = comm_scale[comm];
            for (int e = tid; e < nm; e += stride) {
                fb_u64 g = base + e;
                int j = e / m, i = e % m;
                fb_u64 key = fb_fold_more(nkeys[(fb_u64)f * n + j], (fb_u64)comm);
                double sigma = (double)cap[g] * scale;
                msg[2 * g] = pw[g] + sigma * fb_normal_at(key, 2 * (fb_u64)i);
                msg[2 * g + 1] = py[g] + sigma * fb_normal_at(key, 2 * (fb_u64)i + 1);
            }
            __syncthreads();
            double ln_window = prose_window ? fb_ln((double)t) : fb_ln((double)((fb_u64)n * t));
            for (int e = tid; e < nm; e += stride) {
                fb_u64 g = base + e;
                int rcv = e / m, i = e % m;
                double snap_w = w[g], snap_y = y[g];
                double units = prose_window ? own[g] : snap_w;
                double q_hat = snap_y / snap_w;
                double half = omega1 * sqrt(3.0 * ln_window / (2.0 * units));
                double we = snap_w, ye = snap_y;
                fb_u64 a = 0, x = 0;
                for (int snd = 0; snd < n; ++snd) {
                    if (snd == rcv) continue;
                    fb_u64 s = base + (fb_u64)snd * m + i;
                    double wt = msg[2 * s], yt = msg[2 * s + 1];
                    if (wt > 0.0 && fabs(yt / wt - q_hat) <= half) {
                        we += omega2 * wt;
                        ye += omega2 * yt;
                        ++a;
                    } else {
                        ++x;
                    }
                }
                w[g] = we;
                y[g] = ye;
                acc[g] += a;
                rej[g] += x;
                pw[g] = 0.0;
                py[g] = 0.0;
            }
            ++comm;
        }
        __syncthreads();
    }
}
