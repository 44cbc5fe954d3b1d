//! The memif protocol as bytes and rules, with no system call and no shared memory:
//! the 128-byte control messages, the server's side of the handshake as a state
//! machine that refuses (with the reason string sent to the peer) anything out of
//! order, out of range or without its file descriptor, the ring and region geometry,
//! and the checks every descriptor read from shared memory passes before a byte is
//! copied. The fuzz target `memif_ctl` feeds it messages and descriptors as a hostile
//! peer would write them.
//!
//! Wire facts (libmemif's protocol, version 2.0, as DPDK's net_memif and VPP speak
//! it): a message is 128 bytes on a `SOCK_SEQPACKET` Unix socket, a 16-bit type then
//! a packed body in host byte order; a region or a ring's interrupt eventfd travels as
//! `SCM_RIGHTS` with its `ADD_REGION`/`ADD_RING`. The client (which owns the memory)
//! connects; the server sends `HELLO`; the client answers `INIT`, then one
//! `ADD_REGION` per region and one `ADD_RING` per ring, each acknowledged (`ACK`),
//! then `CONNECT`, answered by `CONNECTED`. Either side may send `DISCONNECT` with a
//! reason of up to 96 bytes.
//!
//! A ring is a 128-byte header (cookie and flags at 0 and 4, `head` at 6, `tail` at
//! 64) followed by `1 << log2` descriptors of 16 bytes (flags, region, length,
//! offset, metadata). The producer of a client-to-server ring (C2S) is the client,
//! which moves `head`; the server consumes and moves `tail`. On a server-to-client
//! ring (S2C) the client posts empty buffers by moving `head`, the server fills them
//! and moves `tail`.

/// Size of every control message.
pub const MSG_SIZE: usize = 128;
/// Written by the client at the start of each ring, checked by the server.
pub const COOKIE: u32 = 0x03E3_1F20;
/// Protocol version 2.0 (`major << 8 | minor`).
pub const VERSION: u16 = 0x0200;
/// Names in HELLO, INIT, CONNECT and CONNECTED.
pub const NAME_SZ: usize = 32;
/// The secret in INIT.
pub const SECRET_SZ: usize = 24;
/// The reason in DISCONNECT.
pub const REASON_SZ: usize = 96;
/// Largest ring (log2) either side of ours accepts.
pub const MAX_LOG2_RING: u8 = 14;
/// Regions a peer may add.
pub const MAX_REGIONS: usize = 256;
/// Largest region a peer may add (a zero-copy client exposes its whole packet memory).
pub const MAX_REGION_SIZE: u64 = 64 << 30;
/// Most bytes of regions one connection may have us map, all together.
pub const MAX_REGIONS_TOTAL: u64 = 256 << 30;
/// Ring header: cookie and flags, head (cache line 0), tail (cache line 1).
pub const RING_HDR: usize = 128;
/// One descriptor.
pub const DESC_SIZE: usize = 16;
/// Offsets inside a ring header.
pub const RING_FLAGS_OFF: usize = 4;
/// `head`: moved by the client (C2S: produced; S2C: buffers posted).
pub const RING_HEAD_OFF: usize = 6;
/// `tail`: moved by the server (C2S: consumed; S2C: filled).
pub const RING_TAIL_OFF: usize = 64;
/// Ring flag: the receiver polls, do not write its eventfd.
pub const RING_FLAG_MASK_INT: u16 = 1;
/// Descriptor flag: the packet goes on in the next descriptor.
pub const DESC_FLAG_NEXT: u16 = 1;
/// `ADD_RING` flag: the ring carries client-to-server packets.
pub const ADD_RING_FLAG_C2S: u16 = 1;
/// `INIT` mode: Ethernet (the only one served).
pub const MODE_ETHERNET: u8 = 0;

/// Message types.
pub mod ty {
    /// Acknowledge INIT, ADD_REGION or ADD_RING.
    pub const ACK: u16 = 1;
    /// Server's limits and version.
    pub const HELLO: u16 = 2;
    /// Client's version, interface id, mode and secret.
    pub const INIT: u16 = 3;
    /// A shared memory region (fd attached).
    pub const ADD_REGION: u16 = 4;
    /// A ring (interrupt eventfd attached).
    pub const ADD_RING: u16 = 5;
    /// Client: all is added.
    pub const CONNECT: u16 = 6;
    /// Server: connected.
    pub const CONNECTED: u16 = 7;
    /// Either side: going away, with a reason.
    pub const DISCONNECT: u16 = 8;
}

