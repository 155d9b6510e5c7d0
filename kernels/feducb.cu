// fedbandits: FedUCB's data-dependent sync inside the multi-round kernel
// (algo/linear/feducb.rs; the CPU's operations are Fed::round and DetTest
// in src/algo/linear/cpu/mod.rs). fb_feducb_rounds (rounds.cu) runs a
// federation's agents in `blocks` consecutive blocks (by ticket, four
// agents each) and, after every round's step, the events here: each
// agent's determinant test, the federation's decisions (refactor when due,
// sync when any agent fired), the refactorizations and the sync, with group
// barriers (fb_group_barrier) where the federation's blocks exchange data.
// No launch per round: the rounds of a chunk run in one launch. Every
// operation has the CPU's operation order, so the emulation reproduces the
// CPU bit for bit.
#include "common.cuh"

// Everything fb_feducb_rounds needs beyond the step's arguments, one struct
// in device memory (src/algo/linear/cuda/adaptive.rs FedArgs has the same
// layout: every field 8 bytes).
struct fb_fed_args {
    long long m;               // agents per federation
    long long blocks;          // blocks per federation
    long long d;
    long long every_round;     // sync every round
    long long shifted;         // the test uses (S + U_i + c I)^{-1}
    long long refactor_every;  // rank-1 updates between factorizations
    long long svt;             // a private schedule (the sparse vector technique)
    long long cap;             // its requests per agent before the fallback
    long long mode;            // release: 0 exact, 1 tree, 2 cumulative
    long long dubey;           // the tree's node noise: Dubey & Pentland's
    double threshold;          // D
    double qscale;             // the schedule's Laplace scale
    double l2;                 // L^2
    double diag;               // the released Gram's diagonal shift
    double sigma;              // the tree's node noise
    double* vinvc;             // per agent: (S + U_i + c I)^{-1}
    double* logdetc;           // per agent: its log det
    const double* shift;       // per agent: c
    int* fire;                 // per agent, two rounds: the test's verdict
    int* sused;                // per agent: requests so far
    const fb_u64* skeys;       // per agent: the schedule's key
    const double* srho;        // per agent: threshold noise
    const fb_u64* akey;        // per agent: the tree's key
    double* tsum;              // per agent: the tree's exact running sum
    double* nsum;              // per agent: its live nodes' noise
    double* logdets;           // per federation: log det S
    fb_u64* dt;                // rounds since the last sync
    int* since;                // rank-1 updates since the last factorization
    fb_u64* leaves;            // syncs so far (the tree's leaf count)
    double* ssens;             // the schedule's sensitivity of the epoch
    double* total;             // the cumulative release
    double* base;              // S (d x d)
    double* usyn;              // s (d)
    int* failures;             // failed or jittered factorizations
    unsigned* bars;            // two words: the group barrier
    unsigned* tickets;         // two words per launch (fb_block_ticket)
    double* scratch;           // per agent: 3 d^2 doubles
};

// A federation's decision state, the same in every thread of its blocks
// (each computes it from the same data).
struct fb_fed_state {
    fb_u64 dt, leaves;
    int since;
    double logdets, sens;
};

// Where an agent's warp stands in fb_feducb_rounds: its federation f,
// block j of the federation, agent g (index i in the federation), its
// lane, whether it is an agent (`live`: blocks pad a federation to whole
// blocks), its shared memory (V^{-1} A, b, the round's action xs, a d-double
// scratch w, scalars sc) and the block's first agent's (A0, sc0).
struct fb_fed_agent {
    long long f, g, n;
    int j, i, lane, local;
    bool live;
    double *A, *bs, *xs, *w, *sc, *A0, *sc0;
};

// DetTest::after_step for the round's action: with a shift, the shifted
// inverse takes it by Sherman-Morrison (rows over lanes, fb_sherman_morrison's
// operation order) and its log det grows by ln(1 + q); the statistic is
// that log det minus log det S, else log det V minus log det S. The verdict
// (stat > D / Delta t, Delta t counting this round, or the private
// schedule's answer for round t) goes to fire[t mod 2].
FB_DEV void fb_fed_test(const fb_fed_args& ev, const fb_fed_state& st, const fb_fed_agent& a, double ld,
                        double* ldc, fb_u64 t) {
    int d = (int)ev.d, dd = d * d;
    __syncthreads();  // the step's last reads of w are done
    double stat = ld - st.logdets;
    if (ev.shifted) {
        double* vc = ev.vinvc + a.g * dd;
        if (a.live)
            for (int i = a.lane; i < d; i += FB_COOP_LANES) {
                double s = 0.0;
                for (int j = 0; j < d; ++j) s += vc[i * d + j] * a.xs[j];
                a.w[i] = s;
            }
        __syncthreads();
        if (a.live) {
            double q = 0.0;
            for (int i = 0; i < d; ++i) q += a.w[i] * a.xs[i];
            double c = -1.0 / (1.0 + q);
            for (int i = a.lane; i < d; i += FB_COOP_LANES) {
                double cwi = c * a.w[i];
                for (int j = 0; j < d; ++j) vc[i * d + j] += cwi * a.w[j];
            }
            *ldc += fb_ln_1p(q);
        }
        stat = *ldc - st.logdets;
    }
    double thr = ev.threshold / (double)(st.dt + 1);
    if (a.live && a.lane == 0) {
        int fire = stat > thr ? 1 : 0;
        if (ev.svt)
            fire = fb_svt_request(t, t, stat, thr, st.sens, ev.srho[a.g], ev.skeys[a.g], ev.qscale, (int)ev.cap,
                                  ev.sused + a.g);
        ev.fire[(long long)(t & 1) * a.n + a.g] = fire;
    }
}

