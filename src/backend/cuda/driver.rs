//! The batched driver of the linear family on a [`Launcher`]: all
//! repetitions of a cell step in lockstep, one device thread per
//! (federation, agent); the host only sequences kernels and reads the curve
//! at checkpoints.
//!
//! It reproduces the CPU federations exactly (same streams, same operation
//! order), so under the host emulation its output equals the CPU backend's
//! bit for bit, and on a GPU it differs only where CUDA's f64 log/sin/cos
//! round differently from glibc's. Supported: `linucb`, `independent`,
//! `fedlinucb`, `private_fedlinucb` (protocols ldp, sdp_amp, alt: the tree
//! mechanism) on `linear_sphere`;
//! anything else is [`CudaError::Unsupported`] and runs on the CPU.

use super::CudaError;
use super::launcher::{Arg, DevPtr, Launcher, download_slice, upload_slice};
use crate::algo::Counters;
use crate::algo::linear::fedlinucb::{ZhouConstants, zhou_beta};
use crate::algo::linear::oful::Oful;
use crate::algo::linear::{LinearAlgorithm, LinearConfig, Protocol};
use crate::env::{LinearEnv, LinearEnvKind};
use crate::job::Cell;
use crate::privacy::tree::AgentTrees;
use crate::rng::{fold_key, state_words};
use crate::sim::{CurvePoint, RepResult};
use std::time::Instant;

/// Whether the driver can run this configuration.
pub fn supports(cfg: &LinearConfig) -> Result<(), CudaError> {
    let algo_ok = matches!(
        cfg.algorithm,
        LinearAlgorithm::Linucb | LinearAlgorithm::Independent | LinearAlgorithm::Fedlinucb
    ) || (cfg.algorithm == LinearAlgorithm::PrivateFedlinucb
        && matches!(cfg.protocol, Protocol::Ldp | Protocol::SdpAmp | Protocol::Alt));
    if !algo_ok {
        return Err(CudaError::Unsupported(format!(
            "{:?} has no CUDA kernels yet",
            cfg.algorithm
        )));
    }
    if !matches!(cfg.env.kind, LinearEnvKind::Sphere { .. }) {
        return Err(CudaError::Unsupported(
            "only linear_sphere has a CUDA decision-set kernel yet".into(),
        ));
    }
    if cfg.env.d < 2 {
        return Err(CudaError::Unsupported("d < 2".into()));
    }
    Ok(())
}

struct Bufs {
    theta: DevPtr,
    lanes: DevPtr,
    rstate: DevPtr,
    rspare: DevPtr,
    rhas: DevPtr,
    vinv: DevPtr,
    logdet: DevPtr,
    b: DevPtr,
    gram: DevPtr,
    bias: DevPtr,
    regret: DevPtr,
    round_regret: DevPtr,
    group: DevPtr,
    failures: DevPtr,
    gbuf: DevPtr,
    work: DevPtr,
    base: DevPtr,
    usyn: DevPtr,
    scratch: DevPtr,
    tsum: DevPtr,
    akey: DevPtr,
}

