//! Fuzzing the job loader and grid expansion (proptest, in the normal test
//! run).
//!
//! Two generators feed [`Job::parse`]:
//! - `structured`: job files assembled from the registry (every top-level
//!   key, every algorithm, environment and parameter, values at and beyond
//!   each parameter's range, wrong types, grids of 0 to 4 values), so that
//!   inputs get past the YAML parser and into validation and expansion;
//! - `mutated`: the bundled `jobs/*.yaml` and the regression corpus
//!   (`src/tests/job_corpus/`) with byte-level edits (deletions, YAML
//!   punctuation, anchors, tags, BOMs, extreme numbers, duplicated lines).
//!
//! The property, for every input: no panic; a rejection is
//! [`JobError::Invalid`] naming the file, with at least one problem, each
//! with a key or a line within the file and a message; an accepted job
//! satisfies the grid's invariants (cells within `MAX_CELLS`, distinct cell
//! keys, agent-steps equal to the sum over cells, shards that partition the
//! units), `validate` and `plan` render it, and parsing is deterministic.
//!
//! Cases per generator: 1000 in the normal run; `FEDBANDITS_FUZZ_CASES=N`
//! for long runs, `FEDBANDITS_FUZZ_SEED` for other inputs,
//! `FEDBANDITS_FUZZ_LAST=DIR` to keep each generator's current input in
//! DIR/<generator> (what an abort leaves behind) (`cargo test --release --test integration fuzz_job::`). Failures are shrunk by proptest and
//! saved next to this file (`fuzz_job.proptest-regressions`, replayed first
//! on every run); minimal inputs worth keeping go to `job_corpus/`, which
//! `corpus_files_are_handled` replays with their expected outcome.

use fedbandits::algo::family;
use fedbandits::algo::family::params as all_params;
use fedbandits::algo::params::{self, Kind};
use fedbandits::cli::{plan_text, validate_text};
use fedbandits::job::{Job, JobError, MAX_CELLS};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngAlgorithm, TestRng, TestRunner};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

const FILE: &str = "fuzz.yaml";

