// fedbandits: the kernels of FedUCB's data-dependent sync on the batched core
// (algo/linear/feducb.rs; the CPU's operations are DetTest in
// src/algo/linear/cpu/mod.rs). A batch with an adaptive sync steps one round
// per fb_linear_rounds_coop launch (per-agent widths from log det V, the
// chosen action kept in `xlast`); then, without a host round trip, every
// agent's determinant test (fb_det_test), each federation's decisions
// (fb_adaptive_events: refactor when due, sync when any agent fired), the
// refactorizations of the federations that need one (fb_refactor with its
// mask, fb_refactor_shifted), and the syncs of the federations that fired
// (fb_tree_insert, fb_sync_reduce, fb_sync_factor, fb_sync_broadcast with
// their masks, then fb_sync_shifted). Every operation has the CPU's operation
// order, so the emulation reproduces the CPU bit for bit.
#include "common.cuh"

// Per agent: DetTest::after_step. With a shift (private), the shifted
// inverse (S + U_i + c I)^{-1} takes the round's action by Sherman-Morrison
// and its log det grows by ln(1 + q); the statistic is that log det minus
// log det S, else log det V minus log det S. The agent fires when the
// statistic exceeds D / Delta t, Delta t counting this round, or, under a
// private schedule (svt), as fb_svt_request decides for round `round`.
extern "C" __global__ void fb_det_test(int n, int m, int d, int shifted, double threshold, const double* xlast,
                                       double* vinvc, double* logdetc, const double* logdet, const double* logdets,
                                       const fb_u64* dt, double* work, int* fire, int svt, fb_u64 round,
                                       int cap, double qscale, const fb_u64* skeys, const double* srho,
                                       const double* ssens, int* sused) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    int f = g / m, dd = d * d;
    double stat;
    if (shifted) {
        double q = fb_sherman_morrison(vinvc + (long long)g * dd, xlast + (long long)g * d, work + (long long)g * d, d);
        logdetc[g] += fb_ln_1p(q);
        stat = logdetc[g] - logdets[f];
    } else {
        stat = logdet[g] - logdets[f];
    }
    double thr = threshold / (double)(dt[f] + 1);
    if (svt)
        fire[g] = fb_svt_request(round, round, stat, thr, ssens[f], srho[g], skeys[g], qscale, cap, sused + g);
    else
        fire[g] = stat > thr ? 1 : 0;
}

// Per federation: after the round's tests, the rank-1 updates since the last
// factorization grow by one and Delta t by one; a refactorization is due at
// `refactor_every` updates; the federation syncs when any agent fired (or
// every round), and a sync restarts both counts. A sync is the federation's
// next tree leaf (`leaves`) and one more in its count.
extern "C" __global__ void fb_adaptive_events(int nfed, int m, int every_round, int refactor_every, const int* fire,
                                              int* since, fb_u64* dt, int* do_refactor, int* do_sync,
                                              fb_u64* leaves) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= nfed) return;
    since[f] += 1;
    dt[f] += 1;
    int refactor = since[f] >= refactor_every;
    if (refactor) since[f] = 0;
    int fired = every_round;
    for (int i = 0; i < m; ++i) fired |= fire[(long long)f * m + i];
    do_refactor[f] = refactor;
    do_sync[f] = fired;
    if (fired) {
        since[f] = 0;
        dt[f] = 0;
        leaves[f] += 1;
    }
}

// Per agent of a federation due for it: the shifted inverse rebuilt from
// S + U_i + c I (DetTest::refactor: a failed factorization is counted, a
// jittered one is not).
extern "C" __global__ void fb_refactor_shifted(int n, int m, int d, const int* mask, const double* shift,
                                               const double* base, const double* gram, double* vinvc,
                                               double* logdetc, double* scratch, int* failures) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;
    int f = g / m, dd = d * d;
    if (!mask[f]) return;
    double* v = scratch + (long long)g * 3 * dd;
    for (int e = 0; e < dd; ++e) v[e] = base[(long long)f * dd + e] + gram[(long long)g * dd + e];
    for (int j = 0; j < d; ++j) v[j * d + j] += shift[g];
    double ld;
    double jitter = fb_spd_inverse_jitter(v, d, vinvc + (long long)g * dd, v + dd, v + 2 * dd, &ld);
    if (jitter >= 0.0)
        logdetc[g] = ld;
    else
        FB_ATOMIC_ADD_I32(failures + f, 1);
}

// Per federation that synced: log det S from the new S (agent 0's log det
// after fb_sync_factor), and with a shift the shifted inverse (S + c I)^{-1}
// for every agent (DetTest::after_sync: a jittered or failed factorization
// is counted).
extern "C" __global__ void fb_sync_shifted(int nfed, int m, int d, int shifted, const int* mask, const double* shift,
                                           const double* base, const double* logdet, double* logdets,
                                           double* vinvc, double* logdetc, double* scratch, int* failures, int svt,
                                           double l2, double* ssens) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= nfed || !mask[f]) return;
    int dd = d * d;
    long long g0 = (long long)f * m;
    logdets[f] = logdet[g0];
    if (!shifted) return;
    double* v = scratch + (long long)f * 3 * dd;
    for (int e = 0; e < dd; ++e) v[e] = base[(long long)f * dd + e];
    for (int j = 0; j < d; ++j) v[j * d + j] += shift[g0];
    double ld;
    double jitter = fb_spd_inverse_jitter(v, d, vinvc + g0 * dd, v + dd, v + 2 * dd, &ld);
    if (jitter >= 0.0)
        for (int i = 0; i < m; ++i) logdetc[g0 + i] = ld;
    if (jitter != 0.0) failures[f] += 1;
    // Svt::sensitivity of the new epoch: ln(1 + L^2 b), b the bound on the
    // largest eigenvalue of (S + c I)^{-1}; infinite unless the
    // factorization was exact.
    if (svt) ssens[f] = jitter == 0.0 ? fb_ln_1p(l2 * fb_spectral_bound(vinvc + g0 * dd, d)) : 1.0 / 0.0;
    for (int i = 1; i < m; ++i)
        for (int e = 0; e < dd; ++e) vinvc[(g0 + i) * dd + e] = vinvc[g0 * dd + e];
}
