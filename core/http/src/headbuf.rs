//! Collecting heads from a byte stream that arrives in pieces.

use crate::client::{parse_response_resuming, RespParse};
use crate::head::Scan;
use crate::request::{parse_request_resuming, Parse};

/// A connection's received bytes, collected until a head is complete: at most
/// `max_head` bytes are held, bodies to skip are dropped as they arrive, and the search
/// for the end of a head resumes where it stopped (each byte is looked at once, however
/// small the pieces, until the head is complete).
///
/// Server loop over one connection (bytes are what TCP delivered, in order):
/// ```
/// use ironpath_http::{HeadBuf, Parse};
///
/// let mut heads = HeadBuf::new(8192);
/// let mut served = Vec::new();
/// let mut received: &[u8] =
///     b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbodyGET /a HTTP/1.1\r\nHost: h\r\n\r\n";
/// 'connection: while !received.is_empty() {
///     let taken = heads.push(received);
///     received = &received[taken..];
///     loop {
///         match heads.next_request() {
///             Parse::Done { req, .. } => served.push(req.path), // respond; its body is being skipped
///             Parse::Incomplete => break,
///             Parse::Error(_status) => break 'connection,        // error_response, then close
///         }
///     }
/// }
/// assert_eq!(served, ["/up", "/a"]);
/// ```
/// A caller that cannot serve the next request yet (its response is still being sent)
/// stops calling [`next_request`](Self::next_request); [`push`](Self::push) then takes
/// nothing more once `max_head` bytes are held, and the rest stays in TCP's receive
/// buffer, closing the window: pipelining is bounded by back-pressure, not memory.
#[derive(Debug, Clone)]
pub struct HeadBuf {
    buf: Vec<u8>,
    max_head: usize,
    /// Body bytes still to drop; non-zero only while `buf` is empty.
    skip: u64,
    /// How far the search for the end of head got in `buf`.
    scan: Scan,
}

impl HeadBuf {
    /// An empty buffer for heads of at most `max_head` bytes (8192 is common; it should
    /// be at least 1).
    pub fn new(max_head: usize) -> Self {
        HeadBuf { buf: Vec::new(), max_head, skip: 0, scan: Scan::default() }
    }

    /// The head limit.
    pub fn max_head(&self) -> usize {
        self.max_head
    }