// Per agent, when the federation's refactorization is due: V^{-1} and log
// det from S + U_i (fb_refactor: a jittered or failed factorization is
// counted), and with a shift (S + U_i + c I)^{-1} (DetTest::refactor: a
// failed one is counted). Lane 0 factorizes; the log dets reach the other
// lanes through sc.
FB_DEV void fb_fed_refactor(const fb_fed_args& ev, const fb_fed_agent& a, const double* gram, double* ld,
                            double* ldc) {
    int d = (int)ev.d, dd = d * d;
    if (a.live && a.lane == 0) {
        double* v = ev.scratch + a.g * 3 * dd;
        const double* s = ev.base + a.f * dd;
        for (int e = 0; e < dd; ++e) v[e] = FB_LDCG(s + e) + gram[a.g * dd + e];
        double l;
        double jitter = fb_spd_inverse_jitter(v, d, a.A, v + dd, v + 2 * dd, &l);
        a.sc[0] = jitter >= 0.0 ? l : *ld;
        if (jitter != 0.0) FB_ATOMIC_ADD_I32(ev.failures + a.f, 1);
        if (ev.shifted) {
            for (int e = 0; e < dd; ++e) v[e] = FB_LDCG(s + e) + gram[a.g * dd + e];
            for (int j = 0; j < d; ++j) v[j * d + j] += ev.shift[a.g];
            jitter = fb_spd_inverse_jitter(v, d, ev.vinvc + a.g * dd, v + dd, v + 2 * dd, &l);
            a.sc[1] = jitter >= 0.0 ? l : *ldc;
            if (jitter < 0.0) FB_ATOMIC_ADD_I32(ev.failures + a.f, 1);
        }
    }
    __syncthreads();
    if (a.live) {
        *ld = a.sc[0];
        if (ev.shifted) *ldc = a.sc[1];
    }
    __syncthreads();
}

// The block's thread 0 after the sync's release: S^{-1} and log det S into
// the block's first agent's A0 and sc0[0] (fb_sync_factor; a failed
// factorization leaves agent 0's own, which it stored), and with a shift
// (S + c I)^{-1} into the first agent's shifted inverse, its log det and
// whether it succeeded in sc0[1], sc0[2], the schedule's sensitivity of the
// new epoch in sc0[3] (DetTest::after_sync). The
// federation's first block counts the failures.
FB_DEV void fb_fed_factor(const fb_fed_args& ev, const fb_fed_agent& a, const double* vinv, const double* logdet,
                          double sens) {
    int d = (int)ev.d, dd = d * d;
    long long m = ev.m, g0 = a.f * m, gb = g0 + (long long)a.j * (blockDim.x / FB_COOP_LANES);
    double* v = ev.scratch + gb * 3 * dd;
    const double* s = ev.base + a.f * dd;
    for (int e = 0; e < dd; ++e) v[e] = FB_LDCG(s + e);
    double l;
    double jitter = fb_spd_inverse_jitter(v, d, a.A0, v + dd, v + 2 * dd, &l);
    if (jitter < 0.0) {
        for (int e = 0; e < dd; ++e) a.A0[e] = FB_LDCG(vinv + g0 * dd + e);
        l = FB_LDCG(logdet + g0);
    }
    a.sc0[0] = l;
    if (a.j == 0 && jitter != 0.0) FB_ATOMIC_ADD_I32(ev.failures + a.f, 1);
    if (!ev.shifted) return;
    double* vc = ev.vinvc + gb * dd;
    for (int e = 0; e < dd; ++e) v[e] = FB_LDCG(s + e);
    for (int j = 0; j < d; ++j) v[j * d + j] += ev.shift[g0];
    jitter = fb_spd_inverse_jitter(v, d, vc, v + dd, v + 2 * dd, &l);
    if (jitter < 0.0 && gb != g0)
        for (int e = 0; e < dd; ++e) vc[e] = FB_LDCG(ev.vinvc + g0 * dd + e);
    a.sc0[1] = l;
    a.sc0[2] = jitter >= 0.0 ? 1.0 : 0.0;
    if (a.j == 0 && jitter != 0.0) FB_ATOMIC_ADD_I32(ev.failures + a.f, 1);
    // Svt::sensitivity of the new epoch: ln(1 + L^2 b), b the bound on the
    // largest eigenvalue of (S + c I)^{-1}; infinite unless the
    // factorization was exact.
    if (ev.svt) sens = jitter == 0.0 ? fb_ln_1p(ev.l2 * fb_spectral_bound(vc, d)) : 1.0 / 0.0;
    a.sc0[3] = sens;
}

