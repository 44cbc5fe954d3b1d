//! What telemetry clients send: a v2 socket message (split into command and
//! parameter, answered from empty figures) and a metrics scrape's request head.
#![no_main]
use ironpath::telemetry::server::{parse_head, respond, split_command, Ask};
use ironpath::telemetry::Figures;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let f = Figures { app: "fuzz", params: vec![], ports: vec![], pools: vec![], graph: None };
    let (cmd, param) = split_command(data);
    let reply = respond(&Ask::Command { cmd, param }, &f);
    assert!(serde_json::from_str::<serde_json::Value>(&reply).is_ok(), "{reply}");
    let _ = parse_head(&String::from_utf8_lossy(data));
});
