//! What people read: the per-target colour diff and the aggregate.
//!
//! Each output format is its own small module.

pub mod terminal;

// `posrecall report`: the data (aggregate), the trait (export), one module per format.
pub mod aggregate;
pub mod csv;
pub mod export;
pub mod html;
pub mod json;
pub mod markdown;
pub mod table;
pub mod tabular;
