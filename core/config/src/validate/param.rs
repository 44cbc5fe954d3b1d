//! `params:` of a node, checked against its type's [`ParamSpec`]s.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use crate::catalog::{NodeSpec, ParamKind, ParamSpec, VariantSpec};
use crate::error::Loc;
use crate::params::{ParamValue, Params};
use crate::suggest::show;
use crate::tree::{self, Node, NodeKind};

use super::{boolean, choice, string, uint, Errors, Fields, Names};
use crate::suggest::did_you_mean;

/// What parameter values may refer to.
pub(crate) struct Env<'a> {
    /// Directory relative paths are resolved against (`None`: leave them relative).
    pub(crate) base_dir: Option<&'a Path>,
    pub(crate) ports: &'a Names,
    pub(crate) mempools: &'a Names,
}

/// The parameters of node `ctx` ("node `rx0`") of type `spec`; `None` if any is wrong.
pub(crate) fn params(
    e: &mut Errors,
    node: Option<&Node>,
    spec: &NodeSpec,
    ctx: &str,
    node_loc: Loc,
    env: &Env<'_>,
) -> Option<Params> {
    let fields = match node {
        None => None,
        Some(n) if n.kind == NodeKind::Null => None,
        Some(n) => Some(Fields::of(e, n, &format!("`params` in {ctx}"))?),
    };
    let scope = Scope { type_name: spec.type_name, parent: None, owner: ctx, loc: node_loc };
    entries(e, fields.as_ref(), spec.params, &scope, env)
}

/// Whose entries [`entries`] checks: a node's `params:`, or one record of a `Records` param.
struct Scope<'a> {
    /// The node type whose catalog entry declares the specs.
    type_name: &'a str,
    /// For a record, its param's place in the node type ("param `listen`", "field `ports` of
    /// param `listen`"), named in messages about the catalog's defaults; `None` for a node.
    parent: Option<&'a str>,
    /// The owner in messages: "node `tcp`", "record 2 of param `listen` of node `tcp`".
    owner: &'a str,
    /// The owner's position: where defaults are placed, and where a missing entry is reported
    /// when there is no map.
    loc: Loc,
}

impl Scope<'_> {
    /// What one entry is called: "param" for a node, "field" in a record.
    fn noun(&self) -> &'static str {
        if self.parent.is_some() {
            "field"
        } else {
            "param"
        }
    }

    /// The place of spec `name` in the node type: "param `burst`", "field `app` of param `listen`".
    fn spec_path(&self, name: &str) -> String {
        match self.parent {
            None => format!("param `{name}`"),
            Some(parent) => format!("field `{name}` of {parent}"),
        }
    }
}

/// The entries of `fields` (absent: none given) checked against `specs`: unknown and repeated
/// keys, missing required ones, each value, defaults filled in. `None` if any is wrong.
fn entries(
    e: &mut Errors,
    fields: Option<&Fields<'_>>,
    specs: &[ParamSpec],
    scope: &Scope<'_>,
    env: &Env<'_>,
) -> Option<Params> {
    let before = e.0.len();
    let noun = scope.noun();
    let accepted: Vec<&str> = specs.iter().map(|p| p.name).collect();
    let in_owner = match scope.parent {
        None => format!("in {} (type {})", scope.owner, scope.type_name),
        Some(_) => format!("in {}", scope.owner),
    };
    if let Some(f) = fields {
        f.check_names(e, noun, &in_owner, &accepted);
    }
    let mut out = Params::new();
    for p in specs {
        match fields.and_then(|f| f.get(p.name)) {
            Some(v) => {
                let what = format!("{noun} `{}` of {}", p.name, scope.owner);
                if let Some(val) = value(e, p, scope, v, &what, env) {
                    out.insert(p.name, val, v.loc);
                }
            }
            None if p.required => {
                let loc = fields.map_or(scope.loc, |f| f.loc);
                e.push(loc, format!("missing required {noun} `{}` {in_owner}: {}", p.name, p.kind.describe()));
            }
            None => {
                if let Some(val) = default(e, p, scope, env) {
                    out.insert(p.name, val, scope.loc);
                }
            }
        }
    }
    (e.0.len() == before).then_some(out)
}

