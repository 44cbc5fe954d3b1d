//! DPDK-style runtime (EAL) arguments, the part before `--` on a command line:
//! `-l 0-1` or `-c 0x3` (neither: every CPU this process may run on, as DPDK),
//! `--vdev net_null0,size=64` (repeatable), `-a`/`-b` (repeatable), `-d PATH`
//! (repeatable, file or directory, added to the default plugins),
//! `--no-default-plugins`, `--no-huge`, `-m MB`, `--log-level`,
//! `--file-prefix`, `--no-pci` (accepted; no PCI bus scan exists).

use crate::lcore::{parse_lcore_list, LcoreError};
use std::path::PathBuf;

/// Usage text of the runtime arguments.
pub const USAGE: &str = "\
runtime arguments (before `--`):
  -l, --lcores LIST    lcores to use, e.g. 0-1 or 0,2 (first = main lcore)
                       [default: every CPU this process may run on]
  -c COREMASK          lcores as a hexadecimal bit mask, e.g. 0x3 (= -l 0-1)
  --vdev DEVARGS       add a virtual device, e.g. net_null0,size=64 (repeatable)
  -a, --allow DEVARGS  add a device by bus address (PCI PMDs) (repeatable)
  -b, --block ADDR     never probe the device at ADDR (repeatable; not with -a)
  -d PATH              also load a PMD plugin file or every plugin in a directory
                       (repeatable; before the default ones: $IRONPATH_PMD_PATH and
                       the directory next to the executable)
  --no-default-plugins only the -d plugins
  --no-huge            use ordinary pages instead of hugepages
  -m MB                memory to reserve, in MiB (checked against pool sizes)
  --no-pci             accepted for DPDK compatibility (no PCI scan is done)
  -n N                 memory channels: accepted for DPDK compatibility, ignored
  --main-lcore ID      which lcore of -l is the main one [default: the first]
  --log-level LEVEL    log level: emergency, alert, critical, error, warning,
                       notice, info, debug or 1-8 [default: notice]; PATTERN:LEVEL
                       sets it for the log targets PATTERN matches (repeatable)
  --file-prefix NAME   names this process's runtime directory, where its
                       telemetry socket is (/var/run/dpdk/NAME) [default: rte]
  --no-telemetry       no telemetry socket
  --metrics ADDR:PORT  serve Prometheus/OpenMetrics text at http://ADDR:PORT/metrics
                       (ADDR: an IP address, [IPv6], a host name, or none: every
                       IPv4 address)";

/// Parsed runtime arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EalArgs {
    /// Lcore list (sorted; first is the main lcore).
    pub lcores: Vec<u32>,
    /// Virtual devices, in order.
    pub vdevs: Vec<String>,
    /// Devices added with `-a`.
    pub allow: Vec<String>,
    /// Plugin paths (`-d`), loaded before the default ones.
    pub plugin_paths: Vec<PathBuf>,
    /// `--no-default-plugins`: only the `-d` plugins.
    pub no_default_plugins: bool,
    /// `--no-huge`.
    pub no_huge: bool,
    /// `-m`.
    pub mem_mb: Option<u64>,
    /// `--main-lcore`.
    pub main_lcore: Option<u32>,
    /// Devices never probed (`-b`).
    pub block: Vec<String>,
    /// `--log-level` values, checked, in order (apply with [`EalArgs::apply_log_levels`]).
    pub log_levels: Vec<String>,
    /// `--file-prefix` [default: `rte`].
    pub file_prefix: String,
    /// `--no-telemetry`.
    pub no_telemetry: bool,
    /// `--metrics ADDR:PORT`.
    pub metrics: Option<String>,
}

