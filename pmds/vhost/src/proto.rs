//! The vhost-user protocol as QEMU and DPDK speak it: a 12-byte header (request,
//! flags, payload size, little-endian), a payload of the request's type, and file
//! descriptors passed with the header (`SCM_RIGHTS`). Pure parsing and encoding; the
//! control thread ([`crate::ctl`]) acts on what [`parse`] returns.
//!
//! Everything here comes from the front end (QEMU, a virtio-user process), which is
//! not trusted: sizes are checked against the request's payload type, region and
//! queue counts against our limits, and descriptors counted against what the
//! request carries.

/// Size of the header.
pub const HDR_SIZE: usize = 12;
/// The largest payload we read (a memory table of [`MAX_REGIONS`] is 264 bytes).
pub const MAX_PAYLOAD: usize = 512;
/// Most memory regions in one table (the protocol's limit).
pub const MAX_REGIONS: usize = 8;
/// Header flags: the protocol version (low two bits).
pub const VERSION: u32 = 0x1;
/// Header flags: a reply.
pub const F_REPLY: u32 = 0x4;
/// Header flags: the front end wants an acknowledgement (`REPLY_ACK`).
pub const F_NEED_REPLY: u32 = 0x8;

/// Device feature bits we may offer (virtio-net and virtio).
pub mod feat {
    /// The device completes partial checksums (guest TX checksum offload).
    pub const CSUM: u32 = 0;
    /// The driver completes partial checksums (we may send partial checksums).
    pub const GUEST_CSUM: u32 = 1;
    /// The config space's MTU field is valid.
    pub const MTU: u32 = 3;
    /// The config space holds a MAC.
    pub const MAC: u32 = 5;
    /// The driver takes TCPv4 segments larger than the MTU.
    pub const GUEST_TSO4: u32 = 7;
    /// The driver takes TCPv6 segments larger than the MTU.
    pub const GUEST_TSO6: u32 = 8;
    /// The device takes TCPv4 segments larger than the MTU (guest TSO).
    pub const HOST_TSO4: u32 = 11;
    /// The device takes TCPv6 segments larger than the MTU.
    pub const HOST_TSO6: u32 = 12;
    /// Receive buffers may be merged (`num_buffers` in the header).
    pub const MRG_RXBUF: u32 = 15;
    /// The config space holds a link status.
    pub const STATUS: u32 = 16;
    /// A control virtqueue (handled by the front end over vhost-user).
    pub const CTRL_VQ: u32 = 17;
    /// Several queue pairs.
    pub const MQ: u32 = 22;
    /// Descriptors of any layout (header and data in one buffer, or not).
    pub const ANY_LAYOUT: u32 = 27;
    /// Indirect descriptor tables.
    pub const INDIRECT_DESC: u32 = 28;
    /// vhost-user: protocol features are negotiated.
    pub const PROTOCOL_FEATURES: u32 = 30;
    /// virtio 1.0.
    pub const VERSION_1: u32 = 32;
    /// Buffers are used in the order they were made available (we always do: every
    /// chain is returned in ring order), which lets the driver take its in-order
    /// paths (DPDK's virtio PMD: one descriptor a packet, no free list).
    pub const IN_ORDER: u32 = 35;
}

/// Protocol feature bits.
pub mod pfeat {
    /// Several queue pairs (`GET_QUEUE_NUM`).
    pub const MQ: u32 = 0;
    /// Acknowledgements on request (`F_NEED_REPLY`).
    pub const REPLY_ACK: u32 = 3;
}

/// The features we offer: checksum and segmentation offloads both ways, merged
/// receive buffers, several queue pairs, indirect tables, virtio 1.0, in-order use.
pub const OFFERED: u64 = bits(&[
    feat::CSUM,
    feat::GUEST_CSUM,
    feat::GUEST_TSO4,
    feat::GUEST_TSO6,
    feat::HOST_TSO4,
    feat::HOST_TSO6,
    feat::MRG_RXBUF,
    feat::CTRL_VQ,
    feat::MQ,
    feat::ANY_LAYOUT,
    feat::INDIRECT_DESC,
    feat::PROTOCOL_FEATURES,
    feat::VERSION_1,
    feat::IN_ORDER,
]);

