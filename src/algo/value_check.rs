//! What a parameter value may be and how a wrong one is told: the range
//! limits every float parameter shares, the typed error of
//! `Kind::check` in `algo::kind` (its message names the value and what is
//! allowed) and the "did you mean" suggestion for unknown names and values.

/// The largest finite magnitude a float parameter may take: beyond it the
/// engine's arithmetic (squares of epsilon, products of rewards and
/// horizons) leaves the range of doubles.
pub const FLOAT_LIMIT: f64 = 1e12;

/// The smallest non-zero magnitude a float parameter may take: below it
/// the engine's arithmetic (squares and products of epsilon, delta, lambda,
/// alpha; their inverses squared) underflows to 0 or overflows to infinity,
/// and subnormals (below 2.2e-308) run as if they were 0: five unrelated
/// settings at 1e-320 gave the same regrets.
pub const FLOAT_FLOOR: f64 = 1e-100;

/// A parameter value its kind does not allow (`Kind::check` (`algo::kind`)); the
/// message names the value and what is allowed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// Outside the range.
    #[error("{value} is out of range; allowed: {allowed}")]
    OutOfRange {
        /// The value as written.
        value: String,
        /// The allowed values.
        allowed: String,
    },
    /// A non-zero magnitude below [`FLOAT_FLOOR`].
    #[error(
        "{value:e} is below {FLOAT_FLOOR:e} in magnitude, where squares, products and inverses of the engine's \
         arithmetic underflow or overflow (it would run as if it were 0, or not at all); allowed: {allowed}, of \
         magnitude at least {FLOAT_FLOOR:e} (or 0 where that is in range)"
    )]
    Underflow {
        /// The value.
        value: f64,
        /// The allowed values.
        allowed: String,
    },
    /// A finite magnitude beyond [`FLOAT_LIMIT`].
    #[error(
        "{value:e} is beyond {FLOAT_LIMIT:e} in magnitude, where squares and products of the engine's arithmetic \
         overflow (e.g. epsilon 1e308 would report zero privacy loss); allowed: {allowed}"
    )]
    Overflow {
        /// The value.
        value: f64,
        /// The allowed values.
        allowed: String,
    },
    /// Another type than the kind's.
    #[error("expected {expected}, got {got}{}", allowed.as_ref().map_or(String::new(), |a| format!("; allowed: {a}")))]
    WrongType {
        /// What the kind takes.
        expected: &'static str,
        /// What was given.
        got: &'static str,
        /// The allowed values, where the message states them.
        allowed: Option<String>,
    },
    /// Text that is none of the choices.
    #[error("unknown value '{value}'{suggestion}; allowed: {allowed}")]
    UnknownChoice {
        /// The value.
        value: String,
        /// ", did you mean ...?" or empty.
        suggestion: String,
        /// The choices.
        allowed: String,
    },
    /// Not text where a choice is expected.
    #[error("expected one of {choices}, got {got}")]
    NotAChoice {
        /// The choices.
        choices: String,
        /// What was given.
        got: &'static str,
    },
}

/// " (did you mean 'x'?)" for the candidate closest to `word` when it is
/// close (an edit distance of at most 2, and less than half the word),
/// else "".
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    let best = candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .min_by_key(|&(dist, c)| (dist, c.len()));
    match best {
        Some((dist, c)) if dist > 0 && dist <= 2 && 2 * dist < word.chars().count().max(2) => {
            format!(" (did you mean '{c}'?)")
        }
        _ => String::new(),
    }
}

/// Levenshtein distance (insertions, deletions, substitutions), by chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
