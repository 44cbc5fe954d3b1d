//! Classic BPF (the filter language of tcpdump and libpcap): a verifier and an
//! interpreter, so a capture filter compiled by libpcap runs in the data plane.
//!
//! [`Program::verify`] accepts only programs the interpreter can run to the end
//! without a check failing: at most [`MAX_INSNS`] instructions, every opcode
//! known, every jump forward and inside the program, scratch memory indexes
//! below [`MEMWORDS`], no division or remainder by a constant zero, a shift by a
//! constant below 32, and a return as the last instruction (so every path ends
//! in one: jumps only go forward). [`Program::run`] then cannot loop and cannot
//! panic: a load past the end of the frame ends the program with 0 (reject), as
//! the kernel's interpreter does, and so does a division by a zero `X`.

use std::fmt;

/// Most instructions a program may have (the kernel's limit too).
pub const MAX_INSNS: usize = 4096;
/// Words of scratch memory (`M[0..16]`).
pub const MEMWORDS: usize = 16;

/// One instruction, as libpcap's `struct bpf_insn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Class, size, mode or operation bits.
    pub code: u16,
    /// Jump offset if true (conditional jumps).
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// The constant.
    pub k: u32,
}

impl Insn {
    /// An instruction from its parts.
    pub const fn new(code: u16, jt: u8, jf: u8, k: u32) -> Self {
        Self { code, jt, jf, k }
    }
}

/// Why a program was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No instruction at all.
    #[error("empty program")]
    Empty,
    /// Over [`MAX_INSNS`] instructions.
    #[error("{0} instructions: at most {MAX_INSNS}")]
    TooLong(usize),
    /// An opcode the interpreter does not know.
    #[error("instruction {pc}: unknown opcode 0x{code:04x}")]
    Opcode {
        /// Where.
        pc: usize,
        /// The opcode.
        code: u16,
    },
    /// A jump that leaves the program.
    #[error("instruction {0}: jump out of the program")]
    Jump(usize),
    /// A scratch memory index of [`MEMWORDS`] or more.
    #[error("instruction {0}: scratch memory index out of range")]
    Memory(usize),
    /// Division or remainder by a constant zero.
    #[error("instruction {0}: division by a constant zero")]
    DivZero(usize),
    /// A shift by a constant of 32 or more.
    #[error("instruction {0}: shift by 32 or more")]
    Shift(usize),
    /// The last instruction is not a return.
    #[error("the last instruction is not a return")]
    NoReturn,
    /// Bytes that are not a whole number of instructions.
    #[error("{0} bytes: not a whole number of 8-byte instructions")]
    Partial(usize),
}

// Instruction classes (the low three bits).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;
// Load sizes.
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
// Load modes.
const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MEM: u16 = 0x60;
const LEN: u16 = 0x80;
// ALU operations.
const ADD: u16 = 0x00;
const SUB: u16 = 0x10;
const MUL: u16 = 0x20;
const DIV: u16 = 0x30;
const OR: u16 = 0x40;
const AND: u16 = 0x50;
const LSH: u16 = 0x60;
const RSH: u16 = 0x70;
const NEG: u16 = 0x80;
const MOD: u16 = 0x90;
const XOR: u16 = 0xa0;
// Jumps.
const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const JGT: u16 = 0x20;
const JGE: u16 = 0x30;
const JSET: u16 = 0x40;
// Operand source: the constant or X (ALU, jumps); A for returns.
const SRC_X: u16 = 0x08;
const RVAL_A: u16 = 0x10;
// MISC.
const TAX: u16 = 0x00;
const TXA: u16 = 0x80;

/// A verified program.
#[derive(Clone, PartialEq, Eq)]
pub struct Program {
    insns: Box<[Insn]>,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Program({} insns)", self.insns.len())
    }
}