/// The protocol features we offer.
pub const OFFERED_PROTOCOL: u64 = bits(&[pfeat::MQ, pfeat::REPLY_ACK]);

/// A mask of feature bits.
pub const fn bits(b: &[u32]) -> u64 {
    let mut m = 0u64;
    let mut i = 0;
    while i < b.len() {
        m |= 1 << b[i];
        i += 1;
    }
    m
}

/// Whether `features` has bit `b`.
pub fn has(features: u64, b: u32) -> bool {
    features & (1 << b) != 0
}

/// The requests we know (front end to back end).
pub mod req {
    pub const GET_FEATURES: u32 = 1;
    pub const SET_FEATURES: u32 = 2;
    pub const SET_OWNER: u32 = 3;
    pub const RESET_OWNER: u32 = 4;
    pub const SET_MEM_TABLE: u32 = 5;
    pub const SET_LOG_BASE: u32 = 6;
    pub const SET_LOG_FD: u32 = 7;
    pub const SET_VRING_NUM: u32 = 8;
    pub const SET_VRING_ADDR: u32 = 9;
    pub const SET_VRING_BASE: u32 = 10;
    pub const GET_VRING_BASE: u32 = 11;
    pub const SET_VRING_KICK: u32 = 12;
    pub const SET_VRING_CALL: u32 = 13;
    pub const SET_VRING_ERR: u32 = 14;
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    pub const GET_QUEUE_NUM: u32 = 17;
    pub const SET_VRING_ENABLE: u32 = 18;
    pub const SEND_RARP: u32 = 19;
    pub const NET_SET_MTU: u32 = 20;
}

/// One region of the front end's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Guest physical address of its first byte (what descriptors name).
    pub gpa: u64,
    /// Length in bytes.
    pub size: u64,
    /// Its address in the front end's process (what ring addresses name).
    pub uaddr: u64,
    /// Where it starts in the file passed with it.
    pub offset: u64,
}

/// A ring's addresses (front-end process addresses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingAddr {
    /// Descriptor table.
    pub desc: u64,
    /// Used ring.
    pub used: u64,
    /// Available ring.
    pub avail: u64,
}

/// A request, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// A request without payload we act on (`SET_OWNER`, `RESET_OWNER`, the getters).
    Plain(u32),
    /// A request with a 64-bit payload (features, `NET_SET_MTU`, `SEND_RARP`).
    U64(u32, u64),
    /// `SET_VRING_NUM`, `SET_VRING_BASE`, `GET_VRING_BASE`, `SET_VRING_ENABLE`: a ring
    /// index and a number.
    State(u32, u32, u32),
    /// `SET_VRING_ADDR`.
    Addr(u32, RingAddr),
    /// `SET_VRING_KICK`, `SET_VRING_CALL`, `SET_VRING_ERR`: the ring, and whether a
    /// descriptor came (else the ring is polled, `VHOST_USER_VRING_NOFD_MASK`).
    Fd(u32, u32, bool),
    /// `SET_MEM_TABLE`: one descriptor per region, in order.
    MemTable(Vec<Region>),
    /// A request we do not know or do not take (logging): answered with a failure
    /// when the front end asked for an acknowledgement.
    Unknown(u32),
}

/// Why a message was refused (the connection is closed after any of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Header flags name another protocol version.
    Version,
    /// The payload's size does not suit the request.
    Size,
    /// More regions than the protocol allows, or none.
    Regions,
    /// A region of zero bytes, or one whose addresses wrap.
    Region,
    /// The number of descriptors does not suit the request.
    Fds,
}

