//! Job names: the name is the results directory `<output>/<name>/`, so it
//! must be one safe path component that no reader skips.
//!
//! Allowed: ASCII letters, digits, `_`, `-`, `.`; not starting with `.`
//! (hidden, and `.`/`..` would leave the output root) or `_` (Parquet
//! dataset readers and the analysis loader skip `_`-prefixed paths, and the
//! engine's own `_audit`, `.units`, `.snapshots` live beside the parts); at
//! most [`MAX_NAME_BYTES`] bytes (file systems limit a component to 255).
//! The same rule applies to a name taken from the job file's name.

/// The longest job name, in bytes.
pub const MAX_NAME_BYTES: usize = 200;

/// The rule, as error messages state it.
pub const NAME_RULE: &str = "a job name is 1 to 200 letters, digits, '_', '-', '.', not starting with '.' or '_' \
                             (it names the results directory <output>/<name>/)";

/// What is wrong with a job name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// No characters.
    #[error("empty")]
    Empty,
    /// Longer than [`MAX_NAME_BYTES`].
    #[error("{0} bytes long, above {MAX_NAME_BYTES}")]
    TooLong(usize),
    /// A character outside the rule.
    #[error("contains {0:?}")]
    Character(char),
    /// Starts with `.` or `_`.
    #[error("starts with '{0}'")]
    Hidden(char),
}

/// Checks a job name against the rule; the error says what is wrong.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong(name.len()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.".contains(*c)))
    {
        return Err(NameError::Character(c));
    }
    if let Some(c) = name.chars().next().filter(|c| ['.', '_'].contains(c)) {
        return Err(NameError::Hidden(c));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_or_hide_in_the_output_root_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "...",
            ".units",
            "_audit",
            "_manifest",
            "a/b",
            "a b",
            "é",
            "a\0",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(check_name(&"a".repeat(201)), Err(NameError::TooLong(201)));
        assert!(
            check_name(&"a".repeat(201))
                .unwrap_err()
                .to_string()
                .contains("201 bytes")
        );
        for good in ["quickstart", "dubey_fig1a_vm", "a.b-c_1", "x..", "1", &"a".repeat(200)] {
            assert_eq!(check_name(good), Ok(()), "{good:?} refused");
        }
    }
}
