//! The CPU's [`LinearOps`]: each federation of a [`LinearBatch`] keeps its
//! agents in an [`AgentBank`] and steps them with the fused CPU step
//! ([`CpuBackend::ucb_step`]); federations run on rayon's pool when the batch
//! has more than one (the runner's per-repetition tasks hold one each).
//!
//! The state serializes whole (every random stream included), so a snapshot
//! of a running repetition resumes bit for bit.

use super::CpuBackend;
use super::bank::AgentBank;
use crate::backend::{BatchError, LinearBatch, LinearOps, Observation, Release};
use crate::env::LinearEnv;
use crate::linalg;
use crate::privacy::tree::{AgentTrees, symmetric_gaussian};
use crate::privacy::vecsum::VecSum;
use crate::rng::Stream;
use rayon::prelude::*;

/// The CPU state of every federation of a batch.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CpuLinear {
    feds: Vec<Fed>,
    lambda: f64,
}

/// One federation.
#[derive(serde::Serialize, serde::Deserialize)]
struct Fed {
    env: LinearEnv,
    bank: AgentBank,
    /// lambda I + W_syn.
    base: Vec<f64>,
    /// U_syn.
    u_syn: Vec<f64>,
    privatizer: Privatizer,
    /// The random policy's per-agent pick streams (empty for UCB).
    picks: Vec<Stream>,
    /// A leaf and a release (workspace, d x d + d).
    leaf: Vec<f64>,
    release: Vec<f64>,
    group: f64,
}

/// How a federation's sync releases the agents' sums.
#[derive(serde::Serialize, serde::Deserialize)]
enum Privatizer {
    /// Exact sums.
    Exact,
    /// Per-agent trees with symmetric Gaussian node noise.
    Trees { trees: AgentTrees, sigma: f64 },
    /// The shuffle vector-summation protocol.
    VecSum {
        vs: Box<VecSum>,
        agents: Vec<Stream>,
        shuffler: Stream,
    },
}

impl CpuLinear {
    /// The initial state of every federation of `batch` (V = lambda I,
    /// b = 0, every stream at its start).
    pub fn new(batch: &LinearBatch) -> Result<Self, BatchError> {
        let (nf, m, d) = (batch.federations(), batch.m, batch.env.d);
        let bad = |what: &str| BatchError::Unsupported(format!("{what} for {nf} federations of {m} agents"));
        let release = batch.sync.as_ref().map(|s| &s.release);
        if matches!(release, Some(Release::Tree { .. })) && batch.noise_keys.len() != nf * m {
            return Err(bad("a tree release needs one noise key per agent"));
        }
        if let Some(Release::VecSum { keys, .. }) = release
            && keys.len() != nf * (m + 1)
        {
            return Err(bad("sdp_vecsum needs M + 1 stream keys per federation"));
        }
        if batch.random_policy.as_ref().is_some_and(|k| k.len() != nf * m) {
            return Err(bad("a random policy needs one key per agent"));
        }
        let width = d * d + d;
        let mut base = vec![0.0; d * d];
        linalg::set_scaled_identity(&mut base, d, batch.lambda);
        let feds = batch
            .env_keys
            .iter()
            .enumerate()
            .map(|(f, key)| {
                let env = LinearEnv::new(&batch.env, key);
                let privatizer = match release {
                    Some(Release::Tree { sigma, levels }) => Privatizer::Trees {
                        trees: AgentTrees::with_keys(batch.noise_keys[f * m..(f + 1) * m].to_vec(), width, *levels),
                        sigma: *sigma,
                    },
                    Some(Release::VecSum { proto, keys }) => {
                        let k = &keys[f * (m + 1)..(f + 1) * (m + 1)];
                        Privatizer::VecSum {
                            vs: proto.clone(),
                            agents: k[..m].iter().map(|k| Stream::new(k)).collect(),
                            shuffler: Stream::new(&k[m]),
                        }
                    }
                    Some(Release::Exact) | None => Privatizer::Exact,
                };
                let picks = batch
                    .random_policy
                    .as_ref()
                    .map(|k| k[f * m..(f + 1) * m].iter().map(|k| Stream::new(k)).collect())
                    .unwrap_or_default();
                Fed {
                    bank: AgentBank::new(&env, m, batch.lambda, batch.reward_bound),
                    env,
                    base: base.clone(),
                    u_syn: vec![0.0; d],
                    privatizer,
                    picks,
                    leaf: vec![0.0; width],
                    release: vec![0.0; width],
                    group: 0.0,
                }
            })
            .collect();
        Ok(Self {
            feds,
            lambda: batch.lambda,
        })
    }

