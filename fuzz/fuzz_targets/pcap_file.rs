//! Capture files as `rx_pcap` reads them (pcap and pcapng, any resolution): any bytes
//! give packets or an error naming a record, never a panic. The bytes are read from
//! memory (`read_from`, as `read` does from the file) through a 64 KiB buffer:
//! larger than any input, so every block fits as it would in a file.
#![no_main]
use ironpath_pcapfile::read_from;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = read_from(data, 1 << 16) {
        assert!(!e.to_string().is_empty());
    }
});
