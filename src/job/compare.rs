//! The comparisons a job asks its report to lead with (`compare:`): pairs
//! `[numerator, denominator]` of the job's algorithms of one family, e.g.
//! `compare: [[feducb_decentralized, feducb_centralized], [p_fcb, fcb]]`.
//! The report then opens with each pair's paired ratio per stratum of the
//! other swept axes. Not part of any cell's identity: editing it recomputes
//! nothing (a rerun reassembles the part with the new job text).

use super::parse::Parser;
use crate::algo::family::family_of;

/// What `compare:` must hold, for messages.
const SHAPE: &str = "expected a list of [numerator, denominator] pairs of the job's algorithms, e.g. compare: \
                     [[feducb_decentralized, feducb_centralized]]";

impl Parser<'_> {
    /// The job's comparisons (none when `compare` is absent), or None with
    /// the problems recorded; `algorithms`: the job's, when they parsed.
    pub(super) fn compare(
        &mut self,
        v: Option<&serde_yaml::Value>,
        algorithms: Option<&[String]>,
    ) -> Option<Vec<[String; 2]>> {
        let Some(v) = v else { return Some(Vec::new()) };
        let Some(pairs) = v.as_sequence().filter(|s| !s.is_empty()) else {
            self.problem(&["compare"], SHAPE);
            return None;
        };
        let mut out: Vec<[String; 2]> = Vec::new();
        let mut ok = true;
        for (i, item) in pairs.iter().enumerate() {
            match self.pair(i, item, algorithms) {
                Some(pair) if out.contains(&pair) => {
                    self.problem(
                        &["compare"],
                        format!("pair {} ({} / {}) is listed twice", i + 1, pair[0], pair[1]),
                    );
                    ok = false;
                }
                Some(pair) => out.push(pair),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Item `i` of `compare:`: two distinct algorithms of the job of one
    /// family.
    fn pair(&mut self, i: usize, item: &serde_yaml::Value, algorithms: Option<&[String]>) -> Option<[String; 2]> {
        let names: Option<Vec<&str>> = item
            .as_sequence()
            .filter(|s| s.len() == 2)
            .and_then(|s| s.iter().map(serde_yaml::Value::as_str).collect());
        let Some([a, b]) = names.as_deref().map(|n| [n[0], n[1]]) else {
            self.problem(
                &["compare"],
                format!("pair {}: {SHAPE}; found {}", i + 1, super::parse::yaml_text(item)),
            );
            return None;
        };
        let mut ok = true;
        if let Some(algos) = algorithms {
            for n in [a, b] {
                if !algos.iter().any(|x| x == n) {
                    self.problem(
                        &["compare"],
                        format!(
                            "pair {}: '{n}' is not an algorithm of this job; its algorithms: {}",
                            i + 1,
                            algos.join(", ")
                        ),
                    );
                    ok = false;
                }
            }
        }
        if a == b {
            self.problem(&["compare"], format!("pair {}: compares {a} with itself", i + 1));
            ok = false;
        }
        if let (Some(f), Some(g)) = (family_of(a), family_of(b))
            && f.name != g.name
        {
            self.problem(
                &["compare"],
                format!(
                    "pair {}: {a} ({} family) and {b} ({} family) run on different environments; a comparison \
                     pairs cells of one family",
                    i + 1,
                    f.name,
                    g.name
                ),
            );
            ok = false;
        }
        ok.then(|| [a.to_owned(), b.to_owned()])
    }
}

#[cfg(test)]
mod tests {
    use crate::job::{Job, JobError};

    const JOB: &str = "horizon: 50\nalgorithm: [fcb, p_fcb, non_federated, gossip_ucb]\n\
                       environment: [procurement, mab_heterogeneous]\nparams: {epsilon: 1, delta: 0.01}\n";

    fn parse(extra: &str) -> Result<Job, String> {
        Job::parse(std::path::Path::new("c.yaml"), &format!("{JOB}{extra}")).map_err(|e| match e {
            JobError::Invalid { problems, .. } => problems
                .iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        })
    }

    #[test]
    fn pairs_are_the_jobs_algorithms_of_one_family_and_change_no_identity() {
        let plain = parse("").expect("parses");
        let asked = parse("compare: [[p_fcb, fcb], [fcb, non_federated]]\n").expect("parses");
        assert_eq!(
            asked.compare,
            vec![
                ["p_fcb".to_string(), "fcb".into()],
                ["fcb".into(), "non_federated".into()]
            ]
        );
        assert!(plain.compare.is_empty());
        assert_eq!(
            plain.identity(),
            asked.identity(),
            "compare is not part of the job's identity"
        );
        assert!(asked.to_string().contains("compare: p_fcb / fcb"), "{asked}");
    }

    #[test]
    fn a_bad_pair_is_refused_with_the_reason() {
        for (text, want) in [
            (
                "compare: [[p_fcb, linucb]]",
                "'linucb' is not an algorithm of this job; its algorithms: fcb, p_fcb",
            ),
            ("compare: [[fcb, fcb]]", "compares fcb with itself"),
            (
                "compare: [[p_fcb, gossip_ucb]]",
                "p_fcb (combinatorial family) and gossip_ucb (gossip family)",
            ),
            (
                "compare: [p_fcb, fcb]",
                "pair 1: expected a list of [numerator, denominator] pairs",
            ),
            ("compare: [[p_fcb, fcb, non_federated]]", "pair 1: expected a list"),
            ("compare: p_fcb", "expected a list of [numerator, denominator] pairs"),
            (
                "compare: [[p_fcb, fcb], [p_fcb, fcb]]",
                "pair 2 (p_fcb / fcb) is listed twice",
            ),
        ] {
            let err = parse(&format!("{text}\n")).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