fn check_one(pc: usize, i: &Insn, len: usize) -> Result<(), VerifyError> {
    let bad = Err(VerifyError::Opcode { pc, code: i.code });
    let k = i.k as usize;
    match i.code & 0x07 {
        LD => match (i.code & 0x18, i.code & 0xe0, i.code & !0xff) {
            (_, _, x) if x != 0 => bad,
            (W | H | B, ABS | IND, _) => Ok(()),
            (W, IMM | LEN, _) => Ok(()),
            (W, MEM, _) if k < MEMWORDS => Ok(()),
            (W, MEM, _) => Err(VerifyError::Memory(pc)),
            _ => bad,
        },
        LDX => match i.code {
            0x01 | 0x81 | 0xb1 => Ok(()), // LDX W IMM, W LEN, B MSH (0xa0: 4 * (P[k] & 0xf))
            0x61 if k < MEMWORDS => Ok(()),
            0x61 => Err(VerifyError::Memory(pc)),
            _ => bad,
        },
        ST | STX if i.code == ST || i.code == STX => {
            if k < MEMWORDS {
                Ok(())
            } else {
                Err(VerifyError::Memory(pc))
            }
        }
        ALU => {
            let (op, x) = (i.code & 0xf0, i.code & SRC_X != 0);
            if i.code & !0xff != 0 || (op == NEG && x) {
                return bad;
            }
            match op {
                ADD | SUB | MUL | OR | AND | XOR | NEG => Ok(()),
                DIV | MOD if !x && i.k == 0 => Err(VerifyError::DivZero(pc)),
                LSH | RSH if !x && i.k >= 32 => Err(VerifyError::Shift(pc)),
                DIV | MOD | LSH | RSH => Ok(()),
                _ => bad,
            }
        }
        JMP => {
            if i.code & !0xff != 0 {
                return bad;
            }
            let (op, x) = (i.code & 0xf0, i.code & SRC_X != 0);
            let inside = |off: usize| pc.checked_add(1).and_then(|p| p.checked_add(off)).is_some_and(|t| t < len);
            match op {
                JA if !x => {
                    if inside(k) {
                        Ok(())
                    } else {
                        Err(VerifyError::Jump(pc))
                    }
                }
                JEQ | JGT | JGE | JSET => {
                    if inside(i.jt as usize) && inside(i.jf as usize) {
                        Ok(())
                    } else {
                        Err(VerifyError::Jump(pc))
                    }
                }
                _ => bad,
            }
        }
        RET => match i.code {
            0x06 | 0x16 => Ok(()), // RET K, RET A
            _ => bad,
        },
        MISC => match i.code {
            0x07 | 0x87 => Ok(()), // TAX, TXA
            _ => bad,
        },
        _ => bad,
    }
}

/// A load of `n` bytes at `off` of `pkt`, big-endian; `None` past the end.
#[inline]
fn load(pkt: &[u8], off: u32, n: usize) -> Option<u32> {
    let off = off as usize;
    let b = pkt.get(off..off.checked_add(n)?)?;
    Some(b.iter().fold(0u32, |acc, &x| acc << 8 | u32::from(x)))
}

impl Program {
    /// Checks `insns` (see the module's text) and keeps them.
    pub fn verify(insns: &[Insn]) -> Result<Program, VerifyError> {
        if insns.is_empty() {
            return Err(VerifyError::Empty);
        }
        if insns.len() > MAX_INSNS {
            return Err(VerifyError::TooLong(insns.len()));
        }
        for (pc, i) in insns.iter().enumerate() {
            check_one(pc, i, insns.len())?;
        }
        if insns.last().is_none_or(|i| i.code & 0x07 != RET) {
            return Err(VerifyError::NoReturn);
        }
        Ok(Program { insns: insns.into() })
    }

