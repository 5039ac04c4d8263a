//! Reading a GGUF file's header (keys and tensor table, no weights) through
//! llama.cpp's own reader, and finding the parts of a split model.
//!
//! A split model (llama.cpp's `llama-gguf-split`) is files named
//! `NAME-00001-of-0000N.gguf` … `NAME-0000N-of-0000N.gguf`, each with the
//! keys `split.no` (0-based), `split.count` and `split.tensors.count`, and a
//! share of the tensors. llama.cpp loads one when given the first part and
//! finds the others beside it by name; [`parts`] finds them the same way, so
//! that a missing or mismatched part is named before llama.cpp fails on it.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// A GGUF file's header, open; freed on drop.
pub struct Header {
    ctx: *mut llama_cpp_sys_2::gguf_context,
}

impl Header {
    /// Reads `path`'s header, or `None` when it is not a readable GGUF file.
    pub fn read(path: &Path) -> Option<Header> {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        let params = llama_cpp_sys_2::gguf_init_params { no_alloc: true, ctx: std::ptr::null_mut() };
        // SAFETY: a valid C string; with `ctx` null nothing but the header is allocated.
        let ctx = unsafe { llama_cpp_sys_2::gguf_init_from_file(c_path.as_ptr(), params) };
        (!ctx.is_null()).then_some(Header { ctx })
    }

    /// An integer key's value (any of GGUF's integer types), if present.
    pub fn int(&self, key: &str) -> Option<i64> {
        use llama_cpp_sys_2 as sys;
        let c_key = CString::new(key).ok()?;
        // SAFETY: `ctx` is valid until drop; the id is checked before use and
        // each getter is called only for its own type.
        unsafe {
            let id = sys::gguf_find_key(self.ctx, c_key.as_ptr());
            if id < 0 {
                return None;
            }
            Some(match sys::gguf_get_kv_type(self.ctx, id) {
                sys::GGUF_TYPE_UINT8 => sys::gguf_get_val_u8(self.ctx, id) as i64,
                sys::GGUF_TYPE_INT8 => sys::gguf_get_val_i8(self.ctx, id) as i64,
                sys::GGUF_TYPE_UINT16 => sys::gguf_get_val_u16(self.ctx, id) as i64,
                sys::GGUF_TYPE_INT16 => sys::gguf_get_val_i16(self.ctx, id) as i64,
                sys::GGUF_TYPE_UINT32 => sys::gguf_get_val_u32(self.ctx, id) as i64,
                sys::GGUF_TYPE_INT32 => sys::gguf_get_val_i32(self.ctx, id) as i64,
                sys::GGUF_TYPE_UINT64 => sys::gguf_get_val_u64(self.ctx, id) as i64,
                sys::GGUF_TYPE_INT64 => sys::gguf_get_val_i64(self.ctx, id),
                _ => return None,
            })
        }
    }

    /// Where a tensor's data lies in the file: its first byte and its size.
    pub fn tensor_bytes(&self, name: &str) -> Option<(u64, u64)> {
        let c_name = CString::new(name).ok()?;
        // SAFETY: `ctx` is valid until drop; the id is checked before use.
        unsafe {
            let id = llama_cpp_sys_2::gguf_find_tensor(self.ctx, c_name.as_ptr());
            if id < 0 {
                return None;
            }
            let start = llama_cpp_sys_2::gguf_get_data_offset(self.ctx) + llama_cpp_sys_2::gguf_get_tensor_offset(self.ctx, id);
            Some((start as u64, llama_cpp_sys_2::gguf_get_tensor_size(self.ctx, id) as u64))
        }
    }

    /// Where the file's tensor data ends: the byte after its last tensor.
    pub(crate) fn data_end(&self) -> u64 {
        // SAFETY: `ctx` is valid until drop, and ids are in range.
        unsafe {
            let base = llama_cpp_sys_2::gguf_get_data_offset(self.ctx) as u64;
            (0..llama_cpp_sys_2::gguf_get_n_tensors(self.ctx))
                .map(|id| {
                    base + llama_cpp_sys_2::gguf_get_tensor_offset(self.ctx, id) as u64
                        + llama_cpp_sys_2::gguf_get_tensor_size(self.ctx, id) as u64
                })
                .max()
                .unwrap_or(base)
        }
    }

    /// Every tensor's name and bytes, in the file's order.
    pub fn tensors(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        // SAFETY: `ctx` is valid until drop, and ids are in range.
        unsafe {
            for id in 0..llama_cpp_sys_2::gguf_get_n_tensors(self.ctx) {
                let name = CStr::from_ptr(llama_cpp_sys_2::gguf_get_tensor_name(self.ctx, id)).to_string_lossy().into_owned();
                out.push((name, llama_cpp_sys_2::gguf_get_tensor_size(self.ctx, id) as u64));
            }
        }
        out
    }
}

