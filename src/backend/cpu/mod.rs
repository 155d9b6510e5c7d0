//! The CPU backend: SIMD-friendly loops with runtime instruction-set dispatch.
//!
//! The scorer works on 8 actions at a time (one 512-bit vector of f64 per
//! coordinate, since decision sets are column-major) and uses the symmetry of
//! V^{-1}: x^T A x = sum_i x_i (A_ii x_i + 2 sum_{j>i} A_ij x_j), which is
//! d (d + 3) / 2 fused multiply-adds per action instead of d^2 + d. Each lane
//! computes one action with a fixed operation order, so results do not depend
//! on the vector width the dispatcher picks (and `mul_add` is exact on every
//! path), hence bit-identical output on any x86-64 CPU.
//!
//! Parallelism lives above this level: the simulation runs federations on
//! rayon's pool (as per-repetition tasks, or inside a family's batched CPU
//! rounds, its folder's `cpu.rs`); each step is sequential.

use super::{AgentState, AgentStep, Backend, StepResult, Workspace, clip_reward};
use crate::env::{AgentStreams, LinearEnv};
use crate::linalg::{self, LltError};
use crate::rng::lanes::LANES;

#[cfg(target_arch = "x86_64")]
mod avx512;

/// The CPU backend (stateless).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

/// Lane-wise running argmax over blocks of 8 actions.
struct Best {
    s: [f64; LANES],
    i: [usize; LANES],
    q: [f64; LANES],
}

impl Best {
    #[inline(always)]
    fn new() -> Self {
        Self {
            s: [f64::NEG_INFINITY; LANES],
            i: [0; LANES],
            q: [0.0; LANES],
        }
    }

    #[inline(always)]
    fn offer(&mut self, blk: usize, k: usize, mean: &[f64; LANES], quad: &[f64; LANES], beta: f64) {
        for l in 0..LANES {
            let idx = blk * LANES + l;
            let s = beta.mul_add(quad[l].max(0.0).sqrt(), mean[l]);
            let s = if idx < k { s } else { f64::NEG_INFINITY };
            if s > self.s[l] {
                self.s[l] = s;
                self.i[l] = idx;
                self.q[l] = quad[l];
            }
        }
    }

    /// Highest score, lowest index on ties; action 0 if every score was NaN
    /// (only with a corrupted V^{-1}).
    #[inline(always)]
    fn finish(&self) -> (usize, f64) {
        let mut bi = usize::MAX;
        let mut bs = f64::NEG_INFINITY;
        let mut bq = 0.0;
        for l in 0..LANES {
            if self.s[l] > bs || (self.s[l] == bs && self.i[l] < bi) {
                bs = self.s[l];
                bi = self.i[l];
                bq = self.q[l];
            }
        }
        if bi == usize::MAX { (0, 0.0) } else { (bi, bq) }
    }
}

/// Scores NB consecutive 8-action blocks starting at `blk0`. Working on
/// several blocks at once gives NB independent multiply-add chains, so the
/// loop is bound by FMA throughput rather than latency.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn score_group<const NB: usize>(
    d: usize,
    k: usize,
    xb: &[[f64; LANES]],
    kb: usize,
    blk0: usize,
    a: &[f64],
    theta: &[f64],
    beta: f64,
    best: &mut Best,
) {
    let mut mean = [[0.0f64; LANES]; NB];
    let mut quad = [[0.0f64; LANES]; NB];
    for i in 0..d {
        let row = &a[i * d..(i + 1) * d];
        let mut t = [[0.0f64; LANES]; NB];
        for (j, &aij) in row.iter().enumerate().skip(i + 1) {
            let xs = &xb[j * kb + blk0..j * kb + blk0 + NB];
            for g in 0..NB {
                for l in 0..LANES {
                    t[g][l] = aij.mul_add(xs[g][l], t[g][l]);
                }
            }
        }
        let aii = row[i];
        let th = theta[i];
        let xs = &xb[i * kb + blk0..i * kb + blk0 + NB];
        for g in 0..NB {
            for l in 0..LANES {
                let xi = xs[g][l];
                let inner = aii.mul_add(xi, 2.0 * t[g][l]);
                quad[g][l] = xi.mul_add(inner, quad[g][l]);
                mean[g][l] = th.mul_add(xi, mean[g][l]);
            }
        }
    }
    for g in 0..NB {
        best.offer(blk0 + g, k, &mean[g], &quad[g], beta);
    }
}

/// Scores all actions of a column-major decision set (`x`, d blocks of
/// K rounded up to 8) with <theta, x> + beta sqrt(x^T A x) and returns the
/// argmax (lowest index on ties) and its x^T A x. On a CPU with AVX-512F
/// and d <= 16 the intrinsics scorer runs ([`avx512`], the same bits),
/// otherwise [`score_argmax_portable`].
#[inline]
pub fn score_argmax(d: usize, k: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> (usize, f64) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available(d) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { avx512::score_argmax(d, k, x, a, theta, beta) };
    }
    score_argmax_portable(d, k, x, a, theta, beta)
}

