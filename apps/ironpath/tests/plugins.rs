//! Plugins as their authors meet them: `-d` adds to the default plugins, every kind
//! of refused plugin is one line with its reason and a `--vdev` of its driver says
//! it was refused, a newer-ABI plugin is refused unless it names a minor this host
//! meets, a driver that panics is fenced off with one message, and a binary with
//! file capabilities (secure-execution mode) ignores `-d` and `$IRONPATH_PMD_PATH`.

use std::path::{Path, PathBuf};

mod common;

use common::{is_root, skip, testpmd, BIN};

/// The directory of the built plugins (next to the test's `ironpath`).
fn build_dir() -> PathBuf {
    Path::new(BIN).parent().unwrap().to_path_buf()
}

fn plugin(lib: &str) -> PathBuf {
    build_dir().join(format!("lib{lib}.so"))
}

/// A fresh directory for this test, removed on drop.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        let d = std::env::temp_dir().join(format!("ironpath-plugins-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TmpDir(d)
    }

    /// Copy plugin `lib` in as `libironpath_pmd_<name>.so`.
    fn copy(&self, lib: &str, name: &str) -> PathBuf {
        let to = self.0.join(format!("libironpath_pmd_{name}.so"));
        std::fs::copy(plugin(lib), &to).unwrap();
        to
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Lines of `s` that mention `what`.
fn lines_with<'a>(s: &'a str, what: &str) -> Vec<&'a str> {
    s.lines().filter(|l| l.contains(what)).collect()
}

#[test]
fn d_adds_to_the_default_plugins_and_plugins_says_what_became_of_each_file() {
    let dir = TmpDir::new("adds");
    let mine = dir.copy("ironpath_pmd_null", "mynull");
    // A vdev of a default driver (ring) next to one of the -d plugin's (null: the -d
    // copy goes first, the default null is skipped).
    let o = testpmd(
        &format!("-l 0 --no-huge -d {} --vdev net_null0 --vdev net_ring0 -- -i", mine.display()),
        "show port summary all\nquit\n",
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("net_null0") && o.stdout.contains("net_ring0"), "{}", o.stdout);
    assert!(!o.stderr.contains("refused"), "a skipped default plugin is no refusal:\n{}", o.stderr);
    let out = std::process::Command::new(BIN).args(["plugins", "-d"]).arg(&mine).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("  {} (-d)", mine.display())), "{text}");
    assert!(text.contains("(next to the executable)"), "{text}");
    assert!(lines_with(&text, "loaded ").iter().any(|l| l.contains("libironpath_pmd_mynull.so (net_null)")), "{text}");
    assert!(
        lines_with(&text, "skipped").iter().any(|l| l.contains("libironpath_pmd_null.so")
            && l.contains("net_null is provided by a plugin loaded before it")),
        "{text}"
    );
    assert!(lines_with(&text, "loaded").iter().any(|l| l.contains("(net_ring)")), "{text}");
    // `-d` naming a default plugin's own file by a relative path: one line for it.
    let out = std::process::Command::new(BIN)
        .current_dir(std::path::Path::new(BIN).parent().unwrap())
        .args(["plugins", "-d", "./libironpath_pmd_null.so"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(lines_with(&text, "libironpath_pmd_null.so (net_null)").len(), 1, "{text}");
    // --no-default-plugins: only ours.
    let o =
        testpmd(&format!("-l 0 --no-huge --no-default-plugins -d {} --vdev net_ring0 -- -i", mine.display()), "quit\n");
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("no driver for device `net_ring0`: loaded drivers: net_null"), "{}", o.stderr);
}

#[test]
fn every_refused_plugin_is_one_line_and_its_vdev_says_so() {
    use std::os::unix::fs::PermissionsExt;
    // (test plugin, file name, environment, --no-default-plugins, vdev, reason)
    let cases: &[(&str, &str, &str, bool, &str, &str)] = &[
        ("ironpath_testpmd_abi_major", "future", "", false, "net_future0", "ABI major version 2, this host expects 1"),
        ("ironpath_testpmd_abi_newer", "newer", "", false, "net_newer0", "does not say it runs on an older host"),
        ("ironpath_testpmd_abi_newer", "newer", "newer", false, "net_newer0", "needs a host of at least"),
        (
            "ironpath_testpmd_abi_newer",
            "newer",
            "badsize",
            false,
            "net_newer0",
            "size of Mbuf is 136 bytes, this host expects 128",
        ),
        ("ironpath_testpmd_no_entry", "noentry", "", false, "net_noentry0", "no `ironpath_pmd_entry` symbol"),
        ("ironpath_pmd_null", "null", "", true, "net_null0", "writable by others than its owner"),
        ("", "junk", "", false, "net_junk0", "cannot load"),
    ];
    for &(lib, name, env, only_d, vdev, why) in cases {
        let dir = TmpDir::new(&format!("refused-{name}-{env}"));
        let file = if lib.is_empty() {
            let f = dir.0.join(format!("libironpath_pmd_{name}.so"));
            std::fs::write(&f, b"not an ELF file at all").unwrap();
            f
        } else {
            dir.copy(lib, name)
        };
        if name == "null" {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        }
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(["testpmd", "-l", "0", "--no-huge", "-d"]).arg(&dir.0);
        if only_d {
            cmd.arg("--no-default-plugins");
        }
        cmd.args(["--vdev", vdev, "--", "-i"]).env("IRONPATH_TEST_MIN_MINOR", env).stdin(std::process::Stdio::null());
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name}/{env}: {err}");
        let lines = lines_with(&err, &format!("libironpath_pmd_{name}.so"));
        // One line for the refusal, one for the vdev that needed it.
        assert_eq!(lines.len(), 2, "{name}/{env}: {err}");
        assert!(lines[0].contains(why) && !lines[0].contains("refused: plugin"), "{name}/{env}: {err}");
        let driver = vdev.trim_end_matches('0');
        assert!(
            lines[1].contains(&format!("no driver for device `{vdev}`: driver {driver} was refused: "))
                && lines[1].contains(why),
            "{name}/{env}: {err}"
        );
        assert!(!err.contains("no plugin found"), "{err}");
    }
}

