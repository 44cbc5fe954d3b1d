//! The client side, for load and test clients: request heads out, response heads in.

use std::fmt;

use crate::head::{self, FieldError, Fields, Frame, Lines, Scan};
use crate::Method;

/// Why [`parse_response_head`] refused a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientError {
    /// The first `max_head` bytes hold no complete response head.
    HeadTooLarge,
    /// The status line is not `HTTP/d.d SP 3DIGIT [SP reason]`.
    StatusLine,
    /// The version is not HTTP/1.0 or HTTP/1.1.
    Version,
    /// A field line is not `name: value` or holds a control byte.
    Field,
    /// `Content-Length` is not a decimal, or two of them disagree.
    ContentLength,
    /// The response has a `Transfer-Encoding` (chunked bodies are not supported).
    TransferEncoding,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientError::HeadTooLarge => "the response head is larger than the head limit",
            ClientError::StatusLine => "malformed status line (expected `HTTP/1.1 200 OK`)",
            ClientError::Version => "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 are accepted)",
            ClientError::Field => "malformed header field line (expected `Name: value` without control bytes)",
            ClientError::ContentLength => "invalid or conflicting Content-Length",
            ClientError::TransferEncoding => "Transfer-Encoding is not supported (only Content-Length bodies)",
        })
    }
}

impl std::error::Error for ClientError {}

