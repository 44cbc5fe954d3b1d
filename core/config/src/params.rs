//! Node parameters after validation: typed values with their positions, defaults filled in.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use crate::error::Loc;

/// A validated parameter value; the variant follows the parameter's [`crate::ParamKind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    /// From [`crate::ParamKind::Uint`].
    Uint(u64),
    /// From [`crate::ParamKind::Bool`].
    Bool(bool),
    /// From [`crate::ParamKind::Str`] and [`crate::ParamKind::Enum`].
    Str(String),
    /// From [`crate::ParamKind::Mac`].
    Mac([u8; 6]),
    /// From [`crate::ParamKind::Ipv4`].
    Ipv4(Ipv4Addr),
    /// From [`crate::ParamKind::Ipv6`].
    Ipv6(Ipv6Addr),
    /// From [`crate::ParamKind::IpList`] (a single address becomes a list of one).
    IpList(Vec<IpAddr>),
    /// From [`crate::ParamKind::Path`], resolved against the YAML file's directory.
    Path(PathBuf),
    /// From [`crate::ParamKind::Port`]: the name of a port defined in the file.
    Port(String),
    /// From [`crate::ParamKind::Mempool`]: the name of a mempool defined in the file.
    Mempool(String),
    /// From [`crate::ParamKind::Duration`], in microseconds.
    DurationUs(u64),
    /// From [`crate::ParamKind::Records`]: one [`Params`] per record, in file order, each with its
    /// fields' defaults filled in.
    Records(Vec<Params>),
    /// From [`crate::ParamKind::Variant`]: the form's name and its argument (if it takes one).
    Variant(String, Option<u64>),
}

/// The parameters of one node (or the fields of one record of a [`crate::ParamKind::Records`]
/// parameter), by name, with defaults filled in.
///
/// A parameter is absent only when it is optional, has no default and is not in the file.
/// The typed getters return `None` for an absent name (including a name the node type does not
/// declare).
///
/// # Panics
///
/// A typed getter panics when the parameter holds another kind of value than the getter reads
/// (e.g. [`Params::uint`] on a `Str` parameter): the node's code disagrees with its own
/// [`crate::ParamSpec`], a programming error that no YAML file can cause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    values: BTreeMap<String, (ParamValue, Loc)>,
}

