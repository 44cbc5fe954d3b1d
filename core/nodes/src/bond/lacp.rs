//! IEEE 802.1AX (802.3ad) Link Aggregation Control Protocol for one bond: the
//! LACPDU and marker PDU formats, and per member the receive, periodic
//! transmission, selection and mux machines (coupled control: collecting and
//! distributing change together). Pure: no packets, no clock of its own; the bond
//! node feeds it received PDUs and the time, and sends what it returns.
//!
//! One bond is one aggregator: a member joins it only when its partner (system,
//! system priority and key, from the partner's LACPDUs) is the aggregator's
//! partner and says it can aggregate; the first member with a current partner
//! chooses it. A member carries traffic when both ends are in sync, it is
//! collecting and distributing, and the partner says it is collecting.

/// Slow protocols multicast address (LACP, marker).
pub const SLOW_MAC: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x02];
/// Slow protocols EtherType.
pub const ETH_SLOW: u16 = 0x8809;
/// Slow protocol subtypes.
pub const SUBTYPE_LACP: u8 = 1;
/// Marker protocol.
pub const SUBTYPE_MARKER: u8 = 2;
/// A LACPDU or marker PDU frame: 14 bytes of Ethernet header and 110 of PDU.
pub const PDU_FRAME: usize = 124;

/// Actor/partner state bits.
pub mod state {
    /// Active LACP (sends LACPDUs unprompted).
    pub const ACTIVITY: u8 = 1 << 0;
    /// Short timeout (fast rate: LACPDUs every second).
    pub const TIMEOUT: u8 = 1 << 1;
    /// Aggregatable.
    pub const AGGREGATION: u8 = 1 << 2;
    /// In sync: attached to the right aggregator.
    pub const SYNC: u8 = 1 << 3;
    /// Collecting frames.
    pub const COLLECTING: u8 = 1 << 4;
    /// Distributing frames.
    pub const DISTRIBUTING: u8 = 1 << 5;
    /// Partner information is the defaults (no LACPDU heard).
    pub const DEFAULTED: u8 = 1 << 6;
    /// The partner's information expired.
    pub const EXPIRED: u8 = 1 << 7;
}

/// One side's information in a LACPDU (actor or partner TLV).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Info {
    /// System priority.
    pub system_priority: u16,
    /// System id (a MAC).
    pub system: [u8; 6],
    /// Operational key.
    pub key: u16,
    /// Port priority.
    pub port_priority: u16,
    /// Port number.
    pub port: u16,
    /// State bits ([`state`]).
    pub state: u8,
}

impl Info {
    fn parse(b: &[u8]) -> Info {
        let u16at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut system = [0; 6];
        system.copy_from_slice(&b[2..8]);
        Info {
            system_priority: u16at(0),
            system,
            key: u16at(8),
            port_priority: u16at(10),
            port: u16at(12),
            state: b[14],
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&self.system_priority.to_be_bytes());
        b[2..8].copy_from_slice(&self.system);
        b[8..10].copy_from_slice(&self.key.to_be_bytes());
        b[10..12].copy_from_slice(&self.port_priority.to_be_bytes());
        b[12..14].copy_from_slice(&self.port.to_be_bytes());
        b[14] = self.state;
    }

    /// The same port of the same system with the same key (what makes two LACPDUs
    /// describe one link end), ignoring the state bits.
    fn same_port(&self, o: &Info) -> bool {
        (self.system_priority, self.system, self.key, self.port_priority, self.port)
            == (o.system_priority, o.system, o.key, o.port_priority, o.port)
    }
}

/// A slow protocol PDU received on a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pdu {
    /// A LACPDU: the sender's (actor) and its view of us (partner).
    Lacp {
        /// The sender.
        actor: Info,
        /// What the sender knows of us.
        partner: Info,
    },
    /// A marker information PDU (to be answered with a response carrying the same
    /// fields).
    MarkerInfo([u8; 16]),
    /// A marker response (to a marker we never send: counted and dropped).
    MarkerResponse,
}

