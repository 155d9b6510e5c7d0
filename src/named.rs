//! Names the compiler checks: an enum whose variants job files name
//! ([`Named`]: every variant once in [`Named::ALL`], their names in
//! [`Named::NAMES`], one exhaustive `match` from variant to name), declared
//! through [`named_enum!`] so that a variant without a name, or a name
//! without a variant, does not compile. A word resolves to its variant or
//! to nothing ([`Named::from_name`]), never to another variant through a
//! catch-all. A lowest layer: the environments, graphs and mechanisms
//! declare their options with it, and the algorithms their algorithms.

/// An enum of named choices (an algorithm, or one of a parameter's values).
pub trait Named: Copy + PartialEq + 'static {
    /// Every variant, each once.
    const ALL: &'static [Self];

    /// Their names, in the order of [`Named::ALL`] (a parameter table's
    /// allowed values, and what errors list).
    const NAMES: &'static [&'static str];

    /// The name job files use.
    fn name(self) -> &'static str;

    /// The variant named `name`, if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// Declares an enum and its [`Named`] impl from one list of `Variant =
/// "name"` pairs: the enum (with its attributes and each variant's docs as
/// written), [`Named::ALL`], [`Named::NAMES`] and an exhaustive
/// [`Named::name`].
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $crate::named::Named for $name {
            const ALL: &'static [Self] = &[$(Self::$variant),+];
            const NAMES: &'static [&'static str] = &[$($word),+];

            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $word),+
                }
            }
        }
    };
}
