//! The Linux system interface of the af_packet PMD: sockets, rings, interface ioctls.
//! Offsets of the kernel's ring structures (`linux/if_packet.h`) are named here once.

use std::io::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};

use ironpath_pmd_sdk::linux::cvt;
pub use ironpath_pmd_sdk::linux::{
    hwaddr, iface_flags, ifindex, mtu, promisc_membership as promisc, set_iface_flag, set_mtu, Fd,
};

pub use ironpath_pmd_sdk::tpacket::{BLK_STATUS, H3_LEN, H3_MAC, H3_SNAPLEN, H3_STATUS};
/// `tpacket2_hdr.tp_status`.
pub const H2_STATUS: usize = 0;
/// `tpacket2_hdr.tp_len`.
pub const H2_LEN: usize = 4;
/// `tpacket2_hdr.tp_snaplen`.
pub const H2_SNAPLEN: usize = 8;
/// `tpacket2_hdr.tp_mac` (offset of the frame from the header).
pub const H2_MAC: usize = 12;
/// `tpacket2_hdr.tp_vlan_tci`.
pub const H2_VLAN_TCI: usize = 24;
/// `tpacket2_hdr.tp_vlan_tpid`.
pub const H2_VLAN_TPID: usize = 26;
/// Size of `tpacket2_hdr`: a frame's `tp_mac` lies beyond it.
pub const H2_HDR_LEN: usize = 32;
/// Where the kernel takes a V2 TX frame's data: TPACKET2_HDRLEN - sizeof(sockaddr_ll).
pub const TX_DATA_OFF: usize = 32;

const _: () = {
    assert!(std::mem::size_of::<libc::tpacket2_hdr>() == 32);
    assert!(std::mem::offset_of!(libc::tpacket3_hdr, tp_snaplen) == H3_SNAPLEN);
    assert!(std::mem::offset_of!(libc::tpacket3_hdr, tp_len) == H3_LEN);
    assert!(std::mem::offset_of!(libc::tpacket3_hdr, tp_status) == H3_STATUS);
    assert!(std::mem::offset_of!(libc::tpacket3_hdr, tp_mac) == H3_MAC);
    assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_len) == H2_LEN);
    assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_snaplen) == H2_SNAPLEN);
    assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_mac) == H2_MAC);
    assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_vlan_tci) == H2_VLAN_TCI);
    assert!(std::mem::offset_of!(libc::tpacket2_hdr, tp_vlan_tpid) == H2_VLAN_TPID);
};

/// A shared mapping of a packet ring, unmapped on drop.
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; the queue that owns it
// is used by one thread at a time.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: mapped by `map_ring` with this length; no reference outlives the queue.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// An AF_PACKET raw socket bound to `ifindex`: receiving every protocol, or (for a
/// socket that only sends) none. A send-only socket bound to ETH_P_ALL would also get
/// a clone of every frame the interface receives and of every frame we send (the
/// kernel's taps run for each), queued until its receive buffer fills and then dropped,
/// per frame, for nothing. The kernel reads a sent frame's protocol from its Ethernet
/// header.
pub fn packet_socket(ifindex: i32, receive: bool) -> Result<Fd> {
    let proto = if receive { (libc::ETH_P_ALL as u16).to_be() } else { 0 };
    // SAFETY: plain socket(2) call.
    let fd = Fd::from_raw(cvt(unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(proto))
    })?);
    // SAFETY: zeroed sockaddr_ll is valid; we fill the fields bind needs.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll of the size given.
    cvt(unsafe {
        libc::bind(fd.raw(), (&sll as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32)
    })?;
    Ok(fd)
}

/// setsockopt(SOL_PACKET, opt, int).
pub fn set_int(fd: &Fd, opt: i32, v: i32) -> Result<()> {
    // SAFETY: `v` is a valid int for the call's duration.
    cvt(unsafe { libc::setsockopt(fd.raw(), libc::SOL_PACKET, opt, (&v as *const i32).cast(), 4) })?;
    Ok(())
}

/// The socket's send buffer: SO_SNDBUFFORCE (CAP_NET_ADMIN: past `wmem_max`), else
/// SO_SNDBUF (capped at `net.core.wmem_max`). The kernel doubles the value, as for
/// any socket. Returns the size the kernel reports.
pub fn set_sndbuf(fd: &Fd, bytes: i32) -> Result<i32> {
    let set = |opt: i32| {
        // SAFETY: `bytes` is a valid int for the call's duration.
        cvt(unsafe { libc::setsockopt(fd.raw(), libc::SOL_SOCKET, opt, (&bytes as *const i32).cast(), 4) })
    };
    if set(libc::SO_SNDBUFFORCE).is_err() {
        set(libc::SO_SNDBUF)?;
    }
    let mut v: i32 = 0;
    let mut len: libc::socklen_t = 4;
    // SAFETY: `v` and `len` are valid for writing; `len` is v's size.
    cvt(unsafe {
        libc::getsockopt(fd.raw(), libc::SOL_SOCKET, libc::SO_SNDBUF, (&mut v as *mut i32).cast(), &mut len)
    })?;
    Ok(v)
}