/// The scorer from portable code, compiled for each instruction set the
/// dispatcher knows (see the module docs).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn score_argmax_portable(d: usize, k: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> (usize, f64) {
    let (xb, _) = x.as_chunks::<LANES>();
    let kb = xb.len() / d.max(1);
    let mut best = Best::new();
    let mut blk = 0;
    while blk + 4 <= kb {
        score_group::<4>(d, k, xb, kb, blk, a, theta, beta, &mut best);
        blk += 4;
    }
    while blk < kb {
        score_group::<1>(d, k, xb, kb, blk, a, theta, beta, &mut best);
        blk += 1;
    }
    best.finish()
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device(&self) -> super::Device<'_> {
        super::Device::Cpu
    }
}

impl AgentStep for CpuBackend {
    fn ucb_step(
        &self,
        env: &LinearEnv,
        streams: &mut AgentStreams,
        ws: &mut Workspace,
        agent: AgentState<'_>,
        beta: f64,
        reward_bound: f64,
    ) -> StepResult {
        let d = env.spec.d;
        env.draw(streams, &mut ws.ds);
        linalg::matvec(agent.vinv, agent.b, &mut ws.theta, d);
        let (arm, quad) = score_argmax(d, ws.ds.k, &ws.ds.x, agent.vinv, &ws.theta, beta);
        ws.ds.action(arm, &mut ws.x);
        let mean = ws.ds.mean[arm];
        let raw = env.reward(streams, mean);
        let y = clip_reward(raw, reward_bound);
        let q = linalg::sherman_morrison(agent.vinv, &ws.x, &mut ws.w, d);
        if let Some(logdet) = agent.logdet {
            *logdet += crate::math::ln_1p(q);
        }
        for (bi, xi) in agent.b.iter_mut().zip(&ws.x) {
            *bi += y * xi;
        }
        StepResult {
            arm,
            mean,
            best: ws.ds.best,
            y,
            clipped: y != raw,
            quad,
        }
    }