fn cases() -> u32 {
    std::env::var("FEDBANDITS_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    }
}

/// The property. Returns what happened, for the corpus test.
fn check(text: &str) -> Result<Outcome, TestCaseError> {
    // Lines as YAML counts them: "\r\n", "\n" and a lone "\r" (as editors
    // do) each end one.
    let lines = text
        .replace("\r\n", "\n")
        .chars()
        .filter(|&c| c == '\n' || c == '\r')
        .count()
        + 1;
    match Job::parse(Path::new(FILE), text) {
        Err(JobError::Io { .. }) => Err(TestCaseError::fail("parsing text gave an I/O error")),
        Err(e @ JobError::Invalid { .. }) => {
            let JobError::Invalid { path, problems } = &e else {
                unreachable!()
            };
            prop_assert_eq!(path, FILE);
            prop_assert!(!problems.is_empty(), "rejected with no problem");
            for p in problems {
                prop_assert!(
                    p.line.is_some() || !p.key.is_empty(),
                    "problem without a location: {:?}",
                    p
                );
                if let Some(l) = p.line {
                    prop_assert!(
                        l >= 1 && l <= lines + 1,
                        "line {} outside the file's {} lines: {:?}",
                        l,
                        lines,
                        p
                    );
                }
                prop_assert!(!p.message.trim().is_empty(), "problem without a message: {:?}", p);
            }
            prop_assert!(e.to_string().starts_with(FILE));
            Ok(Outcome::Rejected(problems.iter().map(|p| p.key.clone()).collect()))
        }
        Ok(job) => {
            prop_assert!(!job.cells.is_empty());
            prop_assert!(job.cells.len() <= MAX_CELLS);
            let keys: HashSet<_> = job.cells.iter().map(|c| c.key.clone()).collect();
            prop_assert_eq!(keys.len(), job.cells.len(), "two cells share a key");
            let total = job.cells.iter().try_fold(0u64, |acc, c| {
                (c.config.agents() as u64)
                    .checked_mul(c.config.family().horizon())
                    .and_then(|s| s.checked_mul(u64::from(job.repetitions)))
                    .and_then(|s| acc.checked_add(s))
            });
            prop_assert_eq!(total, Some(job.total_agent_steps()));
            for tasks in [1, 3, 64] {
                let loads = fedbandits::job::shard::shard_loads(&job.cells, job.repetitions, tasks);
                prop_assert_eq!(loads.len(), tasks);
                let units: usize = loads.iter().map(|l| l.0).sum();
                prop_assert_eq!(units, job.cells.len() * job.repetitions as usize);
                let steps: u64 = loads.iter().map(|l| l.1).sum();
                prop_assert_eq!(steps, job.total_agent_steps());
            }
            let rounds = job.checkpoint_rounds();
            prop_assert!(rounds.last() == Some(&job.horizon) && rounds.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(validate_text(&job, 4).contains("totals:"));
            let request = fedbandits::cli::text::PlanRequest {
                tasks: 7,
                threads: 2,
                model: &fedbandits::sim::cost::TimeModel::model(),
                all: false,
                out: None,
                finished: &Default::default(),
                cold_cache: false,
            };
            prop_assert!(plan_text(&job, &request).contains("results:"));
            let again = Job::parse(Path::new(FILE), text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again.identity(), job.identity());
            Ok(Outcome::Accepted(job.cells.len()))
        }
    }
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Accepted(usize),
    Rejected(Vec<String>),
}

// ---- structured generator -------------------------------------------------

/// Scalars of every YAML type, at the edges that matter to the loader.
fn any_scalar() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "0",
        "1",
        "2",
        "-1",
        "0.5",
        "1.5",
        "10.5",
        "1e3",
        "1e12",
        "1e13",
        "1e308",
        "-1e308",
        "1e-320",
        ".inf",
        "-.inf",
        ".nan",
        "-0.0",
        "255",
        "65535",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "0x10",
        "0o17",
        "true",
        "false",
        "yes",
        "null",
        "~",
        "''",
        "'1'",
        "abc",
        "\"a b\"",
        "[]",
        "{}",
        "[1, 2]",
        "{a: 1}",
        "!!str 3",
        "!!binary aGk=",
        "'\u{00e9}\u{4e2d}'",
    ])
    .prop_map(str::to_owned)
}

/// Values for one parameter: mostly in its range (so that jobs get past
/// validation into expansion), sometimes at or just beyond its edges, or of
/// another type.
fn param_value(kind: Kind) -> BoxedStrategy<String> {
    let (inside, edges): (Vec<String>, Vec<String>) = match kind {
        Kind::Int { min, max } => {
            let inside = [min, min.saturating_add(1), 2, 3, 5, 10, 100, max]
                .into_iter()
                .filter(|x| (min..=max).contains(x))
                .map(|x| x.to_string())
                .collect();
            let edges = [min.saturating_sub(1), max.saturating_add(1)]
                .iter()
                .map(i64::to_string)
                .collect();
            (inside, edges)
        }
        Kind::Float { min, max, .. } => {
            // Inside: what the loader's own range check accepts (finite).
            let ok = |x: f64| x.is_finite() && kind.check(&params::Value::Float(x)).is_ok();
            let candidates = [
                min,
                max,
                0.0,
                1e-300,
                0.05,
                0.5,
                1.0,
                4.0,
                1e12,
                1e13,
                f64::INFINITY,
                (min + max) / 2.0,
            ];
            let inside = candidates.iter().copied().filter(|&x| ok(x)).map(yaml_float).collect();
            let mut edges: Vec<String> = candidates.iter().copied().filter(|&x| !ok(x)).map(yaml_float).collect();
            edges.extend(
                [min - 1.0, max + 1.0, f64::NAN]
                    .into_iter()
                    .filter(|x| !x.is_infinite())
                    .map(yaml_float),
            );
            (inside, edges)
        }
        Kind::Choice(words) => (words.iter().map(|w| (*w).to_owned()).collect(), vec!["bogus".into()]),
        Kind::Bool => (vec!["true".into(), "false".into()], vec!["yes".into(), "1".into()]),
        Kind::Text => (
            vec!["src/tests/job_corpus/edges.txt".into(), "missing.csv".into()],
            ["''", "/dev/null", "/dev/zero", "jobs", "jobs/quickstart.yaml"]
                .map(str::to_owned)
                .to_vec(),
        ),
    };
    let inside = if inside.is_empty() { edges.clone() } else { inside };
    prop_oneof![30 => prop::sample::select(inside), 2 => prop::sample::select(edges), 1 => any_scalar()].boxed()
}