impl Drop for Header {
    fn drop(&mut self) {
        // SAFETY: made by gguf_init_from_file and freed once.
        unsafe { llama_cpp_sys_2::gguf_free(self.ctx) }
    }
}

/// A split model whose parts cannot all be loaded. The messages name the
/// file at fault and no command-line flag.
/// Needs no hint: the fix is to the files it names, not to a setting.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PartsError {
    #[error("cannot read the GGUF header of {0}")]
    Unreadable(PathBuf),
    #[error("{path} is part {no} of {count} of a split model; give its first part, {first}")]
    NotFirst { path: PathBuf, no: i64, count: i64, first: String },
    #[error(
        "{path} is the first of {count} parts of a split model, but its name does not end in -00001-of-{count:05}.gguf, so its other parts cannot be found"
    )]
    BadName { path: PathBuf, count: i64 },
    #[error("part {no} of {count} of the split model, {path}, is missing")]
    Missing { path: PathBuf, no: usize, count: usize },
    #[error("{path} does not belong to this split model: {why}")]
    Mismatched { path: PathBuf, why: String },
    /// The header is whole but the tensor data it describes is not: a
    /// download or copy cut short. Named here, since llama.cpp's failure
    /// would name only the first part.
    #[error("llama.cpp could not load {what}{path}: it is cut short (its tensors end at byte {need}, the file has {have})")]
    CutShort { path: PathBuf, what: String, need: u64, have: u64 },
}

/// Refuses a file shorter than the tensor data its header describes; `what`
/// names the part of a split model ("part 3 of 3 of the split model, ").
fn check_whole(path: &Path, head: &Header, what: String) -> Result<(), PartsError> {
    let need = head.data_end();
    let have = std::fs::metadata(path).map(|m| m.len()).map_err(|_| PartsError::Unreadable(path.to_path_buf()))?;
    match have < need {
        true => Err(PartsError::CutShort { path: path.to_path_buf(), what, need, have }),
        false => Ok(()),
    }
}

/// The name part `i` (0-based) of `count` has, after `stem`.
fn part_name(stem: &str, i: usize, count: usize) -> String {
    format!("{stem}-{:05}-of-{count:05}.gguf", i + 1)
}

/// The files of the model at `path`: itself alone, or, for the first part of
/// a split model, every part in order (each checked to be that part of this
/// model, and their tensors to add up to the model's count).
pub fn parts(path: &Path) -> Result<Vec<PathBuf>, PartsError> {
    let head = Header::read(path).ok_or_else(|| PartsError::Unreadable(path.to_path_buf()))?;
    let count = head.int("split.count").unwrap_or(1);
    if count <= 1 {
        check_whole(path, &head, String::new())?;
        return Ok(vec![path.to_path_buf()]);
    }
    let no = head.int("split.no").unwrap_or(0);
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let suffix = |i: i64| format!("-{:05}-of-{count:05}.gguf", i + 1);
    let stem = file_name.strip_suffix(&suffix(no)).map(str::to_string);
    if no != 0 {
        let first = match &stem {
            Some(s) => path.with_file_name(format!("{s}{}", suffix(0))).display().to_string(),
            None => format!("the file named …{}", suffix(0)),
        };
        return Err(PartsError::NotFirst { path: path.to_path_buf(), no: no + 1, count, first });
    }
    let Some(stem) = stem else {
        return Err(PartsError::BadName { path: path.to_path_buf(), count });
    };
    let count = count as usize;
    check_whole(path, &head, format!("part 1 of {count} of the split model, "))?;
    let want_tensors = head.int("split.tensors.count");
    let mut files = vec![path.to_path_buf()];
    let mut tensors = head.tensors().len() as i64;
    for i in 1..count {
        let p = path.with_file_name(part_name(&stem, i, count));
        if !p.is_file() {
            return Err(PartsError::Missing { path: p, no: i + 1, count });
        }
        let h = Header::read(&p).ok_or_else(|| PartsError::Unreadable(p.clone()))?;
        let (c, n) = (h.int("split.count"), h.int("split.no"));
        if c != Some(count as i64) || n != Some(i as i64) {
            let said = |v: Option<i64>, plus: i64| v.map_or("none".to_string(), |v| (v + plus).to_string());
            let why = format!("it says it is part {} of {}, not part {} of {count}", said(n, 1), said(c, 0), i + 1);
            return Err(PartsError::Mismatched { path: p, why });
        }
        if h.int("split.tensors.count") != want_tensors {
            return Err(PartsError::Mismatched { path: p, why: "its tensor count differs from the first part's".into() });
        }
        check_whole(&p, &h, format!("part {} of {count} of the split model, ", i + 1))?;
        tensors += h.tensors().len() as i64;
        files.push(p);
    }
    if let Some(want) = want_tensors.filter(|&w| w != tensors) {
        return Err(PartsError::Mismatched {
            path: files.last().cloned().unwrap_or_default(),
            why: format!("the parts hold {tensors} tensors, the model has {want}"),
        });
    }
    Ok(files)
}
