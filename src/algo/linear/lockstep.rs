//! The round loop of every linear algorithm with a batched form, written
//! once: which batched operation ([`LinearOps`]) runs when. The algorithms
//! (`linucb`, `independent`, `random`, `fedlinucb`, `private_fedlinucb`)
//! differ only in the [`LinearBatch`] they describe (width schedule, lambda,
//! sync rule and release, policy); every backend runs this same loop, the
//! CPU with one federation per task or many, the GPU with thousands.
//!
//! Round t = 1..T of every federation: the agents' local steps; when the
//! agents have taken `refactor_every` rank-1 updates since their last
//! factorization, a refactorization; when t is a multiple of the sync
//! period, the sync (which refactorizes too); at a checkpoint, an
//! observation. Runs of rounds with no event between them go to the backend
//! as one chunk (up to [`LinearOps::max_rounds`]), which is how the GPU
//! runs many rounds per launch.
//!
//! FedUCB's syncs depend on each federation's data ([`SyncWhen::Adaptive`]):
//! its federations refactorize and sync on their own schedules inside
//! [`LinearOps::rounds`] (a per-federation mask on every backend), so the
//! loop only cuts chunks at checkpoints, and the sync and message counts
//! come from the backend's observations.
//!
//! [`SyncWhen::Adaptive`]: crate::algo::linear::batch::SyncWhen::Adaptive

use crate::algo::linear::batch::{BatchPoint, LinearBatch, LinearOps, Observation, SyncWhen, Width};
use crate::backend::BatchError;

/// Where a batch stands in the loop (serializable, for snapshots).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Lockstep {
    /// Rounds done.
    pub t: u64,
    /// Rank-1 updates since the last factorization (the same for every
    /// agent: all step every round and all refactorize together).
    since_factor: u32,
    /// Syncs so far.
    syncs: u64,
    #[serde(skip)]
    betas: Vec<f64>,
    #[serde(skip)]
    obs: Vec<Observation>,
}