/// Why a slow protocol frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Too short, a wrong TLV type or length.
    Malformed,
    /// Another slow protocol (OAM, ...), or a subtype we do not speak.
    Unknown,
}

/// Parses a slow protocol frame (the whole Ethernet frame, untagged). 802.1AX
/// 6.4.2.3: TLVs are checked by type and length; versions above 1 are accepted
/// (later versions keep the version 1 fields where they are).
pub fn parse(frame: &[u8]) -> Result<Pdu, Bad> {
    if frame.len() < 14 + 2 || u16::from_be_bytes([frame[12], frame[13]]) != ETH_SLOW {
        return Err(Bad::Malformed);
    }
    let p = &frame[14..];
    match p[0] {
        SUBTYPE_LACP => {
            // subtype, version, actor TLV (type 1, length 20), partner TLV (type 2,
            // length 20), collector TLV (type 3, length 16), terminator (0, 0).
            if p.len() < 2 + 20 + 20 + 16 + 2 || p[1] == 0 {
                return Err(Bad::Malformed);
            }
            if (p[2], p[3], p[22], p[23], p[42], p[43]) != (1, 20, 2, 20, 3, 16) {
                return Err(Bad::Malformed);
            }
            Ok(Pdu::Lacp { actor: Info::parse(&p[4..22]), partner: Info::parse(&p[24..42]) })
        }
        SUBTYPE_MARKER => {
            // subtype, version, marker TLV (type 1 or 2, length 16), terminator.
            if p.len() < 2 + 16 + 2 || p[1] == 0 || p[3] != 16 {
                return Err(Bad::Malformed);
            }
            match p[2] {
                1 => {
                    let mut tlv = [0; 16];
                    tlv.copy_from_slice(&p[2..18]);
                    Ok(Pdu::MarkerInfo(tlv))
                }
                2 => Ok(Pdu::MarkerResponse),
                _ => Err(Bad::Malformed),
            }
        }
        _ => Err(Bad::Unknown),
    }
}

/// Writes a LACPDU frame from `src` into `out` ([`PDU_FRAME`] bytes).
pub fn write_lacpdu(out: &mut [u8; PDU_FRAME], src: [u8; 6], actor: &Info, partner: &Info) {
    out.fill(0);
    out[0..6].copy_from_slice(&SLOW_MAC);
    out[6..12].copy_from_slice(&src);
    out[12..14].copy_from_slice(&ETH_SLOW.to_be_bytes());
    let p = &mut out[14..];
    p[0] = SUBTYPE_LACP;
    p[1] = 1;
    (p[2], p[3]) = (1, 20);
    actor.write(&mut p[4..22]);
    (p[22], p[23]) = (2, 20);
    partner.write(&mut p[24..42]);
    (p[42], p[43]) = (3, 16);
    // Collector max delay 0, reserved, terminator (0, 0) and reserved: zero.
}

/// Writes the marker response to marker information `tlv` (same fields, TLV type
/// 2) from `src` into `out`.
pub fn write_marker_response(out: &mut [u8; PDU_FRAME], src: [u8; 6], tlv: &[u8; 16]) {
    out.fill(0);
    out[0..6].copy_from_slice(&SLOW_MAC);
    out[6..12].copy_from_slice(&src);
    out[12..14].copy_from_slice(&ETH_SLOW.to_be_bytes());
    out[14] = SUBTYPE_MARKER;
    out[15] = 1;
    out[16..32].copy_from_slice(tlv);
    out[16] = 2;
}

/// The receive machine's state (802.1AX 6.4.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rx {
    /// The member's link is down.
    Disabled,
    /// A LACPDU arrived within the timeout.
    Current,
    /// None arrived within one timeout: the partner is asked for fast LACPDUs.
    Expired,
    /// None within two: the partner is unknown.
    Defaulted,
}

