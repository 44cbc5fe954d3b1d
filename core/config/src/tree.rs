//! Layer 1: YAML text to a generic tree in which every value and key knows its position.
//!
//! The tree is built by serde-saphyr through serde's `Deserialize`, one [`Spanned`] per node,
//! so a value's YAML type is kept as written: `1` is an [`NodeKind::Int`], `"1"` a
//! [`NodeKind::Str`]. Validation (layer 2) then walks this tree by hand and collects every error.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, NonFiniteFloatPolicy, Spanned};

use crate::error::{ConfigError, Loc};

/// Deepest nesting of lists and maps accepted (the pipeline schema needs 4); deeper input is
/// refused by the parser's budget before it can exhaust the stack.
pub const MAX_DEPTH: usize = 64;

/// A YAML value with the position where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the value is written (for an alias `*a`: where the alias is).
    pub loc: Loc,
    /// The value.
    pub kind: NodeKind,
}

/// A map key with its position. Keys that are not strings keep their YAML text (`1`, `true`);
/// a list or map used as a key is named `[...]` / `{...}`. Schema keys are all strings, so such
/// keys are reported as unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The key's text.
    pub name: String,
    /// Where the key is written.
    pub loc: Loc,
}

/// The YAML type and value of a [`Node`] (YAML 1.2 core schema; only `true`/`false` are booleans).
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// `null`, `~` or nothing.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An unquoted integer (decimal, `0x`, `0o`, `0b`); i128 holds every i64 and u64.
    Int(i128),
    /// An unquoted floating-point number.
    Float(f64),
    /// A string: quoted, or unquoted text that is not a number, boolean or null.
    Str(String),
    /// A list, in order.
    Seq(Vec<Node>),
    /// A map, in written order; repeated keys are kept (validation reports them).
    Map(Vec<(Key, Node)>),
}

impl NodeKind {
    /// The type in words, with its article, for messages: "a string", "an integer"...
    pub fn describe(&self) -> &'static str {
        match self {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Int(i) if *i < 0 => "a negative integer",
            NodeKind::Int(_) => "an integer",
            NodeKind::Float(_) => "a floating-point number",
            NodeKind::Str(_) => "a string",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a map",
        }
    }
}

