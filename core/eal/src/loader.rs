//! The PMD plugin loader: finds `libironpath_pmd_*.so` files in plugin directories,
//! checks each before calling into it, and keeps every loaded library mapped for the
//! life of the process (ports hold an `Arc<Driver>`; libraries are never closed).
//!
//! Checks, in order, each refusal naming the file and what was expected and found:
//! 1. the file, opened without following a symlink (`O_NOFOLLOW`) from a descriptor
//!    of its directory, is a regular file owned by root, the effective user or the
//!    executable's owner and writable by nobody else (mode & 022 == 0); every
//!    directory from `/` down to it, each opened from the one above without following
//!    links, has such an owner and is not writable by group or others unless sticky
//!    (`/tmp`): nobody but those who could replace the executable itself can put
//!    other code in its place;
//! 2. it loads (`dlopen` of `/proc/self/fd/N`, the very file checked) and exports
//!    [`ironpath_abi::ENTRY_SYMBOL`];
//! 3. the entry's ABI major equals ours (read from the frozen first 8 bytes);
//! 4. the shared struct sizes (mbuf, mempool, stats) equal ours, and the entry is at
//!    least the ABI 1.0 size (later minors append fields; an older entry's missing
//!    fields read as zero: no PCI ids);
//! 5. it has a driver name and a probe function.
//!
//! A process in secure-execution mode (set-uid, set-gid or given capabilities by
//! its file: the kernel's `AT_SECURE`) loads only the plugins next to its
//! executable: `-d` and `$IRONPATH_PMD_PATH` come from whoever started it, who may
//! have fewer privileges than it has, and are ignored with a warning, as the
//! dynamic loader ignores `LD_LIBRARY_PATH` then ([`origin_honoured`]).

use ironpath_abi as abi;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Environment variable with extra plugin directories or files, `:`-separated.
pub const PMD_PATH_ENV: &str = "IRONPATH_PMD_PATH";

/// File-name prefix of plugins found by directory scans.
pub const PLUGIN_PREFIX: &str = "libironpath_pmd_";

/// Most PCI ids read from one plugin's entry table.
const MAX_PCI_IDS: u32 = 4096;

/// Why a plugin file was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Cannot stat the file.
    #[error("plugin {path}: {err}")]
    Io {
        /// File.
        path: PathBuf,
        /// OS error.
        err: std::io::Error,
    },
    /// Writable by group or others.
    #[error(
        "plugin {path}: refused: the file is writable by others than its owner (mode {mode:04o}); \
         expected no group/other write bits (chmod go-w)"
    )]
    Writable {
        /// File.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The path names a symbolic link.
    #[error("plugin {path}: refused: it is a symbolic link (load the file it points to by its own path)")]
    Symlink {
        /// File.
        path: PathBuf,
    },
    /// Not a regular file.
    #[error("plugin {path}: refused: not a regular file")]
    NotRegular {
        /// File.
        path: PathBuf,
    },
    /// Owned by someone else than root, the effective user or the executable's owner.
    #[error("plugin {path}: refused: owned by uid {uid}; expected root, the effective user (uid {euid}) or the executable's owner")]
    Owner {
        /// File.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// Ours.
        euid: u32,
    },
    /// A directory above the file lets others replace it.
    #[error("plugin {path}: refused: directory {dir} {why}")]
    UnsafeDir {
        /// File.
        path: PathBuf,
        /// The directory.
        dir: PathBuf,
        /// What is wrong with it and what is expected.
        why: String,
    },
    /// `dlopen` failed.
    #[error("plugin {path}: cannot load: {err}")]
    Open {
        /// File.
        path: PathBuf,
        /// Loader error text.
        err: String,
    },
    /// No entry symbol.
    #[error("plugin {path}: refused: no `{sym}` symbol (expected a PMD built with ironpath-pmd-sdk); found: none", sym = abi::ENTRY_SYMBOL)]
    NoEntry {
        /// File.
        path: PathBuf,
    },
    /// Entry returned NULL.
    #[error("plugin {path}: refused: `{sym}` returned NULL", sym = abi::ENTRY_SYMBOL)]
    NullEntry {
        /// File.
        path: PathBuf,
    },
    /// ABI major differs.
    #[error(
        "plugin {path}: refused: ABI major version {found}, this host expects {expected} \
         (rebuild the plugin against ironpath-abi {expected}.x)"
    )]
    AbiMajor {
        /// File.
        path: PathBuf,
        /// Plugin's major.
        found: u16,
        /// Ours.
        expected: u16,
    },
    /// Built against a newer ABI minor than this host's, without naming an older
    /// minor it runs on.
    #[error(
        "plugin {path}: refused: built for ABI {major}.{found}, newer than this host's {major}.{host}, \
         and it {min_says}; rebuild it against ironpath-abi {major}.{host} or use a newer host"
    )]
    AbiMinor {
        /// File.
        path: PathBuf,
        /// Major (both sides).
        major: u16,
        /// Plugin's minor.
        found: u16,
        /// The oldest minor the plugin says it runs on (0: not said).
        min: u16,
        /// Ours.
        host: u16,
        /// "does not say it runs on an older host" or "needs 1.N".
        min_says: String,
    },
    /// A shared struct has another size.
    #[error("plugin {path}: refused: size of {what} is {found} bytes, this host expects {expected}")]
    Size {
        /// File.
        path: PathBuf,
        /// Which struct.
        what: &'static str,
        /// Plugin's size.
        found: u32,
        /// Ours.
        expected: u32,
    },
    /// Missing name or probe.
    #[error("plugin {path}: refused: {what} is missing from its entry table")]
    Incomplete {
        /// File.
        path: PathBuf,
        /// What is missing.
        what: &'static str,
    },
    /// Same driver name as an already loaded plugin.
    #[error("plugin {path}: refused: driver `{name}` is already provided by {other}")]
    Duplicate {
        /// File.
        path: PathBuf,
        /// Driver name.
        name: String,
        /// The file that provides it already.
        other: PathBuf,
    },
}