impl Lockstep {
    /// At round 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs rounds up to `until` (at most the horizon); at each checkpoint
    /// reached, pushes every federation's point onto `points` (one curve per
    /// federation, batch order).
    pub fn advance(
        &mut self,
        batch: &LinearBatch,
        ops: &mut dyn LinearOps,
        until: u64,
        checkpoints: &[u64],
        points: &mut [Vec<BatchPoint>],
    ) -> Result<(), BatchError> {
        let adaptive = batch.adaptive();
        // An adaptive batch refactorizes per federation, in its rounds.
        let refactor_every = if adaptive {
            u32::MAX
        } else {
            batch.refactor_every.max(1)
        };
        let chunk = ops.max_rounds().max(1) as u64;
        let sync_every = batch.sync.as_ref().and_then(|s| match s.when {
            SyncWhen::Every(n) => Some(n.max(1)),
            SyncWhen::Adaptive(_) => None,
        });
        let messages_per_sync = batch.sync.as_ref().map_or(0, |s| s.messages_per_sync);
        while self.t < until {
            let t0 = self.t + 1;
            let next_check = checkpoints.get(checkpoints.partition_point(|&c| c < t0)).copied();
            let mut end = until.min(t0.saturating_add(chunk - 1));
            end = end.min(t0 + u64::from(refactor_every - self.since_factor.min(refactor_every - 1)) - 1);
            if let Some(b) = sync_every {
                end = end.min(t0.div_ceil(b) * b);
            }
            if let Some(c) = next_check {
                end = end.min(c);
            }
            self.betas.clear();
            if let Width::Schedule(beta) = &batch.beta {
                self.betas.extend((t0..=end).map(beta));
            }
            ops.rounds(t0, (end - t0 + 1) as usize, &self.betas)?;
            self.t = end;
            self.since_factor = self.since_factor.saturating_add((end - t0 + 1) as u32);
            if self.since_factor >= refactor_every {
                ops.refactor()?;
                self.since_factor = 0;
            }
            if sync_every.is_some_and(|b| end.is_multiple_of(b)) {
                self.syncs += 1;
                ops.sync(self.syncs)?;
                self.since_factor = 0;
            }
            if next_check == Some(end) {
                ops.observe(&mut self.obs)?;
                for (curve, o) in points.iter_mut().zip(&self.obs) {
                    let (sync_rounds, messages) = if adaptive {
                        (o.syncs, o.messages)
                    } else {
                        (self.syncs, messages_per_sync * self.syncs)
                    };
                    curve.push(BatchPoint {
                        t: end,
                        group_regret: o.group_regret,
                        agent_regret_max: o.agent_regret_max,
                        sync_rounds,
                        messages,
                        cholesky_failures: o.cholesky_failures,
                        clipped_rewards: o.clipped_rewards,
                        beta_clamps: o.beta_clamps,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::linear::batch::{Release, SyncRule};
    use crate::algo::linear::cpu::CpuLinear;
    use crate::env::{LinearEnvKind, LinearEnvSpec};

    /// Operations that record what the loop asked for.
    struct Recorder {
        max: usize,
        log: Vec<String>,
    }

    impl LinearOps for Recorder {
        fn max_rounds(&self) -> usize {
            self.max
        }
        fn rounds(&mut self, t0: u64, count: usize, betas: &[f64]) -> Result<(), BatchError> {
            assert_eq!(betas.len(), count);
            for (r, b) in betas.iter().enumerate() {
                assert_eq!(*b, (t0 + r as u64) as f64, "width of round t is beta(t)");
            }
            self.log.push(format!("r{t0}+{count}"));
            Ok(())
        }
        fn refactor(&mut self) -> Result<(), BatchError> {
            self.log.push("f".into());
            Ok(())
        }
        fn sync(&mut self, index: u64) -> Result<(), BatchError> {
            self.log.push(format!("s{index}"));
            Ok(())
        }
        fn observe(&mut self, out: &mut Vec<Observation>) -> Result<(), BatchError> {
            self.log.push("o".into());
            out.clear();
            out.push(Observation::default());
            Ok(())
        }
    }

    fn batch(federations: usize, sync: Option<SyncRule>) -> LinearBatch {
        LinearBatch {
            env: LinearEnvSpec {
                kind: LinearEnvKind::Sphere {
                    reward_on_raw: false,
                    noise_std: 0.5,
                },
                d: 4,
                k: 12,
            },
            env_keys: (0..federations as u64).map(|f| vec![3, f]).collect(),
            noise_keys: (0..federations as u64 * 3).collect(),
            m: 3,
            lambda: 1.5,
            beta: Width::Schedule(Box::new(|t| t as f64)),
            sync,
            network: None,
            refactor_every: 7,
            random_policy: None,
            reward_bound: f64::INFINITY,
        }
    }

    #[test]
    fn events_fall_where_the_schedule_says() {
        let sync = SyncRule {
            when: SyncWhen::Every(5),
            release: Release::Exact,
            diag: 1.5,
            messages_per_sync: 6,
        };
        let b = batch(1, Some(sync));
        let mut ops = Recorder {
            max: 64,
            log: Vec::new(),
        };
        let mut points = vec![Vec::new()];
        let mut step = Lockstep::new();
        // Stop early once, as a snapshot would, then run to the end (the
        // plan's horizon, its last checkpoint: the caller's bound).
        step.advance(&b, &mut ops, 12, &[3, 10, 20], &mut points).unwrap();
        step.advance(&b, &mut ops, 20, &[3, 10, 20], &mut points).unwrap();
        assert_eq!(ops.log.join(" "), "r1+3 o r4+2 s1 r6+5 s2 o r11+2 r13+3 s3 r16+5 s4 o");
        let p: Vec<(u64, u64, u64)> = points[0].iter().map(|p| (p.t, p.sync_rounds, p.messages)).collect();
        assert_eq!(p, vec![(3, 0, 0), (10, 2, 12), (20, 4, 24)]);
        // Without syncs the refactorization comes every 7 rounds, and a
        // backend's chunk limit splits runs without moving events.
        let mut ops = Recorder {
            max: 4,
            log: Vec::new(),
        };
        Lockstep::new()
            .advance(&batch(1, None), &mut ops, 20, &[], &mut [Vec::new()])
            .unwrap();
        assert_eq!(ops.log.join(" "), "r1+4 r5+3 f r8+4 r12+3 f r15+4 r19+2");
    }

    #[test]
    fn a_batch_of_federations_equals_each_run_alone() {
        let tree = Release::Tree {
            sigma: 0.3,
            levels: 3,
            noise: crate::privacy::tree::NodeNoise::Half,
            lattice: None,
        };
        for release in [Release::Exact, tree] {
            let sync = SyncRule {
                when: SyncWhen::Every(5),
                release,
                diag: 1.5,
                messages_per_sync: 6,
            };
            let run = |b: &LinearBatch| {
                let mut ops = CpuLinear::new(b).unwrap();
                let mut points = vec![Vec::new(); b.federations()];
                Lockstep::new().advance(b, &mut ops, 20, &[7, 20], &mut points).unwrap();
                points
            };
            let all = run(&batch(4, Some(sync.clone())));
            for (f, curve) in all.iter().enumerate() {
                let mut one = batch(4, Some(sync.clone()));
                one.env_keys = vec![one.env_keys[f].clone()];
                one.noise_keys = one.noise_keys[f * 3..(f + 1) * 3].to_vec();
                assert_eq!(&run(&one)[0], curve, "federation {f}");
            }
            assert_ne!(all[0], all[1], "federations have their own streams");
        }
    }
}