/// `ironpath plugins -d d_dir` run by `exe` as uid/gid 65534 with
/// `$IRONPATH_PMD_PATH` = `env_dir`: (status, stdout, stderr).
fn plugins_as_nobody(exe: &Path, d_dir: &Path, env_dir: &Path) -> std::io::Result<(bool, String, String)> {
    use std::os::unix::process::CommandExt;
    let o = std::process::Command::new(exe)
        .arg("plugins")
        .arg("-d")
        .arg(d_dir)
        .env("IRONPATH_PMD_PATH", env_dir)
        .uid(65534)
        .gid(65534)
        .output()?;
    Ok((
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

#[test]
fn a_file_capability_binary_ignores_d_and_the_env_path_root() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        skip("needs root (setcap, and running as another uid)");
        return;
    }
    if !common::have("setcap") {
        skip("needs setcap (apt-get install libcap2-bin)");
        return;
    }
    // Everything readable by uid 65534: a copy of the binary alone in its
    // directory (no plugin next to it), one plugin directory for -d and one for
    // the environment.
    let top = TmpDir::new("secure");
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(&top.0, 0o755);
    let (bin, d_dir, env_dir) = (top.0.join("bin"), top.0.join("d"), top.0.join("env"));
    for d in [&bin, &d_dir, &env_dir] {
        std::fs::create_dir(d).unwrap();
        mode(d, 0o755);
    }
    let exe = bin.join("ironpath");
    std::fs::copy(BIN, &exe).unwrap();
    std::fs::copy(plugin("ironpath_pmd_ring"), d_dir.join("libironpath_pmd_ring.so")).unwrap();
    std::fs::copy(plugin("ironpath_pmd_null"), env_dir.join("libironpath_pmd_null.so")).unwrap();

    // Without capabilities both are searched and loaded.
    let (ok, out, err) = plugins_as_nobody(&exe, &d_dir, &env_dir).unwrap();
    assert!(ok, "{out}{err}");
    assert!(lines_with(&out, "loaded ").iter().any(|l| l.contains("(net_ring)")), "{out}");
    assert!(lines_with(&out, "loaded ").iter().any(|l| l.contains("(net_null)")), "{out}");

    let set = std::process::Command::new("setcap").args(["cap_net_raw+ep"]).arg(&exe).output().unwrap();
    if !set.status.success() {
        skip(&format!("setcap cap_net_raw+ep failed here: {}", String::from_utf8_lossy(&set.stderr).trim()));
        return;
    }
    let (ok, out, err) = match plugins_as_nobody(&exe, &d_dir, &env_dir) {
        Ok(r) => r,
        Err(e) => {
            skip(&format!("a binary with file capabilities cannot run here: {e}"));
            return;
        }
    };
    assert!(!ok, "no plugin at all: {out}{err}");
    assert!(!out.contains("loaded "), "{out}");
    assert!(!out.contains(&d_dir.display().to_string()) && !out.contains(&env_dir.display().to_string()), "{out}");
    // One warning line for each path ignored, naming it and where it came from.
    for (dir, origin) in [(&d_dir, "(-d)"), (&env_dir, "($IRONPATH_PMD_PATH)")] {
        let lines = lines_with(&err, "ignored: the process is set-uid, set-gid or has file capabilities");
        assert_eq!(
            lines.iter().filter(|l| l.contains(&format!("plugin path {} {origin} ignored", dir.display()))).count(),
            1,
            "{err}"
        );
    }
}

#[test]
fn a_newer_plugin_that_names_a_minor_this_host_meets_loads() {
    let dir = TmpDir::new("newer-ok");
    dir.copy("ironpath_testpmd_abi_newer", "newer");
    let out = std::process::Command::new(BIN)
        .args(["plugins", "--no-default-plugins", "-d"])
        .arg(&dir.0)
        .env("IRONPATH_TEST_MIN_MINOR", "host")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("net_newer    ABI 1.{}", ironpath_eal::abi::ABI_MINOR + 3)), "{text}");
}

