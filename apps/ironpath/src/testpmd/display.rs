//! Output in DPDK testpmd's field names and layout, so scripts that parse testpmd
//! keep working (`RX-packets:`, `Rx-pps:`, `CPU cycles/packet=` ...).

use ironpath_eal::abi::Stats;
use ironpath_eal::port::PortInfo;
use std::fmt::Write;

const BORDER: &str = "########################";

/// Rates between two snapshots.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rates {
    /// RX packets per second.
    pub rx_pps: u64,
    /// TX packets per second.
    pub tx_pps: u64,
    /// RX bits per second.
    pub rx_bps: u64,
    /// TX bits per second.
    pub tx_bps: u64,
}

/// Rates from `prev` to `cur` over `secs` seconds.
pub fn rates(prev: &Stats, cur: &Stats, secs: f64) -> Rates {
    if secs <= 0.0 {
        return Rates::default();
    }
    let per = |a: u64, b: u64| (a.saturating_sub(b) as f64 / secs) as u64;
    Rates {
        rx_pps: per(cur.ipackets, prev.ipackets),
        tx_pps: per(cur.opackets, prev.opackets),
        rx_bps: per(cur.ibytes, prev.ibytes) * 8,
        tx_bps: per(cur.obytes, prev.obytes) * 8,
    }
}

/// `show port stats ID` (DPDK `nic_stats_display`).
pub fn nic_stats(port: u16, s: &Stats, r: &Rates) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n  {BORDER} NIC statistics for port {port:<2} {BORDER}");
    let _ = writeln!(o, "  RX-packets: {:<10} RX-missed: {:<10} RX-bytes:  {}", s.ipackets, s.imissed, s.ibytes);
    let _ = writeln!(o, "  RX-errors: {}", s.ierrors);
    let _ = writeln!(o, "  RX-nombuf:  {:<10}", s.rx_nombuf);
    let _ = writeln!(o, "  TX-packets: {:<10} TX-errors: {:<10} TX-bytes:  {}", s.opackets, s.oerrors, s.obytes);
    let _ = writeln!(o, "\n  Throughput (since last show)");
    let _ = writeln!(o, "  Rx-pps: {:>12}          Rx-bps: {:>12}", r.rx_pps, r.rx_bps);
    let _ = writeln!(o, "  Tx-pps: {:>12}          Tx-bps: {:>12}", r.tx_pps, r.tx_bps);
    let _ = writeln!(o, "  {BORDER}############################{BORDER}");
    o
}

/// `show port xstats ID`.
pub fn xstats(port: u16, x: &[(String, u64)]) -> String {
    let mut o = format!("###### NIC extended statistics for port {port}\n");
    for (n, v) in x {
        let _ = writeln!(o, "{n}: {v}");
    }
    o
}

/// Format a MAC address.
pub fn mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// Offload capability flags with the names `show port info` gives them.
const OFFLOAD_NAMES: [(u64, &str); 10] = {
    use ironpath_eal::abi::*;
    [
        (RX_L4_CKSUM_GOOD, "L4_CKSUM"),
        (RX_L4_CKSUM_NONE, "L4_CKSUM_PARTIAL"),
        (RX_IP_CKSUM_GOOD, "IPV4_CKSUM"),
        (RX_RSS_HASH, "RSS_HASH"),
        (RX_VLAN_STRIPPED, "VLAN_STRIP"),
        (RX_AGGREGATED, "TCP_LRO"),
        (TX_IP_CKSUM, "IPV4_CKSUM"),
        (TX_TCP_CKSUM, "TCP_CKSUM"),
        (TX_UDP_CKSUM, "UDP_CKSUM"),
        (TX_TCP_SEG, "TCP_TSO"),
    ]
};

/// `0x...` and the names of the flags set, as one line's value.
fn offloads(capa: u64) -> String {
    let names: Vec<&str> = OFFLOAD_NAMES.iter().filter(|(f, _)| capa & f != 0).map(|(_, n)| *n).collect();
    if names.is_empty() {
        format!("{capa:#x}")
    } else {
        format!("{capa:#x} ({})", names.join(" "))
    }
}

