//! The shell's device commands with DPDK 22.11 testpmd's syntax and output:
//! `port config mtu`, `mac_addr set`, `show rxq|txq info`, `show device info`,
//! `show config txpkts`, `dump_mempool` / `show mempool`, and the `set` words
//! `eth-peer`, `nbport`, `record-core-cycles` and `xstats-hide-zero`.
//!
//! DPDK's texts for the same commands, recorded once with net_null and net_ring
//! ports, are quoted next to each.

use super::display;
use super::App;
use ironpath_eal::{Mempool, Port, PortError};
use std::fmt::Write;

/// A negative errno, as DPDK prints it in `diag=`.
fn diag(e: &PortError) -> i32 {
    match e {
        PortError::Errno { err, .. } => -err.raw_os_error().unwrap_or(5),
        PortError::NotSupported { .. } => -95,
        _ => -22,
    }
}

/// A MAC address `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in m.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// `port config mtu PORT N`. DPDK: `MTU (10) < device min MTU (46) for port_id 0`;
/// on net_ring `Set MTU failed. diag=-95`; nothing on success.
pub fn port_mtu(app: &mut App, port: u16, mtu: u16) -> Result<String, String> {
    let p = app.eal.port_mut(port).map_err(|_| format!("Invalid port {port}"))?;
    if let Ok(i) = p.dev_info() {
        if mtu < i.min_mtu {
            return Err(format!("MTU ({mtu}) < device min MTU ({}) for port_id {port}", i.min_mtu));
        }
        if i.max_mtu > 0 && mtu > i.max_mtu {
            return Err(format!("MTU ({mtu}) > device max MTU ({}) for port_id {port}", i.max_mtu));
        }
    }
    p.set_mtu(mtu).map(|()| String::new()).map_err(|e| format!("Set MTU failed. diag={} ({e})", diag(&e)))
}

/// `mac_addr set PORT MAC`. DPDK: nothing on success; `mac_addr_cmd error:
/// (Operation not supported)` where the driver cannot.
pub fn mac_addr_set(app: &mut App, port: u16, mac: &str) -> Result<String, String> {
    let m = parse_mac(mac).ok_or_else(|| format!("Error: Invalid ethernet address: {mac}"))?;
    let p = app.eal.port_mut(port).map_err(|_| format!("Invalid port {port}"))?;
    p.set_mac(m).map(|()| String::new()).map_err(|e| {
        let why = match &e {
            PortError::Errno { err, .. } => err.to_string(),
            _ => "Operation not supported".into(),
        };
        format!("mac_addr_cmd error: ({why})")
    })
}

/// `mac_addr add|remove PORT MAC` (ABI 1.5): silent on success, as DPDK.
pub fn mac_addr_add_remove(app: &mut App, add: bool, port: u16, mac: &str) -> Result<String, String> {
    let m = parse_mac(mac).ok_or_else(|| format!("Error: Invalid ethernet address: {mac}"))?;
    let p = app.eal.port_mut(port).map_err(|_| format!("Invalid port {port}"))?;
    let r = if add { p.add_mac(m) } else { p.remove_mac(m) };
    r.map(|()| String::new()).map_err(|e| format!("mac_addr_cmd error: ({})", why(&e)))
}

/// DPDK's wording of an error: the errno's text, or "Operation not supported".
fn why(e: &PortError) -> String {
    match e {
        PortError::Errno { err, msg, .. } => {
            // "Invalid argument (os error 22)" -> "Invalid argument", as strerror.
            let text = err.to_string();
            let text = text.split(" (os error").next().unwrap_or_default().to_string();
            // DPDK says no more than that an operation is not supported.
            if msg.is_empty() || not_supported(e) {
                text
            } else {
                format!("{text}: {msg}")
            }
        }
        PortError::NotSupported { .. } => "Operation not supported".into(),
        e => e.to_string(),
    }
}

/// Whether a driver lacks the operation (ENOTSUP), as DPDK's drivers without it.
fn not_supported(e: &PortError) -> bool {
    match e {
        PortError::Errno { err, .. } => err.raw_os_error() == Some(95),
        PortError::NotSupported { .. } => true,
        _ => false,
    }
}

