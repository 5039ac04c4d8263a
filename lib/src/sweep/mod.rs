//! Sweeps (`posrecall matrix`): a layer above [`crate::bench`], which never
//! imports it. [`file`] reads `models.toml` into one set of options per
//! (model × KV) run, [`shard`] says which of the runs this process owns, and
//! [`run`] runs them: one shared range, each model loaded once, its reference
//! run first, each run file written as soon as it is done, resumable;
//! [`list`] runs a `bench` list (several models, `--kv A,B,…`, …) as a sweep.

pub mod file;
pub mod list;
pub mod run;
pub mod shard;

pub use file::{ModelEntry, ReferenceRole, Sweep, SweepRun, expand_vars, process_env};
pub use run::{OutDirError, Outcome, SweepOptions, SweepSink, is_finished, run_sweep};
pub use shard::{Shard, ShardArg, ShardError};

/// Where a sweep's run files go when nothing is said.
pub const DEFAULT_OUT_DIR: &str = "runs";
