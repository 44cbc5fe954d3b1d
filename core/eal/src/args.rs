//! DPDK-style runtime (EAL) arguments, the part before `--` on a command line:
//! `-l 0-1`, `--vdev net_null0,size=64` (repeatable), `-d PATH` (repeatable, file or
//! directory), `--no-huge`, `-m MB`, `--no-pci` (accepted; no PCI bus scan exists).

use crate::lcore::{parse_lcore_list, LcoreError};
use std::path::PathBuf;

/// Usage text of the runtime arguments.
pub const USAGE: &str = "\
runtime arguments (before `--`):
  -l, --lcores LIST    lcores to use, e.g. 0-1 or 0,2 (first = main lcore) [default: 0]
  --vdev DEVARGS       add a virtual device, e.g. net_null0,size=64 (repeatable)
  -a, --allow DEVARGS  add a device by bus address (PCI PMDs) (repeatable)
  -d PATH              load a PMD plugin file or every plugin in a directory (repeatable)
  --no-huge            use ordinary pages instead of hugepages
  -m MB                memory to reserve, in MiB (checked against pool sizes)
  --no-pci             accepted for DPDK compatibility (no PCI scan is done)
  -n N                 memory channels: accepted for DPDK compatibility, ignored
  --main-lcore ID      which lcore of -l is the main one [default: the first]";

/// Parsed runtime arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EalArgs {
    /// Lcore list (sorted; first is the main lcore).
    pub lcores: Vec<u32>,
    /// Virtual devices, in order.
    pub vdevs: Vec<String>,
    /// Devices added with `-a`.
    pub allow: Vec<String>,
    /// Plugin paths.
    pub plugin_paths: Vec<PathBuf>,
    /// `--no-huge`.
    pub no_huge: bool,
    /// `-m`.
    pub mem_mb: Option<u64>,
    /// `--main-lcore`.
    pub main_lcore: Option<u32>,
}

/// A bad runtime argument.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// Unknown option.
    #[error("unknown runtime argument `{0}`\n{USAGE}")]
    Unknown(String),
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
        let mut out = EalArgs::default();
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
            } else if let (Some(short @ ("-l" | "-d" | "-m" | "-a" | "-n")), Some(rest)) = (a.get(..2), a.get(2..)) {
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
                "-d" => out.plugin_paths.push(PathBuf::from(value(&opt)?)),
                "--no-huge" => out.no_huge = true,
                "--no-pci" => {}
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
                _ => return Err(ArgsError::Unknown(a)),
            }
        }
        if out.lcores.is_empty() {
            out.lcores = vec![0];
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

    /// The memory policy these arguments ask for.
    pub fn mem_policy(&self) -> crate::MemPolicy {
        if self.no_huge {
            crate::MemPolicy::NoHuge
        } else {
            crate::MemPolicy::PreferHuge
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

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