/// `set promisc PORT|all on|off`. DPDK 22.11 on net_null (recorded):
/// `Error during disabling promiscuous mode for port 0: Operation not supported`,
/// one line per port, the other ports still set.
pub fn promisc(app: &mut App, ports: &[u16], on: bool) -> Result<String, String> {
    set_mode(app, ports, on, "promiscuous", |p, on| p.set_promiscuous(on))
}

/// `set allmulti PORT|all on|off` (ABI 1.5). DPDK: silent on success, else
/// `Error during enabling all-multicast mode for port 0: Operation not supported`.
pub fn allmulti(app: &mut App, ports: &[u16], on: bool) -> Result<String, String> {
    set_mode(app, ports, on, "all-multicast", |p, on| p.set_allmulticast(on))
}

/// Turns a receive mode (`what`) on or off on each of `ports`: silent on success,
/// one DPDK line per port that refused.
fn set_mode(
    app: &mut App,
    ports: &[u16],
    on: bool,
    what: &str,
    set: impl Fn(&mut Port, bool) -> Result<(), PortError>,
) -> Result<String, String> {
    let mut errs = String::new();
    for &id in ports {
        if let Err(e) = app.eal.port_mut(id).and_then(|p| set(p, on)) {
            let verb = if on { "enabling" } else { "disabling" };
            let _ = writeln!(errs, "Error during {verb} {what} mode for port {id}: {}", why(&e));
        }
    }
    if errs.is_empty() {
        Ok(String::new())
    } else {
        Err(errs.trim_end().to_string())
    }
}

/// `set link-up|link-down port N` (ABI 1.5). DPDK: silent on success, else
/// `Invalid port_id=9` / the reason, then an empty line and `Set link up fail.`
pub fn link(app: &mut App, port: u16, up: bool) -> Result<String, String> {
    let fail = if up { "Set link up fail." } else { "Set link down fail." };
    let p = app.eal.port_mut(port).map_err(|_| format!("Invalid port_id={port}\n\n{fail}"))?;
    // DPDK 22.11 on net_null (no link operation) prints an empty line, then the
    // failure: "\nSet link down fail.".
    p.set_link(up).map(|()| String::new()).map_err(|e| {
        if not_supported(&e) {
            format!("\n{fail}")
        } else {
            format!("{}\n\n{fail}", why(&e))
        }
    })
}

/// `show rxq info PORT QUEUE`, DPDK's layout:
/// `********************* Infos for port 0 , RX queue 0  *********************`,
/// then `Mempool: NAME`, ..., `Number of RXDs: N`.
pub fn rxq_info(app: &App, port: u16, q: u16) -> Result<String, String> {
    let p = app.eal.port(port).map_err(|_| format!("Invalid port {port}"))?;
    let Some((pool, desc)) = p.rxq_info(q) else {
        return Err(format!(
            "Failed to retrieve information for port: {port}, RX queue: {q}\nerror desc: Invalid argument(-22)"
        ));
    };
    let started = p.state() == ironpath_eal::PortState::Started;
    let mut o = String::new();
    let _ = writeln!(o, "\n********************* Infos for port {port} , RX queue {q}  *********************");
    let _ = writeln!(o, "Mempool: {}", pool.name());
    let _ = writeln!(o, "Rx queue state: {}", if started { "started" } else { "stopped" });
    let _ = writeln!(o, "Number of RXDs: {desc}");
    Ok(o)
}

/// `show txq info PORT QUEUE`, DPDK's layout (`Number of TXDs: N`).
pub fn txq_info(app: &App, port: u16, q: u16) -> Result<String, String> {
    let p = app.eal.port(port).map_err(|_| format!("Invalid port {port}"))?;
    let Some(desc) = p.txq_info(q) else {
        return Err(format!(
            "Failed to retrieve information for port: {port}, TX queue: {q}\nerror desc: Invalid argument(-22)"
        ));
    };
    let started = p.state() == ironpath_eal::PortState::Started;
    let mut o = String::new();
    let _ = writeln!(o, "\n********************* Infos for port {port} , TX queue {q}  *********************");
    let _ = writeln!(o, "Tx queue state: {}", if started { "started" } else { "stopped" });
    let _ = writeln!(o, "Number of TXDs: {desc}");
    let _ = writeln!(o, "TX offloads=0x{:x}", p.dev_info().map(|i| i.tx_offload_capa).unwrap_or(0));
    Ok(o)
}