fn yaml_float(x: f64) -> String {
    if x.is_nan() {
        ".nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { ".inf".into() } else { "-.inf".into() }
    } else {
        format!("{x:e}")
    }
}

/// A parameter: mostly one used by the chosen algorithms or environments,
/// sometimes any registered one, rarely an unknown name.
fn param_entry(members: Vec<&'static str>) -> BoxedStrategy<(&'static str, BoxedStrategy<String>)> {
    let used: Vec<usize> = (0..all_params().len())
        .filter(|&i| all_params()[i].used_by.iter().any(|u| members.contains(u)))
        .collect();
    let used = if used.is_empty() {
        (0..all_params().len()).collect()
    } else {
        used
    };
    prop_oneof![
        80 => prop::sample::select(used),
        2 => 0..all_params().len(),
        1 => Just(usize::MAX),
    ]
    .prop_map(|i| match all_params().get(i) {
        Some(p) => (p.name, param_value(p.kind)),
        None => ("bogus_param", any_scalar().boxed()),
    })
    .boxed()
}

/// Up to six parameters, mostly with epsilon and delta first (required by
/// the private algorithms, so that more jobs reach expansion).
fn params_block(members: Vec<&'static str>) -> impl Strategy<Value = Vec<(&'static str, String)>> {
    let privacy = |name: &'static str| {
        let kind = family::param(name).map(|p| p.kind).unwrap();
        prop::option::weighted(0.9, param_value(kind).prop_map(move |v| (name, v)))
    };
    (
        privacy("epsilon"),
        privacy("delta"),
        prop::collection::vec(
            param_entry(members).prop_flat_map(|(n, v)| v.prop_map(move |v| (n, v))),
            0..6,
        ),
    )
        .prop_map(|(e, d, rest)| distinct(e.into_iter().chain(d).chain(rest).collect()))
}

fn grid_block(members: Vec<&'static str>) -> impl Strategy<Value = Vec<(&'static str, Vec<String>)>> {
    prop::collection::vec(
        param_entry(members).prop_flat_map(|(n, v)| {
            let len = prop_oneof![20 => 1..4usize, 1 => Just(0usize), 1 => 4..9usize];
            len.prop_flat_map(move |l| prop::collection::vec(v.clone(), l))
                .prop_map(move |v| (n, v))
        }),
        0..4,
    )
    .prop_map(distinct)
}

/// One to three names from `own` (the chosen family's), sometimes another
/// family's or an unknown word; a list or a single word.
fn word_list(own: Vec<&'static str>, all: Vec<&'static str>) -> impl Strategy<Value = String> {
    let pick = prop_oneof![
        80 => prop::sample::select(own),
        1 => prop::sample::select(all),
        1 => prop::sample::select(vec!["bogus", "''", "1"]),
    ];
    prop_oneof![
        20 => prop::collection::vec(pick.clone(), 1..4).prop_map(|v| format!("[{}]", v.join(", "))),
        20 => pick.prop_map(str::to_owned),
        1 => Just("[]".to_owned()),
    ]
}

