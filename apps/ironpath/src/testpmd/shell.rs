//! Where commands come from: `--cmdline-file`, then an interactive line editor
//! (rustyline: history, tab completion) when standard input is a terminal, or plain
//! lines from standard input otherwise. Without `-i`, forwarding starts at once and
//! runs until `--duration`, Ctrl-C, or end of input, printing `--stats-period` reports.

use super::commands::{self, Flow, WORDS};
use super::App;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};
use std::io::{BufRead, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROMPT: &str = "testpmd> ";

/// Tab completion of command words.
pub struct Completion;

impl Completer for Completion {
    type Candidate = String;
    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<String>)> {
        let start = line[..pos].rfind(char::is_whitespace).map(|i| i + 1).unwrap_or(0);
        let word = &line[start..pos];
        let mut c: Vec<String> = WORDS.iter().filter(|w| w.starts_with(word)).map(|w| format!("{w} ")).collect();
        c.sort();
        c.dedup();
        Ok((start, c))
    }
}
impl Hinter for Completion {
    type Hint = String;
}
impl Highlighter for Completion {}
impl Validator for Completion {}
impl Helper for Completion {}

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

/// Run the shell (or the non-interactive loop); returns the exit status.
pub fn run(app: &mut App) -> i32 {
    if let Some(f) = app.p.cmdline_file.clone() {
        match std::fs::read_to_string(&f) {
            Ok(text) => {
                crate::outln!("Read CLI commands from {}", f.display());
                for line in text.lines() {
                    if run_line(app, line) {
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
    if !app.p.interactive {
        return non_interactive(app);
    }
    if app.p.auto_start {
        run_line(app, if app.p.tx_first { "start tx_first" } else { "start" });
    }
    if std::io::stdin().is_terminal() {
        interactive_tty(app)
    } else {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            crate::outln!("{PROMPT}{line}");
            if run_line(app, &line) {
                return 0;
            }
            if crate::out::gone() {
                break;
            }
        }
        run_line(app, "quit");
        0
    }
}

fn interactive_tty(app: &mut App) -> i32 {
    let mut ed = match rustyline::Editor::<Completion, rustyline::history::DefaultHistory>::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("ironpath testpmd: cannot start the line editor: {e}");
            return 1;
        }
    };
    ed.set_helper(Some(Completion));
    loop {
        match ed.readline(PROMPT) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = ed.add_history_entry(line.as_str());
                }
                if run_line(app, &line) {
                    return 0;
                }
            }
            Err(ReadlineError::Interrupted) | Err(ReadlineError::Eof) => {
                run_line(app, "quit");
                return 0;
            }
            Err(e) => {
                eprintln!("ironpath testpmd: {e}");
                run_line(app, "quit");
                return 1;
            }
        }
    }
}

/// DPDK's non-interactive mode: start, report every `--stats-period`, and stop on
/// Ctrl-C, `--duration`, or (without either of those) a line or end of input.
fn non_interactive(app: &mut App) -> i32 {
    if !app.is_running() && !run_line(app, if app.p.tx_first { "start tx_first" } else { "start" }) && !app.is_running()
    {
        return 1;
    }
    let intr = interrupt_flag();
    let started = Instant::now();
    let deadline = app.p.duration.map(|d| started + Duration::from_secs_f64(d));
    if deadline.is_none() && app.p.stats_period.is_none() {
        crate::outln!("Press enter to exit");
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
    } else {
        let period = app.p.stats_period.map(|p| Duration::from_secs(u64::from(p)));
        let mut next = period.map(|p| Instant::now() + p);
        let mut monitor_prev: Option<(Vec<ironpath_eal::abi::Stats>, Instant)> = None;
        loop {
            if intr.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) || crate::out::gone() {
                break;
            }
            if let (Some(n), Some(p)) = (next, period) {
                if Instant::now() >= n {
                    let ids = app.eal.port_ids();
                    crate::outln!("\nPort statistics ====================================");
                    for id in &ids {
                        if let Ok(s) = app.port_stats_text(*id) {
                            crate::out!("{s}");
                        }
                    }
                    let cur: Vec<_> =
                        ids.iter().map(|id| app.eal.port(*id).and_then(|p| p.stats()).unwrap_or_default()).collect();
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
    run_line(app, "quit");
    0
}
