//! Capture files as `rx_pcap` reads them (pcap and pcapng, any resolution): any bytes
//! give packets or an error naming a record, never a panic.
#![no_main]
use ironpath_pcapfile::read;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("ironpath-fuzz-pcap-{}", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        if let Err(e) = read(&path) {
            assert!(!e.to_string().is_empty());
        }
    }
});