/// A fixed-size name, as sent (NUL-padded, cut at 31 bytes).
pub type Name = String;

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// `ACK`.
    Ack,
    /// `HELLO` (server to client).
    Hello {
        /// Server application name.
        name: Name,
        /// Lowest version served.
        min_version: u16,
        /// Highest version served.
        max_version: u16,
        /// Highest region index accepted.
        max_region: u16,
        /// Highest S2C ring index accepted.
        max_s2c_ring: u16,
        /// Highest C2S ring index accepted.
        max_c2s_ring: u16,
        /// Largest ring accepted (log2).
        max_log2_ring_size: u8,
    },
    /// `INIT` (client to server).
    Init {
        /// Protocol version the client speaks.
        version: u16,
        /// Interface id to connect to.
        id: u32,
        /// Interface mode (0: Ethernet).
        mode: u8,
        /// Secret, NUL-padded.
        secret: [u8; SECRET_SZ],
        /// Client application name.
        name: Name,
    },
    /// `ADD_REGION`.
    AddRegion {
        /// Region index (regions come in order from 0).
        index: u16,
        /// Region size in bytes.
        size: u64,
    },
    /// `ADD_RING`.
    AddRing {
        /// `ADD_RING_FLAG_C2S` or 0 (S2C).
        flags: u16,
        /// Ring (queue) index.
        index: u16,
        /// Region holding the ring.
        region: u16,
        /// Offset of the ring in the region.
        offset: u32,
        /// Ring size (log2).
        log2_ring_size: u8,
        /// Private header size (unused by ironpath).
        private_hdr_size: u16,
    },
    /// `CONNECT` with the client's interface name.
    Connect(Name),
    /// `CONNECTED` with the server's interface name.
    Connected(Name),
    /// `DISCONNECT`.
    Disconnect {
        /// Error code (0).
        code: u32,
        /// Why.
        reason: String,
    },
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(x)
}

/// A NUL-terminated string from a fixed field (lossy UTF-8, printable only).
fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