/// A loaded driver. The library stays loaded while any clone of the `Arc<Driver>`
/// exists; ports hold one.
pub struct Driver {
    /// Driver name (`net_null`).
    pub name: String,
    /// Device-argument help.
    pub help: String,
    /// The file it came from.
    pub path: PathBuf,
    /// ABI minor the plugin was built against.
    pub abi_minor: u16,
    /// Size of the plugin's `DevOps` table.
    pub dev_ops_size: u32,
    /// PCI functions (vendor, device) the driver claims for `-a ADDR` (ABI 1.1).
    pub pci_ids: Vec<abi::PciId>,
    pub(crate) probe: abi::ProbeFn,
    pub(crate) check_args: Option<abi::CheckArgsFn>,
    /// Never closed: a plugin may have registered thread-local destructors or handed
    /// out function pointers that outlive every port (as DPDK, we never unload).
    _lib: std::mem::ManuallyDrop<libloading::Library>,
}

impl Driver {
    /// Checks device arguments without creating a device (ABI 1.4): `None` if the
    /// plugin cannot (older, or it declares no check), else its verdict.
    pub fn check_args(&self, name: &str, args: &str) -> Option<Result<(), String>> {
        let f = self.check_args?;
        let (Ok(cname), Ok(cargs)) = (std::ffi::CString::new(name), std::ffi::CString::new(args)) else {
            return Some(Err("a device argument contains a NUL byte".into()));
        };
        let mut err = abi::ErrMsg { msg: [0; abi::ERR_MSG_LEN] };
        // SAFETY: `f` comes from a checked plugin; the strings are NUL-terminated and
        // `err` is a valid ErrMsg, all alive for the call.
        let rc = unsafe { f(cname.as_ptr(), cargs.as_ptr(), &mut err) };
        if rc == 0 {
            return Some(Ok(()));
        }
        err.msg[abi::ERR_MSG_LEN - 1] = 0;
        // SAFETY: NUL-terminated (forced above).
        let m = unsafe { CStr::from_ptr(err.msg.as_ptr()) }.to_string_lossy().into_owned();
        Some(Err(if m.is_empty() { format!("refused: {}", std::io::Error::from_raw_os_error(-rc)) } else { m }))
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("name", &self.name).field("path", &self.path).finish()
    }
}

