//! A parameter's defaults as data ([`DefaultValue`], per user in the
//! parameter table's `defaults`, `algo::params`): the one place a default
//! is written. The families' resolvers read an unset parameter's value
//! from there (`Params` of `algo::resolve`), and `fedbandits list` prints
//! it from there; a test resolves every algorithm with every parameter left
//! unset and checks the two agree (`cli::tests::list_defaults`).

use super::value::Value;
use std::collections::BTreeMap;

/// What a parameter is when a job does not set it, for some of its users.
#[derive(Clone, Copy, Debug)]
pub enum DefaultValue {
    /// An integer.
    Int(i64),
    /// A number.
    Float(f64),
    /// A word.
    Word(&'static str),
    /// true or false.
    Bool(bool),
    /// Computed for the cell: the rule in words, and the rule.
    Rule(&'static str, fn(&DefaultContext<'_>) -> Value),
    /// None: the parameter must be set (in words: when).
    Required(&'static str),
}

/// What a computed default may read: the cell's algorithm, environment,
/// horizon and the parameters its family resolved before this one.
pub struct DefaultContext<'a> {
    /// The cell's algorithm.
    pub algorithm: &'a str,
    /// The cell's environment.
    pub environment: &'a str,
    /// The horizon T.
    pub horizon: u64,
    /// The parameters resolved so far.
    pub resolved: &'a BTreeMap<&'static str, Value>,
}

impl DefaultContext<'_> {
    /// A parameter resolved before this one, as its key's type.
    pub fn get<T: super::keys::ParamType>(&self, k: super::keys::Key<T>) -> Option<T> {
        self.resolved.get(k.name()).and_then(T::from_value)
    }
}

/// A parameter's defaults: (the algorithms or environments an entry
/// applies to, empty for every other user; the default), the first entry
/// that names the cell's algorithm or environment, or is empty, applies.
pub type Defaults = &'static [(&'static [&'static str], DefaultValue)];

impl DefaultValue {
    /// The value for a cell (None: required).
    pub fn value(&self, cx: &DefaultContext<'_>) -> Option<Value> {
        match *self {
            DefaultValue::Int(v) => Some(Value::Int(v)),
            DefaultValue::Float(v) => Some(Value::Float(v)),
            DefaultValue::Word(v) => Some(Value::Str(v.to_owned())),
            DefaultValue::Bool(v) => Some(Value::Bool(v)),
            DefaultValue::Rule(_, rule) => Some(rule(cx)),
            DefaultValue::Required(_) => None,
        }
    }

    /// In words, as `fedbandits list` prints it.
    pub fn describe(&self) -> String {
        match *self {
            DefaultValue::Int(v) => v.to_string(),
            DefaultValue::Float(v) => Value::Float(v).to_string(),
            DefaultValue::Word(v) => v.to_owned(),
            DefaultValue::Bool(v) => v.to_string(),
            DefaultValue::Rule(words, _) => words.to_owned(),
            DefaultValue::Required(when) => format!("required {when}"),
        }
    }
}

/// The entry of `defaults` for a cell of `algo` on `env`.
pub fn default_for(defaults: Defaults, algo: &str, env: &str) -> Option<&'static DefaultValue> {
    defaults
        .iter()
        .find(|(who, _)| who.is_empty() || who.contains(&algo) || who.contains(&env))
        .map(|(_, d)| d)
}

/// `defaults` in words: `X` for one entry, else `X (a, b); Y (c); Z
/// otherwise`.
pub fn describe(defaults: Defaults) -> String {
    match defaults {
        [] => "none".into(),
        [([], d)] => d.describe(),
        _ => {
            let parts: Vec<String> = defaults
                .iter()
                .map(|(who, d)| {
                    if who.is_empty() {
                        format!("{} otherwise", d.describe())
                    } else {
                        format!("{} ({})", d.describe(), who.join(", "))
                    }
                })
                .collect();
            parts.join("; ")
        }
    }
}

/// A private schedule's cap: ceil(log2 T) (T at least 2).
pub fn log2_horizon(cx: &DefaultContext<'_>) -> Value {
    Value::Int((cx.horizon.max(2) as f64).log2().ceil() as i64)
}
