//! Every repository path the documentation names exists: the README and each
//! `docs/*.md`, outside fenced code blocks.
//!
//! What is checked:
//! * every link target that is not a URL, resolved from the document's folder, and
//!   its `#anchor` against the headings of the document it points into;
//! * every code span that looks like a repository path: relative, made of path
//!   characters only, and either ending in a known file extension or containing a
//!   `/` after a first segment that names a directory of the repository (so units
//!   such as `Mbit/s` and pairs such as `on/off` are not taken for paths). A span
//!   starting with `./` or `../` is resolved from the document's folder; any other
//!   from the repository root, the document's folder, or a path the same
//!   paragraph (or table row) named before it, that path's folders and their
//!   `src/`: "`core/config` (`validate/param.rs`, `params.rs`)" finds
//!   `core/config/src/validate/param.rs` and `core/config/src/params.rs`. A bare
//!   file name may also be the last part of a path the document names, or be in
//!   a folder it names. `path::item` is checked as `path`; a segment in capitals
//!   (`pmds/NAME`) is a placeholder and ends what is checked; `*` matches within
//!   one segment.
//!
//! Absolute paths (`/proc/...`, `/run/memif.sock`, HTTP request paths) name things
//! on the user's machine and are not checked. The few relative names that are
//! deliberately not in a checkout are in [`NOT_IN_REPO`].

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Extensions that make a code span a file name even without a `/`.
const EXTENSIONS: &[&str] =
    &["rs", "md", "yaml", "yml", "toml", "py", "sh", "c", "h", "json", "png", "svg", "pcap", "pcapng", "txt", "lock"];

/// Relative names the documentation uses on purpose for what a checkout does not
/// hold, each with the reason; a name matches an entry equal to it or to one of its
/// leading folders.
const NOT_IN_REPO: &[(&str, &str)] = &[
    ("target", "build output"),
    ("../lib/ironpath", "an installed tree's plugin folder, relative to its bin/"),
    ("dpdk-telemetry.py", "DPDK's telemetry client, installed with DPDK"),
    ("../x", "an HTTP request path that leaves the document root"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The documents checked: the README and every `docs/*.md`.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// The names of every folder in the repository (build output and hidden folders
/// left out): what the first segment of a path-like span must be.
fn folder_names(root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if !e.file_type().unwrap().is_dir() || name.starts_with('.') || name == "target" {
                continue;
            }
            todo.push(e.path());
            names.push(name);
        }
    }
    names.sort();
    names.dedup();
    names
}

/// A paragraph, list or table row of a document, outside fenced code.
struct Block {
    line: usize,
    text: String,
}

fn blocks(doc: &str) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut fenced = false;
    let mut open = false;
    for (i, line) in doc.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            open = false;
            continue;
        }
        if fenced || t.is_empty() {
            open = false;
            continue;
        }
        let alone = t.starts_with('|') || t.starts_with('#');
        match out.last_mut() {
            Some(b) if open && !alone => {
                b.text.push('\n');
                b.text.push_str(line);
            }
            _ => out.push(Block { line: i + 1, text: line.to_string() }),
        }
        open = !alone;
    }
    out
}

/// The code spans of a block (single backticks; a span does not cross a table cell).
fn code_spans(text: &str) -> Vec<String> {
    let parts: Vec<&str> = text.split('`').collect();
    parts.iter().skip(1).step_by(2).take(parts.len() / 2).map(|s| s.to_string()).collect()
}

/// The targets of a block's inline links and images.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a document's headings (a repeated heading gets `-1`, `-2`, ...).
fn anchors(doc: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fenced = false;
    let mut out = Vec::new();
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let s = slug(line.trim_start_matches('#'));
        let n = seen.entry(s.clone()).or_insert(0);
        out.push(if *n == 0 { s.clone() } else { format!("{s}-{n}") });
        *n += 1;
    }
    out
}

/// Whether `path` (relative, `*` allowed within a segment) names something under `base`.
fn exists_under(base: &Path, path: &str) -> bool {
    let mut found = vec![base.to_path_buf()];
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        let mut next = Vec::new();
        for dir in &found {
            if let Some((pre, post)) = seg.split_once('*') {
                let Ok(entries) = std::fs::read_dir(dir) else { continue };
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post) {
                        next.push(e.path());
                    }
                }
            } else if dir.join(seg).exists() {
                next.push(dir.join(seg));
            }
        }
        found = next;
    }
    !found.is_empty()
}

/// `a/b/../c` as `a/c`, so that resolved paths can be compared and shown.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The part of a code span to check, or `None` when the span is not a repository path.
fn path_of_span(span: &str, folders: &[String]) -> Option<String> {
    let span = span.split("::").next().unwrap();
    let path_chars = |c: char| c.is_ascii_alphanumeric() || "_.-/*".contains(c);
    if span.is_empty() || span.starts_with('/') || !span.chars().all(path_chars) {
        return None;
    }
    let file = span.trim_end_matches('/').rsplit('/').next().unwrap();
    let has_ext = file.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext));
    let first = span.split('/').next().unwrap();
    let in_folder = span.contains('/') && (first == "." || first == ".." || folders.iter().any(|f| f == first));
    if !has_ext && !in_folder {
        return None;
    }
    // A placeholder segment (`NAME`, `TARGET`) ends the part that can be checked.
    let placeholder =
        |s: &str| s.len() >= 2 && s.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
    let segs: Vec<&str> = span.split('/').take_while(|s| !placeholder(s)).collect();
    let path = segs.join("/");
    (!path.is_empty()).then_some(path)
}

