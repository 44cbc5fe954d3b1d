//! `Content-Type` by file extension.

use std::path::Path;

/// Extensions (compared case-insensitively) and their media types. Text types say
/// UTF-8 so that browsers do not guess.
const TYPES: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("txt", "text/plain; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("xml", "application/xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("svg", "image/svg+xml"),
    ("ico", "image/x-icon"),
    ("webp", "image/webp"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    // Scripts are shown, never run: this server executes nothing.
    ("pl", "text/plain; charset=utf-8"),
    ("sh", "text/plain; charset=utf-8"),
    ("md", "text/plain; charset=utf-8"),
];

/// The `Content-Type` for a file, by its extension; `application/octet-stream` for an
/// unknown or missing one.
pub fn content_type(path: &Path) -> &'static str {
    let Some(extension) = path.extension().and_then(|e| e.to_str()) else {
        return "application/octet-stream";
    };
    TYPES.iter().find(|(known, _)| known.eq_ignore_ascii_case(extension)).map_or("application/octet-stream", |t| t.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_extension() {
        let cases = [
            ("/a/index.html", "text/html; charset=utf-8"),
            ("INDEX.HTM", "text/html; charset=utf-8"),
            ("a.txt", "text/plain; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("a.js", "text/javascript; charset=utf-8"),
            ("a.json", "application/json"),
            ("a.png", "image/png"),
            ("a.JPG", "image/jpeg"),
            ("a.jpeg", "image/jpeg"),
            ("a.gif", "image/gif"),
            ("a.svg", "image/svg+xml"),
            ("cgi/run.pl", "text/plain; charset=utf-8"),
            ("a.tar.gz", "application/octet-stream"),
            ("Makefile", "application/octet-stream"),
            (".html", "application/octet-stream"),
            ("a.", "application/octet-stream"),
        ];
        for (path, expected) in cases {
            assert_eq!(content_type(Path::new(path)), expected, "{path}");
        }
    }
}
