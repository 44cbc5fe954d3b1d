//! From a request target to a file path under the document root, lexically: no file
//! system access, no symlink resolution.

use std::path::{Component, Path, PathBuf};

use crate::Status;

/// The file a directory target (`/`, `/docs/`) maps to.
pub const INDEX_FILE: &str = "index.html";

/// Maps a raw request target to a path under `root`, without touching the file system:
/// the caller opens the file and answers 404 when that fails (and decides what a
/// directory without a trailing `/` means, e.g. a 301 to `target/` or a 404).
///
/// 1. The target must start with `/` (origin-form; absolute-form `http://host/...` and
///    `*` are refused): else 400.
/// 2. The query (`?...`) and fragment (`#...`) are dropped.
/// 3. The rest is split on `/`, then each segment is percent-decoded (so `%2F` does not
///    split): a `%` not followed by two hex digits is 400, a decoded byte below 0x20
///    (NUL included) or 0x7F is 400, decoded bytes that are not UTF-8 are 400. `+` stays
///    `+` (it means a space only in HTML form queries).
/// 4. Empty and `.` segments (also `%2e`) are skipped: `//etc` is `root/etc`.
/// 5. A `..` segment (also `%2e%2e`, `.%2E`) is 403 Forbidden, wherever it is, even
///    where it would stay inside the root (`/a/../b`): refusing is simpler to audit than
///    normalising, and no browser sends it (they normalise before sending).
/// 6. A segment holding `/` (from `%2F`) or `\` (raw or `%5C`) is 404: no file can have
///    that name on Unix, and refusing `\` keeps `..\` from meaning anything anywhere.
///    (This is Apache's default for `%2F`, `AllowEncodedSlashes Off`.)
/// 7. Each remaining segment must be one plain path component on this platform
///    (`Path::components` yields a single `Normal` equal to it), else 404: a last line
///    of defence against anything `PathBuf::push` would treat as a root or prefix.
/// 8. A target ending in `/` (or `/.`), and `/` itself, maps to [`INDEX_FILE`] in that
///    directory.
///
/// Hidden files (`/.git/config`) are not refused; a caller that must not serve them
/// checks the returned path's components.
///
/// The result always starts with `root` and has no `..` component after it.
pub fn resolve_path(root: &Path, target: &str) -> Result<PathBuf, Status> {
    let path = target.split(['?', '#']).next().unwrap_or_default();
    let rest = path.strip_prefix('/').ok_or(Status::BAD_REQUEST)?;
    let mut resolved = root.to_path_buf();
    let mut directory = true;
    let mut decoded = Vec::new();
    for raw in rest.split('/') {
        percent_decode(raw.as_bytes(), &mut decoded)?;
        match decoded.as_slice() {
            b"" | b"." => {
                directory = true;
                continue;
            }
            b".." => return Err(Status::FORBIDDEN),
            _ => {}
        }
        if decoded.iter().any(|&b| b < 0x20 || b == 0x7f) {
            return Err(Status::BAD_REQUEST);
        }
        if decoded.iter().any(|&b| b == b'/' || b == b'\\') {
            return Err(Status::NOT_FOUND);
        }
        let segment = std::str::from_utf8(&decoded).map_err(|_| Status::BAD_REQUEST)?;
        if !is_one_normal_component(segment) {
            return Err(Status::NOT_FOUND);
        }
        resolved.push(segment);
        directory = false;
    }
    if directory {
        resolved.push(INDEX_FILE);
    }
    Ok(resolved)
}

/// Decodes `%XX` escapes of `raw` into `out` (cleared first).
fn percent_decode(raw: &[u8], out: &mut Vec<u8>) -> Result<(), Status> {
    out.clear();
    let mut bytes = raw.iter();
    while let Some(&b) = bytes.next() {
        if b == b'%' {
            let hi = bytes.next().and_then(|&h| hex_value(h)).ok_or(Status::BAD_REQUEST)?;
            let lo = bytes.next().and_then(|&l| hex_value(l)).ok_or(Status::BAD_REQUEST)?;
            out.push(hi << 4 | lo);
        } else {
            out.push(b);
        }
    }
    Ok(())
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).and_then(|v| u8::try_from(v).ok())
}

