//! The node reference of `docs/pipeline-yaml.md`, generated from [`crate::CATALOG`]
//! so the documentation cannot drift from the code (a test compares them).

use ironpath_config::{NodeSpec, ParamKind, ParamSpec};
use std::fmt::Write;

/// Markdown for every node type: what it does, its next edges and parameters.
pub fn catalog_markdown() -> String {
    let mut s = String::new();
    for n in crate::CATALOG {
        node(&mut s, n);
    }
    s
}

fn node(s: &mut String, n: &NodeSpec) {
    let _ = writeln!(s, "### `{}`\n\n{}.\n", n.type_name, capitalize(n.doc));
    let nexts = n.nexts.names();
    let _ = writeln!(
        s,
        "- next edges: {}",
        if n.nexts.per_port() {
            let extra: String = n.nexts.extra().iter().map(|x| format!(", and `{x}`")).collect();
            format!("one per port, named after it (`next: <port>`), to that port's transmit node{extra}")
        } else if nexts.is_empty() {
            "none (a sink)".to_string()
        } else {
            nexts.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
        }
    );
    let _ = writeln!(s, "- polled every walk: {}\n", if n.source { "yes" } else { "no (runs when packets arrive)" });
    if n.params.is_empty() {
        let _ = writeln!(s, "No parameters.\n");
        return;
    }
    params_table(s, "param", n.params);
    records_tables(s, "", n.params);
}

/// One row per parameter (or field of a record).
fn params_table(s: &mut String, head: &str, params: &[ParamSpec]) {
    let _ = writeln!(s, "| {head} | accepts | default | meaning |\n|---|---|---|---|");
    for p in params {
        let default = match (p.required, p.default) {
            (true, _) => "required".to_string(),
            (false, Some(d)) => format!("`{d}`"),
            (false, None) => "-".to_string(),
        };
        let _ = writeln!(s, "| `{}` | {} | {} | {} |", p.name, p.kind.describe(), default, p.doc);
    }
    s.push('\n');
}

/// A table of fields under each list-of-records parameter (Markdown tables do not nest), and
/// under each list-of-records field of those, named by their path (`listen`, `listen[].tls`).
fn records_tables(s: &mut String, parent: &str, params: &[ParamSpec]) {
    for p in params {
        if let ParamKind::Records(fields) = p.kind {
            let path = format!("{parent}{}", p.name);
            let _ = writeln!(s, "Each record of `{path}` is a map with these fields:\n");
            params_table(s, "field", fields);
            records_tables(s, &format!("{path}[]."), fields);
        }
    }
}

fn capitalize(t: &str) -> String {
    let mut c = t.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use ironpath_config::{ParamKind, ParamSpec};

    #[test]
    fn records_fields_get_their_own_table() {
        const TLS: &[ParamSpec] = &[ParamSpec::new("cert", ParamKind::Path).required().doc("d")];
        const LISTEN: &[ParamSpec] = &[
            ParamSpec::new("port", ParamKind::Uint { min: 1, max: 65535 }).required().doc("d"),
            ParamSpec::new("backlog", ParamKind::Uint { min: 1, max: 9 }).default("4").doc("d"),
            ParamSpec::new("tls", ParamKind::Records(TLS)).doc("d"),
        ];
        let params = [ParamSpec::new("listen", ParamKind::Records(LISTEN)).default("[]").doc("d")];
        let mut s = String::new();
        super::params_table(&mut s, "param", &params);
        super::records_tables(&mut s, "", &params);
        assert_eq!(
            s,
            "| param | accepts | default | meaning |\n|---|---|---|---|\n\
             | `listen` | a list of maps with keys: port, backlog, tls | `[]` | d |\n\n\
             Each record of `listen` is a map with these fields:\n\n\
             | field | accepts | default | meaning |\n|---|---|---|---|\n\
             | `port` | an unsigned integer in 1..=65535 | required | d |\n\
             | `backlog` | an unsigned integer in 1..=9 | `4` | d |\n\
             | `tls` | a list of maps with keys: cert | - | d |\n\n\
             Each record of `listen[].tls` is a map with these fields:\n\n\
             | field | accepts | default | meaning |\n|---|---|---|---|\n\
             | `cert` | a file path | required | d |\n\n"
        );
    }

    /// `docs/pipeline-yaml.md` holds the generated reference between its markers;
    /// `UPDATE_DOCS=1 cargo test -p ironpath-nodes` rewrites it.
    #[test]
    fn docs_match_the_catalog() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/pipeline-yaml.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (begin, end) = ("<!-- nodes: begin (generated from core/nodes CATALOG) -->\n", "<!-- nodes: end -->");
        let want = super::catalog_markdown();
        let (a, rest) = doc.split_once(begin).expect("begin marker");
        let (_, b) = rest.split_once(end).expect("end marker");
        let fresh = format!("{a}{begin}{want}{end}{b}");
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        assert!(fresh == doc, "docs/pipeline-yaml.md is out of date: UPDATE_DOCS=1 cargo test -p ironpath-nodes");
    }
}