    /// Decodes and verifies a program from libpcap's in-memory layout (8 bytes an
    /// instruction: `code` u16, `jt`, `jf`, `k` u32, host order = little-endian
    /// here); a trailing partial instruction is refused.
    pub fn from_le_bytes(bytes: &[u8]) -> Result<Program, VerifyError> {
        if !bytes.len().is_multiple_of(8) {
            return Err(VerifyError::Partial(bytes.len()));
        }
        let insns: Vec<Insn> = bytes
            .chunks_exact(8)
            .map(|c| {
                Insn::new(u16::from_le_bytes([c[0], c[1]]), c[2], c[3], u32::from_le_bytes([c[4], c[5], c[6], c[7]]))
            })
            .collect();
        Self::verify(&insns)
    }

    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Runs the program on a frame whose first bytes are `pkt` and whose length
    /// on the wire is `wirelen`: the number of bytes to keep (0 = reject).
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; MEMWORDS];
        let mut pc = 0usize;
        // Every jump goes forward, so this runs at most `insns.len()` times.
        while let Some(&i) = self.insns.get(pc) {
            pc += 1;
            let k = i.k;
            match i.code {
                // Loads into A.
                c if c & 0x07 == LD => {
                    let n = match c & 0x18 {
                        W => 4,
                        H => 2,
                        _ => 1,
                    };
                    a = match c & 0xe0 {
                        IMM => k,
                        LEN => wirelen,
                        MEM => mem.get(k as usize).copied().unwrap_or(0),
                        ABS => match load(pkt, k, n) {
                            Some(v) => v,
                            None => return 0,
                        },
                        _ => match x.checked_add(k).and_then(|off| load(pkt, off, n)) {
                            Some(v) => v,
                            None => return 0,
                        },
                    };
                }
                0x01 => x = k,
                0x81 => x = wirelen,
                0x61 => x = mem.get(k as usize).copied().unwrap_or(0),
                0xb1 => {
                    x = match load(pkt, k, 1) {
                        Some(v) => (v & 0x0f) << 2,
                        None => return 0,
                    }
                }
                0x02 => {
                    if let Some(m) = mem.get_mut(k as usize) {
                        *m = a;
                    }
                }
                0x03 => {
                    if let Some(m) = mem.get_mut(k as usize) {
                        *m = x;
                    }
                }
                c if c & 0x07 == ALU => {
                    let v = if c & SRC_X != 0 { x } else { k };
                    a = match c & 0xf0 {
                        ADD => a.wrapping_add(v),
                        SUB => a.wrapping_sub(v),
                        MUL => a.wrapping_mul(v),
                        DIV => match a.checked_div(v) {
                            Some(q) => q,
                            None => return 0,
                        },
                        MOD => match a.checked_rem(v) {
                            Some(r) => r,
                            None => return 0,
                        },
                        OR => a | v,
                        AND => a & v,
                        LSH => a.checked_shl(v).unwrap_or(0),
                        RSH => a.checked_shr(v).unwrap_or(0),
                        NEG => a.wrapping_neg(),
                        _ => a ^ v,
                    };
                }
                c if c & 0x07 == JMP => {
                    let v = if c & SRC_X != 0 { x } else { k };
                    let off = match c & 0xf0 {
                        JA => k as usize,
                        op => {
                            let t = match op {
                                JEQ => a == v,
                                JGT => a > v,
                                JGE => a >= v,
                                _ => a & v != 0,
                            };
                            usize::from(if t { i.jt } else { i.jf })
                        }
                    };
                    pc = pc.saturating_add(off);
                }
                c if c & 0x07 == RET => return if c & RVAL_A != 0 { a } else { k },
                c if c == MISC | TAX => x = a,
                c if c == MISC | TXA => a = x,
                // Refused by the verifier; reject rather than guess.
                _ => return 0,
            }
        }
        0
    }
}

