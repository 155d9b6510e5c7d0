// fedbandits: decentralized FedUCB on a graph
// (algo/linear/feducb_decentralized.rs; the CPU's operations are PeerFed in
// src/algo/linear/cpu/peer.rs, whose doc comment defines the round). n agents
// (federation-major), G = gamma estimator slots each, slot s = g * n + agent
// (so slot g's rows are an agent-indexed array the step plays on), R = G + 1
// ring entries per slot, W = d^2 + d entries per payload. Every agent's
// senders within G hops (itself at distance 0), in index order, are a CSR
// list: start[a] .. start[a + 1] into nbr (local index) and hops. A round,
// inside fb_peer_rounds (rounds.cu), each agent's warp doing its share:
// the broadcasts that requests ask for (fb_peer_asked_agent, the tree
// leaves when private, fb_peer_payload_entry), every slot's deliveries
// (fb_peer_deliver_entry, senders in index order), the first-heard flags
// and the played slot's factorization when due (fb_peer_refactor_agent;
// before the first round, every slot's), the step, the determinant test and the request
// (fb_peer_test_agent), the requesters' broadcasts with the delivery to
// themselves, and a group barrier of the federation. A payload is read
// only in a later round than it was sent (or by its sender), so one group
// barrier a round suffices. Every sum has the CPU's operation order, so
// the emulation reproduces the CPU bit for bit.
#include "common.cuh"

// Agent a: the slots a request made dist(a, j) rounds ago by a neighbour j
// asks it to broadcast in round t (asked[g * n + a]), and each such slot's
// next tree leaf (private).
FB_DEV void fb_peer_asked_agent(int a, int n, int m, int G, fb_u64 t, const int* start, const int* nbr,
                                const int* hops, const fb_u64* request_round, int* asked, fb_u64* leaves) {
    int f = a / m, R = G + 1;
    for (int g = 0; g < G; ++g) asked[(long long)g * n + a] = 0;
    for (int k = start[a]; k < start[a + 1]; ++k) {
        fb_u64 h = (fb_u64)hops[k];
        if (h == 0 || h > t) continue;
        fb_u64 s = t - h;
        if (FB_LDCG(request_round + ((long long)f * m + nbr[k]) * R + (long long)(s % (fb_u64)R)) == s)
            asked[(long long)(s % (fb_u64)G) * n + a] = 1;
    }
    if (leaves)
        for (int g = 0; g < G; ++g)
            if (asked[(long long)g * n + a]) leaves[(long long)g * n + a] += 1;
}

// Entry e of slot s's broadcast of round t (mask mk: 1, or 2 with the
// first-heard shift of its own first payload). The payload is the
// increment of the slot's noisy prefix sum (private: release = exact
// running sum + live nodes' noise, after fb_tree_insert_entry) or its local
// sums; it goes into ring entry t mod R, and the local sums restart. With
// `self_deliver` the sender adds the payload to its own S at once (and the
// first-heard shift where mk is 2). Entry 0 stamps the ring entry and
// restarts Delta.
FB_DEV void fb_peer_payload_entry(long long s, int e, int mk, int d, int G, fb_u64 t, int priv, int self_deliver,
                                  double first_heard, double* gram, double* bias, const double* tsum,
                                  const double* nsum, double* prev, double* payload, fb_u64* payload_round,
                                  fb_u64* last_bc, fb_u64* dt, fb_u64* nbc, double* smat, double* svec) {
    int dd = d * d, W = dd + d, R = G + 1;
    long long idx = s * W + e;
    long long r = s * R + (long long)(t % (fb_u64)R);
    double* u = e < dd ? gram + s * dd + e : bias + s * d + (e - dd);
    double p;
    if (priv) {
        double rel = 0.0 + tsum[idx];
        rel += nsum[idx];
        p = rel - prev[idx];
        prev[idx] = rel;
    } else {
        p = *u;
    }
    payload[r * W + e] = p;
    *u = 0.0;
    if (self_deliver) {
        double* S = e < dd ? smat + s * dd + e : svec + s * d + (e - dd);
        *S += p;
        if (mk == 2 && e < dd && e / d == e % d) *S += first_heard;
    }
    if (e == 0) {
        payload_round[r] = t;
        last_bc[s] = t;
        dt[s] = 0;
        nbc[s] += 1;
    }
}