/// A bad runtime argument.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// Unknown option, with a did-you-mean or, failing one, where application
    /// arguments go.
    #[error("unknown runtime argument `{0}`{1}")]
    Unknown(String, String),
    /// `-l`/`-c` names CPUs the process may not run on (its affinity mask).
    #[error("{opt}: lcore(s) {unusable} unavailable: this process may run on CPU(s) {usable} only (its CPU affinity)")]
    Unavailable {
        /// `-l` or `-c`.
        opt: String,
        /// The lcores named that it may not use, as a list (`2-63`).
        unusable: String,
        /// The CPUs it may use, as a list (`0-1`).
        usable: String,
    },
    /// Option without its value.
    #[error("`{0}` needs a value: {1}")]
    MissingValue(String, &'static str),
    /// Bad value.
    #[error("`{opt}`: {why}")]
    BadValue {
        /// Option.
        opt: String,
        /// What is wrong.
        why: String,
    },
}

fn usage_of(opt: &str) -> &'static str {
    match opt {
        "-l" | "--lcores" => "-l LIST, e.g. -l 0-1",
        "--vdev" => "--vdev NAME[,KEY=VALUE...], e.g. --vdev net_null0,size=64",
        "-a" | "--allow" => "-a DEVARGS, e.g. -a 0000:00:04.0",
        "-b" | "--block" => "-b ADDR, e.g. -b 0000:00:04.0",
        "-c" => "-c COREMASK, e.g. -c 0x3",
        "--log-level" => "--log-level LEVEL or PATTERN:LEVEL, e.g. --log-level debug",
        "--file-prefix" => "--file-prefix NAME, e.g. --file-prefix vm1",
        "--metrics" => "--metrics [ADDR]:PORT, e.g. --metrics 127.0.0.1:9100, localhost:9100, [::1]:9100 or :9100",
        "-d" => "-d PATH (a plugin .so or a directory of them)",
        "-m" => "-m MB, e.g. -m 512",
        "--main-lcore" => "--main-lcore ID, e.g. --main-lcore 1",
        "-n" => "-n CHANNELS, e.g. -n 4",
        _ => "",
    }
}