/// Appends a request head:
/// `GET /path HTTP/1.1\r\nHost: host\r\nUser-Agent: ironpath\r\nConnection: keep-alive\r\n\r\n`
/// (`close` when `keep_alive` is false). Whatever the arguments, the result is a
/// well-formed head:
/// * `path` is sent as given (so `%`-escapes and `?query` pass through), except that
///   bytes that cannot appear in a request target (space, controls, non-ASCII) are
///   percent-encoded; an empty path is sent as `/`;
/// * bytes of `host` outside visible ASCII are dropped;
/// * [`Method::Other`] is sent as the unregistered method `OTHER`, which a server
///   answers with 405 or 501 (a way to test that answer).
pub fn request_head(out: &mut Vec<u8>, method: Method, path: &str, host: &str, keep_alive: bool) {
    out.extend_from_slice(match method {
        Method::Get => b"GET ",
        Method::Head => b"HEAD ",
        Method::Other => b"OTHER ",
    });
    if path.is_empty() {
        out.push(b'/');
    }
    for b in path.bytes() {
        if head::is_vchar(b) {
            out.push(b);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend(host.bytes().filter(|&b| head::is_vchar(b)));
    out.extend_from_slice(b"\r\nUser-Agent: ironpath\r\n");
    out.extend_from_slice(if keep_alive { b"Connection: keep-alive\r\n\r\n" } else { b"Connection: close\r\n\r\n" });
}

/// The outcome of [`parse_response_head`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespParse {
    /// No complete head yet: call again with more bytes.
    Incomplete,
    /// A complete head.
    Done {
        /// The status code (100 to 999; the reason phrase is not kept).
        status: u16,
        /// `Content-Length`. `None`: the body runs until the server closes, except for
        /// responses that have no body whatever the fields say (to HEAD, 1xx, 204, 304;
        /// a 1xx is followed by another response head).
        content_length: Option<u64>,
        /// Whether the server keeps the connection (HTTP/1.1 unless `Connection: close`;
        /// HTTP/1.0 only with `Connection: keep-alive`). Without `content_length` a body
        /// ends with the connection anyway.
        keep_alive: bool,
        /// Bytes of the head, including the empty line; the body follows.
        consumed: usize,
    },
    /// A malformed or unsupported response; the connection is unusable.
    Error(ClientError),
}

/// Parses the response head at the start of `buf`, of at most `max_head` bytes, with the
/// framing rules of [`parse_request`](crate::parse_request) (bare LF accepted, control
/// bytes refused, the limit reached as soon as `buf.len() >= max_head`).
/// Never panics, whatever the bytes; never allocates.
pub fn parse_response_head(buf: &[u8], max_head: usize) -> RespParse {
    parse_response_resuming(buf, max_head, &mut Scan::default())
}

/// [`parse_response_head`] resuming the search for the end of head (see [`head::frame`]).
pub(crate) fn parse_response_resuming(buf: &[u8], max_head: usize, scan: &mut Scan) -> RespParse {
    match head::frame(buf, max_head, scan) {
        Frame::Incomplete => RespParse::Incomplete,
        Frame::TooLarge { .. } => RespParse::Error(ClientError::HeadTooLarge),
        Frame::Done { lines, consumed } => match parse_head(lines) {
            Ok((status, content_length, keep_alive)) => {
                RespParse::Done { status, content_length, keep_alive, consumed }
            }
            Err(error) => RespParse::Error(error),
        },
    }
}

fn parse_head(mut lines: Lines<'_>) -> Result<(u16, Option<u64>, bool), ClientError> {
    let (status, minor) = status_line(lines.next().unwrap_or_default())?;
    let fields = Fields::parse(lines).map_err(|error| match error {
        FieldError::Malformed => ClientError::Field,
        FieldError::ContentLength => ClientError::ContentLength,
    })?;
    if fields.transfer_encoding {
        return Err(ClientError::TransferEncoding);
    }
    Ok((status, fields.content_length, fields.keep_alive(minor)))
}

/// `HTTP-version SP 3DIGIT SP reason-phrase` (RFC 9112 §4); a missing `SP reason` is
/// accepted.
fn status_line(line: &[u8]) -> Result<(u16, u8), ClientError> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().ok_or(ClientError::StatusLine)?;
    let reason = parts.next().unwrap_or_default();
    let (major, minor) = head::parse_version(version).ok_or(ClientError::StatusLine)?;
    let status = match code {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(ClientError::StatusLine),
    };
    if !reason.iter().all(|&b| head::is_text(b)) {
        return Err(ClientError::StatusLine);
    }
    if major != 1 || minor > 1 {
        return Err(ClientError::Version);
    }
    Ok((status, minor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{error_response, parse_request, response_head, Parse, Status};

    #[test]
    fn request_heads() {
        let mut out = Vec::new();
        request_head(&mut out, Method::Get, "/a%20b?x=1", "10.0.0.1:8080", true);
        assert_eq!(
            out,
            b"GET /a%20b?x=1 HTTP/1.1\r\nHost: 10.0.0.1:8080\r\nUser-Agent: ironpath\r\nConnection: keep-alive\r\n\r\n"
        );
        let Parse::Done { req, consumed } = parse_request(&out, 8192) else { panic!() };
        assert_eq!(
            (req.method, req.path.as_str(), req.keep_alive, consumed),
            (Method::Get, "/a%20b?x=1", true, out.len())
        );

        out.clear();
        request_head(&mut out, Method::Head, "/", "h", false);
        let Parse::Done { req, .. } = parse_request(&out, 8192) else { panic!() };
        assert_eq!((req.method, req.keep_alive), (Method::Head, false));

        // Arguments that would break the head are repaired.
        out.clear();
        request_head(&mut out, Method::Other, "/a b/caf\u{e9}\r\n", "h\r\nX: y", true);
        assert!(out.starts_with(b"OTHER /a%20b/caf%C3%A9%0D%0A HTTP/1.1\r\nHost: hX:y\r\n"));
        let Parse::Done { req, .. } = parse_request(&out, 8192) else { panic!() };
        assert_eq!(req.method, Method::Other);
        let root = std::path::Path::new("/r");
        assert_eq!(crate::resolve_path(root, &req.path), Err(Status::BAD_REQUEST)); // the decoded CR
        out.clear();
        request_head(&mut out, Method::Get, "", "", true);
        let Parse::Done { req, .. } = parse_request(&out, 8192) else { panic!() };
        assert_eq!(req.path, "/");
    }

    #[test]
    fn our_own_responses() {
        let mut out = Vec::new();
        response_head(&mut out, Status::OK, 42, "text/plain", true);
        let len = out.len();
        out.extend_from_slice(b"body");
        assert_eq!(
            parse_response_head(&out, 4096),
            RespParse::Done { status: 200, content_length: Some(42), keep_alive: true, consumed: len }
        );
        out.clear();
        error_response(&mut out, Status::METHOD_NOT_ALLOWED, false, false);
        let RespParse::Done { status, content_length, keep_alive, consumed } = parse_response_head(&out, 4096) else {
            panic!()
        };
        assert_eq!((status, content_length, keep_alive), (405, Some(23), false));
        assert_eq!(&out[consumed..], b"405 Method Not Allowed\n");
    }

    #[test]
    fn responses() {
        let cases: [(&[u8], u16, Option<u64>, bool); 7] = [
            (b"HTTP/1.1 204 No Content\r\n\r\n", 204, None, true),
            (b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 200, Some(0), true),
            (b"HTTP/1.1 200 \r\n\r\n", 200, None, true),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", 200, Some(5), false),
            (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", 200, None, true),
            (b"HTTP/1.1 404 Not Found\nConnection: upgrade, CLOSE\n\n", 404, None, false),
            (b"HTTP/1.1 599 Weird  reason\xff\r\n\r\n", 599, None, true),
        ];
        for (buf, status, content_length, keep_alive) in cases {
            assert_eq!(
                parse_response_head(buf, 4096),
                RespParse::Done { status, content_length, keep_alive, consumed: buf.len() },
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        assert_eq!(parse_response_head(b"HTTP/1.1 200 OK\r\n", 4096), RespParse::Incomplete);
        assert_eq!(parse_response_head(b"HTTP/1.1 200 OK\r\n", 17), RespParse::Error(ClientError::HeadTooLarge));
    }

    #[test]
    fn bad_responses() {
        let cases: [(&[u8], ClientError); 12] = [
            (b"HTTP/1.1 20 OK\r\n\r\n", ClientError::StatusLine),
            (b"HTTP/1.1 2000 OK\r\n\r\n", ClientError::StatusLine),
            (b"HTTP/1.1 099 OK\r\n\r\n", ClientError::StatusLine),
            (b"HTTP/1.1  200 OK\r\n\r\n", ClientError::StatusLine),
            (b"HTTP/1.1\r\n\r\n", ClientError::StatusLine),
            (b"ICY 200 OK\r\n\r\n", ClientError::StatusLine),
            (b"HTTP/1.1 200 O\x01K\r\n\r\n", ClientError::StatusLine),
            (b"HTTP/2.0 200 OK\r\n\r\n", ClientError::Version),
            (b"HTTP/1.1 200 OK\r\nBad Field: x\r\n\r\n", ClientError::Field),
            (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", ClientError::ContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 3\r\n\r\n", ClientError::ContentLength),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", ClientError::TransferEncoding),
        ];
        for (buf, error) in cases {
            assert_eq!(parse_response_head(buf, 4096), RespParse::Error(error), "{:?}", String::from_utf8_lossy(buf));
        }
        assert!(!ClientError::HeadTooLarge.to_string().is_empty());
    }
}
