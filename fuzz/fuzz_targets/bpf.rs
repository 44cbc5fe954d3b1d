//! Classic BPF as `ctl capture` runs it: any instructions are verified, and a
//! program the verifier accepts runs on any frame to an end without a panic, an
//! overflow or a loop. Input: a u16 (little-endian) count of instructions, that
//! many 8-byte instructions as libpcap lays them out, then the frame; its wire
//! length is its length plus the count's top bits (a cut frame).
#![no_main]
use ironpath_graph::bpf::{Program, MAX_INSNS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((n, rest)) = data.split_first_chunk::<2>() else { return };
    let n = u16::from_le_bytes(*n) as usize % (MAX_INSNS + 2);
    let prog_len = (n * 8).min(rest.len() / 8 * 8);
    let (prog, frame) = rest.split_at(prog_len);
    let Ok(p) = Program::from_le_bytes(prog) else { return };
    // What was accepted is what was given.
    assert_eq!(p.insns().len(), prog.len() / 8);
    for (i, c) in p.insns().iter().zip(prog.chunks_exact(8)) {
        assert_eq!(i.code, u16::from_le_bytes([c[0], c[1]]));
        assert_eq!(i.k, u32::from_le_bytes([c[4], c[5], c[6], c[7]]));
    }
    let wire = frame.len() as u32 + u32::from(data[1] >> 4) * 100;
    let a = p.run(frame, wire);
    // Deterministic: the same frame gives the same verdict.
    assert_eq!(a, p.run(frame, wire));
    // The frame's bytes past its end are never read: a shorter view of it can only
    // change a verdict by rejecting (0) where a load fell off the end.
    let _ = p.run(&frame[..frame.len() / 2], wire);
});