fn allowed(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    NOT_IN_REPO.iter().any(|(p, _)| path == *p || path.starts_with(&format!("{p}/")))
}

/// Dead paths of one document, as `file:line: what`.
fn check_document(root: &Path, doc_path: &Path, folders: &[String]) -> Vec<String> {
    let doc = std::fs::read_to_string(doc_path).unwrap();
    let dir = doc_path.parent().unwrap();
    let name = doc_path.strip_prefix(root).unwrap_or(doc_path).display().to_string();
    let mut dead = Vec::new();
    // What the document names with a `/` and is found: where a bare file name may
    // live (`tcp_root.rs` after `apps/ironpath/tests/tcp_root.rs`).
    let mut named: Vec<PathBuf> = Vec::new();
    let mut bare: Vec<(usize, String)> = Vec::new();
    for block in blocks(&doc) {
        let at = |what: String| format!("{name}:{}: {what}", block.line);
        for target in link_targets(&block.text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() { doc_path.to_path_buf() } else { normalize(&dir.join(file)) };
            if !resolved.exists() {
                dead.push(at(format!("link `{target}`: {} does not exist", resolved.display())));
                continue;
            }
            named.push(resolved.clone());
            if let Some(anchor) = anchor.filter(|_| resolved.extension().is_some_and(|x| x == "md")) {
                let text = std::fs::read_to_string(&resolved).unwrap();
                if !anchors(&text).iter().any(|a| a == anchor) {
                    dead.push(at(format!("link `{target}`: no heading with anchor #{anchor}")));
                }
            }
        }
        // A code span is found from the root, from the document's folder, or under
        // a path the block named before it (that path's folders, and their `src/`):
        // "`core/config` (`validate/param.rs`, `params.rs`)".
        let mut before: Vec<PathBuf> = Vec::new();
        for path in code_spans(&block.text).iter().filter_map(|s| path_of_span(s, folders)) {
            if allowed(&path) {
                continue;
            }
            let from_doc = path.starts_with("./") || path.starts_with("../");
            let mut bases: Vec<PathBuf> =
                if from_doc { vec![dir.to_path_buf()] } else { vec![root.to_path_buf(), dir.to_path_buf()] };
            for earlier in before.iter().filter(|_| !from_doc) {
                for a in earlier.ancestors().filter(|a| a.starts_with(root)) {
                    bases.push(a.to_path_buf());
                    bases.push(a.join("src"));
                }
            }
            match bases.iter().find(|b| exists_under(b, &path)) {
                Some(b) => {
                    let found = normalize(&b.join(&path));
                    if path.contains('/') {
                        named.push(found.clone());
                    }
                    before.push(found);
                }
                None if from_doc => dead.push(at(format!("`{path}` does not exist (from {})", dir.display()))),
                None if !path.contains('/') => bare.push((block.line, path)),
                None => dead.push(at(format!("`{path}` does not exist (nor under a path named before it)"))),
            }
        }
    }
    // A bare file name is the last part of a path the document names, or is in a
    // folder it names (`parse.rs` under the heading `core/nodes/src/aggregate`).
    for (line, file) in bare {
        let found = named
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n == file.as_str()) || (p.is_dir() && exists_under(p, &file)));
        if !found {
            dead.push(format!("{name}:{line}: `{file}` does not exist (nor as a path this document names)"));
        }
    }
    dead
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = root();
    let folders = folder_names(&root);
    let dead: Vec<String> = documents(&root).iter().flat_map(|d| check_document(&root, d, &folders)).collect();
    assert!(dead.is_empty(), "dead paths in the documentation:\n{}", dead.join("\n"));
}

#[test]
fn the_checker_finds_dead_paths_and_passes_live_ones() {
    let root = root();
    let folders = folder_names(&root);
    let dir = std::env::temp_dir().join(format!("doc_paths_{}", std::process::id()));
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    let doc = dir.join("docs/x.md");
    std::fs::write(
        &doc,
        "# Top\n\nSee [x](x.md#top), [y](y.md), [z](x.md#nowhere).\n\n\
         | `core/config` (`validate/param.rs`, `params.rs`) |\n| `core/nodes` `catalog.rs` |\n\n\
         `apps/ironpath/tests/tcp_root.rs`, `core/nodes/src/aggregate`.\n\n\
         `tcp_root.rs`, `parse.rs`, `gone_root.rs`.\n\n\
         `Mbit/s`, `on/off`, `/run/memif.sock`, `pmds/NAME`, `ci/bench-*`, `ci/nothing-*`,\n\
         `core/nodes::make`, `target/debug`, `../x`, `../shared/reference/`.\n\n\
         ```text\n`core/gone.rs`\n```\n",
    )
    .unwrap();
    // The document lives outside the repository: resolve repository paths from `root`.
    let dead = check_document(&root, &doc, &folders);
    let _ = std::fs::remove_dir_all(&dir);
    let dead: Vec<&str> = dead.iter().map(|d| d.split_once(": ").unwrap().1).collect();
    let expect = [
        "link `y.md`:",
        "link `x.md#nowhere`: no heading",
        "`ci/nothing-*` does not exist",
        "`../shared/reference/` does not exist",
        "`catalog.rs` does not exist",
        "`gone_root.rs` does not exist",
    ];
    assert_eq!(dead.len(), expect.len(), "{dead:#?}");
    for (d, e) in dead.iter().zip(expect) {
        assert!(d.starts_with(e), "{d} should start with {e}");
    }
}
