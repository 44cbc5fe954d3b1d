//! `ironpath ctl`: commands to a running `ironpath run` or `ironpath testpmd`
//! (`show runtime`, `show interface`, `show errors` ...), as `vppctl` is to VPP.
//!
//! Every such process listens on a control socket beside its telemetry socket,
//! `ironpath_ctl.sock` in the runtime directory of its file prefix
//! ([`crate::telemetry::rundir`]: a 0700 directory, the socket 0600), the next
//! process with the same prefix on `ironpath_ctl.sock:1`, and so on (`ctl -i N`).
//!
//! The protocol, one command per connection (a `SOCK_STREAM` socket):
//!
//! * the client sends one command line, at most [`MAX_LINE`] bytes with its
//!   `\n`; bytes that are not UTF-8 are replaced;
//! * the server answers with text lines and ends the answer with one line made of
//!   a NUL byte and a status, [`END_OK`] (`\0ok\n`) or [`END_ERR`] (`\0error\n`),
//!   then closes. Answer text never holds a NUL (the server removes any);
//! * a connection the server refuses (another user, too many clients, a line too
//!   long, nothing sent in time) gets one line saying why, without the status
//!   line, and is closed; a client that ends without a status line failed.
//!
//! `capture` is answered differently: with the line `\0capture\n` and then a
//! pcapng stream until the capture ends ([`capture`]).
//!
//! Bounds, each counted ([`server::Counts`], `show ctl`): a client has
//! [`IDLE_TIMEOUT`] to send its line and [`SEND_TIMEOUT`] to read its answer; at
//! most [`MAX_CLIENTS`] are served at once. The socket threads never touch ports
//! or lcores: a command goes as a [`Request`] through a bounded queue to the
//! thread that owns the ports (the run's main loop, testpmd's responder), which
//! answers it from counters the data plane publishes anyway ([`commands`]).

pub mod capture;
pub mod client;
pub mod commands;
pub mod server;

use ironpath_graph::GraphInfo;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

/// The socket's name in the runtime directory (`:N` appended for the N-th
/// further process of the prefix).
pub const SOCKET_NAME: &str = "ironpath_ctl.sock";
/// Longest command line, its `\n` included.
pub const MAX_LINE: usize = 4096;
/// Clients served at once; the next one is told `busy` and closed.
pub const MAX_CLIENTS: usize = 32;
/// How long a client may take to send its command line.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer may wait for its client to read it.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client's command waits for the owning thread.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// Commands waiting for the owning thread (above [`MAX_CLIENTS`]: it bites only
/// if that thread stops polling).
pub const QUEUE: usize = 64;
/// The line that ends a successful answer.
pub const END_OK: &str = "\0ok\n";
/// The line that ends an answer to a refused command (the text says why).
pub const END_ERR: &str = "\0error\n";

/// A command for the thread that owns the ports.
pub struct Request {
    /// The command line, trimmed.
    pub line: String,
    reply: SyncSender<Reply>,
}

/// What the owning thread gives back for a [`Request`].
pub enum Reply {
    /// The answer's text, or why the command was refused.
    Text(Result<String, String>),
    /// The running graph, if any (for `capture`, which the socket thread serves).
    Graph(Option<Arc<GraphInfo>>),
}

impl Request {
    /// Sends the answer (dropped if the client has given up).
    pub fn reply(self, answer: Result<String, String>) {
        let _ = self.reply.try_send(Reply::Text(answer));
    }

    /// Sends the running graph (for a capture).
    pub fn reply_graph(self, graph: Option<Arc<GraphInfo>>) {
        let _ = self.reply.try_send(Reply::Graph(graph));
    }
}

/// The bytes sent for `answer`: its text (NULs removed, ending in a line end)
/// and the status line.
pub fn encode(answer: &Result<String, String>) -> Vec<u8> {
    let (text, end) = match answer {
        Ok(t) => (t, END_OK),
        Err(e) => (e, END_ERR),
    };
    let mut out: Vec<u8> = text.bytes().filter(|&b| b != 0).collect();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(end.as_bytes());
    out
}

/// What a client made of the bytes it read: `Some(Ok(text))` or
/// `Some(Err(text))` once the status line came, `None` if it did not (the
/// connection was refused or cut: the text read is then the reason).
pub fn decode(bytes: &[u8]) -> Option<Result<String, String>> {
    let text = String::from_utf8_lossy(bytes);
    if let Some(t) = text.strip_suffix(END_OK) {
        Some(Ok(t.to_string()))
    } else {
        text.strip_suffix(END_ERR).map(|t| Err(t.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip() {
        for a in [Ok("a\nb\n".to_string()), Err("no such command".to_string()), Ok(String::new())] {
            let bytes = encode(&a);
            let back = decode(&bytes).expect("a status line");
            let want = a.map(|t| if t.is_empty() || t.ends_with('\n') { t } else { t + "\n" });
            let want = want.map_err(|t| t + "\n");
            assert_eq!(back, want);
        }
        // A NUL inside the text cannot end the answer early.
        let bytes = encode(&Ok("x\0ok\ny".into()));
        assert_eq!(decode(&bytes), Some(Ok("xok\ny\n".into())));
        // A refusal has no status line.
        assert_eq!(decode(b"busy: 32 clients already\n"), None);
    }
}