// Entry e of slot s's deliveries of round t into S and s, senders in index
// order, each the payload it broadcast dist rounds ago (itself: this
// round's, at distance 0), the first payload from a sender with the
// first-heard shift on the diagonal (the flags are set by
// fb_peer_refactor_agent). Other agents' payloads are loaded past the L1
// (in fb_peer_rounds other blocks wrote them).
FB_DEV void fb_peer_deliver_entry(long long s, int e, int n, int m, int d, int G, fb_u64 t, double first_heard,
                                  const int* start, const int* nbr, const int* hops, const double* payload,
                                  const fb_u64* payload_round, const unsigned char* heard, double* smat,
                                  double* svec) {
    int dd = d * d, W = dd + d, R = G + 1;
    int g = (int)(s / n), a = (int)(s % n), f = a / m;
    double* S = e < dd ? smat + s * dd + e : svec + s * d + (e - dd);
    bool diag = e < dd && e / d == e % d;
    double v = *S;
    for (int k = start[a]; k < start[a + 1]; ++k) {
        fb_u64 h = (fb_u64)hops[k];
        if (h > t) continue;
        fb_u64 sr = t - h;
        long long r = ((long long)g * n + (long long)f * m + nbr[k]) * R + (long long)(sr % (fb_u64)R);
        if (FB_LDCG(payload_round + r) != sr) continue;
        v += FB_LDCG(payload + r * W + e);
        if (diag && !heard[s * m + nbr[k]]) v += first_heard;
    }
    *S = v;
}

// Agent a: the first-heard flags and dirty marks of round t's deliveries
// (every slot), then slot g's refactorization when its S changed or after
// `refactor_every` rank-1 updates (PeerFed::refactor): V^{-1} and log det of
// S + U (a jittered or failed factorization counted), log det S, with
// privacy (S + U + c I)^{-1} and its log det, b = s + u.
FB_DEV void fb_peer_refactor_agent(int a, int n, int m, int d, int G, int g, fb_u64 t, int refactor_every,
                                   int priv, const int* start, const int* nbr, const int* hops,
                                   const fb_u64* payload_round, unsigned char* heard, int* dirty, int* since,
                                   const double* smat, const double* svec, const double* gram,
                                   const double* bias, const double* shift, double* vinv, double* logdet,
                                   double* b, double* logdet_s, double* vinvc, double* logdetc, double* scratch,
                                   int* failures, int svt, double l2, double* ssens, double* sinv) {
    int f = a / m, R = G + 1, dd = d * d;
    for (int gg = 0; gg < G; ++gg) {
        long long s2 = (long long)gg * n + a;
        for (int k = start[a]; k < start[a + 1]; ++k) {
            fb_u64 h = (fb_u64)hops[k];
            if (h > t) continue;
            fb_u64 sr = t - h;
            long long r = ((long long)gg * n + (long long)f * m + nbr[k]) * R + (long long)(sr % (fb_u64)R);
            if (FB_LDCG(payload_round + r) != sr) continue;
            heard[s2 * m + nbr[k]] = 1;
            dirty[s2] = 1;
        }
    }
    long long s = (long long)g * n + a;
    if (!dirty[s] && since[s] < refactor_every) return;
    double* v = scratch + (long long)a * 3 * dd;
    for (int e = 0; e < dd; ++e) v[e] = smat[s * dd + e] + gram[s * dd + e];
    double ld;
    double jitter = fb_spd_inverse_jitter(v, d, vinv + s * dd, v + dd, v + 2 * dd, &ld);
    if (jitter >= 0.0) logdet[s] = ld;
    if (jitter != 0.0) FB_ATOMIC_ADD_I32(failures + f, 1);
    for (int e = 0; e < dd; ++e) v[dd + e] = smat[s * dd + e];
    double lds;
    if (!fb_cholesky(v + dd, d, &lds)) logdet_s[s] = lds;
    if (priv) {
        for (int j = 0; j < d; ++j) v[j * d + j] += shift[a];
        double ldc;
        if (fb_spd_inverse_jitter(v, d, vinvc + s * dd, v + dd, v + 2 * dd, &ldc) >= 0.0) logdetc[s] = ldc;
    }
    // The private schedule's sensitivity of the slot's epoch (PeerFed::
    // refactor, Svt::sensitivity): ln(1 + L^2 b), b fb_spectral_bound's,
    // infinite unless the factorization was exact.
    if (svt) {
        for (int e = 0; e < dd; ++e) v[e] = smat[s * dd + e];
        for (int j = 0; j < d; ++j) v[j * d + j] += shift[a];
        double* inv = sinv + (long long)a * dd;
        double lds2;
        double jit = fb_spd_inverse_jitter(v, d, inv, v + dd, v + 2 * dd, &lds2);
        ssens[s] = jit == 0.0 ? fb_ln_1p(l2 * fb_spectral_bound(inv, d)) : 1.0 / 0.0;
    }
    for (int j = 0; j < d; ++j) b[s * d + j] = svec[s * d + j] + bias[s * d + j];
    dirty[s] = 0;
    since[s] = 0;
}

