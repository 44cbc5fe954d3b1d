//! `mempools:`, `ports:` and `lcores:`.

use crate::catalog::Catalog;
use crate::error::Loc;
use crate::model::{HugePages, LcoreCfg, MempoolCfg, PortCfg, DEFAULT_MEMPOOL};
use crate::suggest::{did_you_mean, list, show};
use crate::tree::{Node, NodeKind};

use super::{boolean, choice, entry_ctx, list_of, peek_name, required_list, string, uint_as, Errors, Fields, Names};

const MEMPOOL_KEYS: &[&str] = &["name", "size", "cache", "data_room", "hugepages"];
const PORT_KEYS: &[&str] =
    &["name", "driver", "args", "mempool", "rx_queues", "tx_queues", "rx_desc", "tx_desc", "promisc", "mtu"];
const LCORE_KEYS: &[&str] = &["id", "cpu", "rx_mode"];

/// Largest lcore id (128 lcores).
pub(crate) const MAX_LCORE: u64 = 127;
/// Largest CPU number (glibc's `CPU_SETSIZE` is 1024).
const MAX_CPU: u64 = 1023;

/// Reads the required `name` of an entry and records it in `names`.
fn entry_name<'n>(e: &mut Errors, f: &Fields<'n>, ctx: &str, noun: &str, names: &mut Names) -> Option<&'n str> {
    let name = f.required(e, "name", ctx).and_then(|node| {
        let name = string(e, node, &format!("`name` in {ctx}"))?;
        if name.is_empty() {
            e.push(node.loc, format!("`name` in {ctx}: must not be empty"));
            return None;
        }
        Some((name, node.loc))
    });
    match name {
        Some((name, loc)) => names.add(e, noun, name, loc).then_some(name),
        None => {
            names.mark_incomplete();
            None
        }
    }
}

/// The pools, and their names (with `default` when the key is absent).
pub(crate) fn mempools(e: &mut Errors, node: Option<&Node>) -> (Vec<MempoolCfg>, Names) {
    let mut names = Names::default();
    if node.is_none_or(|n| n.kind == NodeKind::Null) {
        names.add(e, "mempool", DEFAULT_MEMPOOL, Loc::default());
        return (vec![MempoolCfg::implicit()], names);
    }
    let items = list_of(e, node, "mempools");
    if let Some(n @ Node { kind: NodeKind::Seq(s), .. }) = node {
        if s.is_empty() {
            e.push(n.loc, format!("`mempools` is empty; omit the key to get the implicit pool `{DEFAULT_MEMPOOL}`"));
        }
    }
    let mut pools = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(f) = Fields::of(e, item, &format!("mempools[{i}]")) else { continue };
        let ctx = entry_ctx("mempool", "mempools", i, peek_name(&f, "name"));
        f.check_keys(e, &format!("in {ctx}"), MEMPOOL_KEYS);
        let what = |k: &str| format!("`{k}` in {ctx}");
        let name = entry_name(e, &f, &ctx, "mempool", &mut names);
        let size = f.get("size").map_or(Some(8191), |n| uint_as(e, n, &what("size"), 1, 16_777_215));
        let cache = f.get("cache").map_or(Some(256), |n| uint_as(e, n, &what("cache"), 0, 512));
        let data_room = f.get("data_room").map_or(Some(2176), |n| uint_as(e, n, &what("data_room"), 256, 65535));
        let hugepages = f.get("hugepages").map_or(Some(HugePages::Auto), |n| {
            choice(e, n, &what("hugepages"), &["auto", "on", "off"]).map(|v| match v {
                "on" => HugePages::On,
                "off" => HugePages::Off,
                _ => HugePages::Auto,
            })
        });
        if let (Some(name), Some(size), Some(cache), Some(data_room), Some(hugepages)) =
            (name, size, cache, data_room, hugepages)
        {
            pools.push(MempoolCfg { name: name.to_owned(), size, cache, data_room, hugepages, loc: f.loc });
        }
    }
    (pools, names)
}