/// `show device info all|NAME`. DPDK:
/// ```text
/// ********************* Infos for device net_null0 *********************
/// Bus name: vdev
/// Bus information:
/// Driver name: net_null
/// Devargs:
/// Connect to socket: 0
///
///     Port id: 0
///     MAC address: 02:00:00:00:00:07
///     Device name: net_null0
///     Device speed capability: Autonegotiate (all speeds)
/// ```
pub fn device_info(app: &App, which: &str) -> Result<String, String> {
    let mut o = String::new();
    let mut found = false;
    for p in app.eal.ports() {
        let i = p.info();
        if which != "all" && which != i.name {
            continue;
        }
        found = true;
        let pci = ironpath_eal::pci::parse_addr(&i.name).is_some();
        let args = i.devargs.split_once(',').map_or("", |(_, a)| a);
        let _ = writeln!(o, "\n********************* Infos for device {} *********************", i.name);
        let _ = writeln!(o, "Bus name: {}", if pci { "pci" } else { "vdev" });
        let _ = writeln!(o, "Bus information: {}", if pci { i.name.as_str() } else { "" });
        let _ = writeln!(o, "Driver name: {}", i.driver);
        let _ = writeln!(o, "Devargs: {args}");
        let _ = writeln!(o, "Connect to socket: 0\n");
        let _ = writeln!(o, "\tPort id: {} ", i.id);
        let _ = writeln!(o, "\tMAC address: {}", i.mac.as_ref().map(display::mac).unwrap_or_else(|| "n/a".into()));
        let _ = writeln!(o, "\tDevice name: {}", i.name);
        let _ = writeln!(o, "\tDevice plugin: {}", i.plugin.display());
    }
    if found {
        Ok(o)
    } else {
        Err(format!(
            "Invalid device: {which} (devices: all, {})",
            app.eal.ports().map(|p| p.name()).collect::<Vec<_>>().join(", ")
        ))
    }
}

/// `show config txpkts`. DPDK: `Number of segments: 2\nSegment sizes: 64,64\nSplit
/// packet: off`.
pub fn config_txpkts(app: &App) -> String {
    let sizes: Vec<String> = app.p.txpkts.iter().map(u16::to_string).collect();
    format!("Number of segments: {}\nSegment sizes: {}\nSplit packet: off\n", app.p.txpkts.len(), sizes.join(","))
}

/// `show port N rss-hash`. DPDK: `RSS functions:\n  ipv4 ipv4-tcp ...` or
/// `RSS disabled`.
pub fn show_rss(app: &App, port: u16) -> Result<String, String> {
    let p = app.eal.port(port).map_err(|_| format!("Invalid port {port}"))?;
    let (_, cur) = p.rss_hash().map_err(|e| format!("port {port}: {}", why(&e)))?;
    if cur == 0 {
        return Ok("RSS disabled\n".into());
    }
    let names: Vec<&str> = ironpath_eal::abi::RSS_NAMES.iter().filter(|(f, _)| cur & f != 0).map(|(_, n)| *n).collect();
    Ok(format!("RSS functions:\n  {} \n", names.join(" ")))
}

