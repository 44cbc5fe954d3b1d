//! `ironpath-eal`: the runtime every PMD and graph shares.
//!
//! It owns:
//! * [`memory`]: regions on 2 MiB hugepages, or ordinary pages with one warning;
//! * [`mempool`]: fixed-size mbuf pools with an MPMC free ring and per-lcore caches;
//! * [`mbuf`]: the safe packet handle [`Mbuf`] (chains, refcounts, indirect clones)
//!   and the raw fast-path helpers;
//! * [`mpmc`] and [`spsc`]: rings (our MPMC ring for pools, `ringbuf` SPSC for edges
//!   between lcores);
//! * [`lcore`]: lcore ids, pinned threads, `-l` lists;
//! * [`loader`]: the PMD plugin loader and its checks;
//! * [`port`]: ports made from devargs, their control API and fast-path handles;
//! * [`burst`]: [`Burst`], owned packets for the fast path with safe accessors;
//! * [`tsc`]: cycle counting;
//! * [`txbatch`]: [`TxBatcher`], TX batching with bounded delay and explicit TX
//!   completion (driver reclaim plus an emulated completion-coalescing policy);
//! * [`sleep`]: rx modes, and the doorbell and epoll set an idle lcore sleeps in;
//! * [`args`]: DPDK-style runtime arguments (`-l`, `--vdev`, `-d`, `--no-huge`, `-m`);
//! * [`Eal`]: the context tying loaded drivers and ports together (no globals).

pub mod args;
pub mod burst;
pub mod lcore;
pub mod libpcap;
pub mod loader;
pub mod logging;
pub mod mbuf;
pub mod memory;
pub mod mempool;
pub mod mpmc;
pub mod pci;
pub mod port;
pub mod simd;
pub mod sleep;
pub mod spsc;
mod sync;
pub mod tsc;
pub mod txbatch;

pub use burst::{prefetch, Burst, Drain, MAX_BURST};
pub use ironpath_abi as abi;
pub use mbuf::{Mbuf, MbufError, SegList};
pub use memory::{MemKind, MemPolicy};
pub use mempool::{Mempool, MempoolConfig, MempoolError, MempoolStats};
pub use port::{Port, PortError, PortId, PortState, RxQ, TxQ};
pub use sync::CachePadded;
pub use txbatch::{Completion, FlushReason, TxBatchConfig, TxBatchStats, TxBatcher, FLUSH_REASONS, TX_PUSH};

use loader::{LoadError, Registry};
use std::path::{Path, PathBuf};

/// Most ports one runtime holds (as DPDK's `RTE_MAX_ETHPORTS`).
pub const MAX_PORTS: usize = 32;

/// The runtime context: loaded drivers and the port table.
#[derive(Default)]
pub struct Eal {
    registry: Registry,
    ports: Vec<Option<Port>>,
    policy: MemPolicy,
}

impl Eal {
    /// A runtime with no plugins loaded yet.
    pub fn new(policy: MemPolicy) -> Self {
        Self { registry: Registry::default(), ports: Vec::new(), policy }
    }

    /// Load plugins from each path (file or directory), then, unless `defaults` is
    /// false, the default ones: every `$IRONPATH_PMD_PATH` entry, then the first of
    /// the executable-relative directories ([`loader::exe_dirs`]) that holds plugins,
    /// as DPDK's `-d` adds to its default driver directory. A default plugin whose
    /// driver a `-d` plugin provides already is skipped. Returns the refusals (what
    /// every file became: [`Eal::plugin_search`]).
    pub fn load_plugins(&mut self, paths: &[PathBuf], defaults: bool) -> Vec<LoadError> {
        let mut errs: Vec<LoadError> =
            paths.iter().flat_map(|p| self.registry.search(p, loader::Origin::Arg)).collect();
        if !defaults {
            return errs;
        }
        errs.extend(loader::env_paths().iter().flat_map(|p| self.registry.search(p, loader::Origin::Env)));
        if let Some(dir) = loader::exe_dirs().into_iter().find(|d| loader::plugin_files(d).is_ok_and(|f| !f.is_empty()))
        {
            errs.extend(self.registry.search(&dir, loader::Origin::Exe));
        }
        errs
    }