fn put_text(out: &mut [u8], s: &str) {
    // Always NUL-terminated, as strlcpy leaves it.
    let n = s.len().min(out.len() - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
}

impl Msg {
    /// Parse one received message. Errors are the reason string to send back.
    pub fn parse(b: &[u8]) -> Result<Msg, &'static str> {
        if b.len() != MSG_SIZE {
            return Err("Invalid message size");
        }
        Ok(match u16_at(b, 0) {
            ty::ACK => Msg::Ack,
            ty::HELLO => Msg::Hello {
                name: text(&b[2..2 + NAME_SZ]),
                min_version: u16_at(b, 34),
                max_version: u16_at(b, 36),
                max_region: u16_at(b, 38),
                max_s2c_ring: u16_at(b, 40),
                max_c2s_ring: u16_at(b, 42),
                max_log2_ring_size: b[44],
            },
            ty::INIT => {
                let mut secret = [0u8; SECRET_SZ];
                secret.copy_from_slice(&b[9..9 + SECRET_SZ]);
                Msg::Init {
                    version: u16_at(b, 2),
                    id: u32_at(b, 4),
                    mode: b[8],
                    secret,
                    name: text(&b[33..33 + NAME_SZ]),
                }
            }
            ty::ADD_REGION => Msg::AddRegion { index: u16_at(b, 2), size: u64_at(b, 4) },
            ty::ADD_RING => Msg::AddRing {
                flags: u16_at(b, 2),
                index: u16_at(b, 4),
                region: u16_at(b, 6),
                offset: u32_at(b, 8),
                log2_ring_size: b[12],
                private_hdr_size: u16_at(b, 13),
            },
            ty::CONNECT => Msg::Connect(text(&b[2..2 + NAME_SZ])),
            ty::CONNECTED => Msg::Connected(text(&b[2..2 + NAME_SZ])),
            ty::DISCONNECT => Msg::Disconnect { code: u32_at(b, 2), reason: text(&b[6..6 + REASON_SZ]) },
            _ => return Err("Unknown message type"),
        })
    }

    /// The 128 bytes of the message.
    pub fn encode(&self) -> [u8; MSG_SIZE] {
        let mut b = [0u8; MSG_SIZE];
        let put16 = |b: &mut [u8; MSG_SIZE], at: usize, v: u16| b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
        let t = match self {
            Msg::Ack => ty::ACK,
            Msg::Hello {
                name,
                min_version,
                max_version,
                max_region,
                max_s2c_ring,
                max_c2s_ring,
                max_log2_ring_size,
            } => {
                put_text(&mut b[2..2 + NAME_SZ], name);
                put16(&mut b, 34, *min_version);
                put16(&mut b, 36, *max_version);
                put16(&mut b, 38, *max_region);
                put16(&mut b, 40, *max_s2c_ring);
                put16(&mut b, 42, *max_c2s_ring);
                b[44] = *max_log2_ring_size;
                ty::HELLO
            }
            Msg::Init { version, id, mode, secret, name } => {
                put16(&mut b, 2, *version);
                b[4..8].copy_from_slice(&id.to_ne_bytes());
                b[8] = *mode;
                b[9..9 + SECRET_SZ].copy_from_slice(secret);
                put_text(&mut b[33..33 + NAME_SZ], name);
                ty::INIT
            }
            Msg::AddRegion { index, size } => {
                put16(&mut b, 2, *index);
                b[4..12].copy_from_slice(&size.to_ne_bytes());
                ty::ADD_REGION
            }
            Msg::AddRing { flags, index, region, offset, log2_ring_size, private_hdr_size } => {
                put16(&mut b, 2, *flags);
                put16(&mut b, 4, *index);
                put16(&mut b, 6, *region);
                b[8..12].copy_from_slice(&offset.to_ne_bytes());
                b[12] = *log2_ring_size;
                put16(&mut b, 13, *private_hdr_size);
                ty::ADD_RING
            }
            Msg::Connect(name) => {
                put_text(&mut b[2..2 + NAME_SZ], name);
                ty::CONNECT
            }
            Msg::Connected(name) => {
                put_text(&mut b[2..2 + NAME_SZ], name);
                ty::CONNECTED
            }
            Msg::Disconnect { code, reason } => {
                b[2..6].copy_from_slice(&code.to_ne_bytes());
                put_text(&mut b[6..6 + REASON_SZ], reason);
                ty::DISCONNECT
            }
        };
        put16(&mut b, 0, t);
        b
    }

    /// The secret field for `s` (NUL-padded, cut at 23 bytes as strlcpy does).
    pub fn secret(s: &str) -> [u8; SECRET_SZ] {
        let mut b = [0u8; SECRET_SZ];
        put_text(&mut b, s);
        b
    }
}

/// Bytes of a ring of `1 << log2` descriptors.
pub fn ring_bytes(log2: u8) -> u64 {
    RING_HDR as u64 + ((DESC_SIZE as u64) << log2)
}

/// A ring the peer added: where it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSpec {
    /// Region index.
    pub region: u16,
    /// Offset in the region (8-byte aligned, the whole ring inside the region).
    pub offset: u32,
    /// Ring size (log2).
    pub log2: u8,
}

/// What the server's side of the handshake knows about itself.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Our interface id.
    pub id: u32,
    /// The secret a client must give, if any.
    pub secret: Option<[u8; SECRET_SZ]>,
    /// Our RX queues (the C2S rings a client may add).
    pub c2s: u16,
    /// Our TX queues (the S2C rings).
    pub s2c: u16,
    /// Our application name in HELLO.
    pub name: String,
}

/// Where the server's side of the handshake stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// HELLO sent, waiting for INIT.
    Init,
    /// INIT accepted: regions and rings, then CONNECT.
    Setup,
    /// CONNECTED sent.
    Connected,
}