    /// Takes bytes from the front of `data`: first the body bytes still to skip (dropped),
    /// then as many as fit under `max_head` (held). Returns how many were taken; the
    /// caller keeps the rest and offers them again after
    /// [`next_request`](Self::next_request) or [`consume`](Self::consume) made room.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let skipped = usize::try_from(self.skip).map_or(data.len(), |skip| skip.min(data.len()));
        self.skip -= skipped as u64;
        let rest = data.get(skipped..).unwrap_or_default();
        let held = rest.len().min(self.max_head.saturating_sub(self.buf.len()));
        self.buf.extend_from_slice(rest.get(..held).unwrap_or_default());
        skipped + held
    }

    /// Parses the request head at the front of the held bytes (see
    /// [`parse_request`](crate::parse_request)). On [`Parse::Done`] the head is removed
    /// and its body (`content_length` bytes) is skipped: the held bytes, then the next
    /// ones pushed, are the next request. `consumed` counts the bytes of the head.
    /// After [`Parse::Error`] the connection is unusable; the bytes stay.
    pub fn next_request(&mut self) -> Parse {
        let parse = parse_request_resuming(&self.buf, self.max_head, &mut self.scan);
        if let Parse::Done { req, consumed } = &parse {
            self.consume(*consumed);
            self.skip(req.content_length as u64);
        }
        parse
    }

    /// Parses the response head at the front of the held bytes (see
    /// [`parse_response_head`](crate::parse_response_head)). On [`RespParse::Done`] the
    /// head is removed; the held bytes are then the start of the body: read them from
    /// [`buffered`](Self::buffered) and [`consume`](Self::consume) them, or
    /// [`skip`](Self::skip) the body (a load client counting bytes).
    pub fn next_response(&mut self) -> RespParse {
        let parse = parse_response_resuming(&self.buf, self.max_head, &mut self.scan);
        if let RespParse::Done { consumed, .. } = parse {
            self.consume(consumed);
        }
        parse
    }

    /// The held bytes.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Drops the first `n` held bytes (all of them if fewer are held).
    pub fn consume(&mut self, n: usize) {
        self.buf.drain(..n.min(self.buf.len()));
        self.scan = Scan::default();
    }

    /// Drops the next `n` bytes of the stream: held ones first, then as they are pushed.
    pub fn skip(&mut self, n: u64) {
        let held = usize::try_from(n).map_or(self.buf.len(), |n| n.min(self.buf.len()));
        self.consume(held);
        self.skip = self.skip.saturating_add(n - held as u64);
    }

    /// Bytes still to be skipped; 0 once a skipped body has fully arrived.
    pub fn skipping(&self) -> u64 {
        self.skip
    }

    /// Bytes of heap the buffer keeps (its capacity), for a caller that charges
    /// what a connection makes it hold.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Gives the buffer's heap back if it holds nothing (after a burst of requests;
    /// the next bytes allocate again).
    pub fn release(&mut self) {
        if self.buf.is_empty() {
            self.buf = Vec::new();
        }
    }

    /// Forgets everything (for a new connection).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.skip = 0;
        self.scan = Scan::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_request, Method, Request};

    /// Three pipelined requests, one with a body, with bare LFs and a stray CRLF.
    const STREAM: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n\
        POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world\r\n\
        HEAD /c HTTP/1.0\nConnection: keep-alive\n\n\
        GET /d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";

    fn expected() -> Vec<(Method, &'static str, bool)> {
        vec![
            (Method::Get, "/a", true),
            (Method::Other, "/b", true),
            (Method::Head, "/c", true),
            (Method::Get, "/d", false),
        ]
    }

    fn summary(req: &Request) -> (Method, &'static str, bool) {
        let path = ["/a", "/b", "/c", "/d"].into_iter().find(|p| *p == req.path).expect("unexpected path");
        (req.method, path, req.keep_alive)
    }

    /// Feeds `chunks` in order, collecting requests; panics on an error.
    fn feed(heads: &mut HeadBuf, chunks: &[&[u8]]) -> Vec<(Method, &'static str, bool)> {
        let mut got = Vec::new();
        for chunk in chunks {
            let mut data = *chunk;
            loop {
                let taken = heads.push(data);
                data = &data[taken..];
                loop {
                    match heads.next_request() {
                        Parse::Done { req, .. } => got.push(summary(&req)),
                        Parse::Incomplete => break,
                        Parse::Error(status) => panic!("{status}"),
                    }
                }
                if data.is_empty() {
                    break;
                }
            }
        }
        got
    }

    #[test]
    fn pipelined_in_one_piece() {
        assert_eq!(feed(&mut HeadBuf::new(8192), &[STREAM]), expected());
        assert_eq!(feed(&mut HeadBuf::new(64), &[STREAM]), expected());
    }

    #[test]
    fn split_at_every_offset() {
        for cut in 0..=STREAM.len() {
            let mut heads = HeadBuf::new(8192);
            assert_eq!(feed(&mut heads, &[&STREAM[..cut], &STREAM[cut..]]), expected(), "cut at {cut}");
            assert!(heads.buffered().is_empty() && heads.skipping() == 0);
        }
    }

    #[test]
    fn split_at_every_pair_of_offsets() {
        for first in 0..=STREAM.len() {
            for second in first..=STREAM.len() {
                let chunks = [&STREAM[..first], &STREAM[first..second], &STREAM[second..]];
                assert_eq!(feed(&mut HeadBuf::new(60), &chunks), expected(), "cuts at {first} and {second}");
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        let chunks: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(feed(&mut HeadBuf::new(8192), &chunks), expected());
    }

    #[test]
    fn consumed_counts_the_head() {
        let mut heads = HeadBuf::new(8192);
        heads.push(STREAM);
        let Parse::Done { consumed, .. } = heads.next_request() else { panic!() };
        let Parse::Done { consumed: expected, .. } = parse_request(STREAM, 8192) else { panic!() };
        assert_eq!(consumed, expected);
    }

    #[test]
    fn push_is_bounded() {
        let mut heads = HeadBuf::new(20);
        assert_eq!(heads.push(b"GET / HTTP/1.1\r\nHost: h\r\n"), 20);
        assert_eq!(heads.push(b"more"), 0);
        assert_eq!(heads.next_request(), Parse::Error(crate::Status::HEADER_FIELDS_TOO_LARGE));
        let mut heads = HeadBuf::new(10);
        assert_eq!(heads.push(b"GET /aaaaaaaaaaaa"), 10);
        assert_eq!(heads.next_request(), Parse::Error(crate::Status::URI_TOO_LONG));
    }

    #[test]
    fn bodies_are_skipped_across_pushes() {
        let mut heads = HeadBuf::new(100);
        heads.push(b"PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
        assert!(matches!(heads.next_request(), Parse::Done { req, .. } if req.content_length == 10));
        assert_eq!((heads.buffered(), heads.skipping()), (&b""[..], 7));
        assert_eq!(heads.push(b"defg"), 4);
        assert_eq!(heads.skipping(), 3);
        assert_eq!(heads.push(b"hijGET"), 6);
        assert_eq!((heads.buffered(), heads.skipping()), (&b"GET"[..], 0));
        assert_eq!(heads.next_request(), Parse::Incomplete);
        heads.clear();
        assert!(heads.buffered().is_empty());
    }

    #[test]
    fn responses_and_bodies() {
        let mut heads = HeadBuf::new(100);
        let stream =
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(heads.push(&stream[..30]), 30);
        assert_eq!(heads.next_response(), RespParse::Incomplete);
        assert_eq!(heads.push(&stream[30..]), stream.len() - 30);
        assert!(matches!(heads.next_response(), RespParse::Done { status: 200, content_length: Some(5), .. }));
        assert!(heads.buffered().starts_with(b"hello"));
        heads.consume(5);
        assert!(matches!(heads.next_response(), RespParse::Done { status: 404, content_length: Some(3), .. }));
        heads.skip(3);
        assert_eq!((heads.buffered().len(), heads.skipping()), (0, 0));
    }
}
