//! `port_rx` (a source: receive bursts from one queue) and `port_tx` (a sink:
//! send to one queue; what the queue refuses is dropped and counted, never held;
//! completions are reclaimed when the lcore is idle).

use ironpath_eal::{Burst, RxQ, TxQ, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};

/// Receive from one port queue.
pub struct PortRx {
    q: RxQ,
    burst: usize,
}

impl PortRx {
    /// A receiver of up to `burst` packets per poll.
    pub fn new(q: RxQ, burst: usize) -> Self {
        Self { q, burst: burst.clamp(1, MAX_BURST) }
    }
}

impl Node for PortRx {
    #[inline]
    fn process(&mut self, _cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let room = pkts.room().min(self.burst);
        pkts.rx(&self.q, room);
        Dispatch::All(0)
    }
}

static TX_COUNTERS: [CounterSpec; 2] = [
    CounterSpec { name: "sent", unit: "packets" },
    CounterSpec { name: "tx_full", unit: "packets dropped (queue full)" },
];

/// Send to one port queue.
pub struct PortTx {
    q: TxQ,
    retries: u32,
}

impl PortTx {
    /// A sender that retries a full queue `retries` times before dropping.
    pub fn new(q: TxQ, retries: u32) -> Self {
        Self { q, retries }
    }
}

impl Node for PortTx {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let n = pkts.len();
        let mut left = self.retries;
        while !pkts.is_empty() {
            let before = pkts.len();
            pkts.tx(&self.q);
            if pkts.len() == before {
                if left == 0 {
                    break;
                }
                left -= 1;
            }
        }
        let unsent = pkts.len();
        cx.count(0, (n - unsent) as u64);
        if unsent > 0 {
            cx.count(1, unsent as u64);
            pkts.free_all();
        }
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &TX_COUNTERS
    }

    fn idle(&mut self, _cx: &mut NodeCx<'_>) {
        // Nothing to send: let the driver free what the device has finished, so that
        // senders waiting for completions (tcp's tx_inflight_limit) do not wait for the
        // next burst.
        self.q.done_cleanup(0);
    }
}