/// What to do after a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send this reply.
    Reply(Msg),
    /// Map the rings and, if that works, send `CONNECTED` (the interface is up).
    Connect,
    /// Send `DISCONNECT` with this reason and close the channel.
    Refuse(String),
    /// The peer disconnected with this reason: close the channel.
    Closed(String),
}

/// The server's side of one control channel, from HELLO to CONNECTED and after.
#[derive(Debug, Clone)]
pub struct ServerSession {
    lim: ServerLimits,
    /// Where the handshake stands.
    pub phase: Phase,
    /// Declared region sizes, by index.
    pub regions: Vec<u64>,
    /// C2S rings by index (our RX queues).
    pub c2s: Vec<Option<RingSpec>>,
    /// S2C rings by index (our TX queues).
    pub s2c: Vec<Option<RingSpec>>,
    /// The client's application name (INIT) and interface name (CONNECT).
    pub peer_name: String,
    /// The client's interface name.
    pub peer_if_name: String,
}

impl ServerSession {
    /// A session whose HELLO is [`ServerSession::hello`].
    pub fn new(lim: ServerLimits) -> Self {
        let (c, s) = (usize::from(lim.c2s), usize::from(lim.s2c));
        Self {
            lim,
            phase: Phase::Init,
            regions: Vec::new(),
            c2s: vec![None; c],
            s2c: vec![None; s],
            peer_name: String::new(),
            peer_if_name: String::new(),
        }
    }

    /// The HELLO to send first.
    pub fn hello(&self) -> Msg {
        Msg::Hello {
            name: self.lim.name.clone(),
            min_version: VERSION,
            max_version: VERSION,
            max_region: (MAX_REGIONS - 1) as u16,
            max_s2c_ring: self.lim.s2c.saturating_sub(1),
            max_c2s_ring: self.lim.c2s.saturating_sub(1),
            max_log2_ring_size: MAX_LOG2_RING,
        }
    }

    /// Take message `m`, which came with a file descriptor whose file is `fd_size`
    /// bytes long (`Some(0)` for an eventfd) or without one (`None`).
    pub fn on_msg(&mut self, m: Msg, fd_size: Option<u64>) -> Step {
        let refuse = |s: &str| Step::Refuse(s.to_string());
        match (self.phase, m) {
            (_, Msg::Disconnect { reason, .. }) => Step::Closed(reason),
            (Phase::Init, Msg::Init { version, id, mode, secret, name }) => {
                if version != VERSION {
                    return refuse("Incompatible memif version");
                }
                if id != self.lim.id {
                    return refuse("ID not found");
                }
                if mode != MODE_ETHERNET {
                    return refuse("Only ethernet mode supported");
                }
                if let Some(want) = self.lim.secret {
                    if secret[0] == 0 {
                        return refuse("Secret required");
                    }
                    if secret != want {
                        return refuse("Incorrect secret");
                    }
                }
                self.peer_name = name;
                self.phase = Phase::Setup;
                Step::Reply(Msg::Ack)
            }
            (Phase::Setup, Msg::AddRegion { index, size }) => {
                let Some(file) = fd_size else { return refuse("Missing region fd") };
                if usize::from(index) != self.regions.len() || usize::from(index) >= MAX_REGIONS {
                    return refuse("Invalid region index");
                }
                if size == 0 || size > MAX_REGION_SIZE {
                    return refuse("Invalid region size");
                }
                if size > file {
                    return refuse("Region larger than its file");
                }
                if self.regions.iter().sum::<u64>() + size > MAX_REGIONS_TOTAL {
                    return refuse("Regions too large");
                }
                self.regions.push(size);
                Step::Reply(Msg::Ack)
            }
            (Phase::Setup, Msg::AddRing { flags, index, region, offset, log2_ring_size, .. }) => {
                if fd_size.is_none() {
                    return refuse("Missing interrupt fd");
                }
                let rings = if flags & ADD_RING_FLAG_C2S != 0 { &mut self.c2s } else { &mut self.s2c };
                let Some(slot) = rings.get_mut(usize::from(index)) else { return refuse("Invalid ring index") };
                if slot.is_some() {
                    return refuse("Ring added twice");
                }
                if log2_ring_size > MAX_LOG2_RING {
                    return refuse("Invalid ring size");
                }
                let Some(&rsize) = self.regions.get(usize::from(region)) else {
                    return refuse("Invalid ring region");
                };
                if offset % 8 != 0 || u64::from(offset) + ring_bytes(log2_ring_size) > rsize {
                    return refuse("Ring outside its region");
                }
                *slot = Some(RingSpec { region, offset, log2: log2_ring_size });
                Step::Reply(Msg::Ack)
            }
            (Phase::Setup, Msg::Connect(if_name)) => {
                self.peer_if_name = if_name;
                self.phase = Phase::Connected;
                Step::Connect
            }
            _ => refuse("Unexpected message"),
        }
    }
}