/// Runs repetitions `reps` of `cell` and returns their curves (in `reps`
/// order); `progress` receives agent-steps done since its previous call.
pub fn run_cell(
    l: &mut dyn Launcher,
    cell: &Cell,
    seed: u64,
    reps: &[u32],
    checkpoints: &[u64],
    progress: &dyn Fn(u64),
) -> Result<Vec<RepResult>, CudaError> {
    let cfg = &cell.config;
    supports(cfg)?;
    let start = Instant::now();
    let (nf, m, d, k) = (reps.len(), cfg.m, cfg.env.d, cfg.env.k);
    let n = nf * m;
    let (dd, kp) = (d * d, k.div_ceil(8) * 8);
    let reward_raw = match cfg.env.kind {
        LinearEnvKind::Sphere { reward_on_raw, .. } => reward_on_raw,
        LinearEnvKind::Gap => true,
    };
    let noise_std = match cfg.env.kind {
        LinearEnvKind::Sphere { noise_std, .. } => noise_std,
        LinearEnvKind::Gap => 0.0,
    };
    let zhou = matches!(
        cfg.algorithm,
        LinearAlgorithm::Fedlinucb | LinearAlgorithm::PrivateFedlinucb
    );
    let consts = ZhouConstants::new(cfg);
    let lambda = if zhou { consts.lambda } else { cfg.lambda };
    let private = zhou && consts.sigma > 0.0;
    let width = dd + d;

    // Host-side initial state, exactly as the CPU federations build it.
    let mut theta = Vec::with_capacity(nf * d);
    let mut lanes = Vec::with_capacity(n * 32);
    let mut rstate = Vec::with_capacity(n * 4);
    let mut akey: Vec<u64> = Vec::with_capacity(n);
    for &rep in reps {
        let env = LinearEnv::new(&cfg.env, &[seed, cell.env_scope, u64::from(rep)]);
        theta.extend_from_slice(&env.theta);
        let algo_key = [seed, cell.cell_scope, u64::from(rep)];
        for i in 0..m {
            let (ctx, _uni, rew) = env.agent_stream_keys(i);
            let mut words = [0u64; 32];
            let mut key = ctx.clone();
            key.push(0);
            for lane in 0..8 {
                *key.last_mut().unwrap_or(&mut 0) = lane as u64;
                let w = state_words(&key);
                for (wi, v) in w.iter().enumerate() {
                    words[wi * 8 + lane] = *v;
                }
            }
            lanes.extend_from_slice(&words);
            rstate.extend_from_slice(&state_words(&rew));
            akey.push(fold_key(&AgentTrees::noise_key(&algo_key, i)));
        }
    }
    let mut vinv0 = vec![0.0f64; dd];
    for i in 0..d {
        vinv0[i * d + i] = 1.0 / lambda;
    }
    let vinv_all: Vec<f64> = vinv0.repeat(n);
    let logdet_all = vec![d as f64 * lambda.ln(); n];
    let mut base0 = vec![0.0f64; nf * dd];
    for f in 0..nf {
        for i in 0..d {
            base0[f * dd + i * d + i] = lambda;
        }
    }
    let gstride = ((k - d.min(k)) * (d - 1)).max(1);
    let wstride = d * kp + 2 * kp + 3 * d;
    let z = |len: usize| vec![0.0f64; len];
    let bufs = Bufs {
        theta: upload_slice(l, &theta)?,
        lanes: upload_slice(l, &lanes)?,
        rstate: upload_slice(l, &rstate)?,
        rspare: upload_slice(l, &z(n))?,
        rhas: upload_slice(l, &vec![0i32; n])?,
        vinv: upload_slice(l, &vinv_all)?,
        logdet: upload_slice(l, &logdet_all)?,
        b: upload_slice(l, &z(n * d))?,
        gram: upload_slice(l, &z(n * dd))?,
        bias: upload_slice(l, &z(n * d))?,
        regret: upload_slice(l, &z(n))?,
        round_regret: upload_slice(l, &z(n))?,
        group: upload_slice(l, &z(nf))?,
        failures: upload_slice(l, &vec![0i32; nf])?,
        gbuf: l.alloc_zeroed(n * gstride * 4)?,
        work: l.alloc_zeroed(n * wstride * 8)?,
        base: upload_slice(l, &base0)?,
        usyn: upload_slice(l, &z(nf * d))?,
        scratch: l.alloc_zeroed(n.max(nf) * 3 * dd * 8)?,
        tsum: l.alloc_zeroed(if private { n * width * 8 } else { 8 })?,
        akey: upload_slice(l, &akey)?,
    };
    let (ni, mi, di, ki, kpi) = (n as i32, m as i32, d as i32, k as i32, kp as i32);
    let p = Arg::Ptr;
    let mut results: Vec<Vec<CurvePoint>> = vec![Vec::with_capacity(checkpoints.len()); nf];
    let mut next = checkpoints.iter().copied().peekable();
    let mut since_factor = 0u32;
    let mut syncs = 0u64;
    let mut group = vec![0.0f64; nf];
    let mut regret = vec![0.0f64; n];
    let mut failures = vec![0i32; nf];
    for t in 1..=cfg.horizon {
        let beta = if zhou {
            zhou_beta(cfg, &consts, t)
        } else {
            Oful::beta(cfg, t - 1)
        };
        l.launch(
            "fb_linear_step",
            n,
            &[
                Arg::I32(ni),
                Arg::I32(mi),
                Arg::I32(di),
                Arg::I32(ki),
                Arg::I32(kpi),
                Arg::I32(i32::from(reward_raw)),
                Arg::F64(noise_std),
                Arg::F64(beta),
                p(bufs.theta),
                p(bufs.lanes),
                p(bufs.rstate),
                p(bufs.rspare),
                p(bufs.rhas),
                p(bufs.vinv),
                p(bufs.logdet),
                p(bufs.b),
                p(bufs.gram),
                p(bufs.bias),
                p(bufs.regret),
                p(bufs.round_regret),
                p(bufs.gbuf),
                Arg::I32(gstride as i32),
                p(bufs.work),
                Arg::I32(wstride as i32),
            ],
        )?;
        l.launch(
            "fb_round_reduce",
            nf,
            &[Arg::I32(nf as i32), Arg::I32(mi), p(bufs.round_regret), p(bufs.group)],
        )?;
        since_factor += 1;
        if since_factor >= cfg.refactor_every {
            l.launch(
                "fb_refactor",
                n,
                &[
                    Arg::I32(ni),
                    Arg::I32(mi),
                    Arg::I32(di),
                    p(bufs.base),
                    p(bufs.gram),
                    p(bufs.vinv),
                    p(bufs.logdet),
                    p(bufs.scratch),
                    p(bufs.failures),
                ],
            )?;
            since_factor = 0;
        }
        if zhou && t.is_multiple_of(cfg.batch_size) {
            syncs += 1;
            if private {
                l.launch(
                    "fb_tree_insert",
                    n * width,
                    &[Arg::I32(ni), Arg::I32(di), p(bufs.gram), p(bufs.bias), p(bufs.tsum)],
                )?;
            }
            l.launch(
                "fb_sync_reduce",
                nf * width,
                &[
                    Arg::I32(nf as i32),
                    Arg::I32(mi),
                    Arg::I32(di),
                    Arg::U64(syncs),
                    Arg::I32(i32::from(private)),
                    Arg::F64(consts.sigma),
                    Arg::F64(lambda),
                    p(bufs.tsum),
                    p(bufs.akey),
                    p(bufs.gram),
                    p(bufs.bias),
                    p(bufs.base),
                    p(bufs.usyn),
                ],
            )?;
            l.launch(
                "fb_sync_factor",
                nf,
                &[
                    Arg::I32(nf as i32),
                    Arg::I32(mi),
                    Arg::I32(di),
                    p(bufs.base),
                    p(bufs.vinv),
                    p(bufs.logdet),
                    p(bufs.scratch),
                    p(bufs.failures),
                ],
            )?;
            l.launch(
                "fb_sync_broadcast",
                n,
                &[
                    Arg::I32(ni),
                    Arg::I32(mi),
                    Arg::I32(di),
                    p(bufs.usyn),
                    p(bufs.vinv),
                    p(bufs.logdet),
                    p(bufs.b),
                    p(bufs.gram),
                    p(bufs.bias),
                ],
            )?;
            since_factor = 0;
        }
        if t % 1024 == 0 {
            progress(1024 * n as u64);
        }
        if next.peek() == Some(&t) {
            next.next();
            download_slice(l, bufs.group, &mut group)?;
            download_slice(l, bufs.regret, &mut regret)?;
            download_slice(l, bufs.failures, &mut failures)?;
            for f in 0..nf {
                let per = &regret[f * m..(f + 1) * m];
                results[f].push(CurvePoint {
                    t,
                    group_regret: group[f],
                    agent_regret_mean: group[f] / m as f64,
                    agent_regret_max: per.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    counters: Counters {
                        sync_rounds: syncs,
                        messages: 2 * m as u64 * syncs,
                        cholesky_failures: failures[f] as u64,
                        beta_clamps: 0,
                    },
                });
            }
        }
    }
    progress((cfg.horizon % 1024) * n as u64);
    let wall = start.elapsed().as_secs_f64() / nf.max(1) as f64;
    Ok(reps
        .iter()
        .zip(results)
        .map(|(&rep, points)| RepResult {
            rep,
            points,
            wall_seconds: wall,
        })
        .collect())
}
