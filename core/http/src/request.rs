//! Request heads (RFC 9112 §3): the server side's parser.

use crate::head::{self, Fields, Frame, Lines, Scan};
use crate::Status;

/// The request method. Methods are case-sensitive: `get` is [`Method::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: the response head of a GET, without the body.
    Head,
    /// Any other well-formed method; a static file server answers 405 Method Not Allowed.
    Other,
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The raw request target, before percent-decoding: visible ASCII only, normally
    /// origin-form (`/path?query`); hand it to [`resolve_path`](crate::resolve_path).
    pub path: String,
    /// The minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    /// Whether the connection persists after the response: HTTP/1.1 unless `Connection`
    /// lists `close`; HTTP/1.0 only if it lists `keep-alive` (and not `close`).
    pub keep_alive: bool,
    /// Bytes of request body that follow the head (`Content-Length`, 0 without one):
    /// the caller skips them before the next request ([`HeadBuf`](crate::HeadBuf) does).
    pub content_length: usize,
}

/// The outcome of [`parse_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// No complete head yet: call again with more bytes.
    Incomplete,
    /// A complete head.
    Done {
        /// The request.
        req: Request,
        /// Bytes of the head, including the empty line that ends it (and any empty lines
        /// before the request line). The request body, then the next request, follow.
        consumed: usize,
    },
    /// A malformed or unsupported request: answer with this status and close the
    /// connection, since where the next request starts is unknown.
    Error(Status),
}

/// Parses the request head at the start of `buf`, of at most `max_head` bytes.
///
/// * [`Parse::Incomplete`] while `buf` holds no end of head (an empty line: `\r\n\r\n`,
///   or with bare line feeds) and is shorter than `max_head`;
/// * 414 URI Too Long when the first `max_head` bytes do not even hold the request
///   line, 431 Request Header Fields Too Large when they hold it but not the end of the
///   head (so a head of exactly `max_head` bytes is accepted, and the error comes as soon
///   as `buf.len() >= max_head` rather than one byte later);
/// * 400 Bad Request for a malformed request line (`METHOD SP target SP version`, single
///   spaces, a token method, a visible-ASCII target), a field line without a colon or
///   with a malformed name (whitespace before the colon, obs-fold), a control byte
///   (other than HTAB in a value) or a bare CR anywhere, an invalid or conflicting
///   `Content-Length`, and a missing or repeated `Host` in HTTP/1.1 (RFC 9112 §3.2; a
///   repeated one in HTTP/1.0);
/// * 505 HTTP Version Not Supported for a well-formed version other than 1.0 and 1.1;
/// * 501 Not Implemented for any `Transfer-Encoding` (bodies must come with
///   `Content-Length`; RFC 9112 §6.1).
///
/// Never panics, whatever the bytes; allocates only the returned path.
pub fn parse_request(buf: &[u8], max_head: usize) -> Parse {
    parse_request_resuming(buf, max_head, &mut Scan::default())
}

/// [`parse_request`] resuming the search for the end of head (see [`head::frame`]).
pub(crate) fn parse_request_resuming(buf: &[u8], max_head: usize, scan: &mut Scan) -> Parse {
    match head::frame(buf, max_head, scan) {
        Frame::Incomplete => Parse::Incomplete,
        Frame::TooLarge { start_line: false } => Parse::Error(Status::URI_TOO_LONG),
        Frame::TooLarge { start_line: true } => Parse::Error(Status::HEADER_FIELDS_TOO_LARGE),
        Frame::Done { lines, consumed } => match parse_head(lines) {
            Ok(req) => Parse::Done { req, consumed },
            Err(status) => Parse::Error(status),
        },
    }
}

fn parse_head(mut lines: Lines<'_>) -> Result<Request, Status> {
    let (method, path, minor) = request_line(lines.next().unwrap_or_default())?;
    let fields = Fields::parse(lines).map_err(|_| Status::BAD_REQUEST)?;
    if fields.transfer_encoding {
        return Err(Status::NOT_IMPLEMENTED);
    }
    if fields.hosts > 1 || (minor >= 1 && fields.hosts == 0) {
        return Err(Status::BAD_REQUEST);
    }
    let content_length = usize::try_from(fields.content_length.unwrap_or(0)).map_err(|_| Status::BAD_REQUEST)?;
    Ok(Request { method, path, minor, keep_alive: fields.keep_alive(minor), content_length })
}

