//! Device arguments: `key=value` pairs separated by commas, checked against the
//! driver's whitelist. Every error names the argument and says what is accepted.

use crate::PmdError;

/// Parsed device arguments.
#[derive(Debug, Clone, Default)]
pub struct DevArgs {
    pairs: Vec<(String, String)>,
    accepted: &'static [&'static str],
}

impl DevArgs {
    /// Parse `args` (`size=64,copy=1`); keys outside `accepted` are refused with the
    /// list of accepted keys and the closest one. A key may appear once.
    pub fn parse(args: &str, accepted: &'static [&'static str]) -> Result<Self, PmdError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for item in args.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((k, v)) = item.split_once('=') else {
                return Err(PmdError::invalid(format!(
                    "device argument `{item}` has no value: expected KEY=VALUE (accepted keys: {})",
                    accepted.join(", ")
                )));
            };
            let (k, v) = (k.trim(), v.trim());
            if !accepted.contains(&k) {
                let hint = ironpath_util::suggest::did_you_mean(k, accepted.iter().copied());
                return Err(PmdError::invalid(format!(
                    "unknown device argument `{k}`{hint}; accepted: {}",
                    if accepted.is_empty() { "none".to_string() } else { accepted.join(", ") }
                )));
            }
            if pairs.iter().any(|(pk, _)| pk == k) {
                return Err(PmdError::invalid(format!("device argument `{k}` is given twice")));
            }
            pairs.push((k.to_string(), v.to_string()));
        }
        Ok(Self { pairs, accepted })
    }

    /// The raw value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        debug_assert!(self.accepted.contains(&key), "driver asked for undeclared key {key}");
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// An unsigned number in `min..=max` (decimal or 0x-hex), or `default`.
    pub fn get_u64(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, PmdError> {
        let Some(v) = self.get(key) else { return Ok(default) };
        let parsed = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            u64::from_str_radix(h, 16)
        } else {
            v.parse()
        };
        match parsed {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            Ok(n) => {
                Err(PmdError::invalid(format!("device argument `{key}={n}` is out of range: accepted {min}..={max}")))
            }
            Err(_) => {
                Err(PmdError::invalid(format!("device argument `{key}={v}` is not a number: accepted {min}..={max}")))
            }
        }
    }

    /// A boolean given as `0|1` (also `no|yes`, `off|on`, `false|true`), or `default`.
    pub fn get_bool(&self, key: &str, default: bool) -> Result<bool, PmdError> {
        match self.get(key) {
            None => Ok(default),
            Some("1" | "yes" | "on" | "true") => Ok(true),
            Some("0" | "no" | "off" | "false") => Ok(false),
            Some(v) => Err(PmdError::invalid(format!("device argument `{key}={v}` is not a boolean: accepted 0 or 1"))),
        }
    }

    /// A MAC address `aa:bb:cc:dd:ee:ff`, if given.
    pub fn get_mac(&self, key: &str) -> Result<Option<[u8; 6]>, PmdError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let bad = || {
            PmdError::invalid(format!("device argument `{key}={v}` is not a MAC address: expected aa:bb:cc:dd:ee:ff"))
        };
        let parts: Vec<&str> = v.split(':').collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut mac = [0u8; 6];
        for (m, p) in mac.iter_mut().zip(parts) {
            if p.len() != 2 {
                return Err(bad());
            }
            *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        Ok(Some(mac))
    }

    /// A non-empty string of at most `max_len` bytes, if given.
    pub fn get_name(&self, key: &str, max_len: usize) -> Result<Option<String>, PmdError> {
        match self.get(key) {
            None => Ok(None),
            Some("") => Err(PmdError::invalid(format!("device argument `{key}` is empty"))),
            Some(v) if v.len() > max_len => {
                Err(PmdError::invalid(format!("device argument `{key}` is longer than {max_len} bytes")))
            }
            Some(v) => Ok(Some(v.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &["size", "copy", "mac"];

    #[test]
    fn parses_and_types_values() {
        let a = DevArgs::parse("size=128, copy=1,mac=02:00:00:00:00:01", KEYS).unwrap();
        assert_eq!(a.get_u64("size", 64, 14, 9000).unwrap(), 128);
        assert!(a.get_bool("copy", false).unwrap());
        assert_eq!(a.get_mac("mac").unwrap(), Some([2, 0, 0, 0, 0, 1]));
        let a = DevArgs::parse("", KEYS).unwrap();
        assert_eq!(a.get_u64("size", 64, 14, 9000).unwrap(), 64);
    }

    #[test]
    fn errors_name_the_argument_and_the_accepted_values() {
        let e = DevArgs::parse("sise=64", KEYS).unwrap_err();
        assert_eq!(e.msg, "unknown device argument `sise` (did you mean `size`?); accepted: size, copy, mac");
        let e = DevArgs::parse("size", KEYS).unwrap_err();
        assert!(e.msg.contains("`size` has no value"), "{}", e.msg);
        let a = DevArgs::parse("size=70000,copy=2,mac=zz", KEYS).unwrap();
        assert_eq!(
            a.get_u64("size", 64, 14, 9000).unwrap_err().msg,
            "device argument `size=70000` is out of range: accepted 14..=9000"
        );
        assert!(a.get_bool("copy", false).unwrap_err().msg.contains("`copy=2`"));
        assert!(a.get_mac("mac").unwrap_err().msg.contains("`mac=zz`"));
        let e = DevArgs::parse("size=1,size=2", KEYS).unwrap_err();
        assert!(e.msg.contains("given twice"));
    }
}
