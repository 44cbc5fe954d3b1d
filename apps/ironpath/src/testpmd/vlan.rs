//! VLAN receive offloads done in software for every port, with DPDK testpmd's
//! commands: `vlan set strip on|off PORT` takes the 802.1Q/802.1ad tag out of
//! received frames into the mbuf (`vlan_tci`, `RX_VLAN_STRIPPED`), as a NIC's
//! VLAN strip does; `vlan set filter on|off PORT` with `rx_vlan add|rm VID PORT`
//! drops tagged frames whose VLAN id is not listed (untagged frames pass), counted
//! as the port's RX-dropped in the forward statistics.

use super::engine::Stream;
use ironpath_eal::abi::RX_VLAN_STRIPPED;
use std::collections::{BTreeMap, BTreeSet};

/// The shell's VLAN settings, per port.
#[derive(Clone, Debug, Default)]
pub struct VlanSettings {
    /// Ports with strip on.
    pub strip: BTreeSet<u16>,
    /// Ports with filter on.
    pub filter: BTreeSet<u16>,
    /// VLAN ids accepted per port (`rx_vlan add`).
    pub ids: BTreeMap<u16, BTreeSet<u16>>,
}

impl VlanSettings {
    /// The stream state for RX port `port`, or `None` when neither is on.
    pub fn for_port(&self, port: u16) -> Option<StreamVlan> {
        let strip = self.strip.contains(&port);
        let filter = self.filter.contains(&port).then(|| {
            let mut bits = Box::new([0u64; 64]);
            for &v in self.ids.get(&port).into_iter().flatten() {
                bits[usize::from(v >> 6)] |= 1 << (v & 63);
            }
            bits
        });
        (strip || filter.is_some()).then_some(StreamVlan { strip, filter })
    }

    /// `VLAN offload:` line of `show port info`.
    pub fn describe(&self, port: u16) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        let mut s = format!(
            "VLAN offload: \n  strip {}, filter {}, extend off, qinq strip off\n",
            on(self.strip.contains(&port)),
            on(self.filter.contains(&port))
        );
        if let Some(ids) = self.ids.get(&port).filter(|i| !i.is_empty()) {
            let l: Vec<String> = ids.iter().map(u16::to_string).collect();
            s.push_str(&format!("VLAN filter ids: {}\n", l.join(",")));
        }
        s
    }
}

/// A stream's VLAN work.
pub struct StreamVlan {
    strip: bool,
    /// Accepted VLAN ids (4096 bits); `None`: no filter.
    filter: Option<Box<[u64; 64]>>,
}

/// The VLAN id of a tagged frame (`None`: untagged or too short).
fn vid(d: &[u8]) -> Option<u16> {
    if d.len() < 18 {
        return None;
    }
    match u16::from_be_bytes([d[12], d[13]]) {
        0x8100 | 0x88a8 => Some(u16::from_be_bytes([d[14], d[15]]) & 0x0fff),
        _ => None,
    }
}

/// Filters and strips the stream's received burst in place; returns how many
/// packets the filter dropped.
pub fn apply(s: &mut Stream) -> usize {
    let Some(v) = s.vlan.as_ref() else { return 0 };
    let dropped = match &v.filter {
        Some(bits) => s.burst.retain(|_, d| vid(d).is_none_or(|id| bits[usize::from(id >> 6)] >> (id & 63) & 1 == 1)),
        None => 0,
    };
    if v.strip {
        for i in 0..s.burst.len() {
            let tci = {
                let Some(d) = s.burst.data_mut(i) else { continue };
                if vid(d).is_none() {
                    continue;
                }
                let tci = u16::from_be_bytes([d[14], d[15]]);
                // The MAC addresses move 4 bytes on, over the tag.
                d.copy_within(0..12, 4);
                tci
            };
            let h = s.burst.header_mut(i);
            h.data_off += 4;
            h.data_len -= 4;
            h.pkt_len -= 4;
            h.vlan_tci = tci;
            h.ol_flags |= RX_VLAN_STRIPPED;
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_make_stream_state_only_when_needed() {
        let mut v = VlanSettings::default();
        assert!(v.for_port(0).is_none());
        v.filter.insert(0);
        v.ids.entry(0).or_default().insert(100);
        let s = v.for_port(0).unwrap();
        let bits = s.filter.unwrap();
        assert_eq!(bits[1] >> 36 & 1, 1, "vid 100 = word 1, bit 36");
        assert!(!s.strip);
        assert!(v.describe(0).contains("strip off, filter on"));
        assert!(v.describe(0).contains("VLAN filter ids: 100"));
    }

    #[test]
    fn vids() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[14..16].copy_from_slice(&[0x20, 0x64]);
        assert_eq!(vid(&f), Some(100));
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(vid(&f), None);
        assert_eq!(vid(&f[..17]), None);
    }
}