/// `method SP request-target SP HTTP-version` (RFC 9112 §3).
fn request_line(line: &[u8]) -> Result<(Method, String, u8), Status> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Status::BAD_REQUEST);
    };
    if method.is_empty() || !method.iter().all(|&b| head::is_tchar(b)) {
        return Err(Status::BAD_REQUEST);
    }
    if target.is_empty() || !target.iter().all(|&b| head::is_vchar(b)) {
        return Err(Status::BAD_REQUEST);
    }
    let (major, minor) = head::parse_version(version).ok_or(Status::BAD_REQUEST)?;
    if major != 1 || minor > 1 {
        return Err(Status::VERSION_NOT_SUPPORTED);
    }
    let method = match method {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        _ => Method::Other,
    };
    // Visible ASCII is UTF-8, so this never fails.
    let path = std::str::from_utf8(target).map_err(|_| Status::BAD_REQUEST)?.to_owned();
    Ok((method, path, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 8192;

    fn req(buf: &[u8]) -> (Request, usize) {
        match parse_request(buf, MAX) {
            Parse::Done { req, consumed } => (req, consumed),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }

    fn error(buf: &[u8], max_head: usize) -> u16 {
        match parse_request(buf, max_head) {
            Parse::Error(status) => status.0,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }

    #[test]
    fn simple_get() {
        let buf = b"GET /index.html?x=1 HTTP/1.1\r\nHost: example\r\nUser-Agent: t\r\n\r\nNEXT";
        let (r, consumed) = req(buf);
        assert_eq!(consumed, buf.len() - 4);
        assert_eq!(
            r,
            Request {
                method: Method::Get,
                path: "/index.html?x=1".into(),
                minor: 1,
                keep_alive: true,
                content_length: 0
            }
        );
    }

    #[test]
    fn methods() {
        assert_eq!(req(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n").0.method, Method::Head);
        assert_eq!(req(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc").0.method, Method::Other);
        assert_eq!(req(b"get / HTTP/1.1\r\nHost: h\r\n\r\n").0.method, Method::Other);
        assert_eq!(req(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc").0.content_length, 3);
    }

    #[test]
    fn keep_alive_by_version_and_connection() {
        let cases: [(&[u8], bool); 10] = [
            (b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
            (b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false),
            (b"GET / HTTP/1.1\r\nHost: h\r\nconnection: CLOSE\r\n\r\n", false),
            (b"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n\r\n", true),
            (b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade,close\r\n\r\n", false),
            (b"GET / HTTP/1.0\r\n\r\n", false),
            (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
            (b"GET / HTTP/1.0\r\nConnection: keep-alive, Upgrade\r\n\r\n", true),
            (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", false),
            (b"GET / HTTP/1.0\r\nConnection: keep-alived\r\n\r\n", false),
        ];
        for (buf, keep_alive) in cases {
            assert_eq!(req(buf).0.keep_alive, keep_alive, "{:?}", String::from_utf8_lossy(buf));
        }
        assert_eq!(req(b"GET / HTTP/1.0\r\n\r\n").0.minor, 0);
    }

    #[test]
    fn bare_line_feeds_and_leading_blank_lines() {
        let (r, consumed) = req(b"GET /a HTTP/1.1\nHost: h\n\nGET");
        assert_eq!((r.path.as_str(), consumed), ("/a", 25));
        let (r, consumed) = req(b"\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((r.path.as_str(), consumed), ("/b", 32));
    }

    #[test]
    fn incomplete() {
        let full = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        for len in 0..full.len() {
            assert_eq!(parse_request(&full[..len], MAX), Parse::Incomplete, "length {len}");
        }
        assert_eq!(parse_request(b"\r\n\r\n\r\n", MAX), Parse::Incomplete);
    }

    #[test]
    fn head_limit() {
        let full = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        assert!(matches!(parse_request(full, full.len()), Parse::Done { .. }));
        assert_eq!(error(full, full.len() - 1), 431);
        assert_eq!(error(&full[..20], 20), 431);
        let mut long = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: ".to_vec();
        long.resize(long.len() + 100, b'a');
        assert_eq!(parse_request(&long, 200), Parse::Incomplete);
        assert_eq!(error(&long, 100), 431);
        // A request line that does not fit is a URI that is too long.
        let mut target = b"GET /".to_vec();
        target.resize(300, b'a');
        assert_eq!(error(&target, 256), 414);
        assert_eq!(error(b"", 0), 414);
    }

    #[test]
    fn malformed_request_lines() {
        let bad: [&[u8]; 14] = [
            b"GET\r\n\r\n",
            b"GET /\r\n\r\n",
            b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            b" GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
            b"GET / http/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1\r\nHost: h\r\n\r\n",
            b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /\tx HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\rX\r\nHost: h\r\n\r\n",
            b"GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n",
            b"\x00GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        ];
        for buf in bad {
            assert_eq!(error(buf, MAX), 400, "{:?}", String::from_utf8_lossy(buf));
        }
    }

    #[test]
    fn versions() {
        assert_eq!(error(b"GET / HTTP/2.0\r\nHost: h\r\n\r\n", MAX), 505);
        assert_eq!(error(b"GET / HTTP/1.2\r\nHost: h\r\n\r\n", MAX), 505);
        assert_eq!(error(b"GET / HTTP/0.9\r\n\r\n", MAX), 505);
    }

    #[test]
    fn malformed_fields() {
        let bad: [&[u8]; 10] = [
            b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        ];
        for buf in bad {
            assert_eq!(error(buf, MAX), 400, "{:?}", String::from_utf8_lossy(buf));
        }
        assert_eq!(error(b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", MAX), 501);
        assert_eq!(error(b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", MAX), 501);
        // HTAB in values and obs-text are fine; an empty value is fine.
        assert!(matches!(
            parse_request(b"GET / HTTP/1.1\r\nHost: h\r\nX:\ta\tb\r\nY: \xff\r\nZ:\r\n\r\n", MAX),
            Parse::Done { .. }
        ));
    }
}