/// The mux machine's state (802.1AX 6.4.15, coupled control).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mux {
    /// Not part of the aggregate.
    Detached,
    /// Selected, waiting for other members to be selected too.
    Waiting,
    /// Attached to the aggregator, in sync; waiting for the partner's sync.
    Attached,
    /// Collecting and distributing.
    CollectingDistributing,
}

/// Timing in ticks of the caller's clock.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// One second.
    pub second: u64,
    /// Ask the partner for LACPDUs every second (and expire its information after
    /// 3 s) rather than every 30 s (90 s).
    pub fast: bool,
}

impl Timing {
    fn short_timeout(&self) -> u64 {
        3 * self.second
    }
    fn current_timeout(&self) -> u64 {
        if self.fast {
            self.short_timeout()
        } else {
            90 * self.second
        }
    }
}

/// One member's protocol state.
#[derive(Clone, Debug)]
pub struct Port {
    /// What we say of ourselves.
    pub actor: Info,
    /// What we know of the partner (its last LACPDU, else defaults).
    pub partner: Info,
    /// The receive machine.
    pub rx: Rx,
    /// The mux machine.
    pub mux: Mux,
    /// Selected for the aggregator.
    pub selected: bool,
    ntt: bool,
    current_until: u64,
    wait_until: u64,
    next_periodic: u64,
    /// When the last three LACPDUs left (at most three a second).
    sent_at: [u64; 3],
    /// LACPDUs received and sent, and those we refused (our own, looped back).
    pub received: u64,
    /// LACPDUs sent.
    pub sent: u64,
}

/// The LACP side of a bond: its members' machines.
#[derive(Clone, Debug)]
pub struct Lacp {
    /// The members, in order (port number = index + 1).
    pub ports: Vec<Port>,
    timing: Timing,
    /// The aggregator's partner (system priority, system, key), once chosen.
    pub aggregate: Option<(u16, [u8; 6], u16)>,
}

/// The aggregate wait time (802.1AX: 2 s): a selected member waits this long for
/// others before it attaches, so members that come up together join together.
const AGGREGATE_WAIT_S: u64 = 2;
/// Slow periodic time (30 s) when the partner asks for long timeouts.
const SLOW_PERIODIC_S: u64 = 30;

impl Lacp {
    /// The machines of `members` members of a bond of system `system` (its MAC)
    /// with priority `system_priority` and key `key`.
    pub fn new(members: usize, system: [u8; 6], system_priority: u16, key: u16, timing: Timing) -> Lacp {
        let base = state::ACTIVITY | state::AGGREGATION | if timing.fast { state::TIMEOUT } else { 0 };
        let ports = (0..members)
            .map(|i| Port {
                actor: Info {
                    system_priority,
                    system,
                    key,
                    port_priority: 0x00ff,
                    port: i as u16 + 1,
                    state: base | state::DEFAULTED,
                },
                partner: default_partner(),
                rx: Rx::Disabled,
                mux: Mux::Detached,
                selected: false,
                ntt: false,
                current_until: 0,
                wait_until: 0,
                next_periodic: 0,
                sent_at: [0; 3],
                received: 0,
                sent: 0,
            })
            .collect();
        Lacp { ports, timing, aggregate: None }
    }

    /// Member `i`'s link came up or went down.
    pub fn set_enabled(&mut self, i: usize, up: bool, now: u64) {
        let short = self.timing.short_timeout();
        let p = &mut self.ports[i];
        match (up, p.rx) {
            (false, Rx::Disabled) | (true, Rx::Current | Rx::Expired | Rx::Defaulted) => {}
            (false, _) => {
                // PORT_DISABLED: the partner is out of sync; the member leaves.
                p.rx = Rx::Disabled;
                p.partner.state &= !state::SYNC;
                p.selected = false;
            }
            (true, Rx::Disabled) => {
                // EXPIRED: ask for fast LACPDUs at once.
                p.rx = Rx::Expired;
                p.partner.state = (p.partner.state & !state::SYNC) | state::TIMEOUT;
                p.actor.state |= state::EXPIRED;
                p.current_until = now.saturating_add(short);
                p.ntt = true;
            }
        }
    }

