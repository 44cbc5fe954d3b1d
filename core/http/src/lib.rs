//! `ironpath-http`: the protocol half of an HTTP/1.1 static file server and of a small
//! client, without any socket I/O.
//!
//! It owns the HTTP/1.x message heads and what a static file server derives from them;
//! a TCP node feeds it the bytes it received and sends the bytes it returns:
//! * [`parse_request`] (server): a request head into a [`Request`] (method, raw target,
//!   version, keep-alive, body length), or the [`Status`] to answer with;
//! * [`resolve_path`]: a request target into a path under the document root, lexically
//!   (percent-decoding, `..` refused, never outside the root), and [`content_type`];
//! * [`response_head`] and [`error_response`]: the bytes of a response head, or of a
//!   whole small error response;
//! * [`request_head`] and [`parse_response_head`] (client): for load and test clients;
//! * [`HeadBuf`]: collects a head from bytes that arrive in pieces, holds back the bytes
//!   after it (pipelined requests) and skips request bodies.
//!
//! Not here: opening files, directory listings, ranges, conditional requests, chunked
//! transfer coding (a request with `Transfer-Encoding` gets 501), `Expect:
//! 100-continue`, HTTP/2, timers (the caller times out idle connections).
//!
//! Every parser here reads untrusted bytes: none panics or reads out of bounds, whatever
//! the input (property tests and the `http_request` fuzz target check this); heads are
//! bounded by the caller's `max_head`, and nothing is allocated per header.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod head;
mod headbuf;
mod mime;
mod path;
mod request;
mod response;
mod status;

pub use client::{parse_response_head, request_head, ClientError, RespParse};
pub use headbuf::HeadBuf;
pub use mime::content_type;
pub use path::{resolve_path, INDEX_FILE};
pub use request::{parse_request, Method, Parse, Request};
pub use response::{error_response, response_head};
pub use status::Status;