/// What the client runs with, from the server's HELLO and its own configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientRun {
    /// C2S rings (our TX queues the server takes).
    pub c2s: u16,
    /// S2C rings (our RX queues).
    pub s2c: u16,
    /// Ring size (log2).
    pub log2: u8,
}

impl ClientRun {
    /// Agree on rings with the server's HELLO (`want`: our TX and RX queues and ring
    /// size); errors are the reason string for DISCONNECT.
    pub fn agree(hello: &Msg, want: ClientRun) -> Result<ClientRun, &'static str> {
        let Msg::Hello { min_version, max_version, max_s2c_ring, max_c2s_ring, max_log2_ring_size, .. } = *hello else {
            return Err("Unexpected message");
        };
        if min_version > VERSION || max_version < VERSION {
            return Err("Incompatible memif version");
        }
        let run = ClientRun {
            c2s: want.c2s.min(max_c2s_ring.saturating_add(1)),
            s2c: want.s2c.min(max_s2c_ring.saturating_add(1)),
            log2: want.log2.min(max_log2_ring_size),
        };
        Ok(run)
    }
}

/// The client's (copy mode) region 0: every C2S ring, then every S2C ring, then one
/// buffer of `bsize` bytes per descriptor of each ring, in the same order (DPDK's
/// layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The rings.
    pub run: ClientRun,
    /// Buffer size.
    pub bsize: u32,
}

impl Layout {
    fn rings(&self) -> u64 {
        u64::from(self.run.c2s) + u64::from(self.run.s2c)
    }

    /// Offset of ring `i` (`c2s`: client to server).
    pub fn ring_offset(&self, c2s: bool, i: u16) -> u64 {
        let n = if c2s { u64::from(i) } else { u64::from(self.run.c2s) + u64::from(i) };
        n * ring_bytes(self.run.log2)
    }

    /// Offset of the buffer of `slot` in ring `i`.
    pub fn buffer_offset(&self, c2s: bool, i: u16, slot: u16) -> u64 {
        let n = if c2s { u64::from(i) } else { u64::from(self.run.c2s) + u64::from(i) };
        self.rings() * ring_bytes(self.run.log2) + ((n << self.run.log2) + u64::from(slot)) * u64::from(self.bsize)
    }

    /// Size of the region (offsets must fit 32 bits: checked by [`Layout::new`]).
    pub fn size(&self) -> u64 {
        self.rings() * (ring_bytes(self.run.log2) + (u64::from(self.bsize) << self.run.log2))
    }

    /// The layout, if its offsets fit the protocol's 32 bits.
    pub fn new(run: ClientRun, bsize: u32) -> Option<Layout> {
        let l = Layout { run, bsize };
        (l.size() <= u64::from(u32::MAX)).then_some(l)
    }
}

/// A descriptor as read (once) from shared memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Desc {
    /// `DESC_FLAG_NEXT` or 0.
    pub flags: u16,
    /// Region of the buffer.
    pub region: u16,
    /// Bytes in the buffer (or, posted on S2C, its room).
    pub length: u32,
    /// Offset of the buffer in its region.
    pub offset: u32,
    /// Unused.
    pub metadata: u32,
}

impl Desc {
    /// From its 16 bytes.
    pub fn from_bytes(b: [u8; DESC_SIZE]) -> Desc {
        Desc {
            flags: u16_at(&b, 0),
            region: u16_at(&b, 2),
            length: u32_at(&b, 4),
            offset: u32_at(&b, 8),
            metadata: u32_at(&b, 12),
        }
    }