/// A top-level value: mostly one of `good`, sometimes one of `bad` or any
/// scalar, sometimes absent.
fn top_value(good: &[&str], bad: &[&str]) -> BoxedStrategy<Option<String>> {
    let good: Vec<String> = good.iter().map(|s| (*s).to_owned()).collect();
    let bad: Vec<String> = bad.iter().map(|s| (*s).to_owned()).collect();
    prop_oneof![
        2 => Just(None),
        60 => prop::sample::select(good).prop_map(Some),
        2 => prop::sample::select(bad).prop_map(Some),
        1 => any_scalar().prop_map(Some),
    ]
    .boxed()
}

/// Keeps the first entry of each name (a YAML mapping's keys are distinct).
fn distinct<T>(mut v: Vec<(&'static str, T)>) -> Vec<(&'static str, T)> {
    let mut seen = HashSet::new();
    v.retain(|(n, _)| seen.insert(*n));
    v
}

fn render(top: Vec<(&str, Option<String>)>, params: &[(&str, String)], grid: &[(&str, Vec<String>)]) -> String {
    let mut s = String::new();
    for (k, v) in top {
        if let Some(v) = v {
            s += &format!("{k}: {v}\n");
        }
    }
    if !params.is_empty() {
        s += "params:\n";
        for (n, v) in params {
            s += &format!("  {n}: {v}\n");
        }
    }
    if !grid.is_empty() {
        s += "grid:\n";
        for (n, v) in grid {
            s += &format!("  {n}: [{}]\n", v.join(", "));
        }
    }
    s
}

/// A job file of one family (sometimes with another family's members mixed
/// in), with every top-level key.
fn structured_job() -> impl Strategy<Value = String> {
    (0..family::FAMILIES.len()).prop_flat_map(|f| {
        let fam = &family::FAMILIES[f];
        let algos: Vec<&'static str> = fam.algorithms.iter().map(|a| a.0).collect();
        let envs: Vec<&'static str> = fam.environments.iter().map(|e| e.0).collect();
        let members: Vec<&'static str> = algos.iter().chain(&envs).copied().collect();
        let all_algos = family::algorithms().into_iter().map(|a| a.0).collect();
        let all_envs = family::environments().into_iter().map(|e| e.0).collect();
        (
            (
                top_value(&["quick", "x.y-z_1"], &["a b", "''", "../up"]),
                top_value(&["0", "7", "18446744073709551615"], &["-1", "1.5"]),
                top_value(&["1", "2", "3"], &["1000000", "1000001", "0"]),
                top_value(
                    &["50", "100", "1000", "20000"],
                    &["1", "2", "1000000000000", "18446744073709551615", "10.5", "0"],
                ),
                top_value(
                    &["{every: 1}", "{every: 10}", "{log_points: 1}", "{log_points: 5}"],
                    &[
                        "{every: 0}",
                        "{log_points: 1000000000000}",
                        "{every: 1, log_points: 2}",
                        "{rounds: 3}",
                    ],
                ),
                top_value(&["results", "'out dir'"], &["''", "[a]"]),
            ),
            word_list(algos, all_algos),
            word_list(envs, all_envs),
            params_block(members.clone()),
            grid_block(members),
            prop::option::weighted(0.03, Just("surprise: 1".to_owned())),
        )
            .prop_map(
                |((name, seed, reps, horizon, checkpoints, output), algo, env, params, grid, extra)| {
                    let top = vec![
                        ("name", name),
                        ("seed", seed),
                        ("repetitions", reps),
                        ("horizon", horizon),
                        ("checkpoints", checkpoints),
                        ("output", output),
                        ("algorithm", Some(algo)),
                        ("environment", Some(env)),
                    ];
                    let mut s = render(top, &params, &grid);
                    if let Some(e) = extra {
                        s += &e;
                        s += "\n";
                    }
                    s
                },
            )
    })
}

// ---- mutation generator ---------------------------------------------------

fn seeds() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = Vec::new();
    for dir in [root.join("jobs"), root.join("src/tests/job_corpus")] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        v.extend(files.iter().filter_map(|p| std::fs::read_to_string(p).ok()));
    }
    v
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, &'static str),
    DuplicateLine(usize),
    SwapLines(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let tokens = vec![
        ":",
        ": ",
        "-",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "\n",
        "  ",
        "\t",
        "#",
        "'",
        "\"",
        "&a ",
        "*a",
        "<<: *a\n",
        "!!int ",
        "!!float ",
        "!!map ",
        "?",
        "|",
        ">",
        "%YAML 1.2\n",
        "---\n",
        "...\n",
        "\u{feff}",
        "\r",
        "\0",
        "0",
        "9",
        "e308",
        "-1",
        ".nan",
        ".inf",
        "null",
        "~",
        "1e13",
        "99999999999999999999",
        "epsilon",
        "grid",
        "params",
        "horizon: ",
        "every",
        "log_points",
        "private_fedlinucb",
        "fed_ucb_gossip",
        "p_fcb",
        "linear_sphere",
        "mab_heterogeneous",
        "procurement",
        "\u{4e2d}",
        "\u{1F600}",
    ];
    prop_oneof![
        (any::<usize>(), 1..16usize).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), prop::sample::select(tokens)).prop_map(|(a, t)| Edit::Insert(a, t)),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut s = text.to_owned();
    let at = |s: &str, a: usize| {
        let mut i = a % (s.len() + 1);
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    for e in edits {
        match e {
            Edit::Delete(a, n) => {
                let i = at(&s, *a);
                let j = at(&s, i + n);
                s.replace_range(i..j.max(i), "");
            }
            Edit::Insert(a, t) => {
                let i = at(&s, *a);
                s.insert_str(i, t);
            }
            Edit::DuplicateLine(a) | Edit::SwapLines(a, _) if s.lines().count() == 0 => {
                let _ = a;
            }
            Edit::DuplicateLine(a) => {
                let mut lines: Vec<&str> = s.lines().collect();
                let l = lines[a % lines.len()];
                lines.insert(a % lines.len(), l);
                s = lines.join("\n");
            }
            Edit::SwapLines(a, b) => {
                let mut lines: Vec<&str> = s.lines().collect();
                let n = lines.len();
                lines.swap(a % n, b % n);
                s = lines.join("\n");
            }
        }
    }
    s
}

