//! A parameter's type and allowed range ([`Kind`]): checks a parsed value
//! and says, in words, what is allowed.

use super::value::Value;
use super::value_check::{FLOAT_FLOOR, FLOAT_LIMIT, ValueError, did_you_mean};

/// Type and range of a parameter.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Integer in [min, max].
    Int {
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
    /// Real number in a range.
    Float {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
        /// Whether `min` itself is allowed.
        min_inclusive: bool,
        /// Whether `max` itself is allowed.
        max_inclusive: bool,
    },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// true or false.
    Bool,
    /// Any text (a file path).
    Text,
}

impl Kind {
    /// Checks a value; the error names what is wrong and what is allowed.
    pub fn check(&self, v: &Value) -> Result<Value, ValueError> {
        let allowed = || self.describe();
        match (*self, v) {
            (Kind::Int { min, max }, Value::Int(x)) => {
                if (min..=max).contains(x) {
                    Ok(v.clone())
                } else {
                    Err(ValueError::OutOfRange {
                        value: x.to_string(),
                        allowed: allowed(),
                    })
                }
            }
            (Kind::Int { .. }, other) => Err(ValueError::WrongType {
                expected: "an integer",
                got: type_name(other),
                allowed: Some(allowed()),
            }),
            (
                Kind::Float {
                    min,
                    max,
                    min_inclusive,
                    max_inclusive,
                },
                Value::Int(_) | Value::Float(_),
            ) => {
                let x = v.as_f64().unwrap_or(f64::NAN);
                let lo_ok = if min_inclusive { x >= min } else { x > min };
                let hi_ok = if max_inclusive { x <= max } else { x < max };
                // +inf only where the range includes it (epsilon = .inf).
                if x != 0.0 && x.abs() < FLOAT_FLOOR && lo_ok && hi_ok {
                    Err(ValueError::Underflow {
                        value: x,
                        allowed: allowed(),
                    })
                } else if x.is_finite() && x.abs() > FLOAT_LIMIT && lo_ok && hi_ok {
                    Err(ValueError::Overflow {
                        value: x,
                        allowed: allowed(),
                    })
                } else if (x.is_finite() || (x == max && max_inclusive)) && lo_ok && hi_ok {
                    Ok(Value::Float(x))
                } else {
                    Err(ValueError::OutOfRange {
                        value: x.to_string(),
                        allowed: allowed(),
                    })
                }
            }
            (Kind::Float { .. }, other) => Err(ValueError::WrongType {
                expected: "a number",
                got: type_name(other),
                allowed: Some(allowed()),
            }),
            (Kind::Choice(words), Value::Str(s)) => {
                if words.contains(&s.as_str()) {
                    Ok(v.clone())
                } else {
                    Err(ValueError::UnknownChoice {
                        value: s.clone(),
                        suggestion: did_you_mean(s, words),
                        allowed: words.join(", "),
                    })
                }
            }
            (Kind::Choice(words), other) => Err(ValueError::NotAChoice {
                choices: words.join(", "),
                got: type_name(other),
            }),
            (Kind::Bool, Value::Bool(_)) => Ok(v.clone()),
            (Kind::Text, Value::Str(_)) => Ok(v.clone()),
            (Kind::Text, other) => Err(ValueError::WrongType {
                expected: "text",
                got: type_name(other),
                allowed: None,
            }),
            (Kind::Bool, other) => Err(ValueError::WrongType {
                expected: "true or false",
                got: type_name(other),
                allowed: None,
            }),
        }
    }

    /// Human description of the allowed values.
    pub fn describe(&self) -> String {
        match *self {
            Kind::Int { min, max } if max == i64::MAX => format!("integer >= {min}"),
            Kind::Int { min, max } => format!("integer in [{min}, {max}]"),
            Kind::Float {
                min,
                max,
                min_inclusive,
                max_inclusive,
            } => {
                if min.is_infinite() && max.is_infinite() {
                    "a finite number".into()
                } else if max.is_infinite() {
                    format!(
                        "number {} {min}{}",
                        if min_inclusive { ">=" } else { ">" },
                        if max_inclusive { ", or .inf" } else { "" }
                    )
                } else {
                    format!(
                        "number in {}{min}, {max}{}",
                        if min_inclusive { "[" } else { "(" },
                        if max_inclusive { "]" } else { ")" }
                    )
                }
            }
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::Bool => "true or false".into(),
            Kind::Text => "text".into(),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Str(_) => "a string",
        Value::Bool(_) => "a boolean",
    }
}
