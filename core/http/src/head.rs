//! Framing and field grammar shared by request and response heads (RFC 9112 §2, §5;
//! RFC 9110 §5.6): where a head ends, its lines, and the few fields this crate acts on.
//!
//! A line ends with LF, optionally preceded by CR (RFC 9112 §2.2 lets a recipient take a
//! bare LF). Any other CR, and every other control byte except HTAB inside a field value,
//! makes the head malformed. Empty lines before the start line are skipped (RFC 9112
//! §2.2: a client may send an extra CRLF after a body) and count as part of the head.
//! Nothing here allocates, and no input makes it index out of bounds.

/// Where the head at the start of a buffer stands.
pub(crate) enum Frame<'a> {
    /// No end of head yet, and fewer than `max_head` bytes buffered.
    Incomplete,
    /// The first `max_head` bytes hold no end of head; `start_line` says whether they
    /// hold at least a complete start line (request or status line).
    TooLarge { start_line: bool },
    /// A complete head.
    Done {
        /// The start line, then the field lines.
        lines: Lines<'a>,
        /// Bytes of the head from the buffer's first byte through the empty line.
        consumed: usize,
    },
}

/// How far a search for the end of head got in a growing buffer.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scan {
    /// Bytes of complete empty lines before the start line.
    start: usize,
    /// Line feeds before this index were looked at.
    searched: usize,
}

/// Finds the head at the start of `buf` within its first `max_head` bytes.
///
/// `scan` carries the search between calls on a growing buffer, so that each byte is
/// looked at once however small the pieces: skipping empty lines and looking for the
/// end resume where they stopped (appending bytes never undoes a complete empty line,
/// and whether a line feed ends the head depends only on the bytes before it). Pass a
/// fresh `Scan::default()` for a one-shot parse; it is reset when a head is found, and
/// the caller must reset it whenever it removes bytes from the front of the buffer.
pub(crate) fn frame<'a>(buf: &'a [u8], max_head: usize, scan: &mut Scan) -> Frame<'a> {
    let window = buf.get(..max_head).unwrap_or(buf);
    let start = scan.start + skip_blank_lines(window.get(scan.start..).unwrap_or_default());
    match find_end(window, start, scan.searched) {
        Some(end) => {
            *scan = Scan::default();
            let region = window.get(start..end).unwrap_or_default();
            // Drop the empty line, then the LF of the last line; `Lines` drops the CRs.
            let content = region.strip_suffix(b"\n\r\n").or_else(|| region.strip_suffix(b"\n\n")).unwrap_or(region);
            Frame::Done { lines: Lines { rest: Some(content) }, consumed: end }
        }
        None => {
            *scan = Scan { start, searched: window.len() };
            if buf.len() < max_head {
                Frame::Incomplete
            } else {
                Frame::TooLarge { start_line: window.get(start..).is_some_and(|rest| rest.contains(&b'\n')) }
            }
        }
    }
}

/// Bytes taken by empty lines (`\n` or `\r\n`) at the start of `window`.
fn skip_blank_lines(window: &[u8]) -> usize {
    let mut at = 0;
    loop {
        match window.get(at..) {
            Some([b'\n', ..]) => at += 1,
            Some([b'\r', b'\n', ..]) => at += 2,
            _ => return at,
        }
    }
}

/// The index just past the empty line that ends the head starting at `start`, looking at
/// line feeds from `from` on.
fn find_end(window: &[u8], start: usize, from: usize) -> Option<usize> {
    let from = from.max(start);
    let tail = window.get(from..)?;
    memchr::memchr_iter(b'\n', tail)
        .map(|k| from + k + 1)
        .find(|&end| window.get(start..end).is_some_and(|head| head.ends_with(b"\n\n") || head.ends_with(b"\n\r\n")))
}

/// The lines of a head without their line endings (one trailing CR dropped per line).
pub(crate) struct Lines<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(lf) => (rest.get(..lf).unwrap_or_default(), rest.get(lf + 1..)),
            None => (rest, None),
        };
        self.rest = next;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

/// `tchar` of RFC 9110 §5.6.2: the bytes of methods and field names.
#[inline]
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

/// [`is_tchar`] as a table (it is asked of every byte of every field name).
static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            );
        b += 1;
    }
    t
};