fn mutated_job() -> impl Strategy<Value = String> {
    let seeds = seeds();
    assert!(seeds.len() > 10, "the mutation seeds (jobs/*.yaml) are missing");
    (prop::sample::select(seeds), prop::collection::vec(edit(), 1..6)).prop_map(|(s, e)| apply(&s, &e))
}

/// Runs `cases()` inputs of `strategy` through [`check`] with a fixed seed
/// (`FEDBANDITS_FUZZ_SEED` varies it), prints how many were accepted.
fn fuzz<S: Strategy<Value = String>>(name: &str, strategy: S) {
    let mut config = config();
    config.source_file = Some(file!());
    let seed: u64 = std::env::var("FEDBANDITS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..8 + name.len().min(24)].copy_from_slice(&name.as_bytes()[..name.len().min(24)]);
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let (accepted, rejected) = (AtomicU64::new(0), AtomicU64::new(0));
    let started = std::time::Instant::now();
    let slowest = std::sync::Mutex::new(0f64);
    let keys = std::sync::Mutex::new(std::collections::BTreeMap::<String, u64>::new());
    let last = std::env::var_os("FEDBANDITS_FUZZ_LAST").map(|p| std::path::PathBuf::from(p).join(name));
    let result = runner.run(&strategy, |text| {
        if let Some(p) = &last {
            // An abort (allocation failure, stack overflow) cannot be
            // caught: the input that caused it is left in this file.
            std::fs::write(p, &text).unwrap();
        }
        let t = std::time::Instant::now();
        match check(&text)? {
            Outcome::Accepted(_) => accepted.fetch_add(1, Ordering::Relaxed),
            Outcome::Rejected(k) => {
                let mut keys = keys.lock().unwrap();
                for k in k {
                    *keys.entry(k).or_default() += 1;
                }
                rejected.fetch_add(1, Ordering::Relaxed)
            }
        };
        let mut s = slowest.lock().unwrap();
        *s = s.max(t.elapsed().as_secs_f64());
        Ok(())
    });
    let (a, r) = (accepted.into_inner(), rejected.into_inner());
    println!(
        "fuzz {name} (seed {seed}): {} executions, {a} accepted, {r} rejected, no panic; {:.1} s, slowest input {:.3} s",
        a + r,
        started.elapsed().as_secs_f64(),
        slowest.into_inner().unwrap()
    );
    let mut keys: Vec<_> = keys.into_inner().unwrap().into_iter().collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.1));
    let top: Vec<String> = keys.iter().take(8).map(|(k, n)| format!("{k} {n}")).collect();
    println!("  problems by key: {}", top.join(", "));
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}

