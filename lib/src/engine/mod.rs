//! The only code that touches llama.cpp.
//!
//! The settings it reads are plain data in [`crate::settings`];
//! [`model`] loads a GGUF model (one file or the parts of a split one) and
//! reads its metadata; [`params`] turns the settings into llama.cpp's
//! parameters, once; [`gguf`] reads a file's header and finds a split
//! model's parts; [`session`] owns a
//! context: prefill, snapshot, restore and greedy generation, with timings;
//! [`parallel`] answers many questions at once over one prefix; [`device`]
//! lists the compute devices and decides how many layers go to the GPU;
//! [`rotation`] decides, sets and checks llama.cpp's rotation of the KV cache.

pub mod device;
pub mod gguf;
pub mod model;
pub mod parallel;
mod params;
pub mod prefix_cache;
pub mod rotation;
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
    let mut default: llama_cpp_sys_2::ggml_log_callback = None;
    let mut user = std::ptr::null_mut();
    // SAFETY: both pointers are valid for llama.cpp to write; `log` is a
    // plain function for the whole process's life. Set before anything is
    // loaded, so that loading backends is silenced too.
    unsafe {
        llama_cpp_sys_2::llama_log_get(&mut default, &mut user);
        if std::env::var_os("POSRECALL_LLAMA_LOG").is_some() {
            let _ = LLAMA_LOGGER.set(Logger(default, user));
        }
        llama_cpp_sys_2::llama_log_set(Some(log), std::ptr::null_mut());
    }
    #[cfg(feature = "dynamic-backends")]
    load_backends()?;
    let b = LlamaBackend::init().context("cannot start llama.cpp")?;
    Ok(BACKEND.get_or_init(|| b))
}

/// A `dynamic-backends` build: load llama.cpp's backends, the best CPU
/// variant for this CPU among them, from the folder of the executable (where
/// a packaged binary carries them) or else from where the build put them.
/// ggml's own default search also tries the current directory; posrecall
/// does not, so that a library lying in the directory it is run from is
/// never loaded.
#[cfg(feature = "dynamic-backends")]
fn load_backends() -> Result<()> {
    let cpu = || {
        // SAFETY: a lookup in ggml's process-wide registry by a NUL-terminated name.
        !unsafe { llama_cpp_sys_2::ggml_backend_reg_by_name(c"CPU".as_ptr()) }.is_null()
    };
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|p| p.to_path_buf()));
    let built = llama_cpp_sys_2::BACKENDS_DIR.map(std::path::PathBuf::from);
    let searched: Vec<_> = beside.into_iter().chain(built).collect();
    for dir in &searched {
        // A path with a NUL byte cannot hold a library ggml could open.
        let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else { continue };
        if !cpu() {
            // SAFETY: a NUL-terminated path, read during the call.
            unsafe { llama_cpp_sys_2::ggml_backend_load_all_from_path(c.as_ptr()) };
        }
    }
    match cpu() {
        true => Ok(()),
        false => anyhow::bail!(
            "no CPU backend of llama.cpp (libggml-cpu-*.so) in {}: a dynamic-backends build needs them beside the executable",
            searched.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" or ")
        ),
    }
}

/// llama.cpp's own logger (it writes to standard error), kept when
/// `POSRECALL_LLAMA_LOG` asks for llama.cpp's log.
struct Logger(llama_cpp_sys_2::ggml_log_callback, *mut std::os::raw::c_void);
// SAFETY: the user data is llama.cpp's own (null for its default logger),
// which it passes to the logger from any thread.
unsafe impl Send for Logger {}
unsafe impl Sync for Logger {}
static LLAMA_LOGGER: OnceLock<Logger> = OnceLock::new();

/// llama.cpp's log: read for what a KV cache decided about rotation
/// ([`rotation`]), then passed to llama.cpp's own logger when
/// `POSRECALL_LLAMA_LOG` is set, else dropped.
unsafe extern "C" fn log(level: llama_cpp_sys_2::ggml_log_level, text: *const std::os::raw::c_char, user: *mut std::os::raw::c_void) {
    if text.is_null() {
        return;
    }
    // SAFETY: llama.cpp passes a NUL-terminated string, valid for this call.
    rotation::observe_log(&unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy());
    if let Some(Logger(Some(forward), data)) = LLAMA_LOGGER.get() {
        let _ = user;
        // SAFETY: llama.cpp's logger with its own user data, as it would call it.
        unsafe { forward(level, text, *data) };
    }
}

pub use device::free_memory;