fn is_one_normal_component(segment: &str) -> bool {
    let mut components = Path::new(segment).components();
    matches!((components.next(), components.next()), (Some(Component::Normal(name)), None) if name == segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(target: &str) -> PathBuf {
        resolve_path(Path::new("/srv/www"), target).unwrap_or_else(|status| panic!("{target}: {status}"))
    }

    fn err(target: &str) -> u16 {
        match resolve_path(Path::new("/srv/www"), target) {
            Ok(path) => panic!("{target}: {}", path.display()),
            Err(status) => status.0,
        }
    }

    #[test]
    fn plain_paths() {
        assert_eq!(ok("/"), Path::new("/srv/www/index.html"));
        assert_eq!(ok("/a.txt"), Path::new("/srv/www/a.txt"));
        assert_eq!(ok("/docs/"), Path::new("/srv/www/docs/index.html"));
        assert_eq!(ok("/docs"), Path::new("/srv/www/docs"));
        assert_eq!(ok("/docs/."), Path::new("/srv/www/docs/index.html"));
        assert_eq!(ok("/a/./b"), Path::new("/srv/www/a/b"));
        assert_eq!(ok("//etc"), Path::new("/srv/www/etc"));
        assert_eq!(ok("//etc//passwd"), Path::new("/srv/www/etc/passwd"));
        assert_eq!(ok("/...."), Path::new("/srv/www/...."));
        assert_eq!(ok("/..a/b.."), Path::new("/srv/www/..a/b.."));
        assert_eq!(ok("/.hidden"), Path::new("/srv/www/.hidden"));
        assert_eq!(ok("/a+b"), Path::new("/srv/www/a+b"));
        assert_eq!(resolve_path(Path::new("www"), "/x").unwrap(), Path::new("www/x"));
        assert_eq!(resolve_path(Path::new(""), "/x").unwrap(), Path::new("x"));
    }

    #[test]
    fn query_and_fragment() {
        assert_eq!(ok("/a.html?x=1&y=/../.."), Path::new("/srv/www/a.html"));
        assert_eq!(ok("/a.html#/../../etc"), Path::new("/srv/www/a.html"));
        assert_eq!(ok("/?q"), Path::new("/srv/www/index.html"));
        assert_eq!(ok("/d/#top"), Path::new("/srv/www/d/index.html"));
        // An escaped `?` is part of the name.
        assert_eq!(ok("/a%3Fb"), Path::new("/srv/www/a?b"));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(ok("/hello%20world.txt"), Path::new("/srv/www/hello world.txt"));
        assert_eq!(ok("/caf%C3%A9"), Path::new("/srv/www/café"));
        assert_eq!(ok("/caf%c3%a9"), Path::new("/srv/www/café"));
        assert_eq!(ok("/%2e/a"), Path::new("/srv/www/a"));
        assert_eq!(ok("/a/%2E"), Path::new("/srv/www/a/index.html"));
        assert_eq!(ok("/%25"), Path::new("/srv/www/%"));
        for bad in ["/%", "/%2", "/%zz", "/%g0", "/a%2", "/%00", "/a%00b", "/%0a", "/%7f", "/%ff", "/%c3"] {
            assert_eq!(err(bad), 400, "{bad}");
        }
    }

    #[test]
    fn escapes_are_refused() {
        for target in ["/../etc/passwd", "/%2e%2e/x", "/%2E%2E/x", "/.%2e/x", "/a/../../b", "/a/../b", "/..", "/a/.."] {
            assert_eq!(err(target), 403, "{target}");
        }
        // Encoded slashes and backslashes never split a segment.
        for target in ["/..%2f..%2fetc/passwd", "/a%2Fb", "/..%5c..%5cx", "/a\\b", "/..\\x"] {
            assert_eq!(err(target), 404, "{target}");
        }
    }

    #[test]
    fn target_forms() {
        for target in ["", "*", "a/b", "http://h/a", "%2Fa"] {
            assert_eq!(err(target), 400, "{target:?}");
        }
    }
}