// The federation's sync (Fed::sync, then DetTest::after_sync): agent 0
// stores its V^{-1} and log det (kept if S's factorization fails); each
// agent inserts its leaf into its tree (a tree release); the federation's
// threads reduce the release entry by entry, agents in order
// (fb_sync_reduce_entry); each block factorizes S itself (fb_fed_factor:
// every block computes the same bits, so no third exchange), and every
// agent takes S^{-1}, log det S, b = s, empty local sums and, with a
// shift, the shifted inverse and its log det.
FB_DEV void fb_fed_sync(const fb_fed_args& ev, fb_fed_state& st, const fb_fed_agent& a, double* vinv,
                        double* logdet, double* gram, double* bias, double* ld, double* ldc) {
    int d = (int)ev.d, dd = d * d, width = dd + d, m = (int)ev.m;
    if (a.live && a.i == 0) {
        for (int e = a.lane; e < dd; e += FB_COOP_LANES) vinv[a.g * dd + e] = a.A[e];
        if (a.lane == 0) logdet[a.g] = *ld;
    }
    if (a.live && ev.mode == 1)
        for (int e = a.lane; e < width; e += FB_COOP_LANES)
            fb_tree_insert_entry(a.g, d, e, st.leaves, (int)ev.dubey, ev.sigma, ev.akey[a.g], gram, bias, ev.tsum,
                                 ev.nsum);
    fb_group_barrier(ev.bars + 2 * a.f, (int)ev.blocks);
    int stride = (int)ev.blocks * blockDim.x;
    for (int e = a.j * blockDim.x + threadIdx.x; e < width; e += stride)
        fb_sync_reduce_entry(a.f, e, m, d, (int)ev.mode, ev.diag, ev.tsum, ev.nsum, ev.total, gram, bias, ev.base,
                             ev.usyn);
    fb_group_barrier(ev.bars + 2 * a.f, (int)ev.blocks);
    if (threadIdx.x == 0) fb_fed_factor(ev, a, vinv, logdet, st.sens);
    __syncthreads();
    st.logdets = a.sc0[0];
    bool exact = true;
    if (ev.shifted) {
        exact = a.sc0[2] != 0.0;
        st.sens = a.sc0[3];
    }
    if (a.live) {
        long long gb = a.f * m + (long long)a.j * (blockDim.x / FB_COOP_LANES);
        if (a.local != 0)
            for (int e = a.lane; e < dd; e += FB_COOP_LANES) a.A[e] = a.A0[e];
        *ld = st.logdets;
        for (int e = a.lane; e < d; e += FB_COOP_LANES) a.bs[e] = FB_LDCG(ev.usyn + a.f * d + e);
        for (int e = a.lane; e < dd; e += FB_COOP_LANES) gram[a.g * dd + e] = 0.0;
        for (int e = a.lane; e < d; e += FB_COOP_LANES) bias[a.g * d + e] = 0.0;
        if (ev.shifted) {
            if (a.local != 0)
                for (int e = a.lane; e < dd; e += FB_COOP_LANES) ev.vinvc[a.g * dd + e] = ev.vinvc[gb * dd + e];
            if (exact) *ldc = a.sc0[1];
        }
    }
    __syncthreads();
}

// After round t's step of every agent: the test, the federation's
// decisions (FedUCB's schedule: the rank-1 updates since the last
// factorization and Delta t grow by one; a refactorization is due at
// `refactor_every` updates; the federation syncs when any agent fired, or
// every round, and a sync restarts both counts and is the next tree leaf),
// then the refactorization and the sync. The decisions are the same in
// every block of the federation, so every block reaches the same barriers.
FB_DEV void fb_fed_after_round(const fb_fed_args& ev, fb_fed_state& st, const fb_fed_agent& a, fb_u64 t,
                               double* vinv, double* logdet, double* gram, double* bias, double* ld, double* ldc) {
    fb_fed_test(ev, st, a, *ld, ldc, t);
    fb_group_barrier(ev.bars + 2 * a.f, (int)ev.blocks);
    int any = 0;
    const int* fire = ev.fire + (long long)(t & 1) * a.n + a.f * ev.m;
    for (int i = threadIdx.x; i < ev.m; i += blockDim.x) any |= FB_LDCG(fire + i);
    int fired = FB_SYNC_OR(any) || ev.every_round;
    st.since += 1;
    st.dt += 1;
    bool refactor = st.since >= ev.refactor_every;
    if (refactor) st.since = 0;
    if (fired) {
        st.since = 0;
        st.dt = 0;
        st.leaves += 1;
    }
    if (refactor) fb_fed_refactor(ev, a, gram, ld, ldc);
    if (fired) fb_fed_sync(ev, st, a, vinv, logdet, gram, bias, ld, ldc);
}