fn loc_of(l: serde_saphyr::Location) -> Loc {
    Loc { line: u32::try_from(l.line()).unwrap_or(u32::MAX), column: u32::try_from(l.column()).unwrap_or(u32::MAX) }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<NodeKind>::deserialize(d)?;
        Ok(Node { loc: loc_of(s.referenced), kind: s.value })
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<NodeKind>::deserialize(d)?;
        let name = match s.value {
            NodeKind::Str(s) => s,
            NodeKind::Null => "null".to_owned(),
            NodeKind::Bool(b) => b.to_string(),
            NodeKind::Int(i) => i.to_string(),
            NodeKind::Float(f) => f.to_string(),
            NodeKind::Seq(_) => "[...]".to_owned(),
            NodeKind::Map(_) => "{...}".to_owned(),
        };
        Ok(Key { name, loc: loc_of(s.referenced) })
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = NodeKind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }
    fn visit_none<E>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeKind, D::Error> {
        NodeKind::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<NodeKind, E> {
        Ok(NodeKind::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<NodeKind, E> {
        Ok(NodeKind::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeKind, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            items.push(n);
        }
        Ok(NodeKind::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeKind, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Key>()? {
            let v = map.next_value::<Node>()?;
            entries.push((k, v));
        }
        Ok(NodeKind::Map(entries))
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<NodeKind, D::Error> {
        NodeKind::deserialize(d)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _data: A) -> Result<NodeKind, A::Error> {
        Err(de::Error::custom("unsupported YAML value"))
    }
}

/// The parser settings: YAML 1.2 booleans only (`on`/`yes` stay strings, so `hugepages: on`
/// is the enum value, not `true`), repeated keys passed through (validation reports each one
/// with both lines), non-finite floats passed through (reported as wrong types), and the depth
/// budget at [`MAX_DEPTH`] for block and flow collections alike.
fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    serde_saphyr::options! {
        budget: Some(budget),
        with_snippet: false,
        strict_booleans: true,
        duplicate_keys: DuplicateKeyPolicy::PassThrough,
        non_finite_float_policy: NonFiniteFloatPolicy::PassThrough,
    }
}

/// Parses one YAML document into a [`Node`] tree. A syntax error (or a breach of the parser's
/// budget, such as nesting deeper than [`MAX_DEPTH`]) is a single error at the parser's position.
/// An empty document is [`NodeKind::Null`].
pub fn parse(text: &str) -> Result<Node, ConfigError> {
    serde_saphyr::from_str_with_options::<Node>(text, options()).map_err(|e| {
        let loc = e.location().map_or(Loc::new(1, 1), loc_of);
        let mut message = e.to_string();
        // The parser appends its own position; ours is printed in front instead.
        let suffix = format!(" at line {}, column {}", loc.line, loc.column);
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message.truncate(stripped.len());
        }
        ConfigError::new(loc, format!("invalid YAML: {message}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(n: &Node) -> &[(Key, Node)] {
        match &n.kind {
            NodeKind::Map(m) => m,
            k => panic!("not a map: {k:?}"),
        }
    }

    #[test]
    fn scalars_keep_their_yaml_type_and_position() {
        let n = parse("a: 1\nb: \"1\"\nc: on\nd: true\ne: -3\nf: 1.5\ng:\nh: [x, 2]\ni: 00:11:22:33:44:55\n").unwrap();
        let m = map(&n);
        let kinds: Vec<(&str, &NodeKind)> = m.iter().map(|(k, v)| (k.name.as_str(), &v.kind)).collect();
        assert_eq!(kinds[0], ("a", &NodeKind::Int(1)));
        assert_eq!(kinds[1], ("b", &NodeKind::Str("1".into())));
        assert_eq!(kinds[2], ("c", &NodeKind::Str("on".into())));
        assert_eq!(kinds[3], ("d", &NodeKind::Bool(true)));
        assert_eq!(kinds[4], ("e", &NodeKind::Int(-3)));
        assert_eq!(kinds[5], ("f", &NodeKind::Float(1.5)));
        assert_eq!(kinds[6], ("g", &NodeKind::Null));
        assert!(matches!(kinds[7].1, NodeKind::Seq(v) if v.len() == 2 && v[1].loc == Loc::new(8, 8)));
        assert_eq!(kinds[8], ("i", &NodeKind::Str("00:11:22:33:44:55".into())));
        assert_eq!(m[1].0.loc, Loc::new(2, 1));
        assert_eq!(m[1].1.loc, Loc::new(2, 4));
    }

    #[test]
    fn radix_integers_and_unquoted_addresses() {
        let n = parse("a: 0x10\nb: 0o17\nc: 0b11\nd: {mac: 02:00:00:00:00:01}\ne: ::1\n").unwrap();
        let m = map(&n);
        assert_eq!(m[0].1.kind, NodeKind::Int(16));
        assert_eq!(m[1].1.kind, NodeKind::Int(15));
        assert_eq!(m[2].1.kind, NodeKind::Int(3));
        assert_eq!(map(&m[3].1)[0].1.kind, NodeKind::Str("02:00:00:00:00:01".into()));
        assert_eq!(m[4].1.kind, NodeKind::Str("::1".into()));
    }

    #[test]
    fn repeated_keys_are_kept() {
        let n = parse("a: 1\na: 2\n").unwrap();
        assert_eq!(map(&n).len(), 2);
    }

    #[test]
    fn syntax_error_has_a_position() {
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.loc.line >= 1, "{e}");
        assert!(e.message.starts_with("invalid YAML: "), "{e}");
        assert!(!e.message.contains(" at line "), "{e}");
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse("").unwrap().kind, NodeKind::Null);
        assert_eq!(parse("# only a comment\n").unwrap().kind, NodeKind::Null);
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        for text in ["[".repeat(100_000), "{a: ".repeat(100_000), "- ".repeat(10_000), {
            let mut s = String::new();
            for i in 0..1000 {
                s.push_str(&" ".repeat(i));
                s.push_str("a:\n");
            }
            s
        }] {
            let e = parse(&text).unwrap_err();
            assert!(e.message.starts_with("invalid YAML"), "{e}");
        }
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        parse(&ok).unwrap();
    }

    #[test]
    fn aliases_and_merges_resolve() {
        let n = parse("base: &b {x: 1}\nuse: *b\nm:\n  <<: *b\n  y: 2\n").unwrap();
        let m = map(&n);
        assert_eq!(map(&m[1].1)[0].1.kind, NodeKind::Int(1));
        assert_eq!(map(&m[2].1).len(), 2);
    }
}