/// Parses `tcpdump -ddd` output (a count line, then `code jt jf k` in decimal a
/// line) into instructions, unverified.
pub fn parse_ddd(text: &str) -> Option<Vec<Insn>> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let n: usize = lines.next()?.parse().ok()?;
    let insns: Option<Vec<Insn>> = lines
        .map(|l| {
            let mut w = l.split_whitespace().map(|w| w.parse::<u64>().ok());
            let (c, jt, jf, k) = (w.next()??, w.next()??, w.next()??, w.next()??);
            Some(Insn::new(
                u16::try_from(c).ok()?,
                u8::try_from(jt).ok()?,
                u8::try_from(jf).ok()?,
                u32::try_from(k).ok()?,
            ))
        })
        .collect();
    insns.filter(|v| v.len() == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RET_K: u16 = RET;
    fn ret(k: u32) -> Insn {
        Insn::new(RET_K, 0, 0, k)
    }

    /// `tcpdump -ddd -y EN10MB 'tcp port 80'` (libpcap 1.10).
    const TCP_PORT_80: &str = "20
40 0 0 12
21 0 6 34525
48 0 0 20
21 0 15 6
40 0 0 54
21 12 0 80
40 0 0 56
21 10 11 80
21 0 10 2048
48 0 0 23
21 0 8 6
40 0 0 20
69 6 0 8191
177 0 0 14
72 0 0 14
21 2 0 80
72 0 0 16
21 0 1 80
6 0 0 262144
6 0 0 0
";

    fn frame(ethertype: u16, proto: u8, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[14] = 0x45;
        f[20..22].copy_from_slice(&frag.to_be_bytes());
        f[23] = proto;
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn tcpdumps_program_keeps_port_80() {
        // A count that does not match the lines is refused.
        assert!(parse_ddd(&TCP_PORT_80.replacen("20", "21", 1)).is_none());
        let insns = parse_ddd(TCP_PORT_80).unwrap();
        let p = Program::verify(&insns).unwrap();
        let n = |f: &[u8]| p.run(f, f.len() as u32);
        assert_eq!(n(&frame(0x0800, 6, 1234, 80, 0)), 262144);
        assert_eq!(n(&frame(0x0800, 6, 80, 1234, 0)), 262144);
        assert_eq!(n(&frame(0x0800, 6, 1234, 81, 0)), 0);
        assert_eq!(n(&frame(0x0800, 17, 1234, 80, 0)), 0, "udp");
        assert_eq!(n(&frame(0x0800, 6, 1234, 80, 0x0010)), 0, "a later fragment has no ports");
        assert_eq!(n(&frame(0x0806, 6, 1234, 80, 0)), 0);
        // Truncated: the port load falls off the end: reject, no panic.
        assert_eq!(n(&frame(0x0800, 6, 1234, 80, 0)[..35]), 0);
        assert_eq!(n(&[]), 0);
    }

    #[test]
    fn the_verifier_refuses_what_could_go_wrong() {
        assert_eq!(Program::verify(&[]), Err(VerifyError::Empty));
        assert_eq!(Program::verify(&vec![ret(0); MAX_INSNS + 1]), Err(VerifyError::TooLong(MAX_INSNS + 1)));
        assert!(Program::verify(&vec![ret(0); MAX_INSNS]).is_ok());
        assert_eq!(Program::verify(&[Insn::new(0x07, 0, 0, 0)]), Err(VerifyError::NoReturn));
        // Jumps: past the end, and a JA whose offset wraps.
        assert_eq!(Program::verify(&[Insn::new(0x15, 1, 0, 0), ret(0)]), Err(VerifyError::Jump(0)));
        assert_eq!(Program::verify(&[Insn::new(0x05, 0, 0, u32::MAX), ret(0)]), Err(VerifyError::Jump(0)));
        assert!(Program::verify(&[Insn::new(0x15, 0, 1, 0), ret(1), ret(0)]).is_ok());
        // Scratch memory.
        assert_eq!(Program::verify(&[Insn::new(0x02, 0, 0, 16), ret(0)]), Err(VerifyError::Memory(0)));
        assert_eq!(Program::verify(&[Insn::new(0x60, 0, 0, 16), ret(0)]), Err(VerifyError::Memory(0)));
        assert_eq!(Program::verify(&[Insn::new(0x61, 0, 0, 99), ret(0)]), Err(VerifyError::Memory(0)));
        // Division by a constant zero; by X is checked at run time.
        assert_eq!(Program::verify(&[Insn::new(0x34, 0, 0, 0), ret(0)]), Err(VerifyError::DivZero(0)));
        assert_eq!(Program::verify(&[Insn::new(0x94, 0, 0, 0), ret(0)]), Err(VerifyError::DivZero(0)));
        assert_eq!(Program::verify(&[Insn::new(0x64, 0, 0, 32), ret(0)]), Err(VerifyError::Shift(0)));
        // Unknown opcodes.
        for code in [0x08u16 | 0x60, 0x0e, 0x8c, 0xc4, 0x1f, 0x105, 0x55 | 0x100] {
            assert!(
                matches!(Program::verify(&[Insn::new(code, 0, 0, 0), ret(0)]), Err(VerifyError::Opcode { .. })),
                "{code:x}"
            );
        }
    }

    #[test]
    fn arithmetic_memory_and_edge_cases() {
        let run = |insns: &[Insn], pkt: &[u8]| Program::verify(insns).unwrap().run(pkt, 1000);
        // A = 7; M[3] = A; X = 0; A /= X -> reject.
        assert_eq!(
            run(&[Insn::new(0x00, 0, 0, 7), Insn::new(0x02, 0, 0, 3), Insn::new(0x3c, 0, 0, 0), ret(5)], &[]),
            0
        );
        // A = len; A -= 1000; A = -A; RET A -> 0; A = 7 % 4 = 3.
        assert_eq!(
            run(
                &[
                    Insn::new(0x80, 0, 0, 0),
                    Insn::new(0x14, 0, 0, 1000),
                    Insn::new(0x84, 0, 0, 0),
                    Insn::new(0x16, 0, 0, 0)
                ],
                &[]
            ),
            0
        );
        assert_eq!(run(&[Insn::new(0x00, 0, 0, 7), Insn::new(0x94, 0, 0, 4), Insn::new(0x16, 0, 0, 0)], &[]), 3);
        // X = 4*(P[0]&0xf); A = P[X+1] as half; RET A.
        assert_eq!(
            run(
                &[Insn::new(0xb1, 0, 0, 0), Insn::new(0x48, 0, 0, 1), Insn::new(0x16, 0, 0, 0)],
                &[0x41, 0, 0, 0, 0, 0xab, 0xcd]
            ),
            0xabcd
        );
        // An indexed load whose offset overflows: reject.
        assert_eq!(run(&[Insn::new(0x01, 0, 0, u32::MAX), Insn::new(0x50, 0, 0, 1), ret(9)], &[1, 2, 3]), 0);
        // Shift by X of 32 or more gives 0; TAX/TXA; M[] round trip.
        let p = [
            Insn::new(0x00, 0, 0, 40),
            Insn::new(0x07, 0, 0, 0), // X = A
            Insn::new(0x00, 0, 0, 1),
            Insn::new(0x6c, 0, 0, 0),  // A <<= X
            Insn::new(0x02, 0, 0, 15), // M[15] = A
            Insn::new(0x61, 0, 0, 15), // X = M[15]
            Insn::new(0x87, 0, 0, 0),  // A = X
            Insn::new(0x16, 0, 0, 0),
        ];
        assert_eq!(run(&p, &[]), 0);
    }

    /// A small deterministic generator (xorshift) for test frames.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Frames of many kinds: headers laid out as the filters look for them, random
    /// fields, truncations.
    fn frames() -> Vec<(Vec<u8>, u32)> {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut out = Vec::new();
        for i in 0..3000 {
            let len = 18 + (rng.next() % 120) as usize;
            let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let (et, l3) = match i % 6 {
                0 => (0x0800u16, 14),
                1 => (0x86dd, 14),
                2 => (0x0806, 14),
                3 => {
                    f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
                    (0x0800, 18)
                }
                4 => (0x0800, 14),
                _ => (rng.next() as u16, 14),
            };
            f[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
            if et == 0x0800 && f.len() > l3 + 24 {
                f[l3] = 0x45;
                f[l3 + 6] &= 0x3f;
                if !rng.next().is_multiple_of(4) {
                    f[l3 + 6] = 0;
                    f[l3 + 7] = 0;
                }
                f[l3 + 9] = [6u8, 17, 1, 47][(rng.next() % 4) as usize];
                if rng.next().is_multiple_of(2) {
                    f[l3 + 12..l3 + 16].copy_from_slice(&[198, 18, 0, (rng.next() % 4) as u8]);
                }
                let port = [80u16, 443, 53, 8080][(rng.next() % 4) as usize];
                f[l3 + 20 + (rng.next() % 2) as usize * 2..][..2].copy_from_slice(&port.to_be_bytes());
            }
            if et == 0x86dd && f.len() > l3 + 44 {
                f[l3] = 0x60;
                f[l3 + 6] = [6u8, 17, 58, 0][(rng.next() % 4) as usize];
                f[l3 + 42..l3 + 44].copy_from_slice(&443u16.to_be_bytes());
            }
            let wire = if i % 5 == 0 { len as u32 + (rng.next() % 2000) as u32 } else { len as u32 };
            out.push((f, wire));
        }
        out
    }

    #[test]
    fn agrees_with_libpcap_on_its_own_programs() {
        const FILTERS: &[&str] = &[
            "tcp port 80",
            "udp",
            "icmp or arp",
            "ip6 and tcp dst port 443",
            "vlan and tcp",
            "net 198.18.0.0/15",
            "src host 198.18.0.1 or dst host 198.18.0.3",
            "ip[8] > 60",
            "len > 100",
            "greater 90 and less 120",
            "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
            "ip[2:2] / 4 > 10",
            "ip[2:2] % 7 = 3",
            "ip[0] & 0xf << 2 = 20",
            "ether[0] & 1 = 1",
            "udp[8:2] = 0x1234 or proto 47",
            "not (tcp or udp)",
        ];
        let frames = frames();
        let views: Vec<(&[u8], u32)> = frames.iter().map(|(f, w)| (f.as_slice(), *w)).collect();
        for expr in FILTERS {
            let (insns, want) = match ironpath_eal::libpcap::offline_filter(expr, 65535, &views) {
                Ok(r) => r,
                Err(e) if e.contains(ironpath_eal::libpcap::SONAME) => {
                    eprintln!("skipped: {e}");
                    return;
                }
                Err(e) => panic!("{e}"),
            };
            let insns: Vec<Insn> = insns.into_iter().map(|(c, jt, jf, k)| Insn::new(c, jt, jf, k)).collect();
            let p = Program::verify(&insns).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let mut kept = 0;
            for ((f, w), want) in views.iter().zip(&want) {
                let got = p.run(f, *w);
                assert_eq!(got, *want as u32, "{expr} on {f:02x?} (wire {w})");
                kept += usize::from(got != 0);
            }
            // Each filter keeps some frames and refuses others: the test can fail.
            assert!(kept > 0 && kept < views.len(), "{expr}: kept {kept} of {}", views.len());
        }
    }

    #[test]
    fn bytes_decode_as_libpcap_lays_them_out() {
        let mut b = Vec::new();
        for i in [Insn::new(0x06, 0, 0, 0x1234), Insn::new(0x15, 1, 2, 7)] {
            b.extend_from_slice(&i.code.to_le_bytes());
            b.extend_from_slice(&[i.jt, i.jf]);
            b.extend_from_slice(&i.k.to_le_bytes());
        }
        assert_eq!(Program::from_le_bytes(&b[..8]).unwrap().run(&[], 0), 0x1234);
        assert_eq!(Program::from_le_bytes(&b), Err(VerifyError::Jump(1)));
        assert_eq!(Program::from_le_bytes(&b[..7]), Err(VerifyError::Partial(7)));
    }
}