// Agent a, after round t on slot g (its action x, d doubles of workspace
// `work`): Delta and the updates since the last factorization grow by one;
// the statistic (private: the shifted inverse takes the round's action by
// Sherman-Morrison and its log det grows by ln(1 + q); minus log det S)
// against D / (Delta + 1); a request is recorded and counted, and the slot
// broadcasts (mask 1, or 2 with the first-heard shift of its own first
// payload) unless it did this round.
FB_DEV void fb_peer_test_agent(int a, int n, int m, int d, int G, int g, fb_u64 t, int priv, int every_round,
                               double threshold, const double* x, double* vinvc, double* logdetc,
                               const double* logdet, const double* logdet_s, fb_u64* dt, int* since,
                               const fb_u64* last_bc, double* work, fb_u64* request_round, fb_u64* nreq,
                               unsigned char* heard, int* dirty, int* bmask, fb_u64* leaves, int svt, int cap,
                               double qscale, const fb_u64* skeys, const double* srho, const double* ssens,
                               int* sused) {
    int i = a % m, dd = d * d, R = G + 1;
    long long s = (long long)g * n + a;
    dt[s] += 1;
    since[s] += 1;
    double stat;
    if (priv) {
        double q = fb_sherman_morrison(vinvc + s * dd, x, work, d);
        logdetc[s] += fb_ln_1p(q);
        stat = logdetc[s] - logdet_s[s];
    } else {
        stat = logdet[s] - logdet_s[s];
    }
    for (int gg = 0; gg < G; ++gg) bmask[(long long)gg * n + a] = 0;
    double thr = threshold / (double)(dt[s] + 1);
    // The fallback follows the slot's own rounds, ceil(t / G) (Svt::request).
    fb_u64 own = (t + (fb_u64)G - 1) / (fb_u64)G;
    int fire = svt ? fb_svt_request(t, own, stat, thr, ssens[s], srho[s], skeys[s], qscale, cap, sused + s)
                   : (every_round || stat > thr);
    if (!fire) return;
    nreq[a] += 1;
    request_round[(long long)a * R + (long long)(t % (fb_u64)R)] = t;
    if (last_bc[s] == t) return;
    bmask[s] = heard[s * m + i] ? 1 : 2;
    heard[s * m + i] = 1;
    dirty[s] = 1;
    if (leaves) leaves[s] += 1;
}

// ------------------------------------------- rounds inside one launch

// Everything fb_peer_rounds (rounds.cu) needs beyond the step's arguments,
// one struct in device memory (src/algo/linear/cuda/peer.rs PeerArgs has
// the same layout: every field 8 bytes). The arrays are PeerState's.
struct fb_peer_args {
    long long m, blocks, d, G, priv, every_round, refactor_every, svt, cap, dubey;
    double threshold, first_heard, qscale, l2, sigma;
    const int* start;
    const int* nbr;
    const int* hops;
    fb_u64* request_round;
    fb_u64* nreq;
    fb_u64* nbc;
    int* asked;
    int* bmask;
    double* smat;
    double* svec;
    double* logdet_s;
    double* vinvc;
    double* logdetc;
    fb_u64* dt;
    int* since;
    int* dirty;
    fb_u64* last_bc;
    unsigned char* heard;
    double* prev;
    fb_u64* leaves;  // null unless private
    double* payload;
    fb_u64* payload_round;
    const double* shift;
    const fb_u64* akey;
    double* tsum;
    double* nsum;
    int* failures;
    double* scratch;
    const fb_u64* skeys;
    const double* srho;
    double* ssens;
    int* sused;
    double* sinv;
    unsigned* bars;
    unsigned* tickets;
};

// The broadcasts of agent a's slots in `mask` in round t, its lanes over
// the entries: the tree leaf (private) and the payload of each entry
// (fb_tree_insert_entry, then fb_peer_payload_entry, entry by entry).
FB_DEV void fb_peer_broadcasts(const fb_peer_args& pa, const fb_fed_agent& a, const int* mask, fb_u64 t,
                               int self_deliver, double* gram, double* bias) {
    int d = (int)pa.d, G = (int)pa.G, W = d * d + d;
    if (!a.live) return;
    for (int g = 0; g < G; ++g) {
        long long s = (long long)g * a.n + a.g;
        int mk = mask[s];
        if (!mk) continue;
        for (int e = a.lane; e < W; e += FB_COOP_LANES) {
            if (pa.priv)
                fb_tree_insert_entry(s, d, e, pa.leaves[s], (int)pa.dubey, pa.sigma, pa.akey[s], gram, bias, pa.tsum,
                                     pa.nsum);
            fb_peer_payload_entry(s, e, mk, d, G, t, (int)pa.priv, self_deliver, pa.first_heard, gram, bias, pa.tsum,
                                  pa.nsum, pa.prev, pa.payload, pa.payload_round, pa.last_bc, pa.dt, pa.nbc, pa.smat,
                                  pa.svec);
        }
    }
}

