//! Arbitrary frames through every node kind, as the attack corpus builds them
//! (`ironpath_nodes::attack`: each kind of the registry with small bounds, in-process
//! ports), with the corpus's checks after every call: no panic, every packet of the
//! input accounted for (still in the burst for a declared edge, held, or gone with a
//! counter that moved), what the node holds bounded.
//!
//! Input: a byte choosing the subject (one of `attack::CONFIGS`), then bursts, each a
//! byte of count n (at most 32), a byte of time step (x 64 us) and a flags byte (bit 0:
//! the frames as chains of 2 KiB buffers; bits 1-3: the port they arrive on, 7 being
//! no port of the node), then n frames, each a little-endian u16 length and its bytes
//! (cut to 9216 and to what is left).
//!
//! Each subject is built once per process (building some, the router's FIB, takes
//! far longer than an input) and keeps its state from input to input, as a node
//! under a long attack does; every 4096 inputs it is run on for an hour of virtual
//! time, stopped, checked for leaks (no buffer of either pool left in use) and built
//! again.
#![no_main]
use ironpath_nodes::attack::{subject, Inputs, Subject, CONFIGS};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

const STEP: u64 = 64_000;
const REBUILD_AFTER: u32 = 4096;

thread_local! {
    /// Per subject: the node and the inputs it has had since it was built.
    static SUBJECTS: RefCell<Vec<Option<(Subject, u32)>>> = RefCell::new((0..CONFIGS.len()).map(|_| None).collect());
}

/// Subject `i` with input pools of its own (its leak check counts only its buffers).
fn build(i: usize) -> Subject {
    subject(i, &Inputs::sized(512, 1024))
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else { return };
    let i = usize::from(sel) % CONFIGS.len();
    SUBJECTS.with(|all| {
        let mut all = all.borrow_mut();
        let (s, uses) = all[i].get_or_insert_with(|| (build(i), 0));
        while rest.len() >= 3 {
            let (n, step, flags) = (usize::from(rest[0] % 33), u64::from(rest[1]), rest[2]);
            rest = &rest[3..];
            let mut frames: Vec<&[u8]> = Vec::new();
            for _ in 0..n {
                if rest.len() < 2 {
                    break;
                }
                let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(9216).min(rest.len() - 2);
                frames.push(&rest[2..2 + len]);
                rest = &rest[2 + len..];
            }
            s.call(&frames, u16::from(flags >> 1 & 7), step * STEP, flags & 1 != 0);
        }
        *uses += 1;
        if *uses >= REBUILD_AFTER {
            if let Some((s, _)) = all[i].take() {
                s.finish();
            }
        }
    });
});
