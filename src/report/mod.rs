//! What people read: the per-target colour diff and the aggregate.
//!
//! Each output format is its own small module.

pub mod terminal;