fn set_struct<T>(fd: &Fd, opt: i32, v: &T) -> Result<()> {
    // SAFETY: `v` is a valid T of the size given.
    cvt(unsafe {
        libc::setsockopt(fd.raw(), libc::SOL_PACKET, opt, (v as *const T).cast(), std::mem::size_of::<T>() as u32)
    })?;
    Ok(())
}

fn map_ring(fd: &Fd, len: usize) -> Result<Mmap> {
    // SAFETY: mapping the socket's ring as the kernel documents (shared, read/write).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
            fd.raw(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        // MAP_LOCKED may exceed RLIMIT_MEMLOCK for non-root: retry without it.
        // SAFETY: as above.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.raw(), 0)
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os_error());
        }
        return Ok(Mmap { ptr: p.cast(), len });
    }
    Ok(Mmap { ptr: p.cast(), len })
}

/// Set up and map a TPACKET_V3 RX ring.
pub fn rx_ring_v3(fd: &Fd, blocksz: u32, nblocks: u32, framesz: u32, tov_ms: u32) -> Result<Mmap> {
    set_int(fd, libc::PACKET_VERSION, libc::tpacket_versions::TPACKET_V3 as i32)?;
    let req = libc::tpacket_req3 {
        tp_block_size: blocksz,
        tp_block_nr: nblocks,
        tp_frame_size: framesz,
        tp_frame_nr: blocksz / framesz * nblocks,
        tp_retire_blk_tov: tov_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: libc::TP_FT_REQ_FILL_RXHASH,
    };
    set_struct(fd, libc::PACKET_RX_RING, &req)?;
    map_ring(fd, blocksz as usize * nblocks as usize)
}

/// Set up and map a TPACKET_V2 TX ring of `framecnt` frames.
pub fn tx_ring_v2(fd: &Fd, blocksz: u32, framesz: u32, framecnt: u32) -> Result<Mmap> {
    ring_v2(fd, libc::PACKET_TX_RING, blocksz, framesz, framecnt)
}

/// Set up and map a TPACKET_V2 RX ring of `framecnt` frames (each handed over as it
/// is filled; `blocksz` is a multiple of `framesz`, so the frames are contiguous).
pub fn rx_ring_v2(fd: &Fd, blocksz: u32, framesz: u32, framecnt: u32) -> Result<Mmap> {
    ring_v2(fd, libc::PACKET_RX_RING, blocksz, framesz, framecnt)
}

fn ring_v2(fd: &Fd, which: i32, blocksz: u32, framesz: u32, framecnt: u32) -> Result<Mmap> {
    set_int(fd, libc::PACKET_VERSION, libc::tpacket_versions::TPACKET_V2 as i32)?;
    let per_block = blocksz / framesz;
    let nblocks = framecnt.div_ceil(per_block);
    let req = libc::tpacket_req {
        tp_block_size: blocksz,
        tp_block_nr: nblocks,
        tp_frame_size: framesz,
        tp_frame_nr: per_block * nblocks,
    };
    set_struct(fd, which, &req)?;
    map_ring(fd, blocksz as usize * nblocks as usize)
}