/// `show port info ID`; `rss_capa` is what the port can hash on (`abi::RSS_*`).
pub fn port_info(p: &PortInfo, link: Option<ironpath_eal::abi::Link>, rss_capa: u64) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n********************* Infos for port {:<2} *********************", p.id);
    let _ = writeln!(o, "MAC address: {}", p.mac.map(|m| mac(&m)).unwrap_or_else(|| "n/a".into()));
    let _ = writeln!(o, "Device name: {}", p.name);
    let _ = writeln!(o, "Device arguments: {}", p.devargs);
    let _ = writeln!(o, "Driver name: {}", p.driver);
    let _ = writeln!(o, "Driver plugin: {}", p.plugin.display());
    let state = match p.state {
        ironpath_eal::PortState::Started => "started",
        ironpath_eal::PortState::Stopped => "stopped",
        ironpath_eal::PortState::Probed => "stopped (not configured)",
    };
    let _ = writeln!(o, "Port state: {state}");
    if let Some(l) = link {
        let _ = writeln!(o, "Link status: {}", if l.up != 0 { "up" } else { "down" });
        let _ = writeln!(o, "Link speed: {}", link_speed(l.speed_mbps));
        let _ = writeln!(o, "Link duplex: {}", if l.full_duplex != 0 { "full-duplex" } else { "half-duplex" });
    }
    let _ = writeln!(o, "MTU: {}", p.dev_info.mtu);
    let _ = writeln!(
        o,
        "Promiscuous mode: {}",
        match p.promisc {
            Some(true) => "enabled",
            Some(false) => "disabled",
            None => "n/a",
        }
    );
    let _ = writeln!(
        o,
        "Allmulticast mode: {}",
        match p.allmulti {
            Some(true) => "enabled",
            Some(false) => "disabled",
            None => "n/a",
        }
    );
    let _ = writeln!(o, "Max possible RX queues: {}", p.dev_info.max_rx_queues);
    let _ = writeln!(o, "Current number of RX queues: {}", p.nb_rxq);
    let _ = writeln!(o, "Max possible TX queues: {}", p.dev_info.max_tx_queues);
    let _ = writeln!(o, "Current number of TX queues: {}", p.nb_txq);
    let _ = writeln!(o, "Min possible number of RXDs per queue: {}", p.dev_info.min_desc);
    let _ = writeln!(o, "Max possible number of RXDs per queue: {}", p.dev_info.max_desc);
    // One descriptor range serves both directions in ironpath's device info.
    let _ = writeln!(o, "Max possible number of TXDs per queue: {}", p.dev_info.max_desc);
    let _ = writeln!(o, "Min possible number of TXDs per queue: {}", p.dev_info.min_desc);
    let _ = writeln!(o, "Max RX packet length: {}", p.dev_info.max_rx_pktlen);
    let _ = writeln!(o, "Number of xstats: {}", p.dev_info.nb_xstats);
    // DPDK 22.11's wording for the two cases.
    if rss_capa == 0 {
        let _ = writeln!(o, "No RSS offload flow type is supported.");
    } else {
        let names: Vec<&str> =
            ironpath_eal::abi::RSS_NAMES.iter().filter(|(f, _)| rss_capa & f != 0).map(|(_, n)| *n).collect();
        let _ = writeln!(o, "Supported RSS offload flow types:\n  {}", names.join("  "));
    }
    let _ = writeln!(o, "Rx offload capabilities: {}", offloads(p.dev_info.rx_offload_capa));
    let _ = writeln!(o, "Tx offload capabilities: {}", offloads(p.dev_info.tx_offload_capa));
    o
}

/// Link speed as DPDK prints it.
pub fn link_speed(mbps: u32) -> String {
    match mbps {
        0 => "None".into(),
        m if m >= 1000 && m % 1000 == 0 => format!("{} Gbps", m / 1000),
        m => format!("{m} Mbps"),
    }
}

/// Forward statistics of one port (DPDK `fwd_stats_display` per-port part).
pub struct PortFwd {
    /// Port id.
    pub port: u16,
    /// Received since start.
    pub rx: u64,
    /// Missed (device drops) since start.
    pub rx_dropped: u64,
    /// Sent since start.
    pub tx: u64,
    /// Dropped by forwarding (TX queue full) plus TX errors.
    pub tx_dropped: u64,
    /// Bad IPv4 checksums (csum).
    pub bad_ip: u64,
    /// Bad L4 checksums (csum).
    pub bad_l4: u64,
    /// RX bursts by size, when recorded (`set record-burst-stats on`).
    pub rx_bursts: Option<Vec<u64>>,
    /// TX bursts by size, when recorded.
    pub tx_bursts: Option<Vec<u64>>,
}