    /// A LACPDU received on member `i`; false if it was refused (the member's link
    /// is down, or it is one of our own looped back).
    pub fn received(&mut self, i: usize, actor: &Info, partner: &Info, now: u64) -> bool {
        let current = self.timing.current_timeout();
        let p = &mut self.ports[i];
        if p.rx == Rx::Disabled || actor.system == p.actor.system {
            return false;
        }
        p.received += 1;
        // update_Selected: a different partner port means another aggregate.
        if !actor.same_port(&p.partner) || (actor.state ^ p.partner.state) & state::AGGREGATION != 0 {
            p.selected = false;
        }
        // update_NTT: the partner's view of us is out of date.
        let mask = state::ACTIVITY | state::TIMEOUT | state::SYNC | state::AGGREGATION;
        if !partner.same_port(&p.actor) || (partner.state ^ p.actor.state) & mask != 0 {
            p.ntt = true;
        }
        // recordPDU: the partner in sync if it sees us as we are (or is individual).
        let matched = partner.same_port(&p.actor) && (partner.state ^ p.actor.state) & state::AGGREGATION == 0;
        let in_sync = actor.state & state::SYNC != 0 && (matched || actor.state & state::AGGREGATION == 0);
        let faster = actor.state & state::TIMEOUT != 0 && p.partner.state & state::TIMEOUT == 0;
        p.partner = Info { state: actor.state & !state::SYNC | if in_sync { state::SYNC } else { 0 }, ..*actor };
        p.actor.state &= !(state::DEFAULTED | state::EXPIRED);
        p.rx = Rx::Current;
        p.current_until = now.saturating_add(current);
        if faster {
            // The partner now wants fast LACPDUs: the next one within a second.
            p.next_periodic = p.next_periodic.min(now.saturating_add(self.timing.second));
        }
        true
    }

    /// Runs the timers and machines at `now`; calls `send(member, actor, partner)`
    /// for each LACPDU to send now, which says whether it could (a LACPDU not sent
    /// is tried again at the next tick).
    pub fn tick(&mut self, now: u64, mut send: impl FnMut(usize, &Info, &Info) -> bool) {
        let t = self.timing;
        for p in &mut self.ports {
            // A clock that stepped back leaves no timer further away than it runs.
            p.current_until = p.current_until.min(now.saturating_add(t.current_timeout()));
            p.wait_until = p.wait_until.min(now.saturating_add(t.second * AGGREGATE_WAIT_S));
            p.next_periodic = p.next_periodic.min(now.saturating_add(SLOW_PERIODIC_S * t.second));
            for s in &mut p.sent_at {
                if *s > now {
                    *s = 0;
                }
            }
        }
        for p in &mut self.ports {
            // Receive machine timers.
            match p.rx {
                Rx::Current if now >= p.current_until => {
                    p.rx = Rx::Expired;
                    p.partner.state = (p.partner.state & !state::SYNC) | state::TIMEOUT;
                    p.actor.state |= state::EXPIRED;
                    p.current_until = now.saturating_add(t.short_timeout());
                    p.ntt = true;
                }
                Rx::Expired if now >= p.current_until => {
                    p.rx = Rx::Defaulted;
                    p.partner = default_partner();
                    p.actor.state = (p.actor.state & !state::EXPIRED) | state::DEFAULTED;
                    p.selected = false;
                    p.ntt = true;
                }
                _ => {}
            }
        }
        self.select();
        for p in &mut self.ports {
            mux(p, now, t.second * AGGREGATE_WAIT_S);
            // Periodic transmission (none while the link is down).
            if p.rx != Rx::Disabled {
                let every = if p.partner.state & state::TIMEOUT != 0 { t.second } else { SLOW_PERIODIC_S * t.second };
                if now >= p.next_periodic {
                    p.ntt = true;
                    p.next_periodic = now.saturating_add(every);
                }
                // At most three LACPDUs in any second.
                if p.ntt
                    && (p.sent < 3 || now.saturating_sub(p.sent_at[0]) >= t.second)
                    && send(p.actor.port as usize - 1, &p.actor, &p.partner)
                {
                    p.ntt = false;
                    p.sent_at = [p.sent_at[1], p.sent_at[2], now];
                    p.sent += 1;
                }
            }
        }
    }