/// Ask the kernel to send every frame marked SEND_REQUEST (non-blocking).
pub fn kick(fd: &Fd) {
    // SAFETY: a zero-length send with no buffer is how a TX ring is flushed.
    let _ = unsafe { libc::send(fd.raw(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
}

/// `sendmsg` of one packet gathered from `iov`, without blocking; the bytes sent.
pub fn send_iov(fd: &Fd, iov: &[libc::iovec]) -> Result<usize> {
    // SAFETY: zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len();
    // SAFETY: `msg` points at `iov`, whose entries the caller made valid for reading.
    let n = unsafe { libc::sendmsg(fd.raw(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Kernel drops since the last call (PACKET_STATISTICS resets the counters).
pub fn take_drops(fd: &Fd) -> Result<u64> {
    // SAFETY: zeroed stats are valid; the kernel fills at most `len` bytes.
    let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as u32;
    // SAFETY: valid out-pointers of the given size.
    cvt(unsafe {
        libc::getsockopt(
            fd.raw(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    })?;
    Ok(u64::from(st.tp_drops))
}

/// Add or drop a unicast address filter on the interface (the kernel receives
/// frames for `mac` too), held by the socket `fd`.
pub fn unicast(fd: &Fd, ifindex: i32, mac: [u8; 6], on: bool) -> Result<()> {
    // SAFETY: zeroed packet_mreq is valid.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex;
    mr.mr_type = libc::PACKET_MR_UNICAST as u16;
    mr.mr_alen = 6;
    mr.mr_address[..6].copy_from_slice(&mac);
    let opt = if on { libc::PACKET_ADD_MEMBERSHIP } else { libc::PACKET_DROP_MEMBERSHIP };
    set_struct(fd, opt, &mr)
}

/// Load a ring status word with acquire ordering.
///
/// # Safety
/// `p` points to a 4-byte aligned u32 inside a live ring mapping.
#[inline(always)]
pub unsafe fn load_acquire_u32(p: *mut u8) -> u32 {
    // SAFETY: caller's contract; the kernel updates this word concurrently, so it is
    // accessed atomically.
    unsafe { (*p.cast::<AtomicU32>()).load(Ordering::Acquire) }
}

/// Store a ring status word with release ordering (hands the slot to the kernel).
///
/// # Safety
/// As for [`load_acquire_u32`].
#[inline(always)]
pub unsafe fn store_release_u32(p: *mut u8, v: u32) {
    // SAFETY: caller's contract.
    unsafe { (*p.cast::<AtomicU32>()).store(v, Ordering::Release) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sndbuf_is_raised_past_the_default() {
        // SAFETY: a plain socket call; the descriptor is owned by `Fd` below.
        let fd = Fd::from_raw(cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) }).unwrap());
        let want = 4 << 20;
        let got = set_sndbuf(&fd, want).unwrap();
        let wmem_max: i32 =
            std::fs::read_to_string("/proc/sys/net/core/wmem_max").map_or(0, |s| s.trim().parse().unwrap_or(0));
        if got < 2 * want {
            // Without CAP_NET_ADMIN the kernel caps SO_SNDBUF at wmem_max (then doubles it).
            assert_eq!(got, 2 * wmem_max.min(want));
        }
        assert!(got >= 2 * wmem_max.min(want));
    }
}

/// `bpf(2)` commands, program type, attach type and return code used below
/// (`linux/bpf.h`, `linux/pkt_cls.h`).
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
const BPF_TCX_INGRESS: u32 = 46;
const TC_ACT_SHOT: i32 = 2;

/// One `struct bpf_insn`: opcode, dst/src registers (4 bits each), offset, immediate.
#[repr(C)]
struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// The part of `union bpf_attr` that `BPF_PROG_LOAD` reads (zero beyond).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The part of `union bpf_attr` that `BPF_LINK_CREATE` reads for a tcx link.
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    _pad: u32,
    expected_revision: u64,
}

const _: () = {
    assert!(std::mem::offset_of!(ProgLoadAttr, prog_name) == 48);
    assert!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type) == 68);
    assert!(std::mem::offset_of!(LinkCreateAttr, attach_type) == 8);
    assert!(std::mem::size_of::<BpfInsn>() == 8);
};

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> Result<Fd> {
    // SAFETY: `attr` is a valid, fully initialised attribute block of the size passed;
    // the kernel reads it (and zero-fills what lies beyond it).
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>() as u32) };
    if rc < 0 {
        return Err(Error::last_os_error());
    }
    Ok(Fd::from_raw(rc as i32))
}

/// Stop the kernel's own stack from receiving what arrives on interface `ifindex`:
/// a two-instruction tc program (`return TC_ACT_SHOT`) attached at the interface's
/// tcx ingress hook, which runs after the AF_PACKET taps have taken their copy and
/// before IP, ARP and the rest. Returns the link: closing it (the port closes, or the
/// process exits however it does) detaches the program. Needs Linux 6.6 (tcx) and
/// CAP_BPF + CAP_NET_ADMIN.
pub fn drop_kernel_ingress(ifindex: i32) -> Result<Fd> {
    let insns = [
        // r0 = TC_ACT_SHOT (BPF_ALU64 | BPF_MOV | BPF_K)
        BpfInsn { code: 0xb7, regs: 0, off: 0, imm: TC_ACT_SHOT },
        // return r0 (BPF_JMP | BPF_EXIT)
        BpfInsn { code: 0x95, regs: 0, off: 0, imm: 0 },
    ];
    let license = c"Dual MIT/GPL";
    let mut name = [0u8; 16];
    name[..15].copy_from_slice(b"ironpath_kdrop\0");
    let mut load = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SCHED_CLS,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..Default::default()
    };
    let prog = bpf(BPF_PROG_LOAD, &mut load)?;
    let mut link = LinkCreateAttr {
        prog_fd: prog.raw() as u32,
        target_ifindex: ifindex as u32,
        attach_type: BPF_TCX_INGRESS,
        ..Default::default()
    };
    // The link holds the program; its own descriptor (`prog`) closes here.
    bpf(BPF_LINK_CREATE, &mut link)
}
