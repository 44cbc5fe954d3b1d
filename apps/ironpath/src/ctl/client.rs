//! `ironpath ctl [-f PREFIX] [-i N] [COMMAND...]`: sends a command to the
//! process listening on the control socket of `PREFIX` and prints the answer;
//! without a command, a shell (`ironpath# `, with history and completion on a
//! terminal; one command a line otherwise).

use super::commands::complete;
use super::{decode, MAX_LINE, SOCKET_NAME};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Helper};
use std::io::{BufRead, IsTerminal, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PROMPT: &str = "ironpath# ";
/// How long a client waits for a whole answer (the server gives up sooner).
const WAIT: Duration = Duration::from_secs(15);

/// The usage text.
pub const USAGE: &str = "usage: ironpath ctl [-f PREFIX] [-i N] [COMMAND...]

Sends COMMAND to the `ironpath run` or `ironpath testpmd` started with
--file-prefix PREFIX and prints the answer; without COMMAND, a shell
(`help` lists the commands, `quit` leaves).

  -f, --file-prefix PREFIX   the process's file prefix [default: rte]
  -i, --instance N           the N-th further process of that prefix [default: 0]
  -h, --help                 this text

`ironpath ctl -f PREFIX capture ... -w FILE|-` writes packets of the running
pipeline to pcapng (`ironpath ctl capture -h`).";

/// Where the control socket of `prefix` (instance `n`) is.
pub fn socket_path(prefix: &str, n: u32) -> PathBuf {
    let name = if n == 0 { SOCKET_NAME.to_string() } else { format!("{SOCKET_NAME}:{n}") };
    crate::telemetry::rundir::path_for(prefix).join(name)
}

/// Connects to the control socket at `path` (of `prefix`); why not, said plainly.
pub fn connect(path: &Path, prefix: &str) -> Result<UnixStream, String> {
    UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            format!("no ironpath process with file prefix {prefix} (socket {}): is it running?", path.display())
        }
        std::io::ErrorKind::PermissionDenied => format!(
            "{}: permission denied: the control socket is its owner's only (a 0700 directory, a 0600 socket); \
             run as the process's user or root",
            path.display()
        ),
        _ => format!("{}: {e}", path.display()),
    })
}

/// Sends `line` to the socket at `path`; the answer, or why there is none.
pub fn ask(path: &Path, prefix: &str, line: &str) -> Result<String, String> {
    if line.len() + 1 > MAX_LINE {
        return Err(format!("command longer than {} bytes", MAX_LINE - 1));
    }
    let mut c = connect(path, prefix)?;
    let _ = c.set_write_timeout(Some(WAIT));
    match c.write_all(format!("{line}\n").as_bytes()) {
        Ok(()) => {}
        // A server that refuses a client may close before the line is written:
        // what it said is still to be read.
        Err(e) if matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset) => {}
        Err(e) => return Err(format!("{}: {e}", path.display())),
    }
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("{}: no answer within {} s", path.display(), WAIT.as_secs()));
        }
        let _ = c.set_read_timeout(Some(left));
        match c.read(&mut chunk) {
            // A server that refuses a client closes without reading its line: the
            // reason it wrote is read first, then the reset ends the answer.
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !got.is_empty() => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    match decode(&got) {
        Some(answer) => answer.map_err(|e| e.trim_end().to_string()),
        None => {
            let why = String::from_utf8_lossy(&got);
            let why = why.trim_end();
            Err(if why.is_empty() { format!("{}: closed without an answer", path.display()) } else { why.to_string() })
        }
    }
}

/// Entry point of `ironpath ctl`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let mut prefix = "rte".to_string();
    let mut instance = 0u32;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: usize| args.get(i + 1).cloned();
        match a {
            "-h" | "--help" => {
                crate::outln!("{USAGE}");
                return 0;
            }
            "-f" | "--file-prefix" => match value(i) {
                Some(v) => prefix = v,
                None => return usage_error(&format!("{a} needs a value")),
            },
            "-i" | "--instance" => match value(i).and_then(|v| v.parse().ok()) {
                Some(v) => instance = v,
                None => return usage_error(&format!("{a} needs a number")),
            },
            "--" => {
                i += 1;
                break;
            }
            _ if a.starts_with('-') => return usage_error(&format!("unknown option `{a}`")),
            _ => break,
        }
        i += 2;
    }
    if prefix.is_empty() || prefix.contains('/') || prefix == "." || prefix == ".." {
        return usage_error(&format!("file prefix `{prefix}` is not a directory name"));
    }
    let path = socket_path(&prefix, instance);
    let rest = &args[i.min(args.len())..];
    if rest.first().is_some_and(|w| w == "capture") {
        return super::capture::client_main(&path, &prefix, &rest[1..]);
    }
    let command = rest.join(" ");
    if !command.trim().is_empty() {
        return match ask(&path, &prefix, command.trim()) {
            Ok(text) => {
                crate::out!("{text}");
                0
            }
            Err(e) => {
                eprintln!("ironpath ctl: {e}");
                1
            }
        };
    }
    if std::io::stdin().is_terminal() {
        shell(&path, &prefix)
    } else {
        piped(&path, &prefix)
    }
}

fn usage_error(e: &str) -> i32 {
    eprintln!("ironpath ctl: {e}\n{USAGE}");
    2
}

/// Runs one shell line; `None` to leave, else whether it failed.
fn one(path: &Path, prefix: &str, line: &str) -> Option<bool> {
    let l = line.trim();
    match l {
        "quit" | "exit" => None,
        "" => Some(false),
        _ if super::capture::is_capture(l) => {
            let words: Vec<String> = l.split_whitespace().skip(1).map(str::to_string).collect();
            Some(super::capture::client_main(path, prefix, &words) != 0)
        }
        _ => Some(match ask(path, prefix, l) {
            Ok(text) => {
                crate::out!("{text}");
                false
            }
            Err(e) => {
                crate::outln!("error: {e}");
                true
            }
        }),
    }
}

/// Commands from a pipe, one a line, each echoed after the prompt; exit status 1
/// if any was refused or unanswered.
fn piped(path: &Path, prefix: &str) -> i32 {
    let mut failed = false;
    for l in std::io::stdin().lock().lines() {
        let Ok(l) = l else { break };
        crate::outln!("{PROMPT}{l}");
        match one(path, prefix, &l) {
            None => break,
            Some(f) => failed |= f,
        }
        if crate::out::gone() {
            break;
        }
    }
    i32::from(failed)
}

/// Tab completion from the command grammar.
struct Completion;

impl Completer for Completion {
    type Candidate = Pair;
    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        Ok(crate::completion::candidates(complete(&line[..pos]), &line[..pos]))
    }
}
impl Hinter for Completion {
    type Hint = String;
}
impl Highlighter for Completion {}
impl Validator for Completion {}
impl Helper for Completion {}

fn shell(path: &Path, prefix: &str) -> i32 {
    let config = Config::builder().completion_type(CompletionType::List).completion_show_all_if_ambiguous(true).build();
    let mut ed = match rustyline::Editor::<Completion, rustyline::history::DefaultHistory>::with_config(config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("ironpath ctl: cannot start the line editor: {e}");
            return 1;
        }
    };
    ed.set_helper(Some(Completion));
    loop {
        match ed.readline(PROMPT) {
            Ok(l) => {
                if !l.trim().is_empty() {
                    let _ = ed.add_history_entry(l.as_str());
                }
                if one(path, prefix, &l).is_none() {
                    return 0;
                }
            }
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => return 0,
            Err(e) => {
                eprintln!("ironpath ctl: {e}");
                return 1;
            }
        }
    }
}
