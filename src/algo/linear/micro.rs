//! The linear family's micro-benchmarks (`fedbandits bench --kernels`,
//! `--linalg`, declared in its registry entry): its per-step kernels timed
//! one by one on one thread, and the faer crossover table, each line handed
//! to `emit`.

use std::time::Instant;

/// Times the hot kernels of one linear-bandit agent-step (d = 10, K = 100,
/// linear_sphere) on one thread and prints nanoseconds per call, so that the
/// agent-step rate can be traced to its parts (the CPU's kernels).
pub fn kernels(emit: &mut dyn FnMut(&str)) {
    use super::cpu::score::score_argmax;
    use super::step::{AgentState, AgentStep, Workspace};
    use crate::backend::cpu::CpuBackend;
    use crate::env::{LinearEnv, LinearEnvKind, LinearEnvSpec};
    use crate::linalg;
    use crate::rng::normal::fill_normals_f32;
    use std::hint::black_box;

    let (d, k) = (10usize, 100usize);
    let spec = LinearEnvSpec {
        kind: LinearEnvKind::Sphere {
            noise_std: 0.5,
            reward_on_raw: true,
        },
        d,
        k,
    };
    let env = LinearEnv::new(&spec, &[1, 2, 3]);
    let mut streams = env.agent_streams(0);
    let mut ws = Workspace::new(d, k);
    let mut vinv = vec![0.0; d * d];
    linalg::set_scaled_identity(&mut vinv, d, 0.5);
    let mut logdet = 0.0;
    let mut b = vec![0.1; d];
    let mut time = |name: &str, iters: u32, f: &mut dyn FnMut()| {
        for _ in 0..iters / 10 {
            f();
        }
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        let ns = start.elapsed().as_secs_f64() * 1e9 / f64::from(iters);
        emit(&format!("kernel {name} ns_per_call={ns:.1}\n"));
    };
    // f32: what both linear environments draw.
    let mut buf = vec![0.0f32; (k - d) * (d - 1)];
    time("normals_810", 100_000, &mut || {
        fill_normals_f32(&mut streams.lanes, black_box(&mut buf))
    });
    time("decision_set_sphere_d10_k100", 100_000, &mut || {
        env.draw(&mut streams, black_box(&mut ws.ds))
    });
    let theta = vec![0.05; d];
    let x = ws.ds.x.clone();
    time("score_argmax_d10_k100", 100_000, &mut || {
        black_box(score_argmax(d, k, black_box(&x), &vinv, &theta, 1.3));
    });
    let xs = vec![0.3; d];
    let mut w = vec![0.0; d];
    let mut inv2 = vinv.clone();
    time("sherman_morrison_d10", 1_000_000, &mut || {
        black_box(linalg::sherman_morrison(&mut inv2, black_box(&xs), &mut w, d));
    });
    time("ucb_step_d10_k100", 100_000, &mut || {
        black_box(CpuBackend.ucb_step(
            &env,
            &mut streams,
            &mut ws,
            AgentState {
                vinv: &mut vinv,
                logdet: Some(&mut logdet),
                b: &mut b,
            },
            1.0,
            f64::INFINITY,
        ));
    });
    // One tree node's noise at d = 10 (d^2 + d = 110 keyed normals,
    // symmetrized as Dubey & Pentland's PRIVATIZER), and one keyed normal
    // entry by entry.
    let mut node = vec![0.0; d * d + d];
    let mut key = 0u64;
    time("tree_node_noise_d10", 200_000, &mut || {
        key += 1;
        crate::privacy::tree::dubey_noise(black_box(&mut node), d, 1.0, key);
    });
    time("keyed_normal_at", 1_000_000, &mut || {
        key += 1;
        black_box(crate::rng::normal_at(7, black_box(key)));
    });
}

/// The faer crossover table (`bench --linalg`): for d in 4..=256, one
/// thread, nanoseconds per call of the hand-written SPD inverse
/// ([`crate::linalg::spd_inverse`]) against faer's
/// ([`crate::backend::dense::spd_inverse`]), and of the hand-written
/// symmetric UCB scorer ([`crate::algo::linear::cpu::score::score_argmax`]) against the
/// decision set scored as a faer matrix product
/// ([`crate::backend::dense::score_argmax`]), K = 100.
pub fn linalg_crossover(emit: &mut dyn FnMut(&str)) {
    use crate::backend::dense::{self, DenseScratch};
    use crate::linalg;
    use crate::rng::Stream;
    use std::hint::black_box;
    let k = 100usize;
    let kp = k.div_ceil(8) * 8;
    let time = |budget: f64, f: &mut dyn FnMut()| -> f64 {
        f();
        let mut iters = 1u64;
        loop {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            let s = start.elapsed().as_secs_f64();
            if s > budget {
                return s * 1e9 / iters as f64;
            }
            iters *= 2;
        }
    };
    emit(
        "linalg d inverse_handwritten_ns inverse_faer_ns score_handwritten_ns score_faer_gemm_ns (K = 100, one thread)\n",
    );
    let mut s = Stream::new(&[99]);
    for d in [4usize, 8, 16, 32, 48, 64, 96, 128, 192, 256] {
        let mut a = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut a, d, 1.0);
        for _ in 0..d + 2 {
            let v: Vec<f64> = (0..d).map(|_| s.normal()).collect();
            linalg::add_outer(&mut a, &v, d);
        }
        let x: Vec<f64> = (0..d * kp).map(|_| s.normal()).collect();
        let theta: Vec<f64> = (0..d).map(|_| s.normal()).collect();
        let (mut inv, mut w) = (vec![0.0; d * d], vec![0.0; d * d]);
        let mut scratch = DenseScratch::new(d, kp);
        let inv_hand = time(0.05, &mut || {
            let _ = black_box(linalg::spd_inverse(black_box(&a), d, &mut inv, &mut w));
        });
        let inv_faer = time(0.05, &mut || {
            let _ = black_box(dense::spd_inverse(black_box(&a), d, &mut inv, &mut scratch));
        });
        let sc_hand = time(0.05, &mut || {
            black_box(super::cpu::score::score_argmax(
                d,
                k,
                black_box(&x),
                &a,
                &theta,
                1.3,
            ));
        });
        let sc_faer = time(0.05, &mut || {
            black_box(dense::score_argmax(d, k, black_box(&x), &a, &theta, 1.3, &mut scratch));
        });
        emit(&format!(
            "linalg {d} {inv_hand:.0} {inv_faer:.0} {sc_hand:.0} {sc_faer:.0}\n"
        ));
    }
}
