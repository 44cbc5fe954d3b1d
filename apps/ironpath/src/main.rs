//! `ironpath`: the command-line front end of the framework.
//!
//! * `ironpath testpmd [runtime args] -- [app args]`: DPDK testpmd's shell and
//!   forwarding engines on ironpath ports;
//! * `ironpath run FILE`: run a YAML pipeline (graph of nodes on lcores);
//! * `ironpath check FILE...`: validate pipeline files;
//! * `ironpath ctl [-f PREFIX] [COMMAND...]`: commands to a running `run` or
//!   `testpmd` (`show runtime`, `show interface` ...), one-shot or as a shell;
//! * `ironpath plugins [-d DIR]`: list the PMD plugins found and their device
//!   arguments, and what became of every plugin file;
//! * `ironpath new-pmd NAME`: a new driver crate made from the template;
//! * `ironpath --version`: the version and the plugin ABI.
#![forbid(unsafe_code)]

use ironpath::testpmd;

fn usage() -> &'static str {
    "usage: ironpath COMMAND [ARGS]\n\ncommands:\n  testpmd [runtime args] -- [app args]   packet forwarding shell (see `ironpath testpmd --help`)\n  run FILE [options]                     run a YAML pipeline (see `ironpath run --help`)\n  check FILE...                          validate pipeline files\n  ctl [-f PREFIX] [-i N] [COMMAND...]    commands to a running run or testpmd (see `ironpath ctl --help`)\n  plugins [-d PATH]...                   list loadable PMD plugins and their device arguments
  new-pmd NAME [--dir DIR]               create a PMD crate for driver net_NAME from the template
  --version                              the version and the PMD plugin ABI it implements"
}

fn plugins(args: &[String]) -> i32 {
    let (eal_args, _) = match ironpath_eal::args::EalArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ironpath plugins: {e}");
            return 1;
        }
    };
    let mut eal = ironpath_eal::Eal::new(eal_args.mem_policy());
    let refused = eal.load_plugins(&eal_args.plugin_paths, !eal_args.no_default_plugins);
    for d in eal.drivers() {
        ironpath::outln!(
            "{:<12} ABI 1.{}  {}\n             {},{}",
            d.name,
            d.abi_minor,
            d.path.display(),
            d.name,
            d.help
        );
        if !d.pci_ids.is_empty() {
            let ids: Vec<String> = d.pci_ids.iter().map(|i| ironpath_eal::pci::fmt_id(*i)).collect();
            ironpath::outln!("             PCI {} (-a DDDD:BB:DD.F)", ids.join(", "));
        }
    }
    let (found, searched) = eal.plugin_search();
    ironpath::outln!(
        "\nsearched (in order; this host implements ABI {}.{}):",
        ironpath_eal::abi::ABI_MAJOR,
        ironpath_eal::abi::ABI_MINOR
    );
    for (path, origin) in searched {
        ironpath::outln!("  {} ({origin})", path.display());
    }
    if eal_args.no_default_plugins {
        ironpath::outln!(
            "  (--no-default-plugins: $IRONPATH_PMD_PATH and the directory next to the executable skipped)"
        );
    }
    ironpath::outln!("files:");
    for f in found {
        match &f.outcome {
            ironpath_eal::loader::Outcome::Loaded(name) => {
                ironpath::outln!("  loaded   {} ({name})", f.path.display())
            }
            ironpath_eal::loader::Outcome::Skipped(name) => {
                ironpath::outln!("  skipped  {} ({name} is provided by a plugin loaded before it)", f.path.display())
            }
            ironpath_eal::loader::Outcome::Refused(_, why) => ironpath::outln!("  refused  {why}"),
        }
    }
    if eal.drivers().is_empty() {
        eprintln!("{}", ironpath::no_plugin_message(refused.len()));
        return 1;
    }
    0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    ironpath_eal::logging::init();
    let code = match args.first().map(String::as_str) {
        Some("testpmd") => testpmd::main(&args[1..]),
        Some("plugins") => plugins(&args[1..]),
        Some("new-pmd") => ironpath::newpmd::main(&args[1..]),
        Some("run") => ironpath::pipeline::cli::run_main(&args[1..]),
        Some("check") => ironpath::pipeline::cli::check_main(&args[1..]),
        Some("ctl") => ironpath::ctl::client::main(&args[1..]),
        Some("-V" | "--version" | "version") => {
            ironpath::outln!(
                "ironpath {} (PMD plugin ABI {}.{})",
                env!("CARGO_PKG_VERSION"),
                ironpath_eal::abi::ABI_MAJOR,
                ironpath_eal::abi::ABI_MINOR
            );
            0
        }
        Some("-h" | "--help" | "help") => {
            ironpath::outln!("{}", usage());
            0
        }
        Some(other) => {
            eprintln!("ironpath: unknown command `{other}`\n{}", usage());
            2
        }
        None => {
            eprintln!("{}", usage());
            2
        }
    };
    std::process::exit(code);
}
