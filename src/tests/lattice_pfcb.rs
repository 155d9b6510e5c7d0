//! `sampler: discrete` for P-FCB's messages (`p_fcb::message_lattice`) end
//! to end: `audit --bits` fails the float messages and passes the lattice
//! ones, a job's rows state the sampler and the lattice with the exact
//! calibration in [0.99, 1] x the target, the output is bit-identical
//! across thread counts, and the device refuses the cell and says why.

use crate::support::runs::{assert_bits_verdicts, f64_at, run_job, str_at, u64_at};
use fedbandits::backend::BatchError;
use fedbandits::job::Job;
use fedbandits::sim::run_batch;
use std::path::Path;

const JOB: &str = "\
name: lattice_pfcb
seed: 23
horizon: 1200
repetitions: 2
checkpoints: {every: 600}
algorithm: p_fcb
environment: procurement
params: {m: 3, producers: 6, delta: 0.01, t_low: 200}
grid: {epsilon: [0.5, 4], sampler: [float, discrete]}
";

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fedbandits-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `audit --bits` (4000 messages per cell): the float cells fail with a
/// delta lower bound above the cell's delta 0.01 (a message of 0 near 0
/// off the grid 2^-53 cannot come from 1), the discrete cells pass; exit 1.
#[test]
fn audit_bits_fails_the_float_messages_and_passes_the_lattice() {
    let rows = assert_bits_verdicts(&tempdir("lattice-pfcb-bits"), JOB, 4000, 4, 0.01);
    assert!(
        rows.iter().all(|r| r.split_whitespace().nth(1) == Some("p_fcb")),
        "{rows:?}"
    );
}

/// Per cell (epsilon, sampler): the final rows' (group regret bits,
/// acct_epsilon, acct_lattice_step, sampler) of each repetition.
type Rows = Vec<((String, String), Vec<(u64, f64, Option<f64>)>)>;

fn run(dir: &Path, threads: &str) -> Rows {
    let mut rows = std::collections::BTreeMap::<(String, String), Vec<(u64, f64, Option<f64>)>>::new();
    for b in &run_job(dir, "lattice_pfcb", JOB, threads) {
        for i in (0..b.num_rows()).filter(|&i| u64_at(b, "t", i) == 1200) {
            let key = (format!("{}", f64_at(b, "epsilon", i).unwrap()), str_at(b, "sampler", i));
            rows.entry(key).or_default().push((
                f64_at(b, "group_regret", i).unwrap().to_bits(),
                f64_at(b, "acct_epsilon", i).unwrap(),
                f64_at(b, "acct_lattice_step", i),
            ));
        }
    }
    rows.into_iter().collect()
}

/// Both samplers at epsilon 0.5 and 4: every figure in [0.99, 1] x the
/// target; the discrete cells' lattice step a power of two at most 1, the
/// float cells' null; regrets that differ between the samplers (different
/// draws) and are bit-identical at 1 and 2 threads.
#[test]
fn discrete_p_fcb_cells_state_their_lattice_and_meet_the_target() {
    let dir = tempdir("lattice-pfcb");
    let one = run(&dir, "1");
    assert_eq!(one, run(&dir, "2"), "the output depends on the thread count");
    assert_eq!(one.len(), 4, "{one:?}");
    for ((eps, sampler), reps) in &one {
        let target: f64 = eps.parse().unwrap();
        let float = &one.iter().find(|((e, s), _)| e == eps && s == "float").unwrap().1;
        assert_eq!(reps.len(), 2);
        for (r, f) in reps.iter().zip(float) {
            let (regret, e, step) = *r;
            assert!(e <= target && e >= 0.99 * target, "{eps} {sampler}: {e}");
            match (sampler.as_str(), step) {
                ("float", s) => assert_eq!(s, None),
                (_, Some(s)) => {
                    assert!(s <= 1.0 && s.log2().fract() == 0.0, "step {s}");
                    assert_ne!(regret, f.0, "{eps}: the samplers drew the same regret");
                }
                (_, None) => panic!("{eps}: no lattice step"),
            }
        }
    }
}

/// A discrete P-FCB cell on the (emulated) device: refused, naming the
/// sampler, never drawn with the kernel's float normals.
#[test]
fn the_device_refuses_discrete_p_fcb_and_says_why() {
    let job = Job::parse(
        Path::new("p.yaml"),
        "horizon: 300\nalgorithm: p_fcb\nenvironment: procurement\nparams: {m: 2, producers: 4, epsilon: 1, delta: 0.01, sampler: discrete}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dev = crate::support::emulated::emulated();
    let e = run_batch(&job.cells[0], 1, &[0], &[300], &dev, &|_| {}).unwrap_err();
    assert!(
        matches!(e, BatchError::Unsupported(_)) && e.to_string().contains("sampler: discrete"),
        "{e}"
    );
}
