//! The Linux system interface of the AF_XDP PMD: the XDP socket, its UMEM and four
//! rings, and the XDP program that redirects an interface's queues into the sockets
//! (raw `bpf(2)` calls, as the af_packet PMD's tcx program: eleven instructions and
//! one map need no loader library).

use std::io::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};

use ironpath_pmd_sdk::linux::cvt;
pub use ironpath_pmd_sdk::linux::{
    hwaddr, iface_flags, ifindex, membership_socket, mtu, promisc_membership, set_iface_flag, set_mtu, Fd,
};

/// `AF_XDP`.
const AF_XDP: i32 = 44;

/// An XDP socket.
pub fn xsk_socket() -> Result<Fd> {
    // SAFETY: plain socket(2) call; the descriptor is owned by `Fd`.
    Ok(Fd::from_raw(cvt(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?))
}

/// `setsockopt(fd, level, opt, &v)` with `v`'s full size.
fn setsockopt<T>(fd: &Fd, level: i32, opt: i32, v: &T) -> Result<()> {
    // SAFETY: `v` is a valid, initialised `T` of the size passed.
    cvt(unsafe {
        libc::setsockopt(fd.raw(), level, opt, (v as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    })
    .map(drop)
}

/// Register `len` bytes at `addr` (page aligned) as the socket's UMEM, chunks of
/// `chunk` bytes placed anywhere (unaligned mode), no UMEM headroom. The whole
/// 32-byte `xdp_umem_reg` is passed: with a shorter one the kernel ignores `flags`.
pub fn umem_reg(fd: &Fd, addr: *mut u8, len: u64, chunk: u32) -> Result<()> {
    let r = libc::xdp_umem_reg {
        addr: addr as u64,
        len,
        chunk_size: chunk,
        headroom: 0,
        flags: libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG,
        tx_metadata_len: 0,
    };
    setsockopt(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &r)
}

/// Size one of the socket's rings (`XDP_RX_RING`, ...; a power of two).
pub fn ring_size(fd: &Fd, opt: i32, entries: u32) -> Result<()> {
    setsockopt(fd, libc::SOL_XDP, opt, &(entries as i32))
}

/// Where each ring's indexes and entries lie in its mapping.
pub fn mmap_offsets(fd: &Fd) -> Result<libc::xdp_mmap_offsets> {
    // SAFETY: an all-zero xdp_mmap_offsets is valid.
    let mut o: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&o) as libc::socklen_t;
    // SAFETY: `o` has room for `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.raw(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut o as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    })?;
    if (len as usize) < std::mem::size_of_val(&o) {
        // A kernel before 5.4 (no `flags` word): not supported.
        return Err(Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    Ok(o)
}

/// The socket's counters.
pub fn statistics(fd: &Fd) -> Result<libc::xdp_statistics> {
    // SAFETY: an all-zero xdp_statistics is valid.
    let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&s) as libc::socklen_t;
    // SAFETY: `s` has room for `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.raw(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&mut s as *mut libc::xdp_statistics).cast(),
            &mut len,
        )
    })?;
    Ok(s)
}

/// Bind the socket to queue `queue` of interface `ifindex`.
pub fn bind(fd: &Fd, ifindex: i32, queue: u32, flags: u16) -> Result<()> {
    let a = libc::sockaddr_xdp {
        sxdp_family: AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex as u32,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `a` is a valid sockaddr_xdp of the size passed.
    cvt(unsafe {
        libc::bind(fd.raw(), (&a as *const libc::sockaddr_xdp).cast(), std::mem::size_of_val(&a) as libc::socklen_t)
    })
    .map(drop)
}

/// Whether the kernel runs the socket in zero-copy mode.
pub fn zero_copy(fd: &Fd) -> bool {
    let mut o = libc::xdp_options { flags: 0 };
    let mut len = std::mem::size_of_val(&o) as libc::socklen_t;
    // SAFETY: `o` has room for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.raw(),
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            (&mut o as *mut libc::xdp_options).cast(),
            &mut len,
        )
    };
    rc == 0 && o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
}