macro_rules! getter {
    ($(#[$doc:meta])* $fn:ident, $variant:ident, $ty:ty, |$v:ident| $conv:expr) => {
        $(#[$doc])*
        pub fn $fn(&self, name: &str) -> Option<$ty> {
            match self.get(name)? {
                ParamValue::$variant($v) => Some($conv),
                other => kind_mismatch(name, stringify!($variant), other),
            }
        }
    };
}

#[cold]
#[track_caller]
fn kind_mismatch(name: &str, wanted: &str, found: &ParamValue) -> ! {
    panic!("parameter `{name}` read as {wanted} but holds {found:?}: the node's code disagrees with its ParamSpec")
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` (replacing any previous value); `loc` is where the value is written
    /// (for a default: the node's position, or the record's for a field of a record).
    pub fn insert(&mut self, name: impl Into<String>, value: ParamValue, loc: Loc) {
        self.values.insert(name.into(), (value, loc));
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.values.get(name).map(|(v, _)| v)
    }

    /// Where the value of `name` is written (for a default: the node's position, or the record's
    /// for a field of a record).
    pub fn loc(&self, name: &str) -> Option<Loc> {
        self.values.get(name).map(|(_, l)| *l)
    }

    /// The form and argument of a [`crate::ParamKind::Variant`] parameter.
    pub fn variant(&self, name: &str) -> Option<(&str, Option<u64>)> {
        match self.get(name)? {
            ParamValue::Variant(v, a) => Some((v.as_str(), *a)),
            other => kind_mismatch(name, "Variant", other),
        }
    }

    /// The variant of a [`crate::ParamKind::Enum`] parameter declared with
    /// `ParamKind::Enum(T::NAMES)` ([`crate::choice!`]). Like the typed getters, it
    /// panics when the value is not one of `T`'s words: the node's code disagrees
    /// with its own [`crate::ParamSpec`].
    pub fn choice<T: crate::Choice>(&self, name: &str) -> Option<T> {
        let word = self.str(name)?;
        match T::from_name(word) {
            Some(v) => Some(v),
            None => kind_mismatch(name, std::any::type_name::<T>(), &ParamValue::Str(word.to_owned())),
        }
    }

    /// Every set parameter, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue, Loc)> {
        self.values.iter().map(|(k, (v, l))| (k.as_str(), v, *l))
    }

    /// How many parameters are set.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no parameter is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    getter!(
        /// A [`ParamValue::Uint`].
        uint, Uint, u64, |v| *v
    );
    getter!(
        /// A [`ParamValue::Bool`].
        bool, Bool, bool, |v| *v
    );
    getter!(
        /// A [`ParamValue::Str`] (a `Str` or `Enum` parameter).
        str, Str, &str, |v| v.as_str()
    );
    getter!(
        /// A [`ParamValue::Mac`].
        mac, Mac, [u8; 6], |v| *v
    );
    getter!(
        /// A [`ParamValue::Ipv4`].
        ipv4, Ipv4, Ipv4Addr, |v| *v
    );
    getter!(
        /// A [`ParamValue::Ipv6`].
        ipv6, Ipv6, Ipv6Addr, |v| *v
    );
    getter!(
        /// A [`ParamValue::IpList`].
        ip_list, IpList, &[IpAddr], |v| v.as_slice()
    );
    getter!(
        /// A [`ParamValue::Path`].
        path, Path, &Path, |v| v.as_path()
    );
    getter!(
        /// A [`ParamValue::Port`]: a port name.
        port, Port, &str, |v| v.as_str()
    );
    getter!(
        /// A [`ParamValue::Mempool`]: a mempool name.
        mempool, Mempool, &str, |v| v.as_str()
    );
    getter!(
        /// A [`ParamValue::DurationUs`], in microseconds.
        duration_us, DurationUs, u64, |v| *v
    );
    getter!(
        /// A [`ParamValue::Records`]: the records in file order (empty for an empty list).
        records, Records, &[Params], |v| v.as_slice()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getters() {
        let mut p = Params::new();
        p.insert("burst", ParamValue::Uint(32), Loc::new(3, 4));
        p.insert("port", ParamValue::Port("p0".into()), Loc::new(3, 9));
        assert_eq!(p.uint("burst"), Some(32));
        assert_eq!(p.port("port"), Some("p0"));
        assert_eq!(p.uint("absent"), None);
        assert_eq!(p.loc("burst"), Some(Loc::new(3, 4)));
        assert_eq!(p.len(), 2);
        assert_eq!(p.iter().map(|(k, _, _)| k).collect::<Vec<_>>(), ["burst", "port"]);

        let mut rec = Params::new();
        rec.insert("port", ParamValue::Uint(80), Loc::new(5, 18));
        p.insert("listen", ParamValue::Records(vec![rec]), Loc::new(5, 9));
        let listen = p.records("listen").unwrap();
        assert_eq!((listen[0].uint("port"), listen[0].loc("port")), (Some(80), Some(Loc::new(5, 18))));
    }

    crate::choice! {
        enum Algo {
            Cubic = "cubic",
            NewReno = "newreno",
        }
    }

    #[test]
    fn choices_are_enums() {
        use crate::Choice;
        let mut p = Params::new();
        p.insert("congestion", ParamValue::Str("newreno".into()), Loc::new(1, 1));
        assert_eq!(p.choice::<Algo>("congestion"), Some(Algo::NewReno));
        assert_eq!(p.choice::<Algo>("absent"), None);
        assert_eq!(Algo::NAMES, ["cubic", "newreno"]);
        assert_eq!(Algo::Cubic.name(), "cubic");
    }

    #[test]
    #[should_panic(expected = "parameter `congestion` read as")]
    fn a_word_outside_the_choice_is_a_programming_error() {
        let mut p = Params::new();
        p.insert("congestion", ParamValue::Str("reno".into()), Loc::new(1, 1));
        let _ = p.choice::<Algo>("congestion");
    }

    #[test]
    #[should_panic(expected = "parameter `burst` read as Str")]
    fn wrong_kind_is_a_programming_error() {
        let mut p = Params::new();
        p.insert("burst", ParamValue::Uint(32), Loc::new(1, 1));
        let _ = p.str("burst");
    }
}