impl Error {
    /// What to log and count.
    pub fn as_str(self) -> &'static str {
        match self {
            Error::Version => "unsupported protocol version",
            Error::Size => "payload size does not suit the request",
            Error::Regions => "memory table with no or too many regions",
            Error::Region => "memory region empty or wrapping",
            Error::Fds => "wrong number of file descriptors",
        }
    }
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// A header: (request, flags, payload size), or why it is refused.
pub fn header(h: &[u8; HDR_SIZE]) -> Result<(u32, u32, usize), Error> {
    let (request, flags, size) = (le32(h, 0), le32(h, 4), le32(h, 8) as usize);
    if flags & 3 != VERSION {
        return Err(Error::Version);
    }
    if size > MAX_PAYLOAD {
        return Err(Error::Size);
    }
    Ok((request, flags, size))
}

/// Parse the payload `p` of `request`, which came with `nfds` descriptors.
pub fn parse(request: u32, p: &[u8], nfds: usize) -> Result<Msg, Error> {
    let need = |n: usize| if p.len() >= n { Ok(()) } else { Err(Error::Size) };
    let no_fds = || if nfds == 0 { Ok(()) } else { Err(Error::Fds) };
    match request {
        req::GET_FEATURES | req::GET_PROTOCOL_FEATURES | req::GET_QUEUE_NUM | req::SET_OWNER | req::RESET_OWNER => {
            no_fds()?;
            Ok(Msg::Plain(request))
        }
        req::SET_FEATURES | req::SET_PROTOCOL_FEATURES | req::NET_SET_MTU | req::SEND_RARP => {
            need(8)?;
            no_fds()?;
            Ok(Msg::U64(request, le64(p, 0)))
        }
        req::SET_VRING_NUM | req::SET_VRING_BASE | req::GET_VRING_BASE | req::SET_VRING_ENABLE => {
            need(8)?;
            no_fds()?;
            Ok(Msg::State(request, le32(p, 0), le32(p, 4)))
        }
        req::SET_VRING_ADDR => {
            need(40)?;
            no_fds()?;
            let a = RingAddr { desc: le64(p, 8), used: le64(p, 16), avail: le64(p, 24) };
            Ok(Msg::Addr(le32(p, 0), a))
        }
        req::SET_VRING_KICK | req::SET_VRING_CALL | req::SET_VRING_ERR => {
            need(8)?;
            let v = le64(p, 0);
            let nofd = v & 0x100 != 0;
            if nfds != usize::from(!nofd) {
                return Err(Error::Fds);
            }
            Ok(Msg::Fd(request, (v & 0xff) as u32, !nofd))
        }
        req::SET_MEM_TABLE => {
            need(8)?;
            let n = le32(p, 0) as usize;
            if n == 0 || n > MAX_REGIONS {
                return Err(Error::Regions);
            }
            need(8 + 32 * n)?;
            if nfds != n {
                return Err(Error::Fds);
            }
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                let o = 8 + 32 * i;
                let r =
                    Region { gpa: le64(p, o), size: le64(p, o + 8), uaddr: le64(p, o + 16), offset: le64(p, o + 24) };
                let wraps = |a: u64| a.checked_add(r.size).is_none();
                if r.size == 0 || wraps(r.gpa) || wraps(r.uaddr) || wraps(r.offset) {
                    return Err(Error::Region);
                }
                v.push(r);
            }
            Ok(Msg::MemTable(v))
        }
        _ => Ok(Msg::Unknown(request)),
    }
}

/// A reply to `request` carrying `payload`.
pub fn reply(request: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HDR_SIZE + payload.len());
    b.extend_from_slice(&request.to_le_bytes());
    b.extend_from_slice(&(VERSION | F_REPLY).to_le_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// A reply carrying a 64-bit number (features, queue count, an acknowledgement: 0
/// for success).
pub fn reply_u64(request: u32, v: u64) -> Vec<u8> {
    reply(request, &v.to_le_bytes())
}

/// A reply carrying a ring state (`GET_VRING_BASE`).
pub fn reply_state(request: u32, index: u32, num: u32) -> Vec<u8> {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&index.to_le_bytes());
    p[4..].copy_from_slice(&num.to_le_bytes());
    reply(request, &p)
}