/// The default of `p`, parsed like a value in the file and placed at the owner's position (so are
/// the fields of records it holds). A bad default is the catalog's bug, reported at the owner so
/// that it is seen.
fn default(e: &mut Errors, p: &ParamSpec, scope: &Scope<'_>, env: &Env<'_>) -> Option<ParamValue> {
    let text = p.default?;
    let mut inner = Errors::default();
    let value = match tree::parse(text) {
        Ok(mut n) => {
            relocate(&mut n, scope.loc);
            value(&mut inner, p, scope, &n, "value", env)
        }
        Err(err) => {
            inner.0.push(err);
            None
        }
    };
    for err in inner.0 {
        e.push(
            scope.loc,
            format!(
                "node type `{}` has an invalid default `{text}` for {} (a bug in the catalog): {}",
                scope.type_name,
                scope.spec_path(p.name),
                err.message.strip_prefix("value: ").unwrap_or(&err.message)
            ),
        );
    }
    value
}

/// Places `node` and everything in it at `loc`.
fn relocate(node: &mut Node, loc: Loc) {
    node.loc = loc;
    match &mut node.kind {
        NodeKind::Seq(items) => items.iter_mut().for_each(|n| relocate(n, loc)),
        NodeKind::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
            k.loc = loc;
            relocate(v, loc);
        }),
        _ => {}
    }
}

/// One value of parameter (or field) `p` of `scope`; `what` names it in messages.
fn value(
    e: &mut Errors,
    p: &ParamSpec,
    scope: &Scope<'_>,
    node: &Node,
    what: &str,
    env: &Env<'_>,
) -> Option<ParamValue> {
    let kind = p.kind;
    let bad = |e: &mut Errors, s: &str| {
        e.push(node.loc, format!("{what}: `{}` is not {}", show(s), kind.describe()));
    };
    match kind {
        ParamKind::Uint { min, max } => uint(e, node, what, min, max).map(ParamValue::Uint),
        ParamKind::Bool => boolean(e, node, what).map(ParamValue::Bool),
        ParamKind::Str => string(e, node, what).map(|s| ParamValue::Str(s.to_owned())),
        ParamKind::Enum(values) => choice(e, node, what, values).map(|s| ParamValue::Str(s.to_owned())),
        ParamKind::Mac => {
            let s = string(e, node, what)?;
            let mac = parse_mac(s);
            if mac.is_none() {
                bad(e, s);
            }
            mac.map(ParamValue::Mac)
        }
        ParamKind::Ipv4 => {
            let s = string(e, node, what)?;
            let ip = s.parse::<Ipv4Addr>().ok();
            if ip.is_none() {
                bad(e, s);
            }
            ip.map(ParamValue::Ipv4)
        }
        ParamKind::Ipv6 => {
            let s = string(e, node, what)?;
            let ip = s.parse::<Ipv6Addr>().ok();
            if ip.is_none() {
                bad(e, s);
            }
            ip.map(ParamValue::Ipv6)
        }
        ParamKind::IpList => ip_list(e, node, what).map(ParamValue::IpList),
        ParamKind::Path => {
            let s = string(e, node, what)?;
            if s.is_empty() {
                e.push(node.loc, format!("{what}: the path must not be empty"));
                return None;
            }
            let p = PathBuf::from(s);
            Some(ParamValue::Path(match env.base_dir {
                Some(base) if p.is_relative() => base.join(p),
                _ => p,
            }))
        }
        ParamKind::Port => env.ports.reference(e, node, what, "port").map(ParamValue::Port),
        ParamKind::Mempool => env.mempools.reference(e, node, what, "mempool").map(ParamValue::Mempool),
        // Checked against the nodes once all are read (`wiring::references`).
        ParamKind::Node(_) => string(e, node, what).map(|s| ParamValue::Str(s.to_owned())),
        ParamKind::Duration => duration(e, node, what).map(ParamValue::DurationUs),
        ParamKind::Records(fields) => {
            let parent = scope.spec_path(p.name);
            records(e, fields, node, what, &Scope { parent: Some(&parent), ..*scope }, env).map(ParamValue::Records)
        }
        ParamKind::Variant(forms) => variant(e, forms, node, what),
    }
}

