//! PCI addresses: `DDDD:BB:DD.F`, or `BB:DD.F` for domain 0 (as `lspci` and DPDK's
//! `-a` take them).

use std::fmt;
use std::str::FromStr;

/// A PCI function's address. Displays in the long lower-case form `0000:00:1f.7`,
/// the name of its directory in `/sys/bus/pci/devices`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddr {
    /// Domain (segment), `0000`..=`ffff`.
    pub domain: u16,
    /// Bus, `00`..=`ff`.
    pub bus: u8,
    /// Device, `00`..=`1f`.
    pub dev: u8,
    /// Function, `0`..=`7`.
    pub func: u8,
}

impl PciAddr {
    /// Parse `DDDD:BB:DD.F` or `BB:DD.F` (hex digits, either case); `None` if `s` is
    /// not a PCI address (so a caller can try it as a device name next).
    pub fn parse(s: &str) -> Option<Self> {
        let (dom, rest) = match s.matches(':').count() {
            2 => s.split_once(':')?,
            1 => ("0000", s),
            _ => return None,
        };
        let (bus, rest) = rest.split_once(':')?;
        let (dev, func) = rest.split_once('.')?;
        let hex = |t: &str, max_len: usize| {
            (!t.is_empty() && t.len() <= max_len && t.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u16::from_str_radix(t, 16).ok())
                .flatten()
        };
        let (domain, bus, dev, func) = (hex(dom, 4)?, hex(bus, 2)?, hex(dev, 2)?, hex(func, 1)?);
        if dev > 0x1f || func > 7 {
            return None;
        }
        // The lengths checked above keep bus and dev below 0x100.
        Some(Self { domain, bus: bus as u8, dev: dev as u8, func: func as u8 })
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.dev, self.func)
    }
}

/// Why a string is not a PCI address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadPciAddr(pub String);

impl fmt::Display for BadPciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a PCI address: expected DDDD:BB:DD.F or BB:DD.F (hex, device <= 1f, function <= 7)",
            self.0
        )
    }
}

impl std::error::Error for BadPciAddr {}

impl FromStr for PciAddr {
    type Err = BadPciAddr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| BadPciAddr(s.to_string()))
    }
}

/// Parse a PCI address into its long lower-case form (`00:1F.7` → `0000:00:1f.7`),
/// or `None` if `s` is not one. The same as `PciAddr::parse(s)` displayed.
pub fn parse_addr(s: &str) -> Option<String> {
    PciAddr::parse(s).map(|a| a.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("0000:00:01.0").as_deref(), Some("0000:00:01.0"));
        assert_eq!(parse_addr("00:1F.7").as_deref(), Some("0000:00:1f.7"));
        assert_eq!(parse_addr("1:2:3.4").as_deref(), Some("0001:02:03.4"));
        assert_eq!(parse_addr("ffff:ff:1f.7").as_deref(), Some("ffff:ff:1f.7"));
        assert_eq!(PciAddr::parse("0001:02:03.4"), Some(PciAddr { domain: 1, bus: 2, dev: 3, func: 4 }));
        for bad in
            ["net_null0", "00:20.0", "00:01.8", "00:01", "0000:00:01.0.1", "x:00:01.0", "00000:00:01.0", "", "+0:01.0"]
        {
            assert_eq!(parse_addr(bad), None, "{bad}");
        }
    }

    #[test]
    fn from_str_says_what_is_accepted() {
        assert_eq!("00:01.0".parse::<PciAddr>().map(|a| a.to_string()), Ok("0000:00:01.0".to_string()));
        let e = "eth0".parse::<PciAddr>().unwrap_err().to_string();
        assert!(e.starts_with("`eth0` is not a PCI address: expected DDDD:BB:DD.F"), "{e}");
    }
}
