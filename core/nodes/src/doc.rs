//! The node reference of `docs/pipeline-yaml.md`, generated from [`crate::CATALOG`]
//! so the documentation cannot drift from the code (a test compares them).

use ironpath_config::NodeSpec;
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
        if nexts.is_empty() {
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
    let _ = writeln!(s, "| param | accepts | default | meaning |\n|---|---|---|---|");
    for p in n.params {
        let default = match (p.required, p.default) {
            (true, _) => "required".to_string(),
            (false, Some(d)) => format!("`{d}`"),
            (false, None) => "-".to_string(),
        };
        let _ = writeln!(s, "| `{}` | {} | {} | {} |", p.name, p.kind.describe(), default, p.doc);
    }
    s.push('\n');
}

fn capitalize(t: &str) -> String {
    let mut c = t.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
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