impl EalArgs {
    /// Parse runtime arguments up to `--`; returns them and the remaining
    /// (application) arguments after `--`.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<(EalArgs, Vec<String>), ArgsError> {
        let mut out = EalArgs { file_prefix: "rte".into(), ..EalArgs::default() };
        let mut coremask = None;
        let mut it = args.iter().map(|s| s.as_ref().to_string());
        let mut rest = Vec::new();
        while let Some(a) = it.next() {
            if a == "--" {
                rest.extend(it);
                break;
            }
            // Accept both `-l 0-1`, `-l0-1` and `--lcores=0-1`.
            let (opt, inline) = if let Some((o, v)) = a.split_once('=').filter(|_| a.starts_with("--")) {
                (o.to_string(), Some(v.to_string()))
            } else if let (Some(short @ ("-l" | "-d" | "-m" | "-a" | "-b" | "-c" | "-n")), Some(rest)) =
                (a.get(..2), a.get(2..))
            {
                // `get` rather than indexing: a multi-byte character at byte 2 is not
                // a short option with a glued value (found by the `cmdline` fuzzer).
                if rest.is_empty() {
                    (short.to_string(), None)
                } else {
                    (short.to_string(), Some(rest.to_string()))
                }
            } else {
                (a.clone(), None)
            };
            let mut value = |opt: &str| -> Result<String, ArgsError> {
                match inline.clone().or_else(|| it.next()) {
                    Some(v) if !v.is_empty() => Ok(v),
                    _ => Err(ArgsError::MissingValue(opt.to_string(), usage_of(opt))),
                }
            };
            match opt.as_str() {
                "-l" | "--lcores" => {
                    let v = value(&opt)?;
                    out.lcores = parse_lcore_list(&v)
                        .map_err(|e: LcoreError| ArgsError::BadValue { opt: opt.clone(), why: e.to_string() })?;
                }
                "--vdev" => out.vdevs.push(value(&opt)?),
                "-a" | "--allow" => out.allow.push(value(&opt)?),
                "-b" | "--block" => out.block.push(value(&opt)?),
                "-c" => {
                    let v = value(&opt)?;
                    coremask = Some(parse_coremask(&v).map_err(|why| ArgsError::BadValue { opt: opt.clone(), why })?);
                }
                "--log-level" => {
                    let v = value(&opt)?;
                    let level = v.rsplit_once(':').filter(|(p, _)| !p.is_empty()).map_or(v.as_str(), |(_, l)| l);
                    crate::logging::parse_level(level).map_err(|why| ArgsError::BadValue { opt: opt.clone(), why })?;
                    out.log_levels.push(v);
                }
                "--file-prefix" => {
                    let v = value(&opt)?;
                    if v.contains('/') || v == "." || v == ".." {
                        return Err(ArgsError::BadValue { opt, why: format!("`{v}` is not a file name") });
                    }
                    out.file_prefix = v;
                }
                "-d" => out.plugin_paths.push(PathBuf::from(value(&opt)?)),
                "--no-huge" => out.no_huge = true,
                "--no-default-plugins" => out.no_default_plugins = true,
                "--no-pci" => {}
                // Our hugepages are anonymous mappings: no file is left to unlink, no
                // shared runtime directory is made (DPDK's meaning of both).
                "--huge-unlink" | "--in-memory" => {}
                "--no-telemetry" => out.no_telemetry = true,
                "--metrics" => {
                    let v = value(&opt)?;
                    metrics_syntax(&v).map_err(|why| ArgsError::BadValue { opt: opt.clone(), why })?;
                    out.metrics = Some(v);
                }
                "--main-lcore" => {
                    let v = value(&opt)?;
                    out.main_lcore = Some(v.parse().map_err(|_| ArgsError::BadValue {
                        opt: opt.clone(),
                        why: format!("`{v}` is not an lcore id"),
                    })?);
                }
                "-n" => {
                    let v = value(&opt)?;
                    v.parse::<u32>().map_err(|_| ArgsError::BadValue {
                        opt: opt.clone(),
                        why: format!("`{v}` is not a number of memory channels"),
                    })?;
                }
                "-m" => {
                    let v = value(&opt)?;
                    let mb = v.parse::<u64>().map_err(|_| ArgsError::BadValue {
                        opt: opt.clone(),
                        why: format!("`{v}` is not a number of MiB ({})", usage_of("-m")),
                    })?;
                    out.mem_mb = Some(mb);
                }
                _ => return Err(ArgsError::Unknown(a.clone(), unknown_hint(&opt))),
            }
        }
        if !out.allow.is_empty() && !out.block.is_empty() {
            return Err(ArgsError::BadValue {
                opt: "-b".into(),
                why: "options allow (-a) and block (-b) can't be used at the same time".into(),
            });
        }
        match coremask {
            Some(_) if !out.lcores.is_empty() => {
                return Err(ArgsError::BadValue {
                    opt: "-c".into(),
                    why: "-c and -l name the lcores twice: use one".into(),
                })
            }
            Some(m) => out.lcores = m,
            None if out.lcores.is_empty() => out.lcores = usable_cpus(),
            None => {}
        }
        if let Some(m) = out.main_lcore {
            let Some(i) = out.lcores.iter().position(|l| *l == m) else {
                return Err(ArgsError::BadValue {
                    opt: "--main-lcore".into(),
                    why: format!("lcore {m} is not in the lcore list {:?}", out.lcores),
                });
            };
            // The main lcore goes first; the others keep their order.
            out.lcores.remove(i);
            out.lcores.insert(0, m);
        }
        Ok((out, rest))
    }

    /// Applies the `--log-level` values to the process's logger.
    pub fn apply_log_levels(&self) {
        crate::logging::init();
        for l in &self.log_levels {
            // Checked by `parse`.
            let _ = crate::logging::set_level(l);
        }
    }

    /// The memory policy these arguments ask for.
    pub fn mem_policy(&self) -> crate::MemPolicy {
        if self.no_huge {
            crate::MemPolicy::NoHuge
        } else {
            crate::MemPolicy::PreferHuge
        }
    }
}

