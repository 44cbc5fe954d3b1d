//! Where commands come from: `--cmdline-file`, then an interactive line editor
//! (rustyline: history, tab completion) when standard input is a terminal, or plain
//! lines from standard input otherwise. Without `-i`, forwarding starts at once and
//! runs until `--duration`, Ctrl-C, or end of input, printing `--stats-period` reports.

use super::commands::complete::{self, Facts};
use super::commands::{self, Flow};
use super::params::MODES;
use super::App;
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Helper};
use std::io::{BufRead, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const PROMPT: &str = "testpmd> ";

/// Tab completion from the command grammar (`commands::complete`), with the ports
/// that exist now.
pub struct Completion<'a> {
    app: &'a Mutex<App>,
}

impl Completer for Completion<'_> {
    type Candidate = Pair;
    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let facts = Facts { ports: lock(self.app).eal.port_ids(), engines: MODES };
        Ok(crate::completion::candidates(complete::complete(&line[..pos], &facts), &line[..pos]))
    }
}
impl Hinter for Completion<'_> {
    type Hint = String;
}
impl Highlighter for Completion<'_> {}
impl Validator for Completion<'_> {}
impl Helper for Completion<'_> {}

/// Run one line, printing its output or error. Returns whether to quit.
pub fn run_line(app: &mut App, line: &str) -> bool {
    match commands::execute(app, line) {
        Ok((out, flow)) => {
            crate::out!("{out}");
            flow == Flow::Quit
        }
        Err(e) => {
            crate::outln!("{e}");
            false
        }
    }
}

fn interrupt_flag() -> Arc<AtomicBool> {
    let f = Arc::new(AtomicBool::new(false));
    let g = f.clone();
    // A second handler cannot be installed; then Ctrl-C keeps its default action.
    let _ = ctrlc::set_handler(move || g.store(true, Ordering::Relaxed));
    f
}

/// The shell state, locked: the shell holds it for one command at a time, the
/// telemetry responder for one answer.
pub fn lock(app: &Mutex<App>) -> MutexGuard<'_, App> {
    app.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs one line on the locked state.
fn line(app: &Mutex<App>, l: &str) -> bool {
    run_line(&mut lock(app), l)
}

/// Run the shell (or the non-interactive loop); returns the exit status.
pub fn run(app: &Mutex<App>) -> i32 {
    let (cmdline_file, interactive, auto_start, tx_first) = {
        let a = lock(app);
        (a.p.cmdline_file.clone(), a.p.interactive, a.p.auto_start, a.p.tx_first)
    };
    if let Some(f) = cmdline_file {
        match std::fs::read_to_string(&f) {
            Ok(text) => {
                crate::outln!("Read CLI commands from {}", f.display());
                for l in text.lines() {
                    if line(app, l) {
                        return 0;
                    }
                }
            }
            Err(e) => {
                eprintln!("ironpath testpmd: --cmdline-file {}: {e}", f.display());
                return 1;
            }
        }
    }
    if !interactive {
        return non_interactive(app);
    }
    if auto_start {
        line(app, if tx_first { "start tx_first" } else { "start" });
    }
    if std::io::stdin().is_terminal() {
        interactive_tty(app)
    } else {
        let stdin = std::io::stdin();
        for l in stdin.lock().lines() {
            let Ok(l) = l else { break };
            crate::outln!("{PROMPT}{l}");
            if line(app, &l) {
                return 0;
            }
            if crate::out::gone() {
                break;
            }
        }
        line(app, "quit");
        0
    }
}

fn interactive_tty(app: &Mutex<App>) -> i32 {
    // A list on the first Tab, as DPDK's cmdline prints the choices or the usage.
    let config = Config::builder().completion_type(CompletionType::List).completion_show_all_if_ambiguous(true).build();
    let mut ed = match rustyline::Editor::<Completion, rustyline::history::DefaultHistory>::with_config(config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("ironpath testpmd: cannot start the line editor: {e}");
            return 1;
        }
    };
    ed.set_helper(Some(Completion { app }));
    loop {
        match ed.readline(PROMPT) {
            Ok(l) => {
                if !l.trim().is_empty() {
                    let _ = ed.add_history_entry(l.as_str());
                }
                if line(app, &l) {
                    return 0;
                }
            }
            Err(ReadlineError::Interrupted) | Err(ReadlineError::Eof) => {
                line(app, "quit");
                return 0;
            }
            Err(e) => {
                eprintln!("ironpath testpmd: {e}");
                line(app, "quit");
                return 1;
            }
        }
    }
}

/// DPDK's non-interactive mode: start, report every `--stats-period`, and stop on
/// Ctrl-C, `--duration`, or (without either of those) a line or end of input.
fn non_interactive(app: &Mutex<App>) -> i32 {
    // Before `start`, which prints the line a supervisor waits for before it may
    // interrupt us.
    let intr = interrupt_flag();
    let (duration, stats_period) = {
        let mut a = lock(app);
        let start = if a.p.tx_first { "start tx_first" } else { "start" };
        if !a.is_running() && !run_line(&mut a, start) && !a.is_running() {
            return 1;
        }
        (a.p.duration, a.p.stats_period)
    };
    let started = Instant::now();
    let deadline = duration.map(|d| started + Duration::from_secs_f64(d));
    if deadline.is_none() && stats_period.is_none() {
        crate::outln!("Press enter to exit");
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
    } else {
        let period = stats_period.map(|p| Duration::from_secs(u64::from(p)));
        let mut next = period.map(|p| Instant::now() + p);
        let mut monitor_prev: Option<(Vec<ironpath_eal::abi::Stats>, Instant)> = None;
        loop {
            if intr.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) || crate::out::gone() {
                break;
            }
            if let (Some(n), Some(p)) = (next, period) {
                if Instant::now() >= n {
                    let mut a = lock(app);
                    let ids = a.eal.port_ids();
                    crate::outln!("\nPort statistics ====================================");
                    for id in &ids {
                        if let Ok(s) = a.port_stats_text(*id) {
                            crate::out!("{s}");
                        }
                    }
                    let cur: Vec<_> =
                        ids.iter().map(|id| a.eal.port(*id).and_then(|p| p.stats()).unwrap_or_default()).collect();
                    drop(a);
                    if let Some((prev, t)) = &monitor_prev {
                        crate::outln!("{}", super::display::monitor_header());
                        for (i, id) in ids.iter().enumerate() {
                            if let Some(pv) = prev.get(i) {
                                crate::outln!(
                                    "{}",
                                    super::display::monitor_row(*id, pv, &cur[i], t.elapsed().as_secs_f64())
                                );
                            }
                        }
                    }
                    monitor_prev = Some((cur, Instant::now()));
                    next = Some(n + p);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    line(app, "quit");
    0
}
