//! Response status codes (RFC 9110 §15) and their reason phrases.

use std::fmt;

/// An HTTP status code. Codes put on the wire should be three digits (100 to 599).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(pub u16);

impl Status {
    /// 200: the file follows.
    pub const OK: Status = Status(200);
    /// 301: the target names a directory; the caller may redirect to the target with a `/`.
    pub const MOVED_PERMANENTLY: Status = Status(301);
    /// 400: a malformed head or target.
    pub const BAD_REQUEST: Status = Status(400);
    /// 403: a target that climbs out of the root (a `..` segment).
    pub const FORBIDDEN: Status = Status(403);
    /// 404: no such file (also targets that no file name can match, see [`resolve_path`](crate::resolve_path)).
    pub const NOT_FOUND: Status = Status(404);
    /// 405: a method other than GET and HEAD ([`error_response`](crate::error_response) adds `Allow`).
    pub const METHOD_NOT_ALLOWED: Status = Status(405);
    /// 408: the head did not arrive in time (the caller's timer).
    pub const REQUEST_TIMEOUT: Status = Status(408);
    /// 413: a request body larger than the caller accepts.
    pub const CONTENT_TOO_LARGE: Status = Status(413);
    /// 414: the request line alone does not fit in the head limit.
    pub const URI_TOO_LONG: Status = Status(414);
    /// 431: the head does not fit in the head limit.
    pub const HEADER_FIELDS_TOO_LARGE: Status = Status(431);
    /// 500: the caller failed (e.g. reading the file).
    pub const INTERNAL_SERVER_ERROR: Status = Status(500);
    /// 501: `Transfer-Encoding` (request bodies must have a `Content-Length`).
    pub const NOT_IMPLEMENTED: Status = Status(501);
    /// 503: the caller is out of resources (connections, buffers).
    pub const SERVICE_UNAVAILABLE: Status = Status(503);
    /// 505: a version other than HTTP/1.0 and HTTP/1.1.
    pub const VERSION_NOT_SUPPORTED: Status = Status(505);

    /// The reason phrase of RFC 9110 §15, or `""` for a code this crate does not know
    /// (an empty reason is valid on the status line).
    pub fn reason(self) -> &'static str {
        match self.0 {
            100 => "Continue",
            200 => "OK",
            204 => "No Content",
            206 => "Partial Content",
            301 => "Moved Permanently",
            302 => "Found",
            304 => "Not Modified",
            400 => "Bad Request",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            411 => "Length Required",
            413 => "Content Too Large",
            414 => "URI Too Long",
            416 => "Range Not Satisfiable",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            503 => "Service Unavailable",
            505 => "HTTP Version Not Supported",
            _ => "",
        }
    }
}

/// `404 Not Found` (the code alone when the reason is unknown).
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            "" => write!(f, "{}", self.0),
            reason => write!(f, "{} {reason}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_display() {
        assert_eq!(Status::OK.reason(), "OK");
        assert_eq!(Status::HEADER_FIELDS_TOO_LARGE.reason(), "Request Header Fields Too Large");
        assert_eq!(Status::VERSION_NOT_SUPPORTED.reason(), "HTTP Version Not Supported");
        assert_eq!(Status::NOT_FOUND.to_string(), "404 Not Found");
        assert_eq!(Status(299).reason(), "");
        assert_eq!(Status(299).to_string(), "299");
    }
}