/// `-c`: a hexadecimal mask, bit N = lcore N.
fn parse_coremask(v: &str) -> Result<Vec<u32>, String> {
    let hex = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
    let bad = || format!("`{v}` is not a hexadecimal core mask (e.g. 0x3 for lcores 0 and 1)");
    if hex.is_empty() || hex.len() > 32 {
        return Err(bad());
    }
    let mask = u128::from_str_radix(hex, 16).map_err(|_| bad())?;
    if mask == 0 {
        return Err(format!("`{v}` names no lcore"));
    }
    Ok((0..128).filter(|i| mask >> i & 1 == 1).collect())
}

/// The CPUs this process may run on (its affinity), as DPDK takes them without `-l`.
/// The options [`EalArgs::parse`] accepts, for "did you mean".
const OPTIONS: &[&str] = &[
    "-l",
    "--lcores",
    "-c",
    "--vdev",
    "-a",
    "--allow",
    "-b",
    "--block",
    "-d",
    "--no-default-plugins",
    "--no-huge",
    "-m",
    "--no-pci",
    "-n",
    "--main-lcore",
    "--log-level",
    "--file-prefix",
    "--no-telemetry",
    "--metrics",
    "--huge-unlink",
    "--in-memory",
];

/// The tail of an unknown-argument message: the closest runtime option, else where
/// application arguments go.
fn unknown_hint(opt: &str) -> String {
    // Every one-letter option is one edit from `-l`: no suggestion among those.
    let close =
        if opt.chars().count() > 2 { ironpath_util::suggest::closest(opt, OPTIONS.iter().copied()) } else { None };
    match close {
        Some(c) => format!(" (did you mean `{c}`?)"),
        None => format!("; application arguments go after `--` ([runtime args] -- {opt}); `--help` lists both kinds"),
    }
}

/// The socket address of `--metrics`: `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT` (the
/// host's first address) or `:PORT` (every IPv4 address, as `0.0.0.0:PORT`). The
/// one reading of the option: the argument checks and the endpoint use it.
pub fn metrics_addr(v: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    match metrics_syntax(v)? {
        MetricsAddr::Addr(sa) => Ok(sa),
        MetricsAddr::Host(host, port) => match (host, port).to_socket_addrs() {
            Ok(mut addrs) => addrs.next().ok_or_else(|| format!("`{v}`: host `{host}` has no address")),
            Err(e) => Err(format!("`{v}`: host `{host}`: {e}")),
        },
    }
}

/// `--metrics` as written: an address, or a host name still to look up.
enum MetricsAddr<'a> {
    Addr(std::net::SocketAddr),
    Host(&'a str, u16),
}

/// `--metrics` read without resolving a name (for [`EalArgs::parse`], which looks
/// up nothing).
fn metrics_syntax(v: &str) -> Result<MetricsAddr<'_>, String> {
    let bad = || format!("`{v}` is not an ADDRESS:PORT ({})", usage_of("--metrics"));
    if let Ok(sa) = v.parse::<std::net::SocketAddr>() {
        return Ok(MetricsAddr::Addr(sa));
    }
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() {
        return Ok(MetricsAddr::Addr(std::net::SocketAddr::from(([0, 0, 0, 0], port))));
    }
    // A host name: letters, digits, `-` and `.` (an IPv6 address needs its brackets
    // and must parse).
    if !host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
        return Err(bad());
    }
    Ok(MetricsAddr::Host(host, port))
}

/// `cpus` as a short list: `0-1,4,6-7`.
fn fmt_cpu_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

impl EalArgs {
    /// Refuses lcores that name CPUs this process may not run on (its affinity
    /// mask, as `taskset` or a cgroup set it), as DPDK refuses a core list naming
    /// CPUs it cannot use. Checked apart from [`EalArgs::parse`], which reads only
    /// the syntax.
    pub fn check_cpus(&self) -> Result<(), ArgsError> {
        self.check_cpus_in(&usable_cpus())
    }

