// fedbandits: the kernels of decentralized FedUCB on a graph
// (algo/linear/feducb_decentralized.rs; the CPU's operations are PeerFed in
// src/algo/linear/cpu/peer.rs, whose doc comment defines the round). n agents
// (federation-major), G = gamma estimator slots each, slot s = g * n + agent
// (so slot g's rows are an agent-indexed array that fb_linear_rounds_coop
// plays on), R = G + 1 ring entries per slot, W = d^2 + d entries per
// payload. Every agent's senders within G hops (itself at distance 0), in
// index order, are a CSR list: start[a] .. start[a + 1] into nbr (local
// index) and hops. A round: fb_peer_asked (the broadcasts that requests
// ask for), fb_tree_insert (private), fb_peer_payload, fb_peer_deliver (every
// slot's deliveries, senders in index order), fb_peer_refactor (first-heard
// flags, then the played slot's factorization when due), the cooperative
// round, fb_peer_test (the determinant test and the requests), and for the
// requesters fb_tree_insert and fb_peer_payload with the delivery to
// themselves. Every sum has the CPU's operation order, so the emulation
// reproduces the CPU bit for bit.
#include "common.cuh"

// Per agent: the slots a request made dist(a, j) rounds ago by a neighbour
// j asks it to broadcast in round t (asked[g * n + a]), and each such slot's
// next tree leaf (private).
extern "C" __global__ void fb_peer_asked(int n, int m, int G, fb_u64 t, const int* start, const int* nbr,
                                         const int* hops, const fb_u64* request_round, int* asked,
                                         fb_u64* leaves) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= n) return;
    int f = a / m, R = G + 1;
    for (int g = 0; g < G; ++g) asked[(long long)g * n + a] = 0;
    for (int k = start[a]; k < start[a + 1]; ++k) {
        fb_u64 h = (fb_u64)hops[k];
        if (h == 0 || h > t) continue;
        fb_u64 s = t - h;
        if (request_round[((long long)f * m + nbr[k]) * R + (long long)(s % (fb_u64)R)] == s)
            asked[(long long)(s % (fb_u64)G) * n + a] = 1;
    }
    if (leaves)
        for (int g = 0; g < G; ++g)
            if (asked[(long long)g * n + a]) leaves[(long long)g * n + a] += 1;
}

// Per (slot, entry) of the slots in `mask`: the broadcast of round t. The
// payload is the increment of the slot's noisy prefix sum (private: release
// = exact running sum + live nodes' noise, after fb_tree_insert) or its
// local sums; it goes into ring entry t mod R, and the local sums restart.
// With `self_deliver` the sender adds the payload to its own S at once (and
// the first-heard shift where mask is 2). Entry 0 stamps the ring entry and
// restarts Delta.
extern "C" __global__ void fb_peer_payload(int ns, int d, int G, fb_u64 t, int priv, int self_deliver,
                                           double first_heard, const int* mask, double* gram, double* bias,
                                           const double* tsum, const double* nsum, double* prev,
                                           double* payload, fb_u64* payload_round, fb_u64* last_bc, fb_u64* dt,
                                           fb_u64* nbc, double* smat, double* svec) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int dd = d * d, W = dd + d, R = G + 1;
    if (idx >= (long long)ns * W) return;
    long long s = idx / W;
    int e = (int)(idx % W);
    int mk = mask[s];
    if (!mk) return;
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

// Per (slot, entry): round t's deliveries into S and s, senders in index
// order, each the payload it broadcast dist rounds ago (itself: this
// round's, at distance 0), the first payload from a sender with the
// first-heard shift on the diagonal (the flags are set by fb_peer_refactor).
extern "C" __global__ void fb_peer_deliver(int n, int m, int d, int G, fb_u64 t, double first_heard,
                                           const int* start, const int* nbr, const int* hops,
                                           const double* payload, const fb_u64* payload_round,
                                           const unsigned char* heard, double* smat, double* svec) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int dd = d * d, W = dd + d, R = G + 1;
    if (idx >= (long long)n * G * W) return;
    long long s = idx / W;
    int e = (int)(idx % W);
    int g = (int)(s / n), a = (int)(s % n), f = a / m;
    double* S = e < dd ? smat + s * dd + e : svec + s * d + (e - dd);
    bool diag = e < dd && e / d == e % d;
    double v = *S;
    for (int k = start[a]; k < start[a + 1]; ++k) {
        fb_u64 h = (fb_u64)hops[k];
        if (h > t) continue;
        fb_u64 sr = t - h;
        long long r = ((long long)g * n + (long long)f * m + nbr[k]) * R + (long long)(sr % (fb_u64)R);
        if (payload_round[r] != sr) continue;
        v += payload[r * W + e];
        if (diag && !heard[s * m + nbr[k]]) v += first_heard;
    }
    *S = v;
}

// Per agent: the first-heard flags and dirty marks of round t's deliveries
// (every slot), then slot g's refactorization when its S changed or after
// `refactor_every` rank-1 updates (PeerFed::refactor): V^{-1} and log det of
// S + U (a jittered or failed factorization counted), log det S, with
// privacy (S + U + c I)^{-1} and its log det, b = s + u.
extern "C" __global__ void fb_peer_refactor(int n, int m, int d, int G, int g, fb_u64 t, int refactor_every,
                                            int priv, const int* start, const int* nbr, const int* hops,
                                            const fb_u64* payload_round, unsigned char* heard, int* dirty,
                                            int* since, const double* smat, const double* svec,
                                            const double* gram, const double* bias, const double* shift,
                                            double* vinv, double* logdet, double* b, double* logdet_s,
                                            double* vinvc, double* logdetc, double* scratch, int* failures,
                                            int svt, double l2, double* ssens, double* sinv) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= n) return;
    int f = a / m, R = G + 1, dd = d * d;
    for (int gg = 0; gg < G; ++gg) {
        long long s2 = (long long)gg * n + a;
        for (int k = start[a]; k < start[a + 1]; ++k) {
            fb_u64 h = (fb_u64)hops[k];
            if (h > t) continue;
            fb_u64 sr = t - h;
            long long r = ((long long)gg * n + (long long)f * m + nbr[k]) * R + (long long)(sr % (fb_u64)R);
            if (payload_round[r] != sr) continue;
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

// Per agent, after round t on slot g: Delta and the updates since the last
// factorization grow by one; the statistic (private: the shifted inverse
// takes the round's action by Sherman-Morrison and its log det grows by
// ln(1 + q); minus log det S) against D / (Delta + 1); a request is recorded
// and counted, and the slot broadcasts (mask 1, or 2 with the first-heard
// shift of its own first payload) unless it did this round.
extern "C" __global__ void fb_peer_test(int n, int m, int d, int G, int g, fb_u64 t, int priv, int every_round,
                                        double threshold, const double* xlast, double* vinvc, double* logdetc,
                                        const double* logdet, const double* logdet_s, fb_u64* dt, int* since,
                                        const fb_u64* last_bc, double* work, fb_u64* request_round, fb_u64* nreq,
                                        unsigned char* heard, int* dirty, int* bmask, fb_u64* leaves, int svt,
                                        int cap, double qscale, const fb_u64* skeys, const double* srho,
                                        const double* ssens, int* sused) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= n) return;
    int i = a % m, dd = d * d, R = G + 1;
    long long s = (long long)g * n + a;
    dt[s] += 1;
    since[s] += 1;
    double stat;
    if (priv) {
        double q = fb_sherman_morrison(vinvc + s * dd, xlast + (long long)a * d, work + (long long)a * d, d);
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