    /// Its 16 bytes.
    pub fn to_bytes(self) -> [u8; DESC_SIZE] {
        let mut b = [0u8; DESC_SIZE];
        b[0..2].copy_from_slice(&self.flags.to_ne_bytes());
        b[2..4].copy_from_slice(&self.region.to_ne_bytes());
        b[4..8].copy_from_slice(&self.length.to_ne_bytes());
        b[8..12].copy_from_slice(&self.offset.to_ne_bytes());
        b[12..16].copy_from_slice(&self.metadata.to_ne_bytes());
        b
    }

    /// From its two 8-byte words (little-endian fields: flags, region, length |
    /// offset, metadata).
    #[inline(always)]
    pub fn from_words(w0: u64, w1: u64) -> Desc {
        Desc {
            flags: w0 as u16,
            region: (w0 >> 16) as u16,
            length: (w0 >> 32) as u32,
            offset: w1 as u32,
            metadata: (w1 >> 32) as u32,
        }
    }

    /// Its two 8-byte words.
    #[inline(always)]
    pub fn to_words(self) -> (u64, u64) {
        (
            u64::from(self.flags) | u64::from(self.region) << 16 | u64::from(self.length) << 32,
            u64::from(self.offset) | u64::from(self.metadata) << 32,
        )
    }

    /// Whether its buffer (`length` bytes at `offset`) lies inside its region, given
    /// the mapped regions' sizes.
    #[inline(always)]
    pub fn fits(&self, regions: &[u64]) -> bool {
        regions
            .get(usize::from(self.region))
            .is_some_and(|&size| u64::from(self.offset) + u64::from(self.length) <= size)
    }
}