fn check_sizes(path: &Path, e: &abi::PmdEntry) -> Result<(), LoadError> {
    let (_entry, mbuf, mempool, _ops, stats) = abi::entry_sizes();
    if e.entry_size < abi::PMD_ENTRY_SIZE_V1_0 {
        return Err(LoadError::Size {
            path: path.to_path_buf(),
            what: "PmdEntry",
            found: e.entry_size,
            expected: abi::PMD_ENTRY_SIZE_V1_0,
        });
    }
    for (what, found, expected) in
        [("Mbuf", e.mbuf_size, mbuf), ("Mempool", e.mempool_size, mempool), ("Stats", e.stats_size, stats)]
    {
        if found != expected {
            return Err(LoadError::Size { path: path.to_path_buf(), what, found, expected });
        }
    }
    Ok(())
}

/// Whether `uid` may own a plugin or a directory above one: root, the effective user,
/// or the owner of the running executable (who could replace the executable itself:
/// `sudo ./target/release/ironpath` from a user's build tree trusts that user anyway).
fn trusted_owner(uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    uid == 0
        || uid == rustix::process::geteuid().as_raw()
        || std::fs::metadata("/proc/self/exe").is_ok_and(|m| m.uid() == uid)
}

/// Opens the plugin at `path` for loading, after the checks of step 1 (module
/// documentation), on descriptors: what is checked is what is loaded.
fn open_checked(path: &Path) -> Result<std::os::fd::OwnedFd, LoadError> {
    use rustix::fs::{fstat, openat, FileType, Mode, OFlags, CWD};
    let io = |err: std::io::Error| LoadError::Io { path: path.to_path_buf(), err };
    let name = path.file_name().ok_or_else(|| io(std::io::ErrorKind::InvalidInput.into()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The directories, as they really are (links among them resolved), walked from
    // the root: each opened from the one above without following a link.
    let dir = parent.canonicalize().map_err(io)?;
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = openat(CWD, "/", dir_flags, Mode::empty()).map_err(|e| io(e.into()))?;
    let mut at = PathBuf::from("/");
    loop {
        let st = fstat(&fd).map_err(|e| io(e.into()))?;
        let unsafe_dir = |why: String| LoadError::UnsafeDir { path: path.to_path_buf(), dir: at.clone(), why };
        if !trusted_owner(st.st_uid) {
            return Err(unsafe_dir(format!(
                "is owned by uid {}; expected root, the effective user (uid {}) or the executable's owner",
                st.st_uid,
                rustix::process::geteuid().as_raw()
            )));
        }
        let mode = st.st_mode & 0o7777;
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(unsafe_dir(format!(
                "is writable by group or others without the sticky bit (mode {mode:04o}); expected chmod go-w"
            )));
        }
        let Some(next) = dir.strip_prefix(&at).ok().and_then(|rest| rest.components().next()) else { break };
        let next = next.as_os_str().to_owned();
        fd = openat(&fd, next.as_os_str(), dir_flags, Mode::empty()).map_err(|e| io(e.into()))?;
        at.push(next);
    }
    // Non-blocking: opening a FIFO put in its place must not hang the host.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = match openat(&fd, name, flags, Mode::empty()) {
        Ok(f) => f,
        Err(rustix::io::Errno::LOOP) => return Err(LoadError::Symlink { path: path.to_path_buf() }),
        Err(e) => return Err(io(e.into())),
    };
    let st = fstat(&file).map_err(|e| io(e.into()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(LoadError::NotRegular { path: path.to_path_buf() });
    }
    if !trusted_owner(st.st_uid) {
        let euid = rustix::process::geteuid().as_raw();
        return Err(LoadError::Owner { path: path.to_path_buf(), uid: st.st_uid, euid });
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        return Err(LoadError::Writable { path: path.to_path_buf(), mode });
    }
    Ok(file)
}

/// Load one plugin file.
pub fn load_file(path: &Path) -> Result<Arc<Driver>, LoadError> {
    load_file_named(path, &mut None)
}

/// Load one plugin file; `name_out` gets the driver name as soon as the entry table
/// shows it (so that a refusal can name the driver it would have provided).
fn load_file_named(path: &Path, name_out: &mut Option<String>) -> Result<Arc<Driver>, LoadError> {
    // The descriptor stays open for the life of the process (as the library stays
    // mapped): the loader knows a library by its name, and a number closed and
    // reused would make a later plugin's `/proc/self/fd/N` the name of this one.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(open_checked(path)?);
    let by_fd = PathBuf::from(format!("/proc/self/fd/{fd}"));
    // SAFETY: loading a library runs its initialisers. We accept that for a file
    // that passed the checks above (its own and its directories' owners and modes),
    // loaded through the descriptor that was checked; Rust cdylibs built with the SDK
    // have no initialisers of their own.
    let lib = unsafe { libloading::Library::new(&by_fd) }
        .map_err(|e| LoadError::Open { path: path.to_path_buf(), err: e.to_string() })?;
    // SAFETY: the symbol's type is fixed by the ABI: `extern "C" fn() -> *const PmdEntry`.
    let entry_fn: abi::PmdEntryFn = match unsafe { lib.get::<abi::PmdEntryFn>(abi::ENTRY_SYMBOL_C) } {
        Ok(f) => *f,
        Err(_) => return Err(LoadError::NoEntry { path: path.to_path_buf() }),
    };
    // SAFETY: calling the entry function has no preconditions; it returns a pointer
    // to a static table (or NULL).
    let ep = unsafe { entry_fn() };
    if ep.is_null() {
        return Err(LoadError::NullEntry { path: path.to_path_buf() });
    }
    // SAFETY: every ABI version starts the table with two u16 and a u32; read only
    // those before the major is known to match.
    let (major, minor) = unsafe { ((*ep).abi_major, (*ep).abi_minor) };
    if major != abi::ABI_MAJOR {
        return Err(LoadError::AbiMajor { path: path.to_path_buf(), found: major, expected: abi::ABI_MAJOR });
    }
    // SAFETY: the name is in the 1.0 part of every major-1 table.
    let name_ptr = unsafe { (*ep).name };
    if !name_ptr.is_null() {
        // SAFETY: a non-NULL name is a NUL-terminated static string (ABI contract).
        *name_out = Some(unsafe { CStr::from_ptr(name_ptr) }.to_string_lossy().into_owned());
    }
    // SAFETY: every version has the frozen header; `entry_size` is at offset 4.
    let entry_size = unsafe { (*ep).entry_size };
    if entry_size < abi::PMD_ENTRY_SIZE_V1_0 {
        return Err(LoadError::Size {
            path: path.to_path_buf(),
            what: "PmdEntry",
            found: entry_size,
            expected: abi::PMD_ENTRY_SIZE_V1_0,
        });
    }
    // Copy the plugin's table into a host-sized, zeroed one: fields an older minor does
    // not have (it is shorter) read as zero/NULL.
    // SAFETY: PmdEntry is integers, raw pointers and an Option<fn>: all-zero is valid.
    let mut e: abi::PmdEntry = unsafe { std::mem::zeroed() };
    // SAFETY: the plugin's table is `entry_size` bytes long (its own declaration, at
    // least the 1.0 size checked above); we copy at most our own size.
    unsafe {
        let n = (entry_size as usize).min(std::mem::size_of::<abi::PmdEntry>());
        std::ptr::copy_nonoverlapping(ep.cast::<u8>(), (&mut e as *mut abi::PmdEntry).cast::<u8>(), n);
    }
    let e = &e;
    check_sizes(path, e)?;
    if minor > abi::ABI_MINOR {
        // A 1.6+ table says the oldest host minor it runs on; ours must reach it.
        let min = if entry_size as usize >= std::mem::offset_of!(abi::PmdEntry, min_abi_minor) + 2 {
            e.min_abi_minor
        } else {
            0
        };
        if min == 0 || min > abi::ABI_MINOR {
            let min_says = if min == 0 {
                "does not say it runs on an older host".to_string()
            } else {
                format!("needs a host of at least {}.{min}", abi::ABI_MAJOR)
            };
            return Err(LoadError::AbiMinor {
                path: path.to_path_buf(),
                major,
                found: minor,
                min,
                host: abi::ABI_MINOR,
                min_says,
            });
        }
    }
    let Some(probe) = e.probe else {
        return Err(LoadError::Incomplete { path: path.to_path_buf(), what: "probe" });
    };
    if e.name.is_null() {
        return Err(LoadError::Incomplete { path: path.to_path_buf(), what: "name" });
    }
    // SAFETY: non-null pointers to NUL-terminated static strings (ABI contract).
    let name = unsafe { CStr::from_ptr(e.name) }.to_string_lossy().into_owned();
    let help = if e.devargs_help.is_null() {
        String::new()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(e.devargs_help) }.to_string_lossy().into_owned()
    };
    if name.is_empty() {
        return Err(LoadError::Incomplete { path: path.to_path_buf(), what: "name" });
    }
    let pci_ids = if e.pci_ids.is_null() {
        Vec::new()
    } else {
        // SAFETY: a non-NULL `pci_ids` points to `nb_pci_ids` static entries (ABI 1.1
        // contract); the count is bounded so a garbage value cannot make us read far.
        unsafe { std::slice::from_raw_parts(e.pci_ids, e.nb_pci_ids.min(MAX_PCI_IDS) as usize) }.to_vec()
    };
    Ok(Arc::new(Driver {
        name,
        help,
        path: path.to_path_buf(),
        abi_minor: minor,
        dev_ops_size: e.dev_ops_size,
        pci_ids,
        probe,
        check_args: e.check_args,
        _lib: std::mem::ManuallyDrop::new(lib),
    }))
}

