//! Golden tests: each `tests/golden/NAME.yaml` is parsed with the mock catalog and its error
//! list must equal `tests/golden/NAME.expected` byte for byte.
//! `UPDATE_GOLDEN=1 cargo test -p ironpath-config --test golden` rewrites the expected files.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use ironpath_config::testing::mock_catalog;
use ironpath_config::{
    load_file, parse_str, EdgeCfg, HugePages, LcoreCfg, Loc, MempoolCfg, ParamValue, PortCfg, DEFAULT_MEMPOOL,
};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// Compares (or, with `UPDATE_GOLDEN=1`, rewrites) the golden output of `name`.
fn check(name: &str) {
    let yaml = dir().join("golden").join(format!("{name}.yaml"));
    let expected_path = yaml.with_extension("expected");
    let text = std::fs::read_to_string(&yaml).unwrap();
    // A relative, machine-independent name for the messages.
    let shown = Path::new("golden").join(format!("{name}.yaml"));
    let actual = match parse_str(&text, &shown, &mock_catalog()) {
        Ok(p) => panic!("{name}.yaml is valid, a golden case must not be: {p:#?}"),
        Err(errs) => format!("{errs}\n"),
    };
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&expected_path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", expected_path.display()));
    assert!(
        actual == expected,
        "{name}: output differs from {}\n--- expected\n{expected}--- actual\n{actual}",
        expected_path.display()
    );
}

macro_rules! golden {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { check(stringify!($name)); } )*
        const CASES: &[&str] = &[$(stringify!($name)),*];
    };
}

golden!(
    bad_enum,
    dangling_refs,
    duplicate_names,
    edge_missing_node,
    empty,
    empty_lists,
    many_errors,
    missing_key,
    next_edges,
    not_a_map,
    out_of_range,
    port_nexts,
    records_bad_enum,
    records_bad_values,
    records_element_not_a_map,
    records_missing_field,
    records_not_a_list,
    records_unknown_field,
    syntax_error,
    undefined_lcore,
    unknown_key,
    unknown_node_type,
    wrong_type,
);

#[test]
fn every_golden_file_has_a_test() {
    let mut found: Vec<String> = std::fs::read_dir(dir().join("golden"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, CASES, "add new golden files to the golden! list");
}

#[test]
fn many_errors_reports_at_least_five() {
    let text = std::fs::read_to_string(dir().join("golden/many_errors.yaml")).unwrap();
    let errs = parse_str(&text, Path::new("m.yaml"), &mock_catalog()).unwrap_err();
    assert!(errs.errors.len() >= 5, "{errs}");
    assert!(errs.errors.windows(2).all(|w| w[0].loc <= w[1].loc), "sorted: {errs}");
}

#[test]
fn valid_full_file() {
    let path = dir().join("valid/full.yaml");
    let p = load_file(&path, &mock_catalog()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.file, path);
    assert_eq!(p.name.as_deref(), Some("lab"));
    assert!(p.description.as_deref().unwrap().starts_with("two ring ports"));

    assert_eq!(
        p.mempools,
        [
            MempoolCfg {
                name: "mp0".into(),
                size: 8191,
                cache: 256,
                data_room: 2176,
                hugepages: HugePages::Auto,
                loc: Loc::new(5, 5)
            },
            MempoolCfg {
                name: "big".into(),
                size: 65535,
                cache: 0,
                data_room: 9216,
                hugepages: HugePages::Off,
                loc: Loc::new(6, 5)
            },
        ]
    );
    assert_eq!(
        p.ports,
        [
            PortCfg {
                name: "p0".into(),
                driver: "net_ring".into(),
                args: "link=p1".into(),
                mempool: "mp0".into(),
                rx_queues: 1,
                tx_queues: 1,
                rx_desc: 1024,
                tx_desc: 1024,
                promisc: true,
                mtu: None,
                loc: Loc::new(12, 5),
            },
            PortCfg {
                name: "p1".into(),
                driver: "net_ring".into(),
                args: String::new(),
                mempool: "big".into(),
                rx_queues: 2,
                tx_queues: 4,
                rx_desc: 512,
                tx_desc: 256,
                promisc: false,
                mtu: Some(9000),
                loc: Loc::new(15, 5),
            },
        ]
    );
    assert_eq!(
        p.lcores,
        [
            LcoreCfg { id: 0, cpu: 0, rx_mode: None, loc: Loc::new(26, 5) },
            LcoreCfg { id: 1, cpu: 3, rx_mode: None, loc: Loc::new(27, 5) }
        ]
    );

    let names: Vec<(&str, &str, u32)> =
        p.nodes.iter().map(|n| (n.name.as_str(), n.type_name.as_str(), n.lcore)).collect();
    assert_eq!(
        names,
        [
            ("rx0", "port_rx", 0),
            ("cls0", "classify", 1),
            ("arp0", "arp", 1),
            ("ms0", "macswap", 1),
            ("tx1", "port_tx", 1),
            ("drop0", "drop", 1),
            ("cap0", "capture", 0),
        ]
    );
    let rx = &p.nodes[0].params;
    assert_eq!((rx.port("port"), rx.uint("queue"), rx.uint("burst")), (Some("p0"), Some(0), Some(32)));
    assert_eq!(rx.loc("port"), Some(Loc::new(33, 20)));
    assert_eq!(rx.loc("burst"), Some(p.nodes[0].loc), "a default is placed at its node");
    assert!(p.nodes[1].params.is_empty());
    let arp = &p.nodes[2].params;
    assert_eq!(arp.ip_list("addresses"), Some(&[IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))][..]));
    assert_eq!(arp.mac("mac"), Some([2, 0, 0, 0, 0, 1]));
    assert_eq!(p.nodes[4].params.uint("queue"), Some(3));
    let cap = &p.nodes[6].params;
    assert_eq!(cap.path("path"), Some(dir().join("valid/caps/out.pcap").as_path()));
    assert_eq!(cap.str("mode"), Some("ring"));
    assert_eq!(cap.duration_us("flush"), Some(5));
    assert_eq!(cap.bool("enabled"), Some(true));
    assert_eq!(cap.str("label"), Some("42"));
    assert_eq!(cap.ipv4("gw"), Some(Ipv4Addr::new(192, 168, 1, 1)));
    assert_eq!(cap.ipv6("gw6"), Some("fe80::1".parse::<Ipv6Addr>().unwrap()));
    assert_eq!(cap.mempool("pool"), Some("big"));
    assert_eq!(cap.get("nothing"), None);

    let edge = |from: &str, next: &str, to: &str, ring_size: u32, line: u32| EdgeCfg {
        from: from.into(),
        next: next.into(),
        to: to.into(),
        ring_size,
        loc: Loc::new(line, 5),
    };
    assert_eq!(
        p.edges,
        [
            edge("rx0", "out", "cls0", 4096, 58),
            edge("cls0", "arp", "arp0", 1024, 59),
            edge("cls0", "ipv4", "ms0", 1024, 60),
            edge("cls0", "other", "drop0", 1024, 61),
            edge("arp0", "out", "tx1", 1024, 62),
            edge("ms0", "out", "tx1", 1024, 63),
        ]
    );
}