    /// What the plugin searches found (each file: loaded, refused or skipped) and
    /// where they looked.
    pub fn plugin_search(&self) -> (&[loader::Found], &[(PathBuf, loader::Origin)]) {
        (self.registry.found(), self.registry.searched())
    }

    /// Load one plugin file.
    pub fn load_plugin(&mut self, path: &Path) -> Result<std::sync::Arc<loader::Driver>, LoadError> {
        self.registry.load_one(path)
    }

    /// Loaded drivers.
    pub fn drivers(&self) -> &[std::sync::Arc<loader::Driver>] {
        self.registry.drivers()
    }

    /// Memory policy for pools made through [`Eal::pool_create`].
    pub fn mem_policy(&self) -> MemPolicy {
        self.policy
    }

    /// Create a pool with this runtime's memory policy.
    pub fn pool_create(&self, cfg: MempoolConfig) -> Result<Mempool, MempoolError> {
        let cfg = if self.policy == MemPolicy::NoHuge { cfg.policy(MemPolicy::NoHuge) } else { cfg };
        Mempool::create(&cfg)
    }

    /// Create a port from a devargs string (`net_null0,size=64`); returns its id.
    pub fn port_attach(&mut self, devargs: &str) -> Result<PortId, PortError> {
        let name = devargs.split(',').next().unwrap_or("").trim();
        if self.ports().any(|p| p.name() == name) {
            return Err(PortError::Exists(name.to_string()));
        }
        let slot = self.free_slot()?;
        let port = Port::probe(&self.registry, slot as PortId, devargs)?;
        self.ports[slot] = Some(port);
        Ok(slot as PortId)
    }

