//! Parameters whose value is one of a few words, as a Rust enum: the words are
//! written once (in the [`choice!`](crate::choice) declaration), the catalog's
//! [`ParamKind::Enum`](crate::ParamKind::Enum) lists them from there, and a node
//! reads the enum, not a string.

/// An enum whose variants are the accepted words of a parameter.
pub trait Choice: Copy + 'static {
    /// The words, in declaration order (what [`crate::ParamKind::Enum`] takes).
    const NAMES: &'static [&'static str];
    /// The variant of `word`, if it is one of [`Choice::NAMES`].
    fn from_name(word: &str) -> Option<Self>;
    /// The word of this variant.
    fn name(self) -> &'static str;
}

/// Declares an enum of words for a [`crate::ParamKind::Enum`] parameter and
/// implements [`Choice`] for it:
///
/// ```
/// ironpath_config::choice! {
///     /// How to merge.
///     pub enum Mode {
///         /// Keep segments as a chain.
///         Gro = "gro",
///         /// Copy into one buffer.
///         Lro = "lro",
///     }
/// }
/// use ironpath_config::{Choice, ParamKind};
/// const KIND: ParamKind = ParamKind::Enum(Mode::NAMES);
/// assert_eq!(Mode::from_name("lro"), Some(Mode::Lro));
/// assert_eq!(Mode::Gro.name(), "gro");
/// ```
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $crate::Choice for $name {
            const NAMES: &'static [&'static str] = &[$( $word, )*];
            fn from_name(word: &str) -> Option<Self> {
                match word {
                    $( $word => Some(Self::$variant), )*
                    _ => None,
                }
            }
            fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $word, )*
                }
            }
        }
    };
}