/// A bare word naming a form without argument, or `{form: N}` for a form with one.
fn variant(e: &mut Errors, forms: &[VariantSpec], node: &Node, what: &str) -> Option<ParamValue> {
    let expected = ParamKind::Variant(&[]).describe();
    let accepted = || forms.iter().map(VariantSpec::describe).collect::<Vec<_>>().join(", ");
    let names = || forms.iter().map(|f| f.name);
    let unknown = |e: &mut Errors, loc: Loc, s: &str| {
        e.push(
            loc,
            format!("{what}: unknown value `{}`; accepted: {}{}", show(s), accepted(), did_you_mean(s, names())),
        );
    };
    match &node.kind {
        NodeKind::Str(s) => match forms.iter().find(|f| f.name == s) {
            Some(f) if f.arg.is_none() => Some(ParamValue::Variant(s.clone(), None)),
            Some(f) => {
                e.push(node.loc, format!("{what}: `{s}` takes a number: write {}", f.describe()));
                None
            }
            None => {
                unknown(e, node.loc, s);
                None
            }
        },
        NodeKind::Map(entries) if entries.len() == 1 => {
            let (k, v) = &entries[0];
            match forms.iter().find(|f| f.name == k.name) {
                Some(VariantSpec { arg: Some((min, max)), .. }) => {
                    let inner = format!("{what} (`{}`)", k.name);
                    uint(e, v, &inner, *min, *max).map(|n| ParamValue::Variant(k.name.clone(), Some(n)))
                }
                Some(_) => {
                    e.push(k.loc, format!("{what}: `{}` takes no number: write it as a bare word", k.name));
                    None
                }
                None => {
                    unknown(e, k.loc, &k.name);
                    None
                }
            }
        }
        _ => {
            e.wrong_type(node, what, &format!("{} ({})", expected.trim_end_matches(": "), accepted()));
            None
        }
    }
}

/// A list of maps, each checked against `fields` like a node's `params:`; every bad record is
/// reported. `scope` is the param's owner with `parent` naming the param itself.
fn records(
    e: &mut Errors,
    fields: &'static [ParamSpec],
    node: &Node,
    what: &str,
    scope: &Scope<'_>,
    env: &Env<'_>,
) -> Option<Vec<Params>> {
    let NodeKind::Seq(items) = &node.kind else {
        let expected = ParamKind::Records(fields).describe();
        if matches!(node.kind, NodeKind::Map(_)) {
            let found = "found a map (for one record, write a list of one: `[{...}]` or `- ...`)";
            e.push(node.loc, format!("{what}: expected {expected}, {found}"));
        } else {
            e.wrong_type(node, what, &expected);
        }
        return None;
    };
    let all: Vec<Option<Params>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            // Counted from 1, as people count list items; the position says which one anyway.
            let owner = format!("record {} of {what}", i + 1);
            let map = Fields::of(e, item, &owner)?;
            entries(e, Some(&map), fields, &Scope { owner: &owner, loc: item.loc, ..*scope }, env)
        })
        .collect();
    all.into_iter().collect()
}

/// `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff`, two hex digits per byte.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let sep = if s.contains('-') { '-' } else { ':' };
    let mut mac = [0u8; 6];
    let mut parts = s.split(sep);
    for b in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        *b = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// One address, or a non-empty list of them; every bad element is reported.
