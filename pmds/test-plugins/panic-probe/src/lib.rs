//! Test plugin: a driver whose probe panics (unless `ok=1`) and whose RX burst panics,
//! to prove the SDK turns panics into error codes and counted errors.
use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::{export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxQueue, TxQueue};
use std::ffi::CStr;
use std::sync::Arc;

/// The device.
pub struct Panicky;
/// RX queue that panics on every burst.
pub struct Rx;
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
    fn rx_queue_setup(&mut self, _: u16, _: u16, _: Pool, _: Arc<QueueStats>) -> Result<Rx, PmdError> {
        Ok(Rx)
    }
    fn tx_queue_setup(&mut self, _: u16, _: u16, _: Arc<QueueStats>) -> Result<Tx, PmdError> {
        Ok(Tx)
    }
    fn mac(&self) -> Result<[u8; 6], PmdError> {
        panic!("deliberate panic in mac_addr_get")
    }
}

impl RxQueue for Rx {
    fn rx_burst(&mut self, _pkts: &mut [*mut Mbuf]) -> usize {
        panic!("deliberate panic in rx_burst")
    }
}

impl TxQueue for Tx {
    fn tx_burst(&mut self, _pkts: &mut [*mut Mbuf]) -> usize {
        panic!("deliberate panic in tx_burst")
    }
}

export_pmd!(Panicky);