/// Ask the kernel to send what the TX ring holds (in copy mode, up to 32 frames a
/// call). `Ok(false)`: try again (EAGAIN, EBUSY: the kernel has more to do or
/// dropped one; its address still completes).
pub fn kick_tx(fd: &Fd) -> Result<bool> {
    // SAFETY: a zero-length send with no buffer and no address.
    let rc = unsafe { libc::sendto(fd.raw(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if rc >= 0 {
        return Ok(true);
    }
    let e = Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::EINTR) | Some(libc::ENOBUFS) => Ok(false),
        _ => Err(e),
    }
}

/// Let the kernel run the interface's receive path for the socket (busy polling).
pub fn wake_rx(fd: &Fd) {
    // SAFETY: a zero-length non-blocking receive with no buffer and no address.
    unsafe {
        libc::recvfrom(
            fd.raw(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// Busy polling on the socket: the kernel polls the device for us up to `budget`
/// frames per call (`busy_budget`).
pub fn busy_poll(fd: &Fd, budget: u32) -> Result<()> {
    const SO_PREFER_BUSY_POLL: i32 = 69;
    const SO_BUSY_POLL_BUDGET: i32 = 70;
    setsockopt(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &1i32)?;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &20i32)?;
    setsockopt(fd, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &(budget as i32))
}

/// A shared mapping of one of the socket's rings, unmapped on drop.
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; the queue that owns it
// is used by one thread at a time.
unsafe impl Send for Mmap {}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: mapped by `Ring::map` with this length; the ring that used it is gone.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One of the four rings: free-running producer and consumer indexes shared with
/// the kernel, `size` entries of `T` (`u64` addresses for the fill and completion
/// rings, `xdp_desc` for RX and TX). One side produces, the other consumes: we
/// produce into the fill and TX rings and consume the RX and completion rings.
pub struct Ring<T: Copy> {
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    entries: *mut T,
    mask: u32,
    /// Our copy of our own index, and the other side's as last read.
    ours: u32,
    theirs: u32,
}

// SAFETY: see `Mmap`.
unsafe impl<T: Copy> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Map the ring of `entries` (a power of two) described by `off` at page offset
    /// `pgoff` of socket `fd`.
    pub fn map(fd: &Fd, off: &libc::xdp_ring_offset, pgoff: u64, entries: u32, producer_side: bool) -> Result<Self> {
        let len = off.desc as usize + entries as usize * std::mem::size_of::<T>();
        // SAFETY: a fresh shared mapping of the socket's ring; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.raw(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os_error());
        }
        let base = p.cast::<u8>();
        // SAFETY: the kernel's offsets lie inside the mapping it sized (indexes are
        // 4-byte aligned u32s, entries follow `desc`).
        let (producer, consumer, flags, ring) = unsafe {
            (
                base.add(off.producer as usize).cast::<AtomicU32>(),
                base.add(off.consumer as usize).cast::<AtomicU32>(),
                base.add(off.flags as usize).cast::<AtomicU32>(),
                base.add(off.desc as usize).cast::<T>(),
            )
        };
        let mut r = Ring {
            _map: Mmap { ptr: base, len },
            producer,
            consumer,
            flags,
            entries: ring,
            mask: entries - 1,
            ours: 0,
            theirs: 0,
        };
        // SAFETY: the index words are live for the mapping's lifetime.
        unsafe {
            if producer_side {
                r.ours = (*r.producer).load(Ordering::Relaxed);
                r.theirs = (*r.consumer).load(Ordering::Acquire);
            } else {
                r.ours = (*r.consumer).load(Ordering::Relaxed);
                r.theirs = (*r.producer).load(Ordering::Acquire);
            }
        }
        Ok(r)
    }

    /// Entries in the ring.
    pub fn size(&self) -> u32 {
        self.mask + 1
    }

    /// Producer side: how many entries are free (reading the consumer's index again
    /// if fewer than `want` were free when last read).
    #[inline(always)]
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.size().saturating_sub(self.ours.wrapping_sub(self.theirs));
        if free >= want {
            return free;
        }
        // SAFETY: the index word is live for the mapping's lifetime.
        self.theirs = unsafe { (*self.consumer).load(Ordering::Acquire) };
        // (A kernel index that ran ahead of ours is clamped: never more than the ring.)
        self.size().saturating_sub(self.ours.wrapping_sub(self.theirs))
    }

    /// Producer side: write entry `i` (0-based after what is already produced).
    #[inline(always)]
    pub fn put(&mut self, i: u32, v: T) {
        let slot = (self.ours.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask; the entry is ours until the producer index passes it.
        unsafe { self.entries.add(slot).write_volatile(v) };
    }

    /// Producer side: publish `n` written entries.
    #[inline(always)]
    pub fn submit(&mut self, n: u32) {
        self.ours = self.ours.wrapping_add(n);
        // SAFETY: the index word is live for the mapping's lifetime.
        unsafe { (*self.producer).store(self.ours, Ordering::Release) };
    }

    /// Consumer side: how many entries are ready, at most `max`.
    #[inline(always)]
    pub fn ready(&mut self, max: u32) -> u32 {
        let mut n = self.theirs.wrapping_sub(self.ours);
        if n < max {
            // SAFETY: the index word is live for the mapping's lifetime.
            self.theirs = unsafe { (*self.producer).load(Ordering::Acquire) };
            n = self.theirs.wrapping_sub(self.ours);
        }
        // (A kernel index that claims more than the ring holds is clamped.)
        n.min(self.size()).min(max)
    }

    /// Consumer side: read entry `i` (0-based after what is already consumed).
    #[inline(always)]
    pub fn get(&self, i: u32) -> T {
        let slot = (self.ours.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask; the entry is the kernel's to write only after we release it.
        unsafe { self.entries.add(slot).read_volatile() }
    }

    /// Consumer side: give `n` read entries back.
    #[inline(always)]
    pub fn release(&mut self, n: u32) {
        self.ours = self.ours.wrapping_add(n);
        // SAFETY: the index word is live for the mapping's lifetime.
        unsafe { (*self.consumer).store(self.ours, Ordering::Release) };
    }

    /// Whether the kernel asks to be woken for this ring.
    #[inline(always)]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: the flags word is live for the mapping's lifetime.
        unsafe { (*self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0 }
    }
}

// ---- the XDP program -------------------------------------------------------------

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// XDP attach modes (`XDP_FLAGS_*` of `linux/if_link.h`).
pub const XDP_FLAGS_SKB_MODE: u32 = 2;
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `BPF_PSEUDO_MAP_FD`: a 64-bit immediate that names a map by descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// One `struct bpf_insn`: opcode, dst/src registers (4 bits each), offset, immediate.
#[repr(C)]
#[derive(Clone, Copy)]
struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// `union bpf_attr`, zero beyond what each command reads (the kernel refuses unknown
/// non-zero bytes).
#[repr(C, align(8))]
struct BpfAttr([u8; 168]);

impl BpfAttr {
    fn new() -> Self {
        Self([0; 168])
    }
    fn u32(mut self, off: usize, v: u32) -> Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, off: usize, v: u64) -> Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut BpfAttr) -> Result<i32> {
    // SAFETY: `attr` is a fully initialised attribute block of the size passed; the
    // pointers inside it point at live values of the caller.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut BpfAttr, std::mem::size_of::<BpfAttr>() as u32) };
    if rc < 0 {
        return Err(Error::last_os_error());
    }
    Ok(rc as i32)
}

/// An XSKMAP of `entries` slots (queue id -> socket).
pub fn xskmap(entries: u32) -> Result<Fd> {
    let mut a = BpfAttr::new().u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, entries);
    a.0[28..28 + 12].copy_from_slice(b"ironpath_xsk");
    Ok(Fd::from_raw(bpf(BPF_MAP_CREATE, &mut a)?))
}

/// Put socket `xsk` in slot `queue` of `map`.
pub fn xskmap_set(map: &Fd, queue: u32, xsk: &Fd) -> Result<()> {
    let (k, v) = (queue, xsk.raw() as u32);
    let mut a =
        BpfAttr::new().u32(0, map.raw() as u32).u64(8, &k as *const u32 as u64).u64(16, &v as *const u32 as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
}

/// Empty slot `queue` of `map`: no frame is redirected to its socket any more.
pub fn xskmap_clear(map: &Fd, queue: u32) -> Result<()> {
    let k = queue;
    let mut a = BpfAttr::new().u32(0, map.raw() as u32).u64(8, &k as *const u32 as u64);
    bpf(BPF_MAP_DELETE_ELEM, &mut a).map(drop)
}

/// The program: `return bpf_redirect_map(&map, ctx->rx_queue_index, XDP_PASS)`: a
/// frame of a queue with a socket in `map` goes to that socket, every other frame to
/// the kernel's stack (the fallback action in the flags, Linux 5.3+).
pub fn redirect_prog(map: &Fd) -> Result<Fd> {
    let insns = [
        // r2 = *(u32 *)(r1 + 16): ctx->rx_queue_index (BPF_LDX | BPF_MEM | BPF_W)
        BpfInsn { code: 0x61, regs: 1 << 4 | 2, off: 16, imm: 0 },
        // r1 = map (BPF_LD | BPF_IMM | BPF_DW, two slots; src = BPF_PSEUDO_MAP_FD)
        BpfInsn { code: 0x18, regs: PSEUDO_MAP_FD << 4 | 1, off: 0, imm: map.raw() },
        BpfInsn { code: 0, regs: 0, off: 0, imm: 0 },
        // r3 = XDP_PASS (BPF_ALU64 | BPF_MOV | BPF_K)
        BpfInsn { code: 0xb7, regs: 3, off: 0, imm: XDP_PASS },
        // r0 = bpf_redirect_map(r1, r2, r3) (BPF_JMP | BPF_CALL)
        BpfInsn { code: 0x85, regs: 0, off: 0, imm: BPF_FUNC_REDIRECT_MAP },
        // return r0 (BPF_JMP | BPF_EXIT)
        BpfInsn { code: 0x95, regs: 0, off: 0, imm: 0 },
    ];
    let license = c"Dual MIT/GPL";
    let mut a = BpfAttr::new()
        .u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64);
    a.0[48..48 + 13].copy_from_slice(b"ironpath_xdp\0");
    Ok(Fd::from_raw(bpf(BPF_PROG_LOAD, &mut a)?))
}

/// Attach `prog` to interface `ifindex` through a BPF link (`flags`: an attach mode,
/// or 0 for the driver's native mode where it has one). Closing the link (the port
/// closes, or the process exits however it does) detaches the program.
pub fn xdp_link(prog: &Fd, ifindex: i32, flags: u32) -> Result<Fd> {
    let mut a = BpfAttr::new().u32(0, prog.raw() as u32).u32(4, ifindex as u32).u32(8, BPF_XDP).u32(12, flags);
    Ok(Fd::from_raw(bpf(BPF_LINK_CREATE, &mut a)?))
}

const _: () = {
    assert!(std::mem::size_of::<BpfInsn>() == 8);
    assert!(std::mem::size_of::<libc::xdp_umem_reg>() == 32);
    assert!(std::mem::size_of::<libc::sockaddr_xdp>() == 16);
    assert!(std::mem::size_of::<libc::xdp_desc>() == 16);
    assert!(std::mem::size_of::<libc::xdp_mmap_offsets>() == 128);
};