    /// Runs `f` on every federation (on rayon's pool when there are several).
    fn each(&mut self, f: impl Fn(&mut Fed) + Send + Sync) {
        if self.feds.len() == 1 {
            f(&mut self.feds[0]);
        } else {
            self.feds.par_iter_mut().for_each(f);
        }
    }
}

impl Fed {
    /// One round of every agent: the random policy, or a UCB step with width
    /// `beta` (randomized into the vector-summation windows when private).
    fn round(&mut self, beta: f64) {
        let mut total = 0.0;
        let bank = &mut self.bank;
        if !self.picks.is_empty() {
            for (i, pick) in self.picks.iter_mut().enumerate() {
                let s = &mut bank.streams[i];
                self.env.draw(s, &mut bank.ws.ds);
                let arm = pick.below(bank.ws.ds.k as u64) as usize;
                let mean = bank.ws.ds.mean[arm];
                let _ = self.env.reward(s, mean); // keeps reward streams aligned with learners
                let r = bank.ws.ds.best - mean;
                bank.regret[i] += r;
                total += r;
            }
        } else {
            for i in 0..bank.m {
                let st = bank.step(i, &self.env, &CpuBackend, beta);
                if let Privatizer::VecSum { vs, agents, .. } = &mut self.privatizer {
                    // An observation the protocol's coordinate clipping
                    // changed counts once, like one whose reward was clipped.
                    if vs.add_point(&bank.ws.x, st.y, &mut agents[i]) && !st.clipped {
                        bank.clipped += 1;
                    }
                }
                total += st.regret();
            }
        }
        self.group += total;
    }

    /// The server's release becomes every agent's base and bias.
    fn sync(&mut self, lambda: f64) {
        let (d, dd, m) = (self.bank.d, self.bank.d * self.bank.d, self.bank.m);
        let released = match &mut self.privatizer {
            Privatizer::Trees { trees, sigma } => {
                // Server output: sum over agents of their noisy prefix sums.
                self.release.fill(0.0);
                let sigma = *sigma;
                for i in 0..m {
                    self.bank.local_leaf(i, &mut self.leaf);
                    // The tree is sized for floor(T/B) leaves, so it cannot be full.
                    let _ = trees.contribute(i, &self.leaf, &mut self.release, |z, key| {
                        symmetric_gaussian(z, d, sigma, key)
                    });
                }
                true
            }
            Privatizer::VecSum { vs, shuffler, .. } => {
                vs.close_batch(shuffler, &mut self.release);
                true
            }
            Privatizer::Exact => false,
        };
        if released {
            linalg::set_scaled_identity(&mut self.base, d, lambda);
            for (b, r) in self.base.iter_mut().zip(&self.release[..dd]) {
                *b += r;
            }
            self.u_syn.copy_from_slice(&self.release[dd..]);
        } else {
            for i in 0..m {
                for (b, g) in self.base.iter_mut().zip(&self.bank.gram[i * dd..(i + 1) * dd]) {
                    *b += g;
                }
                for (u, g) in self.u_syn.iter_mut().zip(&self.bank.bias[i * d..(i + 1) * d]) {
                    *u += g;
                }
            }
        }
        self.bank.reset_all(&self.base, &self.u_syn, &CpuBackend);
    }
}

impl LinearOps for CpuLinear {
    fn max_rounds(&self) -> usize {
        usize::MAX
    }

    fn rounds(&mut self, _t0: u64, betas: &[f64]) -> Result<(), BatchError> {
        self.each(|f| {
            for &beta in betas {
                f.round(beta);
            }
        });
        Ok(())
    }

    fn refactor(&mut self) -> Result<(), BatchError> {
        self.each(|f| {
            for i in 0..f.bank.m {
                f.bank.refactor(i, &f.base, &CpuBackend);
            }
        });
        Ok(())
    }

    fn sync(&mut self, _index: u64) -> Result<(), BatchError> {
        let lambda = self.lambda;
        self.each(|f| f.sync(lambda));
        Ok(())
    }

    fn observe(&mut self, out: &mut Vec<Observation>) -> Result<(), BatchError> {
        out.clear();
        out.extend(self.feds.iter().map(|f| Observation {
            group_regret: f.group,
            agent_regret_max: f.bank.regret.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            cholesky_failures: f.bank.cholesky_failures,
            clipped_rewards: f.bank.clipped,
        }));
        Ok(())
    }
}