/// Plugin files in `dir` (those named `libironpath_pmd_*.so`), sorted.
pub fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PLUGIN_PREFIX) && n.ends_with(".so"))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Plugin paths from `$IRONPATH_PMD_PATH` (`:`-separated files or directories).
pub fn env_paths() -> Vec<PathBuf> {
    std::env::var_os(PMD_PATH_ENV)
        .map(|s| std::env::split_paths(&s).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default()
}

/// Directories next to the running executable where plugins built or installed with
/// it live, in search order: its own directory (a build tree) and `../lib/ironpath`
/// (an install: `bin/ironpath` beside `lib/ironpath/`). Nothing above is searched.
pub fn exe_dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            v.push(dir.to_path_buf());
            if let Some(up) = dir.parent() {
                v.push(up.join("lib/ironpath"));
            }
        }
    }
    v
}

/// Whether the process runs in secure-execution mode: it is set-uid or set-gid,
/// or its file gave it capabilities (the kernel's `AT_SECURE`, which the dynamic
/// loader also obeys).
pub fn secure_execution() -> bool {
    // SAFETY: `getauxval` only reads the auxiliary vector the kernel handed the
    // process at exec; any type may be asked for (0 when absent).
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// Whether plugins found through `origin` are loaded, `secure` saying whether the
/// process runs in secure-execution mode ([`secure_execution`]): then only those
/// next to the executable are, as what the invoker names (`-d`, the environment)
/// must not run with privileges the invoker lacks.
pub fn origin_honoured(origin: &Origin, secure: bool) -> bool {
    !secure || *origin == Origin::Exe
}

/// Where a plugin search looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `-d PATH`.
    Arg,
    /// `$IRONPATH_PMD_PATH`.
    Env,
    /// The directory next to the executable (or its install's `lib/ironpath`).
    Exe,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Arg => "-d",
            Origin::Env => "$IRONPATH_PMD_PATH",
            Origin::Exe => "next to the executable",
        })
    }
}

