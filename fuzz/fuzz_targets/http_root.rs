//! Request targets against a real web root on disk, as the `http` application
//! serves it (`ironpath_nodes::tcp::LocalSite`: a site whose file I/O, done by the
//! node's file-I/O threads, runs on this thread): inside the root, files, a directory, a
//! symlink to a file and one to a directory inside it; dot-files and a
//! dot-directory; symlinks that leave the root (relative, absolute, to /etc/passwd),
//! a symlink loop and a FIFO. The input is the request target.
//!
//! Checked: no panic, no hang; whatever is answered with a body is one of the files
//! meant to be served (or an in-memory object), never the file outside the root,
//! a dot-file, nor /etc/passwd.
#![no_main]
use ironpath_nodes::tcp::LocalSite;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// Contents that may be served, and contents that must never be.
const SERVED: [&[u8]; 4] = [b"index page", b"file a", b"file b in sub", b"deep file"];
const SECRET: [&[u8]; 4] = [b"SECRET outside the root", b"DOTENV", b"DOTGIT", b"HIDDEN"];

fn root() -> PathBuf {
    let top = std::env::temp_dir().join("ironpath-fuzz-root");
    let www = top.join("www");
    if www.exists() {
        return www;
    }
    let _ = std::fs::remove_dir_all(&top);
    std::fs::create_dir_all(www.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(www.join(".git")).unwrap();
    std::fs::write(top.join("secret"), SECRET[0]).unwrap();
    std::fs::write(www.join("index.html"), SERVED[0]).unwrap();
    std::fs::write(www.join("a.txt"), SERVED[1]).unwrap();
    std::fs::write(www.join("sub/b.txt"), SERVED[2]).unwrap();
    std::fs::write(www.join("sub/deeper/c"), SERVED[3]).unwrap();
    std::fs::write(www.join(".env"), SECRET[1]).unwrap();
    std::fs::write(www.join(".git/config"), SECRET[2]).unwrap();
    std::fs::write(www.join("sub/.hidden"), SECRET[3]).unwrap();
    let link = |to: &str, name: &str| std::os::unix::fs::symlink(to, www.join(name)).unwrap();
    link("sub/b.txt", "inner");
    link("sub", "subdir");
    link("../secret", "up");
    link(&top.join("secret").display().to_string(), "abs");
    link("/etc/passwd", "passwd");
    link("loop", "loop");
    link("../../www/sub", "sub/back");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &www.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    www
}

fn site() -> &'static Mutex<LocalSite> {
    static SITE: OnceLock<Mutex<LocalSite>> = OnceLock::new();
    SITE.get_or_init(|| Mutex::new(LocalSite::new(Some(root()), "/obj=10", false).expect("site")))
}

fuzz_target!(|data: &[u8]| {
    let target = String::from_utf8_lossy(data);
    let mut site = site().lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(body) = site.get(&target) {
        let object = body.len() == 10;
        assert!(object || SERVED.contains(&body.as_slice()), "{target:?} served {:?}", String::from_utf8_lossy(&body));
        assert!(!SECRET.contains(&body.as_slice()));
        assert!(!body.starts_with(b"root:"), "{target:?} served /etc/passwd");
    }
});
