//! tcpdump filter expressions compiled by the system's libpcap, loaded at run
//! time (`dlopen("libpcap.so.0.8")`, Debian's libpcap0.8 package): nothing links
//! libpcap at build time, and a process that never compiles a filter never
//! loads it. The result is classic BPF as plain tuples; running it is
//! `ironpath_graph::bpf`'s job (which verifies it first).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

/// The library's name (Debian, Ubuntu: package libpcap0.8).
pub const SONAME: &str = "libpcap.so.0.8";
/// `DLT_EN10MB`: Ethernet frames.
pub const DLT_EN10MB: c_int = 1;
/// Longest filter expression accepted.
pub const MAX_EXPR: usize = 2048;

#[repr(C)]
struct BpfInsn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct BpfProgram {
    len: c_uint,
    insns: *mut BpfInsn,
}

#[repr(C)]
struct PktHdr {
    ts_sec: i64,
    ts_usec: i64,
    caplen: u32,
    len: u32,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type Compile = unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type GetErr = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut c_void);
type OfflineFilter = unsafe extern "C" fn(*const BpfProgram, *const PktHdr, *const u8) -> c_int;

struct Lib {
    _lib: libloading::Library,
    open_dead: OpenDead,
    compile: Compile,
    geterr: GetErr,
    freecode: FreeCode,
    close: Close,
    offline_filter: OfflineFilter,
    /// Older libpcaps' compilers are not reentrant: one compile at a time.
    lock: Mutex<()>,
}

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: loading libpcap runs its initialisers, which only set up its own
        // state; it is the system library of that name, installed by the package
        // manager (as tcpdump loads it).
        let lib = unsafe { libloading::Library::new(SONAME) }
            .map_err(|e| format!("{SONAME}: {e} (install libpcap0.8 to use capture filters)"))?;
        // SAFETY: each symbol is looked up with the C prototype libpcap documents
        // for it (pcap(3PCAP)); the library stays loaded as long as `Lib` lives
        // (forever: it is kept in a static).
        unsafe {
            let open_dead = *lib.get::<OpenDead>(b"pcap_open_dead\0").map_err(|e| e.to_string())?;
            let compile = *lib.get::<Compile>(b"pcap_compile\0").map_err(|e| e.to_string())?;
            let geterr = *lib.get::<GetErr>(b"pcap_geterr\0").map_err(|e| e.to_string())?;
            let freecode = *lib.get::<FreeCode>(b"pcap_freecode\0").map_err(|e| e.to_string())?;
            let close = *lib.get::<Close>(b"pcap_close\0").map_err(|e| e.to_string())?;
            let offline_filter = *lib.get::<OfflineFilter>(b"pcap_offline_filter\0").map_err(|e| e.to_string())?;
            Ok(Lib { _lib: lib, open_dead, compile, geterr, freecode, close, offline_filter, lock: Mutex::new(()) })
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// One classic BPF instruction: `code`, `jt`, `jf`, `k`.
pub type RawInsn = (u16, u8, u8, u32);

/// One compiled program, owned by libpcap until dropped.
struct Compiled<'a> {
    lib: &'a Lib,
    prog: BpfProgram,
}

impl Compiled<'_> {
    fn insns(&self) -> Vec<RawInsn> {
        if self.prog.insns.is_null() {
            return Vec::new();
        }
        // SAFETY: after a successful pcap_compile, `insns` points to `len`
        // initialised instructions that libpcap keeps until pcap_freecode.
        let s = unsafe { std::slice::from_raw_parts(self.prog.insns, self.prog.len as usize) };
        s.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect()
    }
}

impl Drop for Compiled<'_> {
    fn drop(&mut self) {
        // SAFETY: the program came from pcap_compile and is freed once, here.
        unsafe { (self.lib.freecode)(&mut self.prog) }
    }
}

fn with_compiled<T>(expr: &str, snaplen: u32, f: impl FnOnce(&Compiled<'_>) -> T) -> Result<T, String> {
    if expr.len() > MAX_EXPR {
        return Err(format!("filter longer than {MAX_EXPR} bytes"));
    }
    let c = CString::new(expr).map_err(|_| "filter holds a NUL byte".to_string())?;
    let lib = lib()?;
    let _one = lib.lock.lock().unwrap_or_else(|e| e.into_inner());
    let snap = c_int::try_from(snaplen).unwrap_or(c_int::MAX);
    // SAFETY: pcap_open_dead allocates a handle that needs no device; checked for
    // NULL; closed below.
    let p = unsafe { (lib.open_dead)(DLT_EN10MB, snap) };
    if p.is_null() {
        return Err("pcap_open_dead failed".to_string());
    }
    let mut prog = BpfProgram { len: 0, insns: std::ptr::null_mut() };
    // SAFETY: `p` is a live handle, `prog` a writable program, `c` a NUL-ended
    // string; netmask "unknown" (0xffffffff) as pcap_compile documents.
    let rc = unsafe { (lib.compile)(p, &mut prog, c.as_ptr(), 1, 0xffff_ffff) };
    let out = if rc != 0 {
        // SAFETY: pcap_geterr returns a NUL-ended string owned by the live handle;
        // it is copied before the handle is closed.
        let e = unsafe { CStr::from_ptr((lib.geterr)(p)) }.to_string_lossy().into_owned();
        Err(format!("filter `{expr}`: {e}"))
    } else {
        let compiled = Compiled { lib, prog };
        Ok(f(&compiled))
    };
    // SAFETY: `p` is live and closed once; the program does not refer to it.
    unsafe { (lib.close)(p) };
    out
}

/// Compiles tcpdump expression `expr` for Ethernet frames cut at `snaplen`:
/// the instructions (`code`, `jt`, `jf`, `k`), unverified.
pub fn compile(expr: &str, snaplen: u32) -> Result<Vec<RawInsn>, String> {
    with_compiled(expr, snaplen, |c| c.insns())
}

/// libpcap's own verdict for `expr` on each frame of `frames` (`(bytes,
/// wire length)`): the value its interpreter returns (0 = rejected). For tests
/// that compare another interpreter with it.
pub fn offline_filter(expr: &str, snaplen: u32, frames: &[(&[u8], u32)]) -> Result<(Vec<RawInsn>, Vec<i32>), String> {
    with_compiled(expr, snaplen, |c| {
        let verdicts = frames
            .iter()
            .map(|(f, wirelen)| {
                let h = PktHdr { ts_sec: 0, ts_usec: 0, caplen: f.len() as u32, len: *wirelen };
                // SAFETY: the program is live; the header says `caplen` bytes, which
                // `f` holds; libpcap reads no further.
                unsafe { (c.lib.offline_filter)(&c.prog, &h, f.as_ptr()) }
            })
            .collect();
        (c.insns(), verdicts)
    })
}
