//! What net_memif takes from a peer process on its control channel: the 128-byte
//! messages, walked through the server's handshake (`pmds/memif/src/proto.rs`,
//! included as it is), and the client's agreement with a server's HELLO.
//!
//! Input: records of 1 + 128 bytes: the first byte says whether a descriptor came
//! with the message and how large its file is (none, an eventfd, the declared size,
//! smaller, larger), the rest is the message as a peer would send it.
//!
//! No panic; a session reaches CONNECT only through INIT, and then every region it
//! accepted is non-empty, bounded and no larger than its file, and every ring lies
//! 8-byte aligned inside its region; a refusal always names a reason; a client's
//! agreement never exceeds what it asked for and its region layout keeps every
//! buffer inside the region and 32-bit offsets.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../../pmds/memif/src/proto.rs"]
#[allow(dead_code)]
mod proto;

use proto::*;

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let lim = ServerLimits {
        id: u32::from(cfg & 3),
        secret: (cfg & 4 != 0).then(|| Msg::secret("pw")),
        c2s: u16::from(cfg >> 3 & 3) + 1,
        s2c: u16::from(cfg >> 5 & 3) + 1,
        name: "ironpath".into(),
    };
    let mut s = ServerSession::new(lim.clone());
    let mut files: Vec<u64> = Vec::new();
    let mut saw_init = false;
    for rec in rest.chunks_exact(1 + MSG_SIZE) {
        let (fdk, b) = (rec[0], &rec[1..]);
        let m = match Msg::parse(b) {
            Ok(m) => m,
            Err(why) => {
                assert!(!why.is_empty());
                break;
            }
        };
        if matches!(m, Msg::Ack | Msg::AddRegion { .. } | Msg::AddRing { .. }) {
            assert_eq!(Msg::parse(&m.encode()).as_ref(), Ok(&m));
        }
        if let Msg::Hello { .. } = m {
            let want = ClientRun { c2s: u16::from(fdk) + 1, s2c: u16::from(fdk >> 4) + 1, log2: fdk % 15 };
            if let Ok(run) = ClientRun::agree(&m, want) {
                assert!(run.c2s <= want.c2s && run.s2c <= want.s2c && run.log2 <= want.log2);
                for bsize in [64u32, 2048, 65535] {
                    if let Some(l) = Layout::new(run, bsize) {
                        assert!(l.size() <= u64::from(u32::MAX));
                        for (c2s, n) in [(true, run.c2s), (false, run.s2c)] {
                            if n > 0 {
                                let last = ((1u32 << run.log2) - 1) as u16;
                                assert!(l.ring_offset(c2s, n - 1) + ring_bytes(run.log2) <= l.size());
                                assert!(l.buffer_offset(c2s, n - 1, last) + u64::from(bsize) <= l.size());
                            }
                        }
                    }
                }
            }
        }
        let declared = match &m {
            Msg::AddRegion { size, .. } => *size,
            _ => 0,
        };
        let fd_size = match fdk % 5 {
            0 => None,
            1 => Some(0),
            2 => Some(declared),
            3 => Some(declared / 2),
            _ => Some(declared.saturating_add(4096)),
        };
        let was = s.phase;
        let regions_before = s.regions.len();
        match s.on_msg(m.clone(), fd_size) {
            Step::Refuse(why) | Step::Closed(why) => {
                let _ = why;
                break;
            }
            Step::Reply(r) => {
                assert_eq!(r, Msg::Ack);
                if matches!(m, Msg::Init { .. }) {
                    assert_eq!(was, Phase::Init);
                    saw_init = true;
                }
                if s.regions.len() > regions_before {
                    files.push(fd_size.expect("a region came with its file"));
                }
            }
            Step::Connect => {
                assert!(saw_init && was == Phase::Setup && s.phase == Phase::Connected);
                for (i, &size) in s.regions.iter().enumerate() {
                    assert!(size > 0 && size <= MAX_REGION_SIZE && size <= files[i]);
                }
                assert!(s.regions.iter().sum::<u64>() <= MAX_REGIONS_TOTAL);
                for r in s.c2s.iter().chain(s.s2c.iter()).flatten() {
                    let size = s.regions[usize::from(r.region)];
                    assert!(r.offset % 8 == 0 && u64::from(r.offset) + ring_bytes(r.log2) <= size);
                    assert!(r.log2 <= MAX_LOG2_RING);
                }
                assert!(s.c2s.len() == usize::from(lim.c2s) && s.s2c.len() == usize::from(lim.s2c));
            }
        }
    }
});
