//! Attacks on `nat44`: crafted frames and hostile peers on both sides.

use super::*;