/// DPDK's burst line: `  RX-bursts : 1234 [90% of 0 pkts + 10% of 32 pkts]`: the
/// empty bursts, then the two most frequent sizes, then `% of other` for the rest;
/// nothing when no burst was counted.
pub fn bursts_line(dir: &str, spread: &[u64]) -> String {
    let total: u64 = spread.iter().sum();
    if total == 0 {
        return String::new();
    }
    let mut top: Vec<(u64, usize)> = spread.iter().copied().zip(0..).skip(1).filter(|(c, _)| *c > 0).collect();
    top.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut items = vec![(spread[0], 0usize)];
    items.extend(top.into_iter().take(2));
    let mut o = format!("  {dir}-bursts : {total} [");
    let (mut seen, mut pct_seen) = (0u64, 0u64);
    for (count, size) in items {
        seen += count;
        if seen == total {
            let _ = write!(o, "{}% of {size} pkts]", 100 - pct_seen);
            return o + "\n";
        }
        let pct = count * 100 / total;
        let _ = write!(o, "{pct}% of {size} pkts + ");
        pct_seen += pct;
    }
    let _ = write!(o, "{}% of other]", 100 - pct_seen);
    o + "\n"
}

/// One port's block.
pub fn fwd_port(p: &PortFwd, csum: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n  ---------------------- Forward statistics for port {:<2} ----------------------", p.port);
    let _ =
        writeln!(o, "  RX-packets: {:<14} RX-dropped: {:<13} RX-total: {}", p.rx, p.rx_dropped, p.rx + p.rx_dropped);
    if csum {
        let _ = writeln!(o, "  Bad-ipcsum: {:<14} Bad-l4csum: {:<14}", p.bad_ip, p.bad_l4);
    }
    let _ =
        writeln!(o, "  TX-packets: {:<14} TX-dropped: {:<13} TX-total: {}", p.tx, p.tx_dropped, p.tx + p.tx_dropped);
    // DPDK prints both burst lines after the TX line.
    if let Some(b) = &p.rx_bursts {
        o.push_str(&bursts_line("RX", b));
    }
    if let Some(b) = &p.tx_bursts {
        o.push_str(&bursts_line("TX", b));
    }
    let _ = writeln!(o, "  ----------------------------------------------------------------------------");
    o
}

/// The accumulated block for all ports.
pub fn fwd_total(rx: u64, rx_dropped: u64, tx: u64, tx_dropped: u64) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++");
    let _ = writeln!(o, "  RX-packets: {:<14} RX-dropped: {:<13} RX-total: {}", rx, rx_dropped, rx + rx_dropped);
    let _ = writeln!(o, "  TX-packets: {:<14} TX-dropped: {:<13} TX-total: {}", tx, tx_dropped, tx + tx_dropped);
    let _ = writeln!(o, "  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++");
    o
}

/// One stream's block.
pub fn fwd_stream(rxp: u16, rxq: u16, txp: u16, txq: u16, rx: u64, tx: u64, dropped: u64) -> String {
    format!(
        "\n  ------- Forward Stats for RX Port={rxp:>2}/Queue={rxq:>2} -> TX Port={txp:>2}/Queue={txq:>2} -------\n  \
         RX-packets: {rx:<14} TX-packets: {tx:<14} TX-dropped: {dropped:<14}\n"
    )
}

/// The monitor table header (per-second rates).
pub fn monitor_header() -> String {
    format!(
        "{:>4} {:>12} {:>14} {:>12} {:>14} {:>9} {:>9} {:>10} {:>10}",
        "Port", "Ipkts", "IBytes", "Opkts", "Obytes", "rx-Mpps", "tx-Mpps", "rx-Mbit/s", "tx-Mbit/s"
    )
}

/// One monitor row: deltas over the last `secs` seconds.
pub fn monitor_row(port: u16, prev: &Stats, cur: &Stats, secs: f64) -> String {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let (ip, ib, op, ob) = (
        d(cur.ipackets, prev.ipackets),
        d(cur.ibytes, prev.ibytes),
        d(cur.opackets, prev.opackets),
        d(cur.obytes, prev.obytes),
    );
    let s = secs.max(1e-9);
    format!(
        "{:>4} {:>12} {:>14} {:>12} {:>14} {:>9.3} {:>9.3} {:>10.1} {:>10.1}",
        port,
        ip,
        ib,
        op,
        ob,
        ip as f64 / s / 1e6,
        op as f64 / s / 1e6,
        ib as f64 * 8.0 / s / 1e6,
        ob as f64 * 8.0 / s / 1e6
    )
}
