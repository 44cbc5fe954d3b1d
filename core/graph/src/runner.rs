//! Running a built graph: one pinned thread per lcore walking its part until told
//! to stop; stopping joins every lcore, then finishes each part (so ring
//! receivers drain only once their producers are gone).

use crate::sched::LcoreGraph;
use ironpath_eal::lcore::{launch_on, LcoreHandle};
use ironpath_eal::sleep::Doorbell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Lcore threads walking their graphs.
pub struct Running {
    handles: Vec<LcoreHandle<LcoreGraph>>,
    stop: Arc<AtomicBool>,
    /// Each lcore's doorbell (rung at stop, in case it sleeps).
    bells: Vec<Arc<Doorbell>>,
}

/// Start one thread per lcore graph; `pin` pins each to its CPU.
pub fn launch(graphs: Vec<LcoreGraph>, pin: bool) -> std::io::Result<Running> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    let bells: Vec<Arc<Doorbell>> = graphs.iter().map(LcoreGraph::bell).collect();
    for mut g in graphs {
        let stop2 = stop.clone();
        let cpu = if pin { g.cpu } else { None };
        let lcore = g.lcore;
        let h = launch_on(lcore, cpu, move || {
            g.run(&stop2);
            g
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                bells.iter().for_each(|b| b.ring());
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    Ok(Running { handles, stop, bells })
}

impl Running {
    /// True once any lcore thread has ended (a panic or a failed pin).
    pub fn any_finished(&self) -> bool {
        self.handles.iter().any(LcoreHandle::is_finished)
    }

    /// Stop every lcore, wait for them, finish their graphs. Returns the errors of
    /// lcores that failed (pinning, panics), one line each.
    pub fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.bells.iter().for_each(|b| b.ring());
        let mut errs = Vec::new();
        let mut done = Vec::new();
        for h in self.handles {
            let lc = h.lcore;
            match h.join() {
                Ok(g) => done.push(g),
                Err(e) => errs.push(format!("lcore {lc}: {e}")),
            }
        }
        for g in &mut done {
            g.finish();
        }
        errs
    }
}