#[test]
fn a_panicking_driver_is_fenced_off_with_one_message_and_nothing_leaks() {
    let o = testpmd(
        &format!(
            "-l 0-1 --no-huge -d {} --vdev net_panic0,ok=1 --vdev net_null0 -- -i --total-num-mbufs=2048",
            plugin("ironpath_testpmd_panic_probe").display()
        ),
        "start\n@sleep 0.5\nstop\nshow port xstats 0\nquit\n",
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let rx = lines_with(&o.stderr, "panicked in rx_burst");
    assert_eq!(rx.len(), 1, "{}", o.stderr);
    assert!(
        rx[0].contains("driver net_panic: port 0 RX queue 0 panicked in rx_burst: deliberate panic in rx_burst"),
        "{}",
        o.stderr
    );
    assert!(rx[0].contains("fenced off"), "{}", o.stderr);
    assert!(lines_with(&o.stderr, "panicked in tx_burst").len() == 1, "{}", o.stderr);
    assert!(!o.stderr.contains("thread '"), "Rust's own panic message is not printed as well:\n{}", o.stderr);
    let fenced = |key: &str| -> u64 {
        let l = o
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no {key}:\n{}", o.stdout));
        l.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert_eq!(fenced("rx_q0_driver_panics:"), 1);
    assert!(fenced("rx_q0_fenced_bursts:") > 0);
    assert!(!o.stderr.contains("still in use"), "every mbuf back in its pool at exit:\n{}", o.stderr);
}

fn guide() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/writing-a-pmd.md")).unwrap()
}

#[test]
fn the_guide_states_the_abi_of_the_code() {
    use ironpath_eal::abi::{ABI_MAJOR, ABI_MINOR};
    let g = guide();
    assert!(
        g.contains(&format!("The current ABI is **{ABI_MAJOR}.{ABI_MINOR}**")),
        "docs/writing-a-pmd.md: current ABI"
    );
    // Example output of `ironpath plugins` shows the current version.
    for l in g.lines().filter(|l| l.starts_with("net_") && l.contains(" ABI ")) {
        assert!(l.contains(&format!(" ABI {ABI_MAJOR}.{ABI_MINOR} ")), "stale example line: {l}");
    }
    // No version past the current one, but for the refused-plugin examples (minor + 3).
    for (i, _) in g.match_indices(&format!("ABI {ABI_MAJOR}.")) {
        let n: String = g[i + 6..].chars().take_while(char::is_ascii_digit).collect();
        let n: u16 = n.parse().unwrap_or(0);
        assert!(n <= ABI_MINOR || n == ABI_MINOR + 3, "docs/writing-a-pmd.md mentions ABI 1.{n}");
    }
}

#[test]
fn the_out_of_tree_walkthrough_of_the_guide_runs_as_written() {
    // Every ```sh block after a `<!-- ci: run -->` line, in order, in a fresh
    // directory, with this tree's `ironpath` first on PATH.
    let g = guide();
    let mut script = String::from("set -euo pipefail\n");
    let mut rest = g.as_str();
    while let Some(i) = rest.find("<!-- ci: run -->\n```sh\n") {
        let body = &rest[i + "<!-- ci: run -->\n```sh\n".len()..];
        let end = body.find("\n```").unwrap();
        script.push_str(&body[..end]);
        script.push('\n');
        rest = &body[end..];
    }
    assert!(script.contains("ironpath new-pmd"), "no walkthrough found in the guide");
    let dir = TmpDir::new("walkthrough");
    let path = format!("{}:{}", build_dir().display(), std::env::var("PATH").unwrap_or_default());
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&dir.0)
        .env("PATH", path)
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "the guide's commands failed:\n{script}\n--- stdout\n{out}\n--- stderr\n{err}");
    assert!(out.contains("net_mydrv    ABI"), "{out}");
    let i = out.find("Accumulated forward statistics").unwrap_or_else(|| panic!("{out}"));
    let rx: u64 = out[i..].split("RX-packets:").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(rx > 0, "no packet forwarded through net_mydrv:\n{out}");
    assert!(!err.contains("still in use") && !err.contains("refused"), "{err}");

    // `new-pmd`'s closing hint runs as printed, from where `new-pmd` ran, with
    // `ironpath` not on PATH (the crate is built already: cargo has nothing to do).
    let hint = out
        .lines()
        .skip_while(|l| !l.starts_with("build it and start testpmd"))
        .nth(1)
        .unwrap_or_else(|| panic!("no closing hint from new-pmd:\n{out}"))
        .trim();
    let mut run = std::process::Command::new("bash")
        .arg("-c")
        .arg(hint)
        .current_dir(&dir.0)
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        run.stdin.take().unwrap().write_all(b"show port info 0\nquit\n").unwrap();
    }
    let o = run.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "the hint failed:\n{hint}\n--- stdout\n{out}\n--- stderr\n{err}");
    assert!(out.contains("Driver name: net_mydrv") && out.contains("Bye..."), "{hint}\n{out}");
}