    /// Checks a devargs string (`net_null0,size=64`) as [`Eal::port_attach`] would,
    /// creating nothing: `Ok(true)` if the driver accepts the arguments, `Ok(false)`
    /// if its plugin cannot check them without probing (ABI < 1.4).
    pub fn check_devargs(&self, devargs: &str) -> Result<bool, PortError> {
        let devargs = devargs.trim();
        let (name, args) = devargs.split_once(',').map_or((devargs, ""), |(n, a)| (n.trim(), a.trim()));
        let Some(driver) = self.registry.find_for_instance(name) else {
            return Err(PortError::BadDevargs(devargs.to_string()));
        };
        match driver.check_args(name, args) {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(msg)) => Err(PortError::Probe { name: name.to_string(), msg, help: Some(driver.help.clone()) }),
        }
    }

    /// Create a port from an `-a/--allow` entry. A PCI address (`0000:00:01.0` or
    /// `00:01.0`, then optional `,KEY=VALUE...`) goes to the loaded driver that claims
    /// the function's vendor:device ids, probed as `ADDR` with `pci=ADDR` first in its
    /// arguments; anything else is a device string as for [`Eal::port_attach`].
    pub fn port_allow(&mut self, entry: &str) -> Result<PortId, PortError> {
        self.port_allow_in(Path::new(pci::SYSFS_PCI_DEVICES), entry)
    }

    fn port_allow_in(&mut self, sysfs: &Path, entry: &str) -> Result<PortId, PortError> {
        let entry = entry.trim();
        let (first, rest) = entry.split_once(',').map_or((entry, ""), |(a, r)| (a.trim(), r.trim()));
        let Some(addr) = pci::parse_addr(first) else { return self.port_attach(entry) };
        if self.ports().any(|p| p.name() == addr) {
            return Err(PortError::Exists(addr));
        }
        let id = pci::read_ids(sysfs, &addr)?;
        let Some(driver) = self.registry.find_for_pci(id).cloned() else {
            let claimed: Vec<String> = self
                .drivers()
                .iter()
                .filter(|d| !d.pci_ids.is_empty())
                .map(|d| {
                    let ids: Vec<String> = d.pci_ids.iter().map(|i| pci::fmt_id(*i)).collect();
                    format!("{} ({})", d.name, ids.join(", "))
                })
                .collect();
            return Err(PortError::NoPciDriver {
                addr,
                id: pci::fmt_id(id),
                claimed: if claimed.is_empty() { "none loaded (check -d)".into() } else { claimed.join("; ") },
            });
        };
        let slot = self.free_slot()?;
        let args = if rest.is_empty() { format!("pci={addr}") } else { format!("pci={addr},{rest}") };
        let port = Port::probe_driver(&driver, slot as PortId, &addr, &args, entry).map_err(|e| match e {
            // The usage line reads `ADDR,KEY=VALUE...`: `pci=` is implied by `-a ADDR`.
            PortError::Probe { name, msg, help } => {
                let help = help.map(|h| h.split(',').filter(|k| !k.starts_with("pci=")).collect::<Vec<_>>().join(","));
                PortError::Probe { name, msg, help }
            }
            e => e,
        })?;
        self.ports[slot] = Some(port);
        Ok(slot as PortId)
    }

    fn free_slot(&mut self) -> Result<usize, PortError> {
        match self.ports.iter().position(Option::is_none) {
            Some(i) => Ok(i),
            None if self.ports.len() < MAX_PORTS => {
                self.ports.push(None);
                Ok(self.ports.len() - 1)
            }
            None => Err(PortError::TooMany(MAX_PORTS)),
        }
    }

    /// Close and remove a port.
    pub fn port_detach(&mut self, id: PortId) -> Result<(), PortError> {
        let slot = self.ports.get_mut(id as usize).ok_or(PortError::NoPort(id))?;
        let p = slot.as_mut().ok_or(PortError::NoPort(id))?;
        p.close()?;
        *slot = None;
        Ok(())
    }

    /// Re-initialises a stopped port: closed, then probed again with the same
    /// device arguments under the same id (configuration and queues are lost). If
    /// the new probe fails, the port is gone and the error says why.
    pub fn port_reset(&mut self, id: PortId) -> Result<(), PortError> {
        let slot = self.ports.get_mut(id as usize).ok_or(PortError::NoPort(id))?;
        let old = slot.as_mut().ok_or(PortError::NoPort(id))?;
        match old.reprobe() {
            Ok(new) => {
                *slot = Some(new);
                Ok(())
            }
            Err(e @ PortError::State { .. }) => Err(e),
            Err(e) => {
                *slot = None;
                Err(e)
            }
        }
    }

    /// A port by id.
    pub fn port(&self, id: PortId) -> Result<&Port, PortError> {
        self.ports.get(id as usize).and_then(Option::as_ref).ok_or(PortError::NoPort(id))
    }

    /// A port by id, for control operations.
    pub fn port_mut(&mut self, id: PortId) -> Result<&mut Port, PortError> {
        self.ports.get_mut(id as usize).and_then(Option::as_mut).ok_or(PortError::NoPort(id))
    }

    /// All ports, in id order.
    pub fn ports(&self) -> impl Iterator<Item = &Port> {
        self.ports.iter().flatten()
    }

    /// All ports, mutable.
    pub fn ports_mut(&mut self) -> impl Iterator<Item = &mut Port> {
        self.ports.iter_mut().flatten()
    }

    /// Ids of all ports.
    pub fn port_ids(&self) -> Vec<PortId> {
        self.ports().map(Port::id).collect()
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        // Ports first (they call into their libraries), then the registry.
        self.ports.clear();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn allow_entries_go_to_the_driver_of_the_pci_function() {
        let root = std::env::temp_dir().join(format!("ironpath-allow-{}", std::process::id()));
        let dev = root.join("0000:00:01.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("vendor"), "0x8086\n").unwrap();
        std::fs::write(dev.join("device"), "0x100e\n").unwrap();
        let mut eal = Eal::new(MemPolicy::NoHuge);
        let e = eal.port_allow_in(&root, "00:01.0,promisc=0").unwrap_err().to_string();
        assert_eq!(
            e,
            "-a 0000:00:01.0: no loaded driver drives PCI device 0000:00:01.0 (8086:100e); \
             drivers of PCI devices: none loaded (check -d)"
        );
        let e = eal.port_allow_in(&root, "0000:00:02.0").unwrap_err().to_string();
        assert_eq!(e, "-a 0000:00:02.0: no PCI device 0000:00:02.0 (lspci -D lists them)");
        // Not a PCI address: a device name, as with --vdev.
        let e = eal.port_allow_in(&root, "net_null0").unwrap_err();
        assert!(matches!(e, PortError::NoDriver { .. }), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