/// Visible ASCII (`VCHAR`): the bytes of a request target.
pub(crate) fn is_vchar(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// A byte allowed in a field value or reason phrase: HTAB, SP, VCHAR and obs-text.
#[inline]
pub(crate) fn is_text(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// Whether every byte of `s` is [`is_text`]: without an early exit, so that the loop
/// runs 16 or 32 bytes a step (values are short and nearly always valid).
fn all_text(s: &[u8]) -> bool {
    s.iter().fold(true, |ok, &b| ok & is_text(b))
}

/// `HTTP/<major>.<minor>` with one digit each (RFC 9112 §2.3); case-sensitive.
pub(crate) fn parse_version(version: &[u8]) -> Option<(u8, u8)> {
    match version {
        [b'H', b'T', b'T', b'P', b'/', major @ b'0'..=b'9', b'.', minor @ b'0'..=b'9'] => {
            Some((major - b'0', minor - b'0'))
        }
        _ => None,
    }
}

/// A decimal of one or more digits, no sign, no overflow.
pub(crate) fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// `name ":" OWS value OWS`; `None` when the name is empty or not a token (which
/// rejects whitespace before the colon and obs-fold continuation lines, as RFC 9112 §5
/// asks) or the value holds a control byte.
fn split_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    // One pass over the name: token bytes up to the colon.
    let colon = line.iter().position(|&b| !is_tchar(b))?;
    if colon == 0 || line[colon] != b':' {
        return None;
    }
    let (name, value) = (line.get(..colon)?, line.get(colon + 1..)?);
    if !all_text(value) {
        return None;
    }
    Some((name, trim_ows(value)))
}

/// Why the field lines were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldError {
    /// A line is not `name: value`, or holds a control byte.
    Malformed,
    /// `Content-Length` is not a decimal, or two of them disagree.
    ContentLength,
}

/// What the field lines say about framing and the connection.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    /// A `Connection` field lists `close`.
    pub(crate) close: bool,
    /// A `Connection` field lists `keep-alive`.
    pub(crate) keep_alive: bool,
    /// `Content-Length`, when present (repeats must agree).
    pub(crate) content_length: Option<u64>,
    /// A `Transfer-Encoding` field is present.
    pub(crate) transfer_encoding: bool,
    /// How many `Host` fields there are.
    pub(crate) hosts: usize,
}