    /// Hand-written Cholesky below [`super::dense::INVERSE_FAER_MIN_D`],
    /// faer's blocked one from there (`bench --linalg`: 1.7x faster at
    /// d = 32, 6.7x at d = 128).
    fn spd_inverse(&self, v: &[f64], d: usize, inv: &mut [f64], ws: &mut Workspace) -> Result<(f64, f64), LltError> {
        if d >= super::dense::INVERSE_FAER_MIN_D {
            let kp = ws.ds.kp;
            let scratch = ws.dense.get_or_insert_with(|| super::dense::DenseScratch::new(d, kp));
            return linalg::with_jitter(v, d, inv, &mut ws.m1, |m, out| {
                super::dense::spd_inverse(m, d, out, scratch)
            });
        }
        linalg::spd_inverse_with_jitter(v, d, inv, &mut ws.m1, &mut ws.m2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    /// Plain reference scorer: full quadratic form, scalar loop.
    fn reference(d: usize, k: usize, kp: usize, x: &[f64], a: &[f64], theta: &[f64], beta: f64) -> usize {
        let mut best = (f64::NEG_INFINITY, 0);
        for arm in 0..k {
            let xa: Vec<f64> = (0..d).map(|j| x[j * kp + arm]).collect();
            let mut q = 0.0;
            for i in 0..d {
                for j in 0..d {
                    q += xa[i] * a[i * d + j] * xa[j];
                }
            }
            let m: f64 = (0..d).map(|i| theta[i] * xa[i]).sum();
            let s = m + beta * q.max(0.0).sqrt();
            if s > best.0 {
                best = (s, arm);
            }
        }
        best.1
    }

    #[test]
    fn scorer_matches_reference() {
        let mut s = Stream::new(&[3]);
        for (d, k) in [(1usize, 3usize), (3, 8), (5, 25), (10, 100), (7, 9)] {
            let kp = k.div_ceil(8usize) * 8;
            for _ in 0..50 {
                let mut x = vec![0.0; d * kp];
                for j in 0..d {
                    for a in 0..k {
                        x[j * kp + a] = s.normal();
                    }
                }
                let mut a = vec![0.0; d * d];
                for _ in 0..d + 2 {
                    let v: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                    linalg::add_outer(&mut a, &v, d);
                }
                let theta: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                let beta = s.uniform() * 3.0;
                let (arm, _) = score_argmax(d, k, &x, &a, &theta, beta);
                assert_eq!(arm, reference(d, k, kp, &x, &a, &theta, beta));
            }
        }
    }

    /// The intrinsics scorer returns the portable scorer's bits (action and
    /// x^T A x) on Gram-like inverses, ties and NaN included; d up to its
    /// largest, K not a multiple of 8. Skipped (vacuous) on a CPU without
    /// AVX-512F, where the portable scorer is the only one.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn intrinsics_scorer_equals_portable_bit_for_bit() {
        if !avx512::available(1) {
            return;
        }
        let mut s = Stream::new(&[11]);
        for (d, k) in [(1usize, 3usize), (2, 20), (5, 25), (10, 100), (16, 37), (7, 9)] {
            let kp = k.div_ceil(8usize) * 8;
            for rep in 0..200 {
                let mut x = vec![0.0; d * kp];
                for j in 0..d {
                    for a in 0..k {
                        // Every fifth set has repeated actions (ties).
                        x[j * kp + a] = if rep % 5 == 0 {
                            0.25 * ((a % 3) as f64)
                        } else {
                            s.normal()
                        };
                    }
                }
                let mut v = vec![0.0; d * d];
                linalg::set_scaled_identity(&mut v, d, 1.0);
                for _ in 0..rep % 30 {
                    let u: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                    linalg::add_outer(&mut v, &u, d);
                }
                let mut a = vec![0.0; d * d];
                let (mut m1, mut m2) = (vec![0.0; d * d], vec![0.0; d * d]);
                linalg::spd_inverse_with_jitter(&v, d, &mut a, &mut m1, &mut m2).expect("spd");
                if rep == 7 {
                    a[0] = f64::NAN;
                }
                let theta: Vec<f64> = (0..d).map(|_| s.normal()).collect();
                let beta = s.uniform() * 3.0;
                // SAFETY: `available` checked AVX-512F above.
                let (i1, q1) = unsafe { avx512::score_argmax(d, k, &x, &a, &theta, beta) };
                let (i2, q2) = score_argmax_portable(d, k, &x, &a, &theta, beta);
                assert_eq!((i1, q1.to_bits()), (i2, q2.to_bits()), "d {d} k {k} rep {rep}");
            }
        }
    }

    /// From the same state and streams, a step with reward bound 1 plays
    /// the same action and observes the unclipped step's reward clamped to
    /// [-1, 1], flagged exactly when clamping changed it; b differs by
    /// (y_clipped - y) x.
    #[test]
    fn a_clipped_step_is_the_unclipped_step_with_its_reward_clamped() {
        use crate::env::{LinearEnvKind, LinearEnvSpec};
        let (d, k) = (4, 10);
        let spec = LinearEnvSpec {
            kind: LinearEnvKind::Sphere {
                reward_on_raw: true,
                noise_std: 1.0,
            },
            d,
            k,
        };
        let env = LinearEnv::new(&spec, &[7, 1]);
        let mut streams = env.agent_streams(0);
        let mut ws = Workspace::new(d, k);
        let mut vinv = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut vinv, d, 1.0);
        let (mut logdet, mut b) = (0.0, vec![0.0; d]);
        let mut clipped = 0;
        for _ in 0..2000 {
            let (mut s2, mut ws2, mut vinv2, mut logdet2, mut b2) =
                (streams.clone(), ws.clone(), vinv.clone(), logdet, b.clone());
            let c = CpuBackend.ucb_step(
                &env,
                &mut s2,
                &mut ws2,
                AgentState {
                    vinv: &mut vinv2,
                    logdet: Some(&mut logdet2),
                    b: &mut b2,
                },
                0.5,
                1.0,
            );
            let u = CpuBackend.ucb_step(
                &env,
                &mut streams,
                &mut ws,
                AgentState {
                    vinv: &mut vinv,
                    logdet: Some(&mut logdet),
                    b: &mut b,
                },
                0.5,
                f64::INFINITY,
            );
            assert!(!u.clipped);
            assert_eq!(c.arm, u.arm);
            assert_eq!(c.y, u.y.clamp(-1.0, 1.0));
            assert_eq!(c.clipped, u.y.abs() > 1.0);
            for j in 0..d {
                let want = b[j] + (c.y - u.y) * ws.x[j];
                assert!((b2[j] - want).abs() <= 1e-12 * (1.0 + want.abs()), "b[{j}]");
            }
            clipped += u64::from(c.clipped);
        }
        // Raw means lie in [0, 1], so N(mean, 1) leaves [-1, 1] with
        // probability between 0.317 (mean 0) and 0.523 (mean 1); 25% to 60%
        // of 2000 leaves more than 5 standard deviations either side.
        assert!((500..=1200).contains(&clipped), "{clipped} of 2000 clipped");
    }

    #[test]
    fn ties_go_to_lowest_index() {
        let (d, k) = (2, 20);
        let kp = 24;
        let mut x = vec![0.0; d * kp];
        for a in 0..k {
            x[a] = 0.5;
            x[kp + a] = 0.5;
        }
        let a = [1.0, 0.0, 0.0, 1.0];
        let (arm, q) = score_argmax(d, k, &x, &a, &[1.0, 1.0], 1.0);
        assert_eq!(arm, 0);
        assert!((q - 0.5).abs() < 1e-15);
        // Make action 13 strictly best.
        x[13] = 0.6;
        assert_eq!(score_argmax(d, k, &x, &a, &[1.0, 1.0], 1.0).0, 13);
    }
}
