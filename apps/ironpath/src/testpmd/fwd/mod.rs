//! The forwarding engines, one per file, each a value of [`super::engine::FwdEngine`].

pub mod csum;
pub mod fivetswap;
pub mod flowgen;
pub mod icmpecho;
pub mod io;
pub mod mac;
pub mod macswap;
pub mod rxonly;
pub mod txonly;