impl Fields {
    /// Reads the field lines; names are case-insensitive, `Connection` is a comma list
    /// of case-insensitive tokens (several fields add up).
    pub(crate) fn parse<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Result<Fields, FieldError> {
        let mut fields = Fields::default();
        for line in lines {
            let (name, value) = split_field(line).ok_or(FieldError::Malformed)?;
            // By length first: most fields are none of these four.
            if !matches!(name.len(), 4 | 10 | 14 | 17) {
                continue;
            }
            if name.eq_ignore_ascii_case(b"connection") {
                for token in value.split(|&b| b == b',').map(trim_ows) {
                    fields.close |= token.eq_ignore_ascii_case(b"close");
                    fields.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case(b"content-length") {
                let length = parse_decimal(value).ok_or(FieldError::ContentLength)?;
                if fields.content_length.is_some_and(|earlier| earlier != length) {
                    return Err(FieldError::ContentLength);
                }
                fields.content_length = Some(length);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                fields.transfer_encoding = true;
            } else if name.eq_ignore_ascii_case(b"host") {
                fields.hosts += 1;
            }
        }
        Ok(fields)
    }

    /// Whether the connection persists after this message (RFC 9112 §9.3): HTTP/1.1
    /// unless `close` is listed; HTTP/1.0 only when `keep-alive` is listed and `close`
    /// is not.
    pub(crate) fn keep_alive(&self, minor: u8) -> bool {
        !self.close && (minor >= 1 || self.keep_alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(buf: &[u8], max_head: usize) -> Option<(Vec<&[u8]>, usize)> {
        match frame(buf, max_head, &mut Scan::default()) {
            Frame::Done { lines, consumed } => Some((lines.collect(), consumed)),
            _ => None,
        }
    }

    #[test]
    fn line_endings() {
        let crlf: &[&[u8]] = &[b"A", b"b: c"];
        assert_eq!(done(b"A\r\nb: c\r\n\r\nrest", 100), Some((crlf.to_vec(), 11)));
        assert_eq!(done(b"A\nb: c\n\nrest", 100), Some((crlf.to_vec(), 8)));
        assert_eq!(done(b"A\r\nb: c\n\r\n", 100), Some((crlf.to_vec(), 10)));
        assert_eq!(done(b"\r\n\nA\n\n", 100), Some((vec![&b"A"[..]], 6)));
        // A CR that does not precede an LF stays in the line (and is refused there).
        assert_eq!(done(b"A\r\r\n\r\n", 100), Some((vec![&b"A\r"[..]], 6)));
        assert!(done(b"A\r\n\r", 100).is_none());
        assert!(done(b"\r\n\r\n", 100).is_none());
    }

    #[test]
    fn limit() {
        assert!(matches!(frame(b"A\r\n\r\n", 5, &mut Scan::default()), Frame::Done { consumed: 5, .. }));
        assert!(matches!(frame(b"A\r\n\r\n", 4, &mut Scan::default()), Frame::TooLarge { start_line: true }));
        assert!(matches!(frame(b"A\r\n\r", 5, &mut Scan::default()), Frame::Incomplete));
        assert!(matches!(frame(b"AAAA", 4, &mut Scan::default()), Frame::TooLarge { start_line: false }));
        assert!(matches!(frame(b"", 0, &mut Scan::default()), Frame::TooLarge { start_line: false }));
    }

    #[test]
    fn resumed_search_matches_one_shot() {
        let input = b"\r\n\nGET / HTTP/1.1\r\nA: b\n\r\nnext";
        for max_head in [0, 5, 20, 29, 30, 100] {
            let mut scan = Scan::default();
            for len in 0..=input.len() {
                let resumed = frame(&input[..len], max_head, &mut scan);
                let fresh = frame(&input[..len], max_head, &mut Scan::default());
                match (resumed, fresh) {
                    (Frame::Incomplete, Frame::Incomplete) => {}
                    (Frame::TooLarge { start_line: a }, Frame::TooLarge { start_line: b }) => assert_eq!(a, b),
                    (Frame::Done { consumed: a, .. }, Frame::Done { consumed: b, .. }) => {
                        assert_eq!(a, b);
                        scan = Scan::default();
                    }
                    _ => panic!("resumed and fresh searches differ at max_head {max_head}, length {len}"),
                }
            }
        }
    }

    #[test]
    fn fields() {
        let lines: [&[u8]; 4] =
            [b"Connection: Keep-Alive, Upgrade", b"content-length:  7 ", b"HOST:x", b"Connection:\tCLOSE"];
        let fields = Fields::parse(lines.into_iter()).unwrap();
        assert!(fields.close && fields.keep_alive && !fields.transfer_encoding);
        assert_eq!((fields.content_length, fields.hosts), (Some(7), 1));
        assert!(!fields.keep_alive(0) && !fields.keep_alive(1));

        let bad: [&[u8]; 8] =
            [b"Name : v", b" folded", b"no colon", b": v", b"A: \x01", b"A: b\rc", b"A: \x7f", b"(a): b"];
        for line in bad {
            assert_eq!(Fields::parse([line].into_iter()).unwrap_err(), FieldError::Malformed, "{line:?}");
        }
        for value in [&b"Content-Length: -1"[..], b"Content-Length: 1 2", b"Content-Length:", b"Content-Length: 0x10"] {
            assert_eq!(Fields::parse([value].into_iter()).unwrap_err(), FieldError::ContentLength);
        }
        let conflicting: [&[u8]; 2] = [b"Content-Length: 1", b"Content-Length: 2"];
        assert_eq!(Fields::parse(conflicting.into_iter()).unwrap_err(), FieldError::ContentLength);
        let repeated: [&[u8]; 2] = [b"Content-Length: 2", b"Content-Length: 02"];
        assert_eq!(Fields::parse(repeated.into_iter()).unwrap().content_length, Some(2));
        // obs-text in values is kept as opaque bytes.
        assert!(Fields::parse([&b"X: caf\xc3\xa9"[..]].into_iter()).is_ok());
    }

    #[test]
    fn text_bytes() {
        for b in 0..=255u8 {
            assert_eq!(is_text(b), b == b'\t' || (0x20..=0x7e).contains(&b) || b >= 0x80, "byte {b}");
        }
        assert!(all_text(b"") && all_text(b"a\tb c\x80") && !all_text(b"a\x7fb") && !all_text(b"\r"));
    }

    #[test]
    fn tchar_table_matches_rfc_9110() {
        for b in 0..=255u8 {
            assert_eq!(is_tchar(b), b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b), "byte {b}");
        }
    }

    #[test]
    fn decimals_and_versions() {
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b"+1"), None);
        assert_eq!(parse_version(b"HTTP/1.1"), Some((1, 1)));
        assert_eq!(parse_version(b"HTTP/2.0"), Some((2, 0)));
        for bad in [&b"http/1.1"[..], b"HTTP/1.10", b"HTTP/1", b"HTTP/1.1 ", b"HTTP/a.b"] {
            assert_eq!(parse_version(bad), None);
        }
    }
}
