//! The only code that touches llama.cpp.
//!
//! The settings it reads are plain data in [`crate::settings`];
//! [`model`] loads a GGUF model (one file or the parts of a split one) and
//! reads its metadata; [`params`] turns the settings into llama.cpp's
//! parameters, once; [`gguf`] reads a file's header and finds a split
//! model's parts; [`session`] owns a
//! context: prefill, snapshot, restore and greedy generation, with timings;
//! [`parallel`] answers many questions at once over one prefix; [`device`]
//! lists the compute devices and decides how many layers go to the GPU.

pub mod device;
pub mod gguf;
pub mod model;
pub mod parallel;
mod params;
pub mod prefix_cache;
pub mod session;
pub mod state_size;

use anyhow::{Context, Result};
use llama_cpp_2::llama_backend::LlamaBackend;
use std::sync::{Mutex, OnceLock};

/// A token id, as the engine hands tokens to the rest of posrecall.
pub use llama_cpp_2::token::LlamaToken as Token;

static BACKEND: OnceLock<LlamaBackend> = OnceLock::new();
/// llama.cpp can be initialised once per process; this serialises the first calls.
static INIT: Mutex<()> = Mutex::new(());

/// The process-wide llama.cpp backend, initialised once. llama.cpp's own log
/// output is silenced unless `POSRECALL_LLAMA_LOG` is set, so that the
/// terminal shows posrecall's progress, not the loader's chatter.
pub fn backend() -> Result<&'static LlamaBackend> {
    if let Some(b) = BACKEND.get() {
        return Ok(b);
    }
    let _guard = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = BACKEND.get() {
        return Ok(b);
    }
    let mut b = LlamaBackend::init().context("cannot start llama.cpp")?;
    if std::env::var_os("POSRECALL_LLAMA_LOG").is_none() {
        b.void_logs();
    }
    Ok(BACKEND.get_or_init(|| b))
}

pub use device::free_memory;