/// A request as a front end sends it (for tests and the hostile peer).
pub fn request(request: u32, flags: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HDR_SIZE + payload.len());
    b.extend_from_slice(&request.to_le_bytes());
    b.extend_from_slice(&(VERSION | flags).to_le_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// A memory table's payload.
pub fn mem_table(regions: &[Region]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + 32 * regions.len());
    p.extend_from_slice(&(regions.len() as u32).to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    for r in regions {
        for v in [r.gpa, r.size, r.uaddr, r.offset] {
            p.extend_from_slice(&v.to_le_bytes());
        }
    }
    p
}

/// A ring address payload.
pub fn ring_addr(index: u32, a: RingAddr) -> Vec<u8> {
    let mut p = Vec::with_capacity(40);
    p.extend_from_slice(&index.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    for v in [a.desc, a.used, a.avail, 0] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p
}

/// A ring state payload.
pub fn state(index: u32, num: u32) -> Vec<u8> {
    let mut p = index.to_le_bytes().to_vec();
    p.extend_from_slice(&num.to_le_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_refused() {
        let regions = [Region { gpa: 0, size: 4096, uaddr: 0x7000_0000, offset: 0 }];
        let m = request(req::SET_MEM_TABLE, F_NEED_REPLY, &mem_table(&regions));
        let (r, f, n) = header(m[..HDR_SIZE].try_into().unwrap()).unwrap();
        assert_eq!((r, f & F_NEED_REPLY, n), (req::SET_MEM_TABLE, F_NEED_REPLY, 40));
        assert_eq!(parse(r, &m[HDR_SIZE..], 1), Ok(Msg::MemTable(regions.to_vec())));
        assert_eq!(parse(r, &m[HDR_SIZE..], 0), Err(Error::Fds));
        assert_eq!(parse(r, &m[HDR_SIZE..m.len() - 1], 1), Err(Error::Size));
        let wrap = [Region { gpa: u64::MAX - 10, size: 4096, uaddr: 0, offset: 0 }];
        assert_eq!(parse(r, &mem_table(&wrap), 1), Err(Error::Region));
        assert_eq!(parse(r, &mem_table(&[]), 0), Err(Error::Regions));
        let a = RingAddr { desc: 1, used: 2, avail: 3 };
        assert_eq!(parse(req::SET_VRING_ADDR, &ring_addr(1, a), 0), Ok(Msg::Addr(1, a)));
        assert_eq!(parse(req::SET_VRING_KICK, &0x101u64.to_le_bytes(), 0), Ok(Msg::Fd(req::SET_VRING_KICK, 1, false)));
        assert_eq!(parse(req::SET_VRING_KICK, &1u64.to_le_bytes(), 1), Ok(Msg::Fd(req::SET_VRING_KICK, 1, true)));
        assert_eq!(parse(req::SET_VRING_CALL, &1u64.to_le_bytes(), 0), Err(Error::Fds));
        assert_eq!(parse(req::GET_FEATURES, &[], 1), Err(Error::Fds));
        assert_eq!(parse(77, &[], 0), Ok(Msg::Unknown(77)));
        let mut h = [0u8; HDR_SIZE];
        h[4] = 2;
        assert_eq!(header(&h), Err(Error::Version));
        h[4] = 1;
        h[8..12].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(header(&h), Err(Error::Size));
    }

    #[test]
    fn every_truncation_of_every_request_is_parsed_or_refused() {
        let full = [0xabu8; 300];
        for request in 0..30 {
            for len in 0..full.len() {
                for nfds in 0..3 {
                    let _ = parse(request, &full[..len], nfds);
                }
            }
        }
    }
}