/// Whether `a` and `b` name the same file (the same device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    a == b
        || match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
}

/// What became of one plugin file.
#[derive(Debug)]
pub enum Outcome {
    /// Loaded: it provides this driver.
    Loaded(String),
    /// Refused, with the one reason (the refusal's message); the driver it would
    /// have provided, if its entry table got that far.
    Refused(Option<String>, String),
    /// Not loaded because the driver is provided already (a `-d` plugin goes before
    /// the default ones).
    Skipped(String),
}

/// One plugin file the search found, and what became of it.
#[derive(Debug)]
pub struct Found {
    /// The file.
    pub path: PathBuf,
    /// Where it was found.
    pub origin: Origin,
    /// Loaded, refused or skipped.
    pub outcome: Outcome,
}

/// A set of loaded drivers, and what the plugin search found.
#[derive(Default, Debug)]
pub struct Registry {
    drivers: Vec<Arc<Driver>>,
    found: Vec<Found>,
    searched: Vec<(PathBuf, Origin)>,
}

impl Registry {
    /// Load a file, or every plugin file in a directory. Returns the errors of files
    /// that were refused (the others are loaded).
    pub fn load_path(&mut self, path: &Path) -> Vec<LoadError> {
        self.search(path, Origin::Arg)
    }

    /// Load a file, or every plugin file in a directory, found through `origin`; a
    /// default (`Env`, `Exe`) plugin whose driver is loaded already is skipped, an
    /// explicit (`Arg`) one refused. Returns the refusals.
    ///
    /// In secure-execution mode, a path from `-d` or `$IRONPATH_PMD_PATH` is not
    /// searched ([`origin_honoured`]): one warning line says so.
    pub fn search(&mut self, path: &Path, origin: Origin) -> Vec<LoadError> {
        self.search_as(path, origin, secure_execution())
    }

