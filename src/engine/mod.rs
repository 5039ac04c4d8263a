//! The only code that touches llama.cpp.
//!
//! [`config`] holds the settings as plain data (no llama.cpp types);
//! [`model`] loads a GGUF file and reads its metadata; [`session`] owns a
//! context: prefill, snapshot, restore and greedy generation, with timings;
//! [`parallel`] answers many questions at once over one prefix.

pub mod config;
pub mod model;
pub mod parallel;
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

/// The backend this binary was built for: `cpu`, `cuda`, `metal` or `vulkan`.
pub fn backend_name() -> &'static str {
    env!("POSRECALL_BACKEND")
}

/// Free memory where the KV cache will live, and that device's description:
/// the first GPU when layers are offloaded to one, else main memory.
pub fn free_memory(gpu_offload: bool) -> Option<(u64, String)> {
    use llama_cpp_2::{LlamaBackendDeviceType, list_llama_ggml_backend_devices};
    let devices = list_llama_ggml_backend_devices();
    let gpu = devices.iter().find(|d| {
        matches!(d.device_type, LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu)
    });
    match gpu {
        Some(d) if gpu_offload && d.memory_free > 0 => {
            Some((d.memory_free as u64, format!("{} ({})", d.name, d.description)))
        }
        _ => mem_available().map(|b| (b, "main memory".to_string())),
    }
}

/// MemAvailable from /proc/meminfo (Linux), else the CPU device's figure.
fn mem_available() -> Option<u64> {
    if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
        let kb = text
            .lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        if let Some(kb) = kb {
            return Some(kb * 1024);
        }
    }
    llama_cpp_2::list_llama_ggml_backend_devices()
        .into_iter()
        .find(|d| matches!(d.device_type, llama_cpp_2::LlamaBackendDeviceType::Cpu))
        .map(|d| d.memory_free as u64)
        .filter(|&b| b > 0)
}