/// The ports, and their names.
pub(crate) fn ports(
    e: &mut Errors,
    node: Option<&Node>,
    pools: &Names,
    catalog: &Catalog<'_>,
) -> (Vec<PortCfg>, Names) {
    let mut names = Names::default();
    let mut ports = Vec::new();
    for (i, item) in list_of(e, node, "ports").iter().enumerate() {
        let Some(f) = Fields::of(e, item, &format!("ports[{i}]")) else { continue };
        let ctx = entry_ctx("port", "ports", i, peek_name(&f, "name"));
        f.check_keys(e, &format!("in {ctx}"), PORT_KEYS);
        let what = |k: &str| format!("`{k}` in {ctx}");
        let name = entry_name(e, &f, &ctx, "port", &mut names);
        let driver = f.required(e, "driver", &ctx).and_then(|n| driver(e, n, &what("driver"), catalog));
        let args = f.get("args").map_or(Some(""), |n| string(e, n, &what("args")));
        let mempool = match f.get("mempool") {
            Some(n) => pools.reference(e, n, &what("mempool"), "mempool"),
            None => pools.iter().next().map(str::to_owned),
        };
        let queues = |e: &mut Errors, k: &str| f.get(k).map_or(Some(1), |n| uint_as(e, n, &what(k), 1, 64));
        let rx_queues = queues(e, "rx_queues");
        let tx_queues = queues(e, "tx_queues");
        let desc = |e: &mut Errors, k: &str| f.get(k).map_or(Some(1024), |n| uint_as(e, n, &what(k), 1, 32768));
        let rx_desc = desc(e, "rx_desc");
        let tx_desc = desc(e, "tx_desc");
        let promisc = f.get("promisc").map_or(Some(true), |n| boolean(e, n, &what("promisc")));
        let mtu = f.get("mtu").map(|n| uint_as(e, n, &what("mtu"), 68, 65535));
        if let (Some(name), Some(driver), Some(args), Some(mempool), Some(rxq), Some(txq), Some(rxd), Some(txd)) =
            (name, driver, args, mempool, rx_queues, tx_queues, rx_desc, tx_desc)
        {
            if let (Some(promisc), None | Some(Some(_))) = (promisc, mtu) {
                ports.push(PortCfg {
                    name: name.to_owned(),
                    driver: driver.to_owned(),
                    args: args.to_owned(),
                    mempool,
                    rx_queues: rxq,
                    tx_queues: txq,
                    rx_desc: rxd,
                    tx_desc: txd,
                    promisc,
                    mtu: mtu.flatten(),
                    loc: f.loc,
                });
            }
        }
    }
    (ports, names)
}

/// A driver name, checked against the catalog's list when it has one.
fn driver<'n>(e: &mut Errors, node: &'n Node, what: &str, catalog: &Catalog<'_>) -> Option<&'n str> {
    let name = string(e, node, what)?;
    let Some(drivers) = catalog.drivers else { return Some(name) };
    if drivers.iter().any(|d| d == name) {
        return Some(name);
    }
    let known = || drivers.iter().map(String::as_str);
    e.push(
        node.loc,
        format!("{what}: unknown driver `{}`; accepted: {}{}", show(name), list(known()), did_you_mean(name, known())),
    );
    None
}

/// The lcore ids defined; `complete` is false when an entry's id could not be read (then a
/// reference to an unknown id is not reported: it may mean that entry).
pub(crate) struct LcoreIds {
    pub(crate) ids: Vec<u32>,
    pub(crate) complete: bool,
}

/// The lcores, and the ids seen.
pub(crate) fn lcores(e: &mut Errors, top: &Fields<'_>, key: &str) -> (Vec<LcoreCfg>, LcoreIds) {
    let mut ids: Vec<(u32, Loc)> = Vec::new();
    let mut complete = true;
    let mut lcores = Vec::new();
    for (i, item) in required_list(e, top, key, "`lcores: [{id: 0}]`").iter().enumerate() {
        let Some(f) = Fields::of(e, item, &format!("lcores[{i}]")) else { continue };
        let ctx = match f.get("id").map(|n| &n.kind) {
            Some(NodeKind::Int(id)) => format!("lcore {id}"),
            _ => format!("lcores[{i}]"),
        };
        f.check_keys(e, &format!("in {ctx}"), LCORE_KEYS);
        let id_node = f.required(e, "id", &ctx);
        let mut id = id_node.and_then(|n| uint_as::<u32>(e, n, &format!("`id` in {ctx}"), 0, MAX_LCORE));
        complete &= id.is_some();
        if let (Some(v), Some(n)) = (id, id_node) {
            if let Some((_, first)) = ids.iter().find(|(x, _)| *x == v) {
                e.push(n.loc, format!("duplicate lcore id {v} (first defined at line {})", first.line));
                id = None;
            } else {
                ids.push((v, n.loc));
            }
        }
        let cpu = match f.get("cpu") {
            Some(n) => uint_as::<usize>(e, n, &format!("`cpu` in {ctx}"), 0, MAX_CPU),
            None => id.and_then(|v| usize::try_from(v).ok()),
        };
        let rx_mode = f.get("rx_mode").map(|n| choice(e, n, &format!("`rx_mode` in {ctx}"), crate::model::RX_MODES));
        if let (Some(id), Some(cpu), None | Some(Some(_))) = (id, cpu, rx_mode) {
            lcores.push(LcoreCfg { id, cpu, rx_mode: rx_mode.flatten(), loc: f.loc });
        }
    }
    (lcores, LcoreIds { ids: ids.into_iter().map(|(id, _)| id).collect(), complete })
}