    fn search_as(&mut self, path: &Path, origin: Origin, secure: bool) -> Vec<LoadError> {
        if !origin_honoured(&origin, secure) {
            log::warn!(
                "plugin path {} ({origin}) ignored: the process is set-uid, set-gid or has file capabilities \
                 (AT_SECURE); only the plugins next to the executable are loaded",
                path.display()
            );
            return Vec::new();
        }
        self.searched.push((path.to_path_buf(), origin.clone()));
        let files = if path.is_dir() {
            match plugin_files(path) {
                Ok(files) => files,
                Err(err) => return vec![LoadError::Io { path: path.to_path_buf(), err }],
            }
        } else {
            vec![path.to_path_buf()]
        };
        let mut errs = Vec::new();
        for f in files {
            let mut name = None;
            let outcome = match self.load_named(&f, &mut name) {
                Ok(d) => Outcome::Loaded(d.name.clone()),
                Err(LoadError::Duplicate { name, .. }) if origin != Origin::Arg => Outcome::Skipped(name),
                Err(e) => {
                    let why = e.to_string();
                    errs.push(e);
                    Outcome::Refused(name, why)
                }
            };
            // One line per file, however it was named (`-d` with a relative path,
            // then the same file found next to the executable).
            if !self.found.iter().any(|x| same_file(&x.path, &f)) {
                self.found.push(Found { path: f, origin: origin.clone(), outcome });
            }
        }
        errs
    }

    /// Load one file; a driver name already present is refused.
    pub fn load_one(&mut self, path: &Path) -> Result<Arc<Driver>, LoadError> {
        self.load_named(path, &mut None)
    }

