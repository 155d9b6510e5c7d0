//! The batched driver of the linear family on a [`Launcher`]: all
//! repetitions of a cell step in lockstep, eight device threads per agent in
//! the cooperative kernel (one per agent in the fallback); the host only
//! sequences kernels and reads the curve at checkpoints.
//!
//! It runs a [`LinearBatch`] (the algorithm layer's description of a cell:
//! width schedule, lambda, sync rule, noise keys) and reproduces the CPU
//! federations exactly (same streams, same operation order, portable
//! transcendental functions), so under the host emulation its output equals
//! the CPU backend's bit for bit. Supported: every batch the algorithm layer
//! builds (`random`, `linucb`, `independent`, `fedlinucb`,
//! `private_fedlinucb` with the tree mechanism) on `linear_sphere`, and on
//! `linear_gap` where the cooperative kernel fits ([`supports`]).

use super::CudaError;
use super::launcher::{Arg, DevPtr, Launcher, bytemuck_like, download_slice, upload_slice};
use crate::backend::{BatchPoint, LinearBatch};
use crate::env::{LinearEnv, LinearEnvKind};
use crate::rng::state_words;

/// Whether the driver can run this batch: linear_gap and `random` exist only
/// on the cooperative kernel, so they need its shape to fit the device's
/// shared memory; d >= 2; one key per agent where keys are needed.
pub fn supports(batch: &LinearBatch, shared_limit: usize) -> Result<(), CudaError> {
    let gap = matches!(batch.env.kind, LinearEnvKind::Gap);
    if batch.env.d < 2 {
        return Err(CudaError::Unsupported("d < 2".into()));
    }
    if (gap || batch.random_policy.is_some()) && coop_step_shape(gap, batch.env.d, batch.env.k, shared_limit).is_none()
    {
        return Err(CudaError::Unsupported(format!(
            "{} at d = {}, K = {}: four agents' state exceeds the device's {shared_limit} bytes of shared memory per block",
            if gap { "linear_gap" } else { "random" },
            batch.env.d,
            batch.env.k
        )));
    }
    if batch
        .random_policy
        .as_ref()
        .is_some_and(|k| k.len() != batch.federations() * batch.m)
    {
        return Err(CudaError::Unsupported(
            "a random batch needs one policy key per agent".into(),
        ));
    }
    if batch.sync.is_some_and(|s| s.sigma > 0.0) && batch.noise_keys.len() != batch.federations() * batch.m {
        return Err(CudaError::Unsupported(
            "a private batch needs one noise key per agent".into(),
        ));
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
    ustate: DevPtr,
    pstate: DevPtr,
}

/// Runs every federation of `batch` and returns their curves at
/// `checkpoints`; `progress` receives agent-steps done since its previous
/// call.
pub fn run_batch(
    l: &mut dyn Launcher,
    batch: &LinearBatch,
    checkpoints: &[u64],
    progress: &dyn Fn(u64),
) -> Result<Vec<Vec<BatchPoint>>, CudaError> {
    let shared_limit = l.max_shared_per_block();
    supports(batch, shared_limit)?;
    let (nf, m, d, k) = (batch.federations(), batch.m, batch.env.d, batch.env.k);
    let n = nf * m;
    let (dd, kp) = (d * d, k.div_ceil(8) * 8);
    let (reward_raw, noise_std) = match batch.env.kind {
        LinearEnvKind::Sphere {
            reward_on_raw,
            noise_std,
        } => (reward_on_raw, noise_std),
        LinearEnvKind::Gap => (true, 0.0),
    };
    let lambda = batch.lambda;
    let sigma = batch.sync.map_or(0.0, |s| s.sigma);
    let private = sigma > 0.0;
    let width = dd + d;

    // Host-side initial state, exactly as the CPU federations build it.
    let mut theta = Vec::with_capacity(nf * d);
    let mut lanes = Vec::with_capacity(n * 32);
    let mut rstate = Vec::with_capacity(n * 4);
    let mut ustate: Vec<u64> = Vec::with_capacity(n * 4);
    for key in &batch.env_keys {
        let env = LinearEnv::new(&batch.env, key);
        theta.extend_from_slice(&env.theta);
        for i in 0..m {
            let (ctx, uni, rew) = env.agent_stream_keys(i);
            ustate.extend_from_slice(&state_words(&uni));
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
        }
    }
    let akey: Vec<u64> = if private { batch.noise_keys.clone() } else { vec![0; n] };
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
    let gap = matches!(batch.env.kind, LinearEnvKind::Gap);
    let coop = coop_step_shape(gap, d, k, shared_limit);
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
        // Per-agent decision-set scratch only for the one-thread-per-agent
        // kernel; the cooperative one keeps the set in shared memory.
        gbuf: l.alloc_zeroed(if coop.is_some() { 8 } else { n * gstride * 4 })?,
        work: l.alloc_zeroed(if coop.is_some() { 8 } else { n * wstride * 8 })?,
        base: upload_slice(l, &base0)?,
        usyn: upload_slice(l, &z(nf * d))?,
        scratch: l.alloc_zeroed(n.max(nf) * 3 * dd * 8)?,
        tsum: l.alloc_zeroed(if private { n * width * 8 } else { 8 })?,
        akey: upload_slice(l, &akey)?,
        ustate: upload_slice(l, &ustate)?,
        pstate: match &batch.random_policy {
            Some(keys) => upload_slice(l, &keys.iter().flat_map(|k| state_words(k)).collect::<Vec<u64>>())?,
            None => l.alloc_zeroed(8)?,
        },
    };
    let (ni, mi, di, ki, kpi) = (n as i32, m as i32, d as i32, k as i32, kp as i32);
    let p = Arg::Ptr;
    let mut results: Vec<Vec<BatchPoint>> = vec![Vec::with_capacity(checkpoints.len()); nf];
    let refactor_every = batch.refactor_every.max(1);
    let sync_every = batch.sync.map(|s| s.every);
    let messages_per_sync = batch.sync.map_or(0, |s| s.messages_per_sync);
    let mut next = checkpoints.iter().copied().peekable();
    let mut since_factor = 0u32;
    let mut syncs = 0u64;
    let mut group = vec![0.0f64; nf];
    let mut regret = vec![0.0f64; n];
    let mut failures = vec![0i32; nf];
    // Rounds run in chunks that end at every event needing other kernels
    // (refactorization, sync, checkpoint, progress report), so a chunk's
    // rounds touch only each agent's own state: one launch of the
    // cooperative kernel runs them all. The fallback kernel runs one round
    // per launch.
    let chunk_max = if coop.is_some() {
        (RR_BUDGET / (n * 8).max(1)).clamp(1, CHUNK_MAX)
    } else {
        1
    };
    let rr = l.alloc_zeroed(if coop.is_some() { chunk_max * n * 8 } else { 8 })?;
    let betas_dev = l.alloc_zeroed(chunk_max * 8)?;
    let mut betas = vec![0.0f64; chunk_max];
    // The step kernels' arguments: shape, then (per kernel) the width, then
    // the agents' state, then (per kernel) the outputs.
    let shape = [
        Arg::I32(ni),
        Arg::I32(mi),
        Arg::I32(di),
        Arg::I32(ki),
        Arg::I32(kpi),
        Arg::I32(i32::from(reward_raw)),
        Arg::F64(noise_std),
    ];
    let agent_state = [
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
    ];
    let mut t = 1u64;
    while t <= batch.horizon {
        let mut end = batch.horizon.min(t + chunk_max as u64 - 1);
        end = end.min(t + u64::from(refactor_every - since_factor.min(refactor_every - 1)) - 1);
        if let Some(b) = sync_every {
            end = end.min(t.div_ceil(b).max(1) * b);
        }
        if let Some(&c) = next.peek() {
            end = end.min(c.max(t));
        }
        end = end.min(t.div_ceil(1024).max(1) * 1024);
        let rounds = (end - t + 1) as usize;
        match coop {
            Some((agents, shared)) => {
                for (r, bv) in betas.iter_mut().take(rounds).enumerate() {
                    *bv = (batch.beta)(t + r as u64);
                }
                l.upload(betas_dev, bytemuck_like::as_bytes(&betas[..rounds]))?;
                let ri = i32::try_from(rounds).map_err(|_| CudaError::Unsupported("chunk too long".into()))?;
                l.launch_grid(
                    "fb_linear_rounds_coop",
                    n.div_ceil(agents),
                    agents * COOP_LANES,
                    shared,
                    &[
                        &shape[..],
                        &[
                            Arg::I32(i32::from(gap)),
                            p(bufs.ustate),
                            Arg::I32(i32::from(batch.random_policy.is_some())),
                            p(bufs.pstate),
                            Arg::I32(ri),
                            p(betas_dev),
                        ],
                        &agent_state[..],
                        &[p(rr)],
                    ]
                    .concat(),
                )?;
                l.launch(
                    "fb_rounds_reduce",
                    nf,
                    &[Arg::I32(nf as i32), Arg::I32(mi), Arg::I32(ri), p(rr), p(bufs.group)],
                )?;
            }
            None => {
                l.launch(
                    "fb_linear_step",
                    n,
                    &[
                        &shape[..],
                        &[Arg::F64((batch.beta)(t))],
                        &agent_state[..],
                        &[
                            p(bufs.round_regret),
                            p(bufs.gbuf),
                            Arg::I32(gstride as i32),
                            p(bufs.work),
                            Arg::I32(wstride as i32),
                        ],
                    ]
                    .concat(),
                )?;
                l.launch(
                    "fb_round_reduce",
                    nf,
                    &[Arg::I32(nf as i32), Arg::I32(mi), p(bufs.round_regret), p(bufs.group)],
                )?;
            }
        }
        t = end;
        since_factor += rounds as u32 - 1;
        since_factor += 1;
        if since_factor >= refactor_every {
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
        if sync_every.is_some_and(|b| t.is_multiple_of(b)) {
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
                    Arg::F64(sigma),
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
        if t.is_multiple_of(1024) {
            progress(1024 * n as u64);
        }
        if next.peek() == Some(&t) {
            next.next();
            download_slice(l, bufs.group, &mut group)?;
            download_slice(l, bufs.regret, &mut regret)?;
            download_slice(l, bufs.failures, &mut failures)?;
            for f in 0..nf {
                let per = &regret[f * m..(f + 1) * m];
                results[f].push(BatchPoint {
                    t,
                    group_regret: group[f],
                    agent_regret_max: per.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    sync_rounds: syncs,
                    messages: messages_per_sync * syncs,
                    cholesky_failures: failures[f] as u64,
                });
            }
        }
        t += 1;
    }
    progress((batch.horizon % 1024) * n as u64);
    Ok(results)
}

/// Agents per block and dynamic shared memory of `fb_linear_rounds_coop` for
/// the environment (`gap`: linear_gap, else linear_sphere) and (d, K): as
/// many agents as fit the device's shared memory per block (its opt-in
/// limit, read when it opens), a multiple of 4 (whole warps) up to 16 (the
/// layout is kernels/linear.cu's fb_coop_agent_doubles); `None` when not
/// even 4 fit (large d): then linear_sphere runs on the one-thread-per-agent
/// `fb_linear_step` and linear_gap is unsupported.
pub fn coop_step_shape(gap: bool, d: usize, k: usize, shared_limit: usize) -> Option<(usize, usize)> {
    let kp = k.div_ceil(8) * 8;
    let fixed = d.min(k);
    let normals = if gap { k * d } else { (k - fixed) * d.saturating_sub(1) };
    let doubles = d * d + 2 * kp + (4 + COOP_LANES) * d + 4 + if gap { 3 * kp } else { 0 } + normals.div_ceil(2);
    let bytes = doubles * 8;
    let agents = (shared_limit / bytes.max(1)).min(16) / 4 * 4;
    (agents >= 4).then_some((agents, agents * bytes))
}

/// Most rounds one launch of `fb_linear_rounds_coop` runs.
const CHUNK_MAX: usize = 64;
/// Bytes for the per-(round, agent) regrets of a chunk (caps the chunk for
/// very large batches).
const RR_BUDGET: usize = 256 << 20;

/// Threads per block of the cooperative kernels (a multiple of 32).
pub const COOP_BLOCK: usize = 128;
/// Threads per agent in `fb_score_coop`.
pub const COOP_LANES: usize = 8;

/// Scores `n` agents' column-major decision sets (`x`: n x d x kp) with
/// their V^{-1} (`a`: n x d x d) and theta_hat (`theta`: n x d) on the
/// cooperative kernel `fb_score_coop`, returning each agent's (arm, x^T A x)
/// -- bit for bit the CPU scorer's ([`crate::backend::cpu::score_argmax`]).
/// V^{-1} is staged in shared memory when a block's agents fit in 48 KiB.
#[allow(clippy::too_many_arguments)]
pub fn score_batch(
    l: &mut dyn Launcher,
    d: usize,
    k: usize,
    kp: usize,
    beta: f64,
    x: &[f64],
    a: &[f64],
    theta: &[f64],
) -> Result<Vec<(usize, f64)>, CudaError> {
    let n = theta.len() / d.max(1);
    if x.len() != n * d * kp || a.len() != n * d * d || k > kp || !kp.is_multiple_of(8) {
        return Err(CudaError::Unsupported("score_batch: inconsistent shapes".into()));
    }
    let per_block = COOP_BLOCK / COOP_LANES;
    // Per agent: V^{-1} and theta when staged, then each lane's x scratch.
    let scratch = COOP_LANES * d;
    let limit = l.max_shared_per_block();
    let stage = per_block * (d * d + d + scratch) * 8 <= limit;
    let shared = per_block * (if stage { d * d + d } else { 0 } + scratch) * 8;
    if shared > limit {
        return Err(CudaError::Unsupported(format!(
            "score_batch: d = {d} needs {shared} bytes of shared memory"
        )));
    }
    let (xp, ap, tp) = (upload_slice(l, x)?, upload_slice(l, a)?, upload_slice(l, theta)?);
    let arms = upload_slice(l, &vec![0i32; n])?;
    let quads = upload_slice(l, &vec![0.0f64; n])?;
    let int = |v: usize| i32::try_from(v).map_err(|_| CudaError::Unsupported(format!("size {v} exceeds i32")));
    l.launch_grid(
        "fb_score_coop",
        n.div_ceil(per_block).max(1),
        COOP_BLOCK,
        shared,
        &[
            Arg::I32(int(n)?),
            Arg::I32(int(d)?),
            Arg::I32(int(k)?),
            Arg::I32(int(kp)?),
            Arg::I32(i32::from(stage)),
            Arg::F64(beta),
            Arg::Ptr(xp),
            Arg::Ptr(ap),
            Arg::Ptr(tp),
            Arg::Ptr(arms),
            Arg::Ptr(quads),
        ],
    )?;
    let mut arm = vec![0i32; n];
    let mut quad = vec![0.0f64; n];
    download_slice(l, arms, &mut arm)?;
    download_slice(l, quads, &mut quad)?;
    Ok(arm.into_iter().map(|v| v.max(0) as usize).zip(quad).collect())
}
