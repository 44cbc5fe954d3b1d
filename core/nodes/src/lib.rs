//! ironpath-nodes