    /// [`EalArgs::check_cpus`] against the CPUs `usable` (sorted).
    pub fn check_cpus_in(&self, usable: &[u32]) -> Result<(), ArgsError> {
        let mut bad: Vec<u32> = self.lcores.iter().copied().filter(|l| !usable.contains(l)).collect();
        if bad.is_empty() {
            return Ok(());
        }
        bad.sort_unstable();
        Err(ArgsError::Unavailable { opt: "-l".into(), unusable: fmt_cpu_list(&bad), usable: fmt_cpu_list(usable) })
    }
}

fn usable_cpus() -> Vec<u32> {
    let cpus: Vec<u32> = rustix::thread::sched_getaffinity(None)
        .map(|set| (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).map(|c| c as u32).collect())
        .unwrap_or_default();
    if cpus.is_empty() {
        vec![0]
    } else {
        cpus
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn lcores_outside_the_affinity_mask_are_refused() {
        let (a, _) = EalArgs::parse(&["-l", "0-63"]).unwrap();
        let e = a.check_cpus_in(&[0, 1]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-l: lcore(s) 2-63 unavailable: this process may run on CPU(s) 0-1 only (its CPU affinity)"
        );
        let (a, _) = EalArgs::parse(&["-l", "0,2,5-6"]).unwrap();
        assert!(a.check_cpus_in(&[0, 2, 5, 6, 7]).is_ok());
        assert!(a.check_cpus_in(&[0, 1, 2, 4]).unwrap_err().to_string().contains("lcore(s) 5-6 unavailable"));
        assert_eq!(fmt_cpu_list(&[0, 1, 2, 4, 6, 7]), "0-2,4,6-7");
        // Without -l: the CPUs it may use, which pass.
        let (a, _) = EalArgs::parse::<&str>(&[]).unwrap();
        assert!(a.check_cpus().is_ok());
    }

    #[test]
    fn metrics_addresses_with_a_name_brackets_or_no_address() {
        assert_eq!(metrics_addr("127.0.0.1:9198").unwrap().to_string(), "127.0.0.1:9198");
        assert_eq!(metrics_addr(":9198").unwrap().to_string(), "0.0.0.0:9198");
        assert_eq!(metrics_addr("[::1]:9198").unwrap().to_string(), "[::1]:9198");
        assert!(metrics_addr("localhost:9198").unwrap().ip().is_loopback());
        for bad in ["9198", "::1:9198", "localhost", "localhost:x", "127.0.0.1:70000", "[::1:9198", "a b:1"] {
            assert!(metrics_addr(bad).is_err(), "{bad}");
            assert!(EalArgs::parse(&["--metrics", bad]).is_err(), "{bad}");
        }
        // The argument check looks nothing up; the endpoint does.
        assert!(EalArgs::parse(&["--metrics", "no-such-host.invalid:9198"]).is_ok());
        assert!(metrics_addr("no-such-host.invalid:9198").is_err());
    }

    #[test]
    fn unknown_arguments_get_a_suggestion_or_where_app_arguments_go() {
        let e = EalArgs::parse(&["--vdve", "net_null0"]).unwrap_err().to_string();
        assert_eq!(e, "unknown runtime argument `--vdve` (did you mean `--vdev`?)");
        let e = EalArgs::parse(&["-l", "0", "-i"]).unwrap_err().to_string();
        assert!(e.starts_with("unknown runtime argument `-i`; application arguments go after `--`"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }

    #[test]
    fn parses_dpdk_style_arguments() {
        let (a, rest) = EalArgs::parse(&[
            "-l",
            "0-1",
            "--vdev",
            "net_null0,size=64",
            "--vdev=net_null1",
            "-d/tmp/p",
            "--no-huge",
            "--huge-unlink",
            "--in-memory",
            "-m",
            "512",
            "--",
            "-i",
            "--burst=32",
        ])
        .unwrap();
        assert_eq!(a.lcores, vec![0, 1]);
        assert_eq!(a.vdevs, vec!["net_null0,size=64", "net_null1"]);
        assert_eq!(a.plugin_paths, vec![PathBuf::from("/tmp/p")]);
        assert!(a.no_huge);
        assert_eq!(a.mem_mb, Some(512));
        assert_eq!(rest, vec!["-i", "--burst=32"]);
    }

    #[test]
    fn dpdk_compat_arguments() {
        let (a, _) =
            EalArgs::parse(&["-c", "0x5", "--log-level=pmd.*:debug", "--file-prefix", "vm1", "-b", "0000:00:04.0"])
                .unwrap();
        assert_eq!(a.lcores, vec![0, 2]);
        assert_eq!(a.log_levels, vec!["pmd.*:debug"]);
        assert_eq!(a.file_prefix, "vm1");
        assert_eq!(a.block, vec!["0000:00:04.0"]);
        let (a, _) = EalArgs::parse::<&str>(&[]).unwrap();
        assert_eq!(a.file_prefix, "rte");
        assert_eq!(a.lcores, usable_cpus());
        assert!(!a.lcores.is_empty());
        let e = EalArgs::parse(&["-c", "0xg"]).unwrap_err();
        assert!(e.to_string().contains("not a hexadecimal core mask"), "{e}");
        let e = EalArgs::parse(&["-c", "0"]).unwrap_err();
        assert!(e.to_string().contains("names no lcore"), "{e}");
        let e = EalArgs::parse(&["-c", "3", "-l", "0"]).unwrap_err();
        assert!(e.to_string().contains("-c and -l"), "{e}");
        let e = EalArgs::parse(&["--log-level", "loud"]).unwrap_err();
        assert!(e.to_string().contains("`--log-level`: `loud` is not a log level: accepted emergency"), "{e}");
        let e = EalArgs::parse(&["-a", "0000:00:04.0", "-b", "0000:00:05.0"]).unwrap_err();
        assert!(e.to_string().contains("can't be used at the same time"), "{e}");
        let e = EalArgs::parse(&["--file-prefix", "../x"]).unwrap_err();
        assert!(e.to_string().contains("not a file name"), "{e}");
    }

    #[test]
    fn main_lcore_goes_first() {
        let (a, _) = EalArgs::parse(&["-l", "0-2", "--main-lcore", "2"]).unwrap();
        assert_eq!(a.lcores, vec![2, 0, 1]);
        let e = EalArgs::parse(&["-l", "0-1", "--main-lcore", "5"]).unwrap_err();
        assert!(e.to_string().contains("lcore 5 is not in the lcore list"), "{e}");
    }

    #[test]
    fn non_ascii_arguments_are_errors_not_panics() {
        // From a fuzzer crash: a multi-byte character right after the dash.
        assert!(EalArgs::parse(&["-é"]).is_err());
        assert!(EalArgs::parse(&["-lé"]).is_err());
        assert!(EalArgs::parse(&["é"]).is_err());
    }

    #[test]
    fn errors_name_the_argument() {
        let e = EalArgs::parse(&["--vdve", "x"]).unwrap_err();
        assert!(e.to_string().starts_with("unknown runtime argument `--vdve`"), "{e}");
        let e = EalArgs::parse(&["-l"]).unwrap_err();
        assert_eq!(e, ArgsError::MissingValue("-l".into(), "-l LIST, e.g. -l 0-1"));
        let e = EalArgs::parse(&["-m", "lots"]).unwrap_err();
        assert!(e.to_string().contains("`lots` is not a number"), "{e}");
        let e = EalArgs::parse(&["-l", "2-1"]).unwrap_err();
        assert!(e.to_string().contains("goes backwards"), "{e}");
    }
}