fn ip_list(e: &mut Errors, node: &Node, what: &str) -> Option<Vec<IpAddr>> {
    let one = |e: &mut Errors, n: &Node| -> Option<IpAddr> {
        let s = string(e, n, what)?;
        let ip = s.parse::<IpAddr>().ok();
        if ip.is_none() {
            e.push(n.loc, format!("{what}: `{}` is not an IPv4 or IPv6 address", show(s)));
        }
        ip
    };
    match &node.kind {
        NodeKind::Seq(items) if items.is_empty() => {
            e.push(node.loc, format!("{what}: the list of addresses must not be empty"));
            None
        }
        NodeKind::Seq(items) => {
            let all: Vec<Option<IpAddr>> = items.iter().map(|n| one(e, n)).collect();
            all.into_iter().collect()
        }
        NodeKind::Str(_) => one(e, node).map(|ip| vec![ip]),
        _ => {
            e.wrong_type(node, what, "an IP address or a list of IP addresses");
            None
        }
    }
}

/// An integer of microseconds, or a string `<digits><us|ms|s>`.
fn duration(e: &mut Errors, node: &Node, what: &str) -> Option<u64> {
    const EXPECTED: &str = "a duration (10ms, 5us, 1s, or an integer of microseconds)";
    match &node.kind {
        NodeKind::Int(_) => uint(e, node, what, 0, u64::MAX),
        NodeKind::Str(s) => {
            let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let (num, unit) = s.split_at(digits);
            let scale: u64 = match unit {
                "us" | "µs" => 1,
                "ms" => 1_000,
                "s" => 1_000_000,
                _ => 0,
            };
            if num.is_empty() || scale == 0 {
                e.push(node.loc, format!("{what}: `{}` is not {EXPECTED}", show(s)));
                return None;
            }
            let v = num.parse::<u64>().ok().and_then(|n| n.checked_mul(scale));
            if v.is_none() {
                e.push(node.loc, format!("{what}: `{}` is too long (at most {} microseconds)", show(s), u64::MAX));
            }
            v
        }
        _ => {
            e.wrong_type(node, what, EXPECTED);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    const INNER: &[ParamSpec] = &[
        ParamSpec::new("x", ParamKind::Uint { min: 0, max: 9 }).required(),
        ParamSpec::new("y", ParamKind::Bool).default("maybe"),
    ];
    const OUTER: &[ParamSpec] =
        &[ParamSpec::new("name", ParamKind::Str).required(), ParamSpec::new("inner", ParamKind::Records(INNER))];
    static NODES: &[NodeSpec] = &[NodeSpec {
        type_name: "t",
        params: &[
            ParamSpec::new("outer", ParamKind::Records(OUTER)),
            ParamSpec::new("preset", ParamKind::Records(OUTER)).default("[{name: a}, {name: b}]"),
            ParamSpec::new("completion", ParamKind::Variant(FORMS)).default("immediate"),
        ],
        ..NodeSpec::DEFAULT
    }];

    const FORMS: &[VariantSpec] = &[
        VariantSpec { name: "immediate", arg: None },
        VariantSpec { name: "every", arg: Some((1, 256)) },
        VariantSpec { name: "timer_us", arg: Some((1, 1_000_000)) },
    ];

    #[test]
    fn variants_are_a_word_or_a_map_of_one_number() {
        assert_eq!(parse("").unwrap().variant("completion"), Some(("immediate", None)));
        let p = parse("    params: {completion: {every: 16}}\n").unwrap();
        assert_eq!(p.variant("completion"), Some(("every", Some(16))));
        let p = parse("    params:\n      completion:\n        timer_us: 10000\n").unwrap();
        assert_eq!(p.variant("completion"), Some(("timer_us", Some(10000))));
        let e = parse("    params: {completion: evry}\n").unwrap_err();
        assert_eq!(
            e,
            "t.yaml:6:26: error: param `completion` of node `a`: unknown value `evry`; accepted: immediate, \
             {every: 1..=256}, {timer_us: 1..=1000000} (did you mean `every`?)"
        );
        let e = parse("    params: {completion: every}\n").unwrap_err();
        assert!(e.ends_with("`every` takes a number: write {every: 1..=256}"), "{e}");
        let e = parse("    params: {completion: {every: 0}}\n").unwrap_err();
        assert!(e.ends_with("param `completion` of node `a` (`every`): 0 is out of range 1..=256"), "{e}");
        let e = parse("    params: {completion: {immediate: 1}}\n").unwrap_err();
        assert!(e.ends_with("`immediate` takes no number: write it as a bare word"), "{e}");
        let e = parse("    params: {completion: [1]}\n").unwrap_err();
        assert!(e.contains("expected one of (immediate, {every: 1..=256}, {timer_us: 1..=1000000})"), "{e}");
    }

    fn parse(params: &str) -> Result<Params, String> {
        let text = format!("lcores: [{{id: 0}}]\nnodes:\n  - name: a\n    type: t\n    lcore: 0\n{params}");
        let cat = Catalog { nodes: NODES, drivers: None };
        let mut p = crate::parse_str(&text, Path::new("t.yaml"), &cat).map_err(|e| e.to_string())?;
        Ok(p.nodes.remove(0).params)
    }

    #[test]
    fn records_describe_their_keys() {
        assert_eq!(ParamKind::Records(INNER).describe(), "a list of maps with keys: x, y");
    }

    #[test]
    fn nested_records_name_the_whole_path_and_bad_field_defaults_are_at_the_record() {
        let e = parse(
            "    params:\n      outer:\n        - {name: n}\n        - {name: m, inner: [{x: 1}, {x: 10, y: true}]}\n",
        )
        .unwrap_err();
        assert_eq!(
            e,
            "t.yaml:9:29: error: node type `t` has an invalid default `maybe` for field `y` of field `inner` of \
             param `outer` (a bug in the catalog): expected a boolean (true or false), found a string\n\
             t.yaml:9:41: error: field `x` of record 2 of field `inner` of record 2 of param `outer` of node `a`: \
             10 is out of range 0..=9"
        );
    }

    #[test]
    fn records_default_is_placed_at_the_node() {
        let p = parse("").unwrap();
        let preset = p.records("preset").unwrap();
        assert_eq!(preset.iter().map(|r| r.str("name").unwrap()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(preset.iter().all(|r| r.loc("name") == Some(Loc::new(3, 5))), "{preset:?}");
        assert_eq!(p.records("outer"), None, "optional, no default");
    }

    #[test]
    fn macs() {
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("02-00-00-00-00-FF"), Some([2, 0, 0, 0, 0, 255]));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:00:00"), None);
        assert_eq!(parse_mac("2:0:0:0:0:0"), None);
        assert_eq!(parse_mac("+2:00:00:00:00:00"), None);
        assert_eq!(parse_mac("zz:00:00:00:00:00"), None);
    }

    fn dur(text: &str) -> Result<u64, String> {
        let mut e = Errors::default();
        let n = tree::parse(text).unwrap();
        duration(&mut e, &n, "d").ok_or_else(|| e.0[0].message.clone())
    }

    #[test]
    fn durations() {
        assert_eq!(dur("10ms"), Ok(10_000));
        assert_eq!(dur("5us"), Ok(5));
        assert_eq!(dur("1s"), Ok(1_000_000));
        assert_eq!(dur("250"), Ok(250));
        assert!(dur("'10'").unwrap_err().contains("is not a duration"));
        assert!(dur("ms").unwrap_err().contains("is not a duration"));
        assert!(dur("1.5s").unwrap_err().contains("is not a duration"));
        assert!(dur("1.5").unwrap_err().contains("found a floating-point number"));
        assert!(dur("-1").unwrap_err().contains("out of range"));
        assert!(dur("99999999999999999999s").unwrap_err().contains("too long"));
    }
}
