//! Test plugin: a driver whose probe panics (unless `ok=1`) and whose RX burst panics,
//! to prove the SDK turns panics into error codes and counted errors. The RX burst
//! allocates packets into the burst first: the SDK must give them back.
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, TxBurst, TxQueue,
};
use std::ffi::CStr;
use std::sync::Arc;

/// The device.
pub struct Panicky;
/// RX queue that allocates into the burst, then panics, on every burst.
pub struct Rx(Pool);
/// TX queue that panics on every burst.
pub struct Tx;

impl Pmd for Panicky {
    const NAME: &'static CStr = c"net_panic";
    const DEVARGS_HELP: &'static CStr = c"ok=0|1";
    type Rx = Rx;
    type Tx = Tx;

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, &["ok"])?;
        if !a.get_bool("ok", false)? {
            panic!("deliberate panic in probe of {}", ctx.name);
        }
        Ok(Panicky)
    }
    fn info(&self) -> abi::DevInfo {
        abi::DevInfo { max_rx_queues: 1, max_tx_queues: 1, ..Default::default() }
    }
    fn rx_queue_setup(&mut self, _: u16, _: u16, pool: Pool, _: Arc<QueueStats>) -> Result<Rx, PmdError> {
        Ok(Rx(pool))
    }
    fn tx_queue_setup(&mut self, _: u16, _: u16, _: Arc<QueueStats>) -> Result<Tx, PmdError> {
        Ok(Tx)
    }
    fn mac(&self) -> Result<[u8; 6], PmdError> {
        panic!("deliberate panic in mac_addr_get")
    }
}

impl RxQueue for Rx {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let n = burst.room().min(4);
        let got = burst.alloc(&self.0, n).map_or(0, |f| f.len());
        panic!("deliberate panic in rx_burst after allocating {got} packets")
    }
}

impl TxQueue for Tx {
    fn tx_burst(&mut self, _burst: &mut TxBurst<'_>) {
        panic!("deliberate panic in tx_burst")
    }
}

export_pmd!(Panicky);