    /// Selection: the aggregator's partner is kept while a member is attached to
    /// it, else it is the first eligible member's; members whose partner is that
    /// one are selected.
    fn select(&mut self) {
        let eligible = |p: &Port| p.rx == Rx::Current && p.partner.state & state::AGGREGATION != 0;
        let id = |p: &Port| (p.partner.system_priority, p.partner.system, p.partner.key);
        let held = self.aggregate.filter(|a| self.ports.iter().any(|p| p.mux != Mux::Detached && id(p) == *a));
        self.aggregate = held.or_else(|| self.ports.iter().find(|p| eligible(p)).map(id));
        for p in &mut self.ports {
            p.selected = eligible(p) && Some(id(p)) == self.aggregate && (p.selected || p.mux == Mux::Detached);
        }
    }

    /// Member `i` may carry traffic: collecting and distributing, and its partner
    /// collecting.
    pub fn distributing(&self, i: usize) -> bool {
        self.collecting(i) && self.ports[i].partner.state & state::COLLECTING != 0
    }

    /// Member `i` takes frames in: collecting, still selected, and its partner in
    /// sync (a LACPDU that withdrew either counts at once, before the next tick
    /// moves the mux).
    pub fn collecting(&self, i: usize) -> bool {
        let p = &self.ports[i];
        p.mux == Mux::CollectingDistributing && p.selected && p.partner.state & state::SYNC != 0
    }
}

/// The mux machine of one member (coupled control).
fn mux(p: &mut Port, now: u64, wait: u64) {
    let sync = |p: &mut Port, on: bool| {
        let bits = state::SYNC | state::COLLECTING | state::DISTRIBUTING;
        let want = if on { state::SYNC } else { 0 };
        if p.actor.state & bits != want {
            p.actor.state = (p.actor.state & !bits) | want;
            p.ntt = true;
        }
    };
    loop {
        let before = p.mux;
        match p.mux {
            Mux::Detached if p.selected => {
                p.mux = Mux::Waiting;
                p.wait_until = now.saturating_add(wait);
            }
            Mux::Detached => sync(p, false),
            Mux::Waiting if !p.selected => p.mux = Mux::Detached,
            Mux::Waiting if now >= p.wait_until => {
                p.mux = Mux::Attached;
                sync(p, true);
            }
            Mux::Attached if !p.selected => {
                p.mux = Mux::Detached;
                sync(p, false);
            }
            Mux::Attached if p.partner.state & state::SYNC != 0 => {
                p.mux = Mux::CollectingDistributing;
                p.actor.state |= state::COLLECTING | state::DISTRIBUTING;
                p.ntt = true;
            }
            Mux::CollectingDistributing if !p.selected || p.partner.state & state::SYNC == 0 => {
                p.mux = Mux::Attached;
                p.actor.state &= !(state::COLLECTING | state::DISTRIBUTING);
                p.ntt = true;
            }
            _ => {}
        }
        if p.mux == before {
            break;
        }
    }
}

/// The partner we assume before hearing one: nothing, individual, long timeout.
fn default_partner() -> Info {
    Info::default()
}

/// A state's bits as words (`show bond`).
pub fn state_words(s: u8) -> String {
    const NAMES: [&str; 8] =
        ["active", "short-timeout", "aggregatable", "sync", "collecting", "distributing", "defaulted", "expired"];
    let words: Vec<&str> = (0..8).filter(|b| s & (1 << b) != 0).map(|b| NAMES[b]).collect();
    if words.is_empty() {
        "-".into()
    } else {
        words.join(",")
    }
}