#[test]
fn structured() {
    fuzz("structured", structured_job());
}

#[test]
fn mutated() {
    fuzz("mutated", mutated_job());
}

#[test]
fn structured_then_mutated() {
    fuzz(
        "structured_then_mutated",
        (structured_job(), prop::collection::vec(edit(), 1..4)).prop_map(|(t, e)| apply(&t, &e)),
    );
}

/// The regression corpus: each file's first line says `# expect: accepted N`
/// (N cells) or `# expect: rejected KEY[,KEY...]` (the problems' keys).
#[test]
fn corpus_files_are_handled() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tests/job_corpus");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .trim_start_matches('\u{feff}')
            .split(['\n', '\r'])
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| {
                panic!(
                    "{}: first line must be '# expect: accepted N' or '# expect: rejected KEYS'",
                    path.display()
                )
            });
        let got = check(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let want = match expect.split_once(' ') {
            Some(("accepted", n)) => Outcome::Accepted(n.trim().parse().unwrap()),
            Some(("rejected", keys)) => Outcome::Rejected(keys.split(',').map(|k| k.trim().to_owned()).collect()),
            _ => panic!("{}: bad expect line '{expect}'", path.display()),
        };
        assert_eq!(got, want, "{}", path.display());
        n += 1;
    }
    assert!(n >= 5, "corpus has only {n} files");
}

/// An epsilon beyond what the accountant can calibrate (1e7 was written as `acct_epsilon = inf`, and at 1e12 mu was capped so
/// the noise met a far smaller epsilon) is refused when the job loads,
/// naming the largest reachable value; at that value every Gaussian
/// mechanism's figure is finite and in [0.99, 1] x the target.
#[test]
fn an_epsilon_beyond_the_accountant_is_refused_naming_the_largest() {
    let max = fedbandits::privacy::gdp::MAX_EPSILON;
    for (algo, env, extra) in [
        ("private_fedlinucb", "linear_gap", "protocol: ldp"),
        ("feducb_centralized", "linear_gap", "m: 2"),
        ("p_fcb", "procurement", "m: 2"),
    ] {
        for eps in ["1.0e7", "1.0e12"] {
            let text = format!(
                "horizon: 100\nalgorithm: {algo}\nenvironment: {env}\nparams: {{epsilon: {eps}, delta: 0.1, {extra}}}\n"
            );
            let e = match Job::parse(Path::new("e.yaml"), &text) {
                Ok(_) => panic!("{algo} at epsilon {eps} was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains("epsilon") && e.contains("1000000"), "{algo} {eps}: {e}");
        }
        let text = format!(
            "horizon: 3000\nalgorithm: {algo}\nenvironment: {env}\nparams: {{epsilon: {max}, delta: 0.1, {extra}}}\n"
        );
        let job = Job::parse(Path::new("e.yaml"), &text).unwrap_or_else(|e| panic!("{algo} at {max}: {e}"));
        let a = job.cells[0].config.accounting().expect("private");
        let fig = a.epsilon.or(a.epsilon_sums).expect("a figure");
        assert!(fig.is_finite() && fig <= max && fig >= 0.99 * max, "{algo}: {fig}");
    }
}