// Agent a's exchange before round t, on slot sg = t mod G (before round 1,
// every slot's first factorization): the broadcasts
// requests ask for (fb_peer_asked_agent, lane 0), every slot's deliveries
// (lanes over slot x entry), the first-heard flags and slot sg's
// factorization (lane 0): fb_peer_exchange's kernels, the agent's share.
FB_DEV void fb_peer_before_round(const fb_peer_args& pa, const fb_fed_agent& a, fb_u64 t, int sg, double* vinv,
                                 double* logdet, double* b, double* gram, double* bias) {
    int n = (int)a.n, m = (int)pa.m, d = (int)pa.d, G = (int)pa.G, W = d * d + d;
    int ag = (int)a.g;
    __syncthreads();
    // Before the first round every slot is factorized (PeerFed::new: all
    // start dirty), as the refactorization of round 0.
    if (t == 1 && a.live && a.lane == 0)
        for (int g = 0; g < G; ++g)
            fb_peer_refactor_agent(ag, n, m, d, G, g, 0, (int)pa.refactor_every, (int)pa.priv, pa.start, pa.nbr,
                                   pa.hops, pa.payload_round, pa.heard, pa.dirty, pa.since, pa.smat, pa.svec, gram,
                                   bias, pa.shift, vinv, logdet, b, pa.logdet_s, pa.vinvc, pa.logdetc, pa.scratch,
                                   pa.failures, (int)pa.svt, pa.l2, pa.ssens, pa.sinv);
    __syncthreads();
    if (a.live && a.lane == 0)
        fb_peer_asked_agent(ag, n, m, G, t, pa.start, pa.nbr, pa.hops, pa.request_round, pa.asked, pa.leaves);
    __syncthreads();
    fb_peer_broadcasts(pa, a, pa.asked, t, 0, gram, bias);
    __syncthreads();
    if (a.live)
        for (int idx = a.lane; idx < G * W; idx += FB_COOP_LANES)
            fb_peer_deliver_entry((long long)(idx / W) * n + ag, idx % W, n, m, d, G, t, pa.first_heard, pa.start,
                                  pa.nbr, pa.hops, pa.payload, pa.payload_round, pa.heard, pa.smat, pa.svec);
    __syncthreads();
    if (a.live && a.lane == 0)
        fb_peer_refactor_agent(ag, n, m, d, G, sg, t, (int)pa.refactor_every, (int)pa.priv, pa.start, pa.nbr, pa.hops,
                               pa.payload_round, pa.heard, pa.dirty, pa.since, pa.smat, pa.svec, gram, bias, pa.shift,
                               vinv, logdet, b, pa.logdet_s, pa.vinvc, pa.logdetc, pa.scratch, pa.failures,
                               (int)pa.svt, pa.l2, pa.ssens, pa.sinv);
    __syncthreads();
}

// Agent a after round t on slot sg (its action in a.xs): the test and the
// request (lane 0, the workspace a.w), then the requesters' broadcasts,
// each delivered to itself at once; then the federation's group barrier,
// after which the next round's exchange reads what every agent sent.
FB_DEV void fb_peer_after_round(const fb_peer_args& pa, const fb_fed_agent& a, fb_u64 t, int sg,
                                const double* logdet, double* gram, double* bias) {
    int n = (int)a.n, m = (int)pa.m, d = (int)pa.d, G = (int)pa.G;
    __syncthreads();
    if (a.live && a.lane == 0)
        fb_peer_test_agent((int)a.g, n, m, d, G, sg, t, (int)pa.priv, (int)pa.every_round, pa.threshold, a.xs,
                           pa.vinvc, pa.logdetc, logdet, pa.logdet_s, pa.dt, pa.since, pa.last_bc, a.w,
                           pa.request_round, pa.nreq, pa.heard, pa.dirty, pa.bmask, pa.leaves, (int)pa.svt,
                           (int)pa.cap, pa.qscale, pa.skeys, pa.srho, pa.ssens, pa.sused);
    __syncthreads();
    fb_peer_broadcasts(pa, a, pa.bmask, t, 1, gram, bias);
    fb_group_barrier(pa.bars + 2 * a.f, (int)pa.blocks);
}
