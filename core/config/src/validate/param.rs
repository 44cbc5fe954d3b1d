//! `params:` of a node, checked against its type's [`ParamSpec`]s.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use crate::catalog::{NodeSpec, ParamKind, ParamSpec};
use crate::error::Loc;
use crate::params::{ParamValue, Params};
use crate::suggest::show;
use crate::tree::{self, Node, NodeKind};

use super::{boolean, choice, string, uint, Errors, Fields, Names};

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
    let before = e.0.len();
    let fields = match node {
        None => None,
        Some(n) if n.kind == NodeKind::Null => None,
        Some(n) => Some(Fields::of(e, n, &format!("`params` in {ctx}"))?),
    };
    let accepted: Vec<&str> = spec.params.iter().map(|p| p.name).collect();
    let type_ctx = format!("in {ctx} (type {})", spec.type_name);
    if let Some(f) = &fields {
        f.check_names(e, "param", &type_ctx, &accepted);
    }
    let mut out = Params::new();
    for p in spec.params {
        let what = format!("param `{}` of {ctx}", p.name);
        match fields.as_ref().and_then(|f| f.get(p.name)) {
            Some(v) => {
                if let Some(val) = value(e, p.kind, v, &what, env) {
                    out.insert(p.name, val, v.loc);
                }
            }
            None if p.required => {
                let loc = fields.as_ref().map_or(node_loc, |f| f.loc);
                e.push(loc, format!("missing required param `{}` {type_ctx}: {}", p.name, p.kind.describe()));
            }
            None => {
                if let Some(val) = default(e, p, spec, node_loc, env) {
                    out.insert(p.name, val, node_loc);
                }
            }
        }
    }
    (e.0.len() == before).then_some(out)
}

/// The default of `p`, parsed like a value in the file. A bad default is the catalog's bug,
/// reported at the node so that it is seen.
fn default(e: &mut Errors, p: &ParamSpec, spec: &NodeSpec, node_loc: Loc, env: &Env<'_>) -> Option<ParamValue> {
    let text = p.default?;
    let mut inner = Errors::default();
    let value = match tree::parse(text) {
        Ok(n) => value(&mut inner, p.kind, &n, "value", env),
        Err(err) => {
            inner.0.push(err);
            None
        }
    };
    for err in inner.0 {
        e.push(
            node_loc,
            format!(
                "node type `{}` has an invalid default `{text}` for param `{}` (a bug in the catalog): {}",
                spec.type_name,
                p.name,
                err.message.strip_prefix("value: ").unwrap_or(&err.message)
            ),
        );
    }
    value
}

/// One value of kind `kind`; `what` names it in messages.
fn value(e: &mut Errors, kind: ParamKind, node: &Node, what: &str, env: &Env<'_>) -> Option<ParamValue> {
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
        ParamKind::Duration => duration(e, node, what).map(ParamValue::DurationUs),
    }
}

/// `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff`, two hex digits per byte.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
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
