//! Typed parameter keys: a family's resolver reads its parameters through
//! constants ([`Key`]) declared once with their Rust type
//! ([`crate::param_keys!`], atop each family's `table.rs`, whose
//! parameter rows take their names from them), so a misspelt or unknown
//! parameter in family code does not compile, and a read returns the type
//! the key declares ([`ParamType`]: a number, an integer, a flag, a path,
//! or a [`Named`] choice, parsed once here). Each family's tests check
//! every key against the parameter table ([`KeyCheck`]).

use super::kind::Kind;
use super::value::Value;
use crate::named::Named;
use std::marker::PhantomData;

/// A parameter's name and the type its resolver reads it as.
pub struct Key<T> {
    name: &'static str,
    ty: PhantomData<fn() -> T>,
}

impl<T> Clone for Key<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Key<T> {}

impl<T> Key<T> {
    /// The key of parameter `name` (through [`crate::param_keys!`]).
    pub const fn new(name: &'static str) -> Self {
        Self { name, ty: PhantomData }
    }

    /// The parameter's name in job files and columns.
    pub const fn name(self) -> &'static str {
        self.name
    }
}

/// A type a parameter is read as: how it comes from and goes to a
/// [`Value`], and which table kinds hold it.
pub trait ParamType: Sized {
    /// From a checked value (None: another type).
    fn from_value(v: &Value) -> Option<Self>;
    /// As the resolved value recorded for the cell.
    fn to_value(&self) -> Value;
    /// What a read returns after recording that the value is missing (the
    /// cell is then refused, so it is never run).
    fn fallback() -> Self;
    /// Whether the table kind `kind` holds this type.
    fn fits(kind: &Kind) -> bool;
}

impl ParamType for f64 {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_f64()
    }
    fn to_value(&self) -> Value {
        Value::Float(*self)
    }
    fn fallback() -> Self {
        f64::NAN
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Float { .. })
    }
}

impl ParamType for i64 {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_i64()
    }
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
    fn fallback() -> Self {
        0
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Int { .. })
    }
}

impl ParamType for bool {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_bool()
    }
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
    fn fallback() -> Self {
        false
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Bool)
    }
}

impl ParamType for String {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_str().map(str::to_owned)
    }
    fn to_value(&self) -> Value {
        Value::Str(self.clone())
    }
    fn fallback() -> Self {
        String::new()
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Text)
    }
}

/// A choice: the word names a variant (the table lists exactly the enum's
/// names, so a word the table accepts always parses).
impl<T: Named> ParamType for T {
    fn from_value(v: &Value) -> Option<Self> {
        v.as_str().and_then(T::from_name)
    }
    fn to_value(&self) -> Value {
        Value::Str(self.name().to_owned())
    }
    fn fallback() -> Self {
        T::ALL[0]
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Choice(words) if *words == T::NAMES)
    }
}

/// A declared key, for the check against the parameter table: its name and
/// whether a table kind holds its type.
#[derive(Clone, Copy)]
pub struct KeyCheck {
    /// The parameter.
    pub name: &'static str,
    /// Whether a kind holds the key's type.
    pub fits: fn(&Kind) -> bool,
}

impl KeyCheck {
    /// The check of a key of type `T` named `name`.
    pub const fn of<T: ParamType>(name: &'static str) -> Self {
        Self { name, fits: T::fits }
    }
}

/// What disagrees between declared keys and the parameter table `table`
/// (each parameter's name and kind): a key the table lacks, or whose row's
/// kind does not hold its type; `None` when they agree.
pub fn keys_mismatch(keys: &[KeyCheck], table: &[(&str, Kind)]) -> Option<String> {
    let problems: Vec<String> = keys
        .iter()
        .filter_map(|k| match table.iter().find(|(name, _)| *name == k.name) {
            None => Some(format!("key {:?} is not in the parameter table", k.name)),
            Some((_, kind)) if !(k.fits)(kind) => Some(format!(
                "key {:?} is read as a type its table kind {kind:?} does not hold",
                k.name
            )),
            Some(_) => None,
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Declares typed parameter keys (`NAME: Type = "name"`) and `KEYS`, the
/// list the table check reads ([`keys_mismatch`]).
#[macro_export]
macro_rules! param_keys {
    ($($(#[$meta:meta])* $key:ident: $ty:ty = $name:literal),+ $(,)?) => {
        $(
            $(#[$meta])*
            #[doc = concat!("The `", $name, "` parameter.")]
            pub const $key: $crate::algo::keys::Key<$ty> = $crate::algo::keys::Key::new($name);
        )+
        /// Every key declared here, for the check against the parameter table.
        pub const KEYS: &[$crate::algo::keys::KeyCheck] = &[$($crate::algo::keys::KeyCheck::of::<$ty>($name)),+];
    };
}
