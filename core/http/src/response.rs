//! Response heads and small error responses: the server side's writer. Everything is
//! appended to the caller's buffer; nothing else is allocated.

use crate::Status;

/// Appends a response head:
/// `HTTP/1.1 200 OK\r\nServer: ironpath\r\nContent-Length: N\r\nContent-Type: T\r\nConnection: keep-alive\r\n\r\n`
/// (`close` when `keep_alive` is false). For HEAD, pass the length the GET body would
/// have and send no body. Control bytes in `content_type` (CR, LF, ...) are dropped so
/// that it cannot end the field early. 1xx, 204 and 304 responses must not have a body
/// (RFC 9110 §15); they are not this function's use.
pub fn response_head(out: &mut Vec<u8>, status: Status, content_length: u64, content_type: &str, keep_alive: bool) {
    write_head(out, status, content_length, content_type, keep_alive, "");
}

/// Appends a complete error response whose body is the status line's text, e.g.
/// `404 Not Found\n` (`text/plain`). With `head_only` (the request was HEAD) only the head
/// is written, with the same `Content-Length`. 405 gets `Allow: GET, HEAD`, as
/// RFC 9110 §15.5.6 requires.
///
/// After a [`Parse::Error`](crate::Parse::Error), pass `keep_alive = false` and close:
/// the request's framing is unknown. Errors about a well-framed request (403, 404, 405,
/// or 400 from [`resolve_path`](crate::resolve_path)) may keep the connection.
pub fn error_response(out: &mut Vec<u8>, status: Status, keep_alive: bool, head_only: bool) {
    let reason = status.reason();
    let body_len = decimal_len(u64::from(status.0)) + if reason.is_empty() { 0 } else { 1 + reason.len() } + 1;
    let extra = if status == Status::METHOD_NOT_ALLOWED { "Allow: GET, HEAD\r\n" } else { "" };
    write_head(out, status, body_len as u64, "text/plain; charset=utf-8", keep_alive, extra);
    if !head_only {
        push_decimal(out, u64::from(status.0));
        if !reason.is_empty() {
            out.push(b' ');
            out.extend_from_slice(reason.as_bytes());
        }
        out.push(b'\n');
    }
}

/// `extra` is zero or more complete field lines, each ending in CRLF.
fn write_head(out: &mut Vec<u8>, status: Status, length: u64, content_type: &str, keep_alive: bool, extra: &str) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_decimal(out, u64::from(status.0));
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\nServer: ironpath\r\nContent-Length: ");
    push_decimal(out, length);
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend(content_type.bytes().filter(|&b| b == b'\t' || !b.is_ascii_control()));
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(extra.as_bytes());
    out.extend_from_slice(if keep_alive { b"Connection: keep-alive\r\n\r\n" } else { b"Connection: close\r\n\r\n" });
}

/// Appends `n` in decimal without allocating.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

fn decimal_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap()
    }

    #[test]
    fn head() {
        let mut out = b"previous".to_vec();
        response_head(&mut out, Status::OK, 1234, "text/html; charset=utf-8", true);
        assert_eq!(
            text(&out),
            "previousHTTP/1.1 200 OK\r\nServer: ironpath\r\nContent-Length: 1234\r\n\
             Content-Type: text/html; charset=utf-8\r\nConnection: keep-alive\r\n\r\n"
        );
        out.clear();
        response_head(&mut out, Status(299), u64::MAX, "a\r\nSet-Cookie: x", false);
        assert_eq!(
            text(&out),
            "HTTP/1.1 299 \r\nServer: ironpath\r\nContent-Length: 18446744073709551615\r\n\
             Content-Type: aSet-Cookie: x\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn errors() {
        let mut out = Vec::new();
        error_response(&mut out, Status::NOT_FOUND, true, false);
        assert_eq!(
            text(&out),
            "HTTP/1.1 404 Not Found\r\nServer: ironpath\r\nContent-Length: 14\r\n\
             Content-Type: text/plain; charset=utf-8\r\nConnection: keep-alive\r\n\r\n404 Not Found\n"
        );
        out.clear();
        error_response(&mut out, Status::NOT_FOUND, false, true);
        assert!(text(&out)
            .ends_with("Content-Length: 14\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"));
        out.clear();
        error_response(&mut out, Status::METHOD_NOT_ALLOWED, false, false);
        assert!(text(&out).contains("\r\nAllow: GET, HEAD\r\n"));
        // Content-Length matches the body for every code, known or not.
        for code in [0, 7, 99, 400, 405, 431, 505, 999, u16::MAX] {
            out.clear();
            error_response(&mut out, Status(code), false, false);
            let text = text(&out);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())), "{text}");
            assert_eq!(body, format!("{}\n", Status(code)));
        }
    }

    #[test]
    fn decimals() {
        for n in [0, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(text(&out), n.to_string());
            assert_eq!(decimal_len(n), n.to_string().len());
        }
    }
}