/// Entries between a ring's consumer index `from` and producer index `to`, if the
/// peer's index is sane (at most the ring's `size`).
#[inline(always)]
pub fn pending(from: u16, to: u16, size: u32) -> Option<u16> {
    let n = to.wrapping_sub(from);
    (u32::from(n) <= size).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> ServerLimits {
        ServerLimits { id: 7, secret: None, c2s: 2, s2c: 2, name: "ironpath".into() }
    }

    fn init(id: u32, secret: &str) -> Msg {
        Msg::Init { version: VERSION, id, mode: 0, secret: Msg::secret(secret), name: "DPDK 22.11".into() }
    }

    #[test]
    fn messages_round_trip_at_the_documented_offsets() {
        let all = [
            Msg::Ack,
            Msg::Hello {
                name: "x".into(),
                min_version: VERSION,
                max_version: VERSION,
                max_region: 255,
                max_s2c_ring: 3,
                max_c2s_ring: 4,
                max_log2_ring_size: 14,
            },
            init(5, "s3cret"),
            Msg::AddRegion { index: 1, size: 1 << 33 },
            Msg::AddRing { flags: 1, index: 2, region: 0, offset: 4096, log2_ring_size: 10, private_hdr_size: 0 },
            Msg::Connect("memif0".into()),
            Msg::Connected("net_memif0".into()),
            Msg::Disconnect { code: 0, reason: "Device closed".into() },
        ];
        for m in all {
            let b = m.encode();
            assert_eq!(Msg::parse(&b), Ok(m.clone()));
        }
        // The packed layout: INIT's id at 4, mode at 8, secret at 9, name at 33.
        let b = init(0x0102_0304, "ab").encode();
        assert_eq!(
            (u16_at(&b, 0), u16_at(&b, 2), u32_at(&b, 4), b[8], &b[9..11], &b[33..37]),
            (3, 0x0200, 0x0102_0304, 0, &b"ab"[..], &b"DPDK"[..])
        );
        // ADD_RING's offset at 8, log2 at 12; ADD_REGION's 64-bit size at 4.
        let b = Msg::AddRing { flags: 1, index: 2, region: 3, offset: 0x1000, log2_ring_size: 11, private_hdr_size: 0 }
            .encode();
        assert_eq!((u16_at(&b, 2), u16_at(&b, 4), u16_at(&b, 6), u32_at(&b, 8), b[12]), (1, 2, 3, 0x1000, 11));
        assert_eq!(u64_at(&Msg::AddRegion { index: 0, size: 5 << 32 }.encode(), 4), 5 << 32);
        assert_eq!(Msg::parse(&[0; 127]), Err("Invalid message size"));
        assert_eq!(Msg::parse(&[0; 128]), Err("Unknown message type"));
        // A long reason is cut and terminated; control characters are not echoed.
        let m = Msg::Disconnect { code: 1, reason: "x".repeat(200) };
        let Ok(Msg::Disconnect { reason, .. }) = Msg::parse(&m.encode()) else { panic!() };
        assert_eq!(reason.len(), REASON_SZ - 1);
    }

    #[test]
    fn the_server_side_walks_hello_to_connected_and_refuses_the_rest() {
        let mut s = ServerSession::new(lim());
        let Msg::Hello { max_c2s_ring, max_s2c_ring, .. } = s.hello() else { panic!() };
        assert_eq!((max_c2s_ring, max_s2c_ring), (1, 1));
        assert_eq!(
            s.on_msg(Msg::AddRegion { index: 0, size: 10 }, Some(10)),
            Step::Refuse("Unexpected message".into())
        );
        let mut s = ServerSession::new(lim());
        assert_eq!(s.on_msg(init(8, ""), None), Step::Refuse("ID not found".into()));
        let mut s = ServerSession::new(lim());
        assert_eq!(s.on_msg(init(7, ""), None), Step::Reply(Msg::Ack));
        assert_eq!(
            s.on_msg(Msg::AddRegion { index: 0, size: 1 << 20 }, None),
            Step::Refuse("Missing region fd".into())
        );
        assert_eq!(
            s.on_msg(Msg::AddRegion { index: 0, size: 1 << 20 }, Some(4096)),
            Step::Refuse("Region larger than its file".into())
        );
        assert_eq!(
            s.on_msg(Msg::AddRegion { index: 1, size: 1 << 20 }, Some(1 << 20)),
            Step::Refuse("Invalid region index".into())
        );
        assert_eq!(s.on_msg(Msg::AddRegion { index: 0, size: 1 << 20 }, Some(1 << 20)), Step::Reply(Msg::Ack));
        // Four more regions of 64 GiB would make the total more than 256 GiB.
        let mut t = s.clone();
        for i in 1..4 {
            let r = Msg::AddRegion { index: i, size: MAX_REGION_SIZE };
            assert_eq!(t.on_msg(r, Some(MAX_REGION_SIZE)), Step::Reply(Msg::Ack));
        }
        let r = Msg::AddRegion { index: 4, size: MAX_REGION_SIZE };
        assert_eq!(t.on_msg(r, Some(MAX_REGION_SIZE)), Step::Refuse("Regions too large".into()));
        let ring = |flags, index, offset, log2| Msg::AddRing {
            flags,
            index,
            region: 0,
            offset,
            log2_ring_size: log2,
            private_hdr_size: 0,
        };
        assert_eq!(s.on_msg(ring(1, 0, 0, 10), None), Step::Refuse("Missing interrupt fd".into()));
        assert_eq!(s.on_msg(ring(1, 2, 0, 10), Some(0)), Step::Refuse("Invalid ring index".into()));
        assert_eq!(s.on_msg(ring(1, 0, 4, 10), Some(0)), Step::Refuse("Ring outside its region".into()));
        assert_eq!(s.on_msg(ring(1, 0, (1 << 20) - 128, 0), Some(0)), Step::Refuse("Ring outside its region".into()));
        assert_eq!(s.on_msg(ring(1, 0, 0, 15), Some(0)), Step::Refuse("Invalid ring size".into()));
        assert_eq!(s.on_msg(ring(1, 0, 0, 10), Some(0)), Step::Reply(Msg::Ack));
        assert_eq!(s.on_msg(ring(1, 0, 0, 10), Some(0)), Step::Refuse("Ring added twice".into()));
        assert_eq!(s.on_msg(ring(0, 0, 16512, 10), Some(0)), Step::Reply(Msg::Ack));
        assert_eq!(s.on_msg(Msg::Connect("memif0".into()), None), Step::Connect);
        assert_eq!(s.c2s[0], Some(RingSpec { region: 0, offset: 0, log2: 10 }));
        assert_eq!(s.on_msg(Msg::Ack, None), Step::Refuse("Unexpected message".into()));
        assert_eq!(s.on_msg(Msg::Disconnect { code: 0, reason: "bye".into() }, None), Step::Closed("bye".into()));
    }

    #[test]
    fn secrets_versions_and_modes_are_checked() {
        let mut l = lim();
        l.secret = Some(Msg::secret("pw"));
        assert_eq!(ServerSession::new(l.clone()).on_msg(init(7, ""), None), Step::Refuse("Secret required".into()));
        assert_eq!(ServerSession::new(l.clone()).on_msg(init(7, "px"), None), Step::Refuse("Incorrect secret".into()));
        assert_eq!(ServerSession::new(l).on_msg(init(7, "pw"), None), Step::Reply(Msg::Ack));
        let old = Msg::Init { version: 0x0100, id: 7, mode: 0, secret: [0; 24], name: String::new() };
        assert_eq!(ServerSession::new(lim()).on_msg(old, None), Step::Refuse("Incompatible memif version".into()));
        let ip = Msg::Init { version: VERSION, id: 7, mode: 1, secret: [0; 24], name: String::new() };
        assert_eq!(ServerSession::new(lim()).on_msg(ip, None), Step::Refuse("Only ethernet mode supported".into()));
    }

    #[test]
    fn the_client_takes_the_smaller_of_both_sides_and_lays_out_dpdks_region() {
        let hello = ServerSession::new(lim()).hello();
        let run = ClientRun::agree(&hello, ClientRun { c2s: 4, s2c: 1, log2: 10 }).unwrap();
        assert_eq!(run, ClientRun { c2s: 2, s2c: 1, log2: 10 });
        let l = Layout::new(run, 2048).unwrap();
        assert_eq!(ring_bytes(10), 128 + 16 * 1024);
        assert_eq!(l.ring_offset(false, 0), 2 * ring_bytes(10));
        assert_eq!(l.buffer_offset(true, 0, 0), 3 * ring_bytes(10));
        assert_eq!(l.buffer_offset(false, 0, 1), 3 * ring_bytes(10) + (2048 + 1) * 2048);
        assert_eq!(l.size(), l.buffer_offset(false, 0, 1023) + 2048);
        assert!(Layout::new(ClientRun { c2s: 255, s2c: 255, log2: 14 }, 65535).is_none());
        let Msg::Hello { .. } = hello else { panic!() };
        let old = Msg::Hello {
            name: String::new(),
            min_version: 0x0100,
            max_version: 0x0100,
            max_region: 0,
            max_s2c_ring: 0,
            max_c2s_ring: 0,
            max_log2_ring_size: 10,
        };
        assert_eq!(ClientRun::agree(&old, run), Err("Incompatible memif version"));
    }

    #[test]
    fn descriptors_must_lie_inside_their_region_and_indexes_inside_the_ring() {
        let regions = [4096u64, 1 << 20];
        let d = |region, offset, length| Desc { flags: 0, region, length, offset, metadata: 0 };
        assert!(d(0, 2048, 2048).fits(&regions));
        assert!(!d(0, 2049, 2048).fits(&regions));
        assert!(!d(2, 0, 1).fits(&regions));
        assert!(!d(1, u32::MAX, u32::MAX).fits(&regions));
        assert_eq!(Desc::from_bytes(d(1, 2, 3).to_bytes()), d(1, 2, 3));
        let (w0, w1) = d(1, 2, 3).to_words();
        assert_eq!(Desc::from_words(w0, w1), d(1, 2, 3));
        // The words are the 16 bytes read as two little-endian u64.
        let b = d(1, 2, 3).to_bytes();
        assert_eq!(
            (u64::from_le_bytes(b[..8].try_into().unwrap()), u64::from_le_bytes(b[8..].try_into().unwrap())),
            (w0, w1)
        );
        assert_eq!(pending(65530, 4, 1024), Some(10));
        assert_eq!(pending(0, 1025, 1024), None);
        assert_eq!(pending(5, 4, 1024), None);
    }
}