#[test]
fn valid_records_file() {
    let path = dir().join("valid/records.yaml");
    let p = load_file(&path, &mock_catalog()).unwrap_or_else(|e| panic!("{e}"));
    let web = &p.nodes[0].params;
    assert_eq!(web.loc("listen"), Some(Loc::new(12, 9)));
    let listen = web.records("listen").unwrap();
    assert_eq!(listen.len(), 3);

    let http = &listen[0];
    assert_eq!((http.uint("port"), http.str("app")), (Some(80), Some("http")));
    assert_eq!(http.path("root"), Some(dir().join("valid/./www").as_path()), "relative to the file's directory");
    assert_eq!(http.uint("backlog"), Some(128), "a field's default");
    assert_eq!(http.loc("port"), Some(Loc::new(12, 18)));
    assert_eq!(http.loc("backlog"), Some(Loc::new(12, 11)), "a field's default is placed at its record");
    assert_eq!((http.mempool("pool"), http.get("pool")), (None, None), "optional, no default");
    assert_eq!(http.len(), 4);

    let echo = &listen[1];
    assert_eq!((echo.uint("port"), echo.str("app")), (Some(7), Some("echo")));
    assert_eq!((echo.uint("backlog"), echo.mempool("pool"), echo.path("root")), (Some(16), Some("default"), None));
    assert_eq!(echo.loc("app"), Some(Loc::new(14, 16)));

    assert_eq!(listen[2].path("root"), Some(Path::new("/srv/null")));
    assert_eq!(listen[2].str("app"), Some("discard"));

    // The param's own default `[]`, and an explicit empty list: no records.
    assert_eq!(p.nodes[1].params.records("listen"), Some(&[][..]));
    assert_eq!(p.nodes[1].params.loc("listen"), Some(p.nodes[1].loc));
    assert_eq!(p.nodes[2].params.get("listen"), Some(&ParamValue::Records(Vec::new())));
}

#[test]
fn implicit_mempool_and_paths_relative_to_cwd() {
    let text = "lcores: [{id: 0}]\nports: [{name: p0, driver: net_null}]\nnodes:\n  - {name: c, type: capture, lcore: 0, params: {path: x.pcap, flush: 7}}\n";
    let p = parse_str(text, Path::new("pipe.yaml"), &mock_catalog()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.mempools, [MempoolCfg::implicit()]);
    assert_eq!(p.ports[0].mempool, DEFAULT_MEMPOOL);
    assert_eq!(p.nodes[0].params.get("path"), Some(&ParamValue::Path("x.pcap".into())));
    assert_eq!(p.nodes[0].params.duration_us("flush"), Some(7));
    assert_eq!(p.nodes[0].params.str("label"), None);
    let abs = parse_str(&text.replace("x.pcap", "/abs/x.pcap"), Path::new("/etc/p.yaml"), &mock_catalog()).unwrap();
    assert_eq!(abs.nodes[0].params.path("path"), Some(Path::new("/abs/x.pcap")));
}

#[test]
fn unreadable_file_is_one_error_without_position() {
    let errs = load_file(Path::new("/nonexistent/pipe.yaml"), &mock_catalog()).unwrap_err();
    let shown = errs.to_string();
    assert!(shown.starts_with("/nonexistent/pipe.yaml: error: cannot read: "), "{shown}");
    assert_eq!(errs.errors.len(), 1);
}

#[test]
fn catalog_without_driver_list_accepts_any_driver() {
    let cat = ironpath_config::Catalog { drivers: None, ..mock_catalog() };
    let text =
        "lcores: [{id: 0}]\nports: [{name: p0, driver: net_whatever}]\nnodes: [{name: d, type: drop, lcore: 0}]\n";
    let p = parse_str(text, Path::new("p.yaml"), &cat).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.ports[0].driver, "net_whatever");
}
