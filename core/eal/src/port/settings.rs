//! Control operations on a port's device settings: counters, link, MAC addresses,
//! MTU, promiscuous and all-multicast modes, RSS, and `show port info`.

use super::{Port, PortError, PortInfo};
use ironpath_abi as abi;
use std::ffi::CStr;

impl Port {
    /// Basic counters.
    pub fn stats(&self) -> Result<abi::Stats, PortError> {
        let f = op!(self, stats_get, "stats_get");
        let mut s = abi::Stats::default();
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, &mut s) };
        if rc < 0 {
            return Err(self.fail("stats_get", rc));
        }
        Ok(s)
    }

    /// Reset basic counters.
    pub fn stats_reset(&mut self) -> Result<(), PortError> {
        let f = op!(self, stats_reset, "stats_reset");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("stats_reset", rc));
        }
        Ok(())
    }

    /// Extended counters as (name, value) pairs.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, PortError> {
        let fnames = op!(self, xstats_names, "xstats_names");
        let fvals = op!(self, xstats_get, "xstats_get");
        // SAFETY: live device; a NULL buffer of length 0 asks for the count.
        let n = unsafe { fnames(self.dev, std::ptr::null_mut(), 0) };
        if n < 0 {
            return Err(self.fail("xstats_names", n));
        }
        let n = n as u32;
        let mut names = vec![abi::XstatName { name: [0; abi::XSTAT_NAME_LEN] }; n as usize];
        let mut vals = vec![0u64; n as usize];
        // SAFETY: buffers of `n` entries each.
        let (a, b) = unsafe { (fnames(self.dev, names.as_mut_ptr(), n), fvals(self.dev, vals.as_mut_ptr(), n)) };
        if a < 0 {
            return Err(self.fail("xstats_names", a));
        }
        if b < 0 {
            return Err(self.fail("xstats_get", b));
        }
        let k = (a as u32).min(b as u32).min(n) as usize;
        Ok(names[..k]
            .iter_mut()
            .zip(&vals[..k])
            .map(|(nm, v)| {
                nm.name[abi::XSTAT_NAME_LEN - 1] = 0;
                // SAFETY: NUL-terminated (forced above).
                (unsafe { CStr::from_ptr(nm.name.as_ptr()) }.to_string_lossy().into_owned(), *v)
            })
            .collect())
    }

    /// Reset extended counters.
    pub fn xstats_reset(&mut self) -> Result<(), PortError> {
        let f = op!(self, xstats_reset, "xstats_reset");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("xstats_reset", rc));
        }
        Ok(())
    }

    /// Link state.
    pub fn link(&self) -> Result<abi::Link, PortError> {
        let f = op!(self, link_get, "link_get");
        let mut l = abi::Link::default();
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, &mut l) };
        if rc < 0 {
            return Err(self.fail("link_get", rc));
        }
        Ok(l)
    }

    /// MAC address.
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        let f = op!(self, mac_addr_get, "mac_addr_get");
        let mut m = [0u8; 6];
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, &mut m) };
        if rc < 0 {
            return Err(self.fail("mac_addr_get", rc));
        }
        Ok(m)
    }

    /// Set the MAC address.
    pub fn set_mac(&mut self, mac: [u8; 6]) -> Result<(), PortError> {
        let f = op!(self, mac_addr_set, "mac_addr_set");
        // SAFETY: live device, valid pointer.
        let rc = unsafe { f(self.dev, &mac) };
        if rc < 0 {
            return Err(self.fail("mac_addr_set", rc));
        }
        Ok(())
    }

    /// Set the MTU.
    pub fn set_mtu(&mut self, mtu: u16) -> Result<(), PortError> {
        let f = op!(self, mtu_set, "mtu_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, mtu) };
        if rc < 0 {
            return Err(self.fail("mtu_set", rc));
        }
        Ok(())
    }

    /// Promiscuous mode on or off.
    pub fn set_promiscuous(&mut self, on: bool) -> Result<(), PortError> {
        let f = op!(self, promiscuous_set, "promiscuous_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, u8::from(on)) };
        if rc < 0 {
            return Err(self.fail("promiscuous_set", rc));
        }
        Ok(())
    }

    /// Promiscuous mode.
    pub fn promiscuous(&self) -> Result<bool, PortError> {
        let f = op!(self, promiscuous_get, "promiscuous_get");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("promiscuous_get", rc));
        }
        Ok(rc != 0)
    }

    /// All-multicast mode on or off (ABI 1.5).
    pub fn set_allmulticast(&mut self, on: bool) -> Result<(), PortError> {
        let f = op!(self, allmulticast_set, "allmulticast_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, u8::from(on)) };
        if rc < 0 {
            return Err(self.fail("allmulticast_set", rc));
        }
        Ok(())
    }

    /// All-multicast mode (ABI 1.5).
    pub fn allmulticast(&self) -> Result<bool, PortError> {
        let f = op!(self, allmulticast_get, "allmulticast_get");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("allmulticast_get", rc));
        }
        Ok(rc != 0)
    }

    /// Also receive for unicast `mac` (ABI 1.5).
    pub fn add_mac(&mut self, mac: [u8; 6]) -> Result<(), PortError> {
        let f = op!(self, mac_addr_add, "mac_addr_add");
        // SAFETY: live device; `mac` outlives the call.
        let rc = unsafe { f(self.dev, &mac) };
        if rc < 0 {
            return Err(self.fail("mac_addr_add", rc));
        }
        Ok(())
    }

    /// Stop receiving for an added `mac` (ABI 1.5).
    pub fn remove_mac(&mut self, mac: [u8; 6]) -> Result<(), PortError> {
        let f = op!(self, mac_addr_remove, "mac_addr_remove");
        // SAFETY: live device; `mac` outlives the call.
        let rc = unsafe { f(self.dev, &mac) };
        if rc < 0 {
            return Err(self.fail("mac_addr_remove", rc));
        }
        Ok(())
    }

    /// Bring the link up or down administratively (ABI 1.5).
    pub fn set_link(&mut self, up: bool) -> Result<(), PortError> {
        let f = op!(self, dev_set_link, "dev_set_link");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, u8::from(up)) };
        if rc < 0 {
            return Err(self.fail("dev_set_link", rc));
        }
        Ok(())
    }

    /// RSS hash functions: (those the device can use, those in use) (ABI 1.5).
    pub fn rss_hash(&self) -> Result<(u64, u64), PortError> {
        let f = op!(self, rss_hash_get, "rss_hash_get");
        let (mut capa, mut cur) = (0u64, 0u64);
        // SAFETY: live device, valid out-pointers.
        let rc = unsafe { f(self.dev, &mut capa, &mut cur) };
        if rc < 0 {
            return Err(self.fail("rss_hash_get", rc));
        }
        Ok((capa, cur))
    }

    /// Use RSS hash functions `rss_hf` (ABI 1.5).
    pub fn set_rss_hash(&mut self, rss_hf: u64) -> Result<(), PortError> {
        let f = op!(self, rss_hash_set, "rss_hash_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, rss_hf) };
        if rc < 0 {
            return Err(self.fail("rss_hash_set", rc));
        }
        Ok(())
    }

    /// Everything about the port, for `show port info`.
    pub fn info(&self) -> PortInfo {
        PortInfo {
            id: self.id,
            name: self.name.clone(),
            devargs: self.devargs.clone(),
            driver: self.driver.name.clone(),
            plugin: self.driver.path.clone(),
            state: self.state,
            dev_info: self.dev_info().unwrap_or_default(),
            nb_rxq: self.nb_rxq(),
            nb_txq: self.nb_txq(),
            mac: self.mac().ok(),
            promisc: self.promiscuous().ok(),
            allmulti: self.allmulticast().ok(),
        }
    }
}