    fn load_named(&mut self, path: &Path, name_out: &mut Option<String>) -> Result<Arc<Driver>, LoadError> {
        // The directory resolved, the file's own name kept: a link to a plugin is
        // refused, not followed.
        let canon = match (
            path.parent().map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d }),
            path.file_name(),
        ) {
            (Some(dir), Some(name)) => dir.canonicalize().map_or_else(|_| path.to_path_buf(), |d| d.join(name)),
            _ => path.to_path_buf(),
        };
        if let Some(d) = self.drivers.iter().find(|d| d.path == canon) {
            return Ok(d.clone());
        }
        let d = load_file_named(&canon, name_out)?;
        if let Some(other) = self.drivers.iter().find(|o| o.name == d.name) {
            return Err(LoadError::Duplicate { path: canon, name: d.name.clone(), other: other.path.clone() });
        }
        self.drivers.push(d.clone());
        Ok(d)
    }

    /// Loaded drivers.
    pub fn drivers(&self) -> &[Arc<Driver>] {
        &self.drivers
    }

    /// Every plugin file the searches found, in order, with what became of it.
    pub fn found(&self) -> &[Found] {
        &self.found
    }

    /// The paths searched, in order, with where each came from.
    pub fn searched(&self) -> &[(PathBuf, Origin)] {
        &self.searched
    }

    /// The refusal of the plugin that would have provided instance `instance`: its
    /// driver name (from its entry table or, failing that, its file name
    /// `libironpath_pmd_X.so` for `net_X`) prefixes the instance name.
    pub fn refusal_for(&self, instance: &str) -> Option<(String, &str)> {
        self.found
            .iter()
            .filter_map(|f| match &f.outcome {
                Outcome::Refused(name, e) => {
                    let name = name.clone().or_else(|| {
                        let stem = f.path.file_name()?.to_str()?.strip_prefix(PLUGIN_PREFIX)?.strip_suffix(".so")?;
                        Some(format!("net_{stem}"))
                    })?;
                    instance.starts_with(name.as_str()).then_some((name, e.as_str()))
                }
                _ => None,
            })
            .max_by_key(|(n, _)| n.len())
    }

    /// The driver for an instance name: the longest driver name that prefixes it
    /// (`net_null0` → `net_null`).
    pub fn find_for_instance(&self, instance: &str) -> Option<&Arc<Driver>> {
        self.drivers.iter().filter(|d| instance.starts_with(d.name.as_str())).max_by_key(|d| d.name.len())
    }

    /// The first loaded driver that claims PCI function `id` (in load order).
    pub fn find_for_pci(&self, id: abi::PciId) -> Option<&Arc<Driver>> {
        self.drivers.iter().find(|d| d.pci_ids.contains(&id))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_abi_1_0_entry_is_accepted_a_shorter_one_is_not() {
        let (entry, mbuf, mempool, dev_ops, stats) = abi::entry_sizes();
        let mut e = abi::PmdEntry {
            abi_major: abi::ABI_MAJOR,
            abi_minor: 0,
            entry_size: abi::PMD_ENTRY_SIZE_V1_0,
            mbuf_size: mbuf,
            mempool_size: mempool,
            dev_ops_size: dev_ops,
            stats_size: stats,
            name: std::ptr::null(),
            devargs_help: std::ptr::null(),
            probe: None,
            pci_ids: std::ptr::null(),
            nb_pci_ids: 0,
            reserved: 0,
            check_args: None,
            min_abi_minor: 0,
            reserved_1_6: [0; 3],
        };
        assert!(entry > abi::PMD_ENTRY_SIZE_V1_0);
        assert!(check_sizes(Path::new("p.so"), &e).is_ok());
        e.entry_size = 40;
        let err = check_sizes(Path::new("p.so"), &e).unwrap_err().to_string();
        assert_eq!(err, "plugin p.so: refused: size of PmdEntry is 40 bytes, this host expects 48");
    }

    #[test]
    fn secure_execution_searches_only_next_to_the_executable() {
        for origin in [Origin::Arg, Origin::Env, Origin::Exe] {
            assert!(origin_honoured(&origin, false), "{origin}");
        }
        assert!(!origin_honoured(&Origin::Arg, true));
        assert!(!origin_honoured(&Origin::Env, true));
        assert!(origin_honoured(&Origin::Exe, true));
        // Searched, a path that does not exist is an error; ignored, it is not
        // even looked at.
        let missing = Path::new("/nonexistent/plugins");
        let mut r = Registry::default();
        for origin in [Origin::Arg, Origin::Env] {
            assert!(r.search_as(missing, origin, true).is_empty());
        }
        assert!(r.searched().is_empty() && r.found().is_empty());
        assert_eq!(r.search_as(missing, Origin::Exe, true).len(), 1);
        assert_eq!(r.search_as(missing, Origin::Env, false).len(), 1);
        assert_eq!(r.searched().len(), 2);
        // Tests do not run set-uid.
        assert!(!secure_execution());
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let e = load_file(Path::new("/nonexistent/libironpath_pmd_x.so")).unwrap_err();
        assert!(matches!(e, LoadError::Io { .. }));
        assert!(e.to_string().contains("/nonexistent/libironpath_pmd_x.so"));
    }
}
