//! The control plane's entry: what happens to a packet that leaves the forwarding
//! paths ([`Slow`]: copied and routed again, handed to ARP, ND and local delivery,
//! answered with an ICMP error, or held for its next hop), and neighbour resolution
//! around the hold queues (requests sent and retried, held packets released once
//! their neighbour is learned). Runs on the node's lcore, off the fast path.

use super::checks::{rewrite, Slow};
use super::icmp::Icmp;
use super::neigh::Held;
use super::{arp, nd, Router, RouterCounter as C};
use ironpath_eal::Mbuf;
use ironpath_graph::NodeCx;
use std::net::IpAddr;

impl Router {
    /// Everything off the forwarding paths, for a packet we own.
    pub(super) fn slow(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, why: Slow, from: Option<usize>, made_here: bool) {
        match why {
            Slow::Copy => match m.deep_copy(&self.pool) {
                Ok(c) => {
                    cx.count(C::Copied, 1);
                    self.route_owned(cx, c, from, made_here);
                }
                Err(_) => cx.count(C::AllocFailed, 1),
            },
            Slow::Arp => {
                if let Some(k) = from {
                    self.arp(cx, m, k);
                }
            }
            Slow::Local => {
                if let Some(k) = from {
                    self.local(cx, m, k);
                }
            }
            Slow::Hold(k, nh) => {
                if !m.is_writable() {
                    return self.slow(cx, m, Slow::Copy, from, made_here);
                }
                if let Ok(d) = m.data_mut() {
                    rewrite(d, !made_here, None);
                }
                match self.ifaces[k].neigh.hold(nh, m, cx.now_tsc) {
                    Held::Yes { request, evicted } => {
                        cx.count(C::Held, 1);
                        if let Some(packets) = evicted {
                            cx.count(C::ResolvingEvicted, 1);
                            cx.count(C::Unresolved, packets);
                        }
                        if request {
                            self.solicit(cx, k, nh);
                        }
                    }
                    Held::QueueFull => cx.count(C::HoldFull, 1),
                }
            }
            Slow::TimeExceeded => {
                cx.count(C::TtlExceeded, 1);
                self.icmp_error(cx, &m, from, Icmp::TimeExceeded);
            }
            Slow::NoRoute => {
                cx.count(C::NoRoute, 1);
                self.icmp_error(cx, &m, from, Icmp::NoRoute);
            }
            Slow::Unreachable => {
                cx.count(C::Rejected, 1);
                self.icmp_error(cx, &m, from, Icmp::Unreachable);
            }
            Slow::Prohibit => {
                cx.count(C::Rejected, 1);
                self.icmp_error(cx, &m, from, Icmp::Prohibited);
            }
            Slow::TooBig(mtu) => {
                cx.count(C::TooBig, 1);
                self.icmp_error(cx, &m, from, Icmp::TooBig(mtu));
            }
        }
    }

    /// Release packets held for a neighbour now known.
    pub(super) fn learned(&mut self, cx: &NodeCx<'_>, k: usize, ip: IpAddr, mac: [u8; 6]) {
        let (held, evicted) = self.ifaces[k].neigh.learn(ip, mac, cx.now_tsc);
        self.neigh_gen += 1;
        cx.count(C::Learned, 1);
        cx.count(C::Evicted, u64::from(evicted));
        let (src, edge) = (self.ifaces[k].mac, self.ifaces[k].edge);
        for mut m in held {
            if let Ok(d) = m.data_mut() {
                d[0..6].copy_from_slice(&mac);
                d[6..12].copy_from_slice(&src);
                cx.count(C::Forwarded, 1);
                self.out.push_back((m, edge));
            }
        }
    }

    /// Ask for neighbour `ip` on interface `k`: an ARP request or a neighbour solicitation.
    pub(super) fn solicit(&mut self, cx: &NodeCx<'_>, k: usize, ip: IpAddr) {
        let iface = &self.ifaces[k];
        let frame = match ip {
            IpAddr::V4(target) => match arp::request(iface, target) {
                Some(frame) => frame,
                None => return,
            },
            IpAddr::V6(target) => nd::solicitation(iface, target),
        };
        match Mbuf::from_slice(&self.pool, &frame) {
            Ok(m) => {
                cx.count(if ip.is_ipv4() { C::ArpRequests } else { C::NsSent }, 1);
                self.out.push_back((m, iface.edge));
            }
            Err(_) => cx.count(C::AllocFailed, 1),
        }
    }

    /// Ask again for the neighbours being resolved whose retry time came (dropping
    /// the packets of those that used up their tries).
    pub(super) fn retry(&mut self, cx: &NodeCx<'_>) {
        let now = cx.now_tsc;
        let mut again = std::mem::take(&mut self.scratch);
        for k in 0..self.ifaces.len() {
            if !self.ifaces[k].neigh.resolving() {
                continue;
            }
            again.clear();
            let dropped = self.ifaces[k].neigh.retry(now, &mut again);
            cx.count(C::Unresolved, dropped);
            for ip in again.drain(..) {
                self.solicit(cx, k, ip);
            }
        }
        self.scratch = again;
    }
}