/// `port config all rss ip|tcp|udp|all|default|none`: each port gets what it can
/// of the functions asked. DPDK: `Port 0 modified RSS hash function based on
/// hardware support,requested:0xa38c configured:0x0`, then `rss_hf 0xa38c`.
pub fn config_rss(app: &mut App, what: &str) -> Result<String, String> {
    use ironpath_eal::abi::*;
    let hf = match what {
        "ip" => RSS_IPV4 | RSS_IPV6,
        "tcp" => RSS_IPV4_TCP | RSS_IPV6_TCP,
        "udp" => RSS_IPV4_UDP | RSS_IPV6_UDP,
        "all" | "default" => RSS_NAMES.iter().fold(0, |a, (f, _)| a | f),
        "none" => 0,
        x => {
            return Err(format!(
                "Bad arguments: `{x}`: accepted ip, tcp, udp, all, default, none\nUsage: port config all rss ip|tcp|udp|all|default|none"
            ))
        }
    };
    let mut o = String::new();
    let mut errs = String::new();
    for id in app.eal.port_ids() {
        let Ok(p) = app.eal.port_mut(id) else { continue };
        let capa = p.rss_hash().map(|(c, _)| c).unwrap_or(0);
        let want = hf & capa;
        if want != hf {
            let _ = writeln!(
                o,
                "Port {id} modified RSS hash function based on hardware support,requested:{hf:#x} configured:{want:#x}"
            );
        }
        if let Err(e) = p.set_rss_hash(want) {
            // The driver's reason kept (which hash it has): RSS is where a
            // user needs it most.
            let reason = match &e {
                PortError::Errno { msg, .. } if !msg.is_empty() => format!("{}: {msg}", why(&e)),
                _ => why(&e),
            };
            let _ = writeln!(errs, "Port {id}: {reason}");
        }
    }
    let _ = writeln!(o, "rss_hf {hf:#x}");
    if errs.is_empty() {
        Ok(o)
    } else {
        Err(format!("{o}{}", errs.trim_end()))
    }
}

/// `show config rxpkts`. DPDK: `Number of segments: 2\nSegment sizes: 64,128`.
pub fn config_rxpkts(app: &App) -> String {
    let sizes: Vec<String> = app.p.rxpkts.iter().map(u16::to_string).collect();
    format!("Number of segments: {}\nSegment sizes: {}\n", app.p.rxpkts.len(), sizes.join(","))
}

/// `set rxpkts LEN[,LEN...]`: up to 8 segment lengths, each within the pool's
/// data room (0: the rest of the buffer).
pub fn set_rxpkts(app: &mut App, v: &str) -> Result<String, String> {
    let room = app.pool.data_room();
    let segs: Result<Vec<u16>, _> = v.split(',').map(|s| s.trim().parse::<u16>()).collect();
    match segs {
        Ok(s) if !s.is_empty() && s.len() <= 8 && s.iter().all(|l| *l <= room) => {
            app.p.rxpkts = s;
            Ok(String::new())
        }
        _ => {
            Err(format!("Bad arguments: invalid rxpkts `{v}`: expected up to 8 lengths LEN[,LEN...], each 0..={room}"))
        }
    }
}

/// `dump_mempool` / `show mempool`: every pool in DPDK's `rte_mempool_dump`
/// layout (`mempool <mb_pool_0>@0x...`, `size=`, `elt_size=`, cache infos,
/// `common_pool_count=`), with ironpath's own counters after it.
pub fn dump_mempools(app: &App) -> String {
    let mut pools: Vec<(String, Mempool)> = vec![(app.pool.name().to_string(), app.pool.clone())];
    if let Some(run) = &app.pipeline {
        pools.extend(run.pools().iter().cloned());
    }
    let mut o = String::new();
    for (name, m) in pools {
        let s = m.stats();
        let (base, iova, len) = m.region();
        let _ = writeln!(o, "mempool <{name}>@{base:p}");
        let _ = writeln!(o, "  iova=0x{iova:x}");
        let _ = writeln!(o, "  memory={} ({} bytes)", m.mem_kind(), len);
        let _ = writeln!(o, "  size={}", s.size);
        let _ = writeln!(o, "  populated_size={}", s.size);
        let _ = writeln!(o, "  elt_size={}", m.elt_size());
        let _ = writeln!(o, "  data_room={}", m.data_room());
        let _ = writeln!(o, "  ops_name: <ironpath_mpmc>");
        let _ = writeln!(o, "  internal cache infos:");
        let _ = writeln!(o, "    cache_size={}", m.cache_size());
        let _ = writeln!(o, "    total_cache_count={}", s.in_caches);
        let _ = writeln!(o, "  common_pool_count={}", s.available.saturating_sub(s.in_caches));
        let _ = writeln!(o, "  in_use={}", s.in_use);
        let _ = writeln!(o, "  get_fails={}", s.get_fails);
        let _ = writeln!(o, "  cache_hits={} cache_misses={}", s.cache_hits, s.cache_misses);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::parse_mac;

    #[test]
    fn macs() {
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("zz"), None);
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:00:01"), None);
        assert_eq!(parse_mac("002:00:00:00:00:00"), None);
    }
}
