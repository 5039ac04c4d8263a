//! The devices llama.cpp computes on, their memory, and how many of a
//! model's layers go to the GPU.
//!
//! llama.cpp puts a model's last `n` layers on the GPU when asked for `n`
//! layers, and its output layer too when `n` is more than the layer count;
//! the token embeddings stay in main memory. [`WeightLayout`] reads the
//! bytes of each from the GGUF file's tensor table, so that what an offload
//! costs is known before the weights are loaded, and a model that does not
//! fit is refused with the number of layers that would, instead of failing
//! inside llama.cpp.

use crate::settings::{Explain, Names, Setting};
use anyhow::{Context, Result};
use llama_cpp_2::{LlamaBackendDeviceType, list_llama_ggml_backend_devices};
use std::path::Path;

/// `--gpu-layers` not given on a GPU build: as many layers as fit in 90% of
/// the device's free memory, resolved when the model is loaded.
pub(crate) const GPU_LAYERS_AUTO: u32 = u32::MAX;

/// One of llama.cpp's compute devices.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// llama.cpp's name for it: `CPU`, `CUDA0`, `Vulkan0`, `Metal`.
    pub name: String,
    /// What it is, in the driver's words (`NVIDIA H100 80GB HBM3`).
    pub description: String,
    /// The ggml backend that registered it: `CPU`, `CUDA`, `Vulkan`, `MTL`.
    pub backend: String,
    pub free: u64,
    pub total: u64,
    pub gpu: bool,
}

impl Device {
    /// `Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits))`, as a run file records it.
    pub fn label(&self) -> String {
        match self.description.is_empty() {
            true => self.name.clone(),
            false => format!("{} ({})", self.name, self.description),
        }
    }
}

/// Every device this build of llama.cpp found, the CPU included.
pub(crate) fn devices() -> Vec<Device> {
    // Registering the backends is what finds the devices.
    let _ = super::backend();
    list_llama_ggml_backend_devices()
        .into_iter()
        .map(|d| Device {
            gpu: matches!(d.device_type, LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu),
            name: d.name,
            description: d.description,
            backend: d.backend,
            free: d.memory_free as u64,
            total: d.memory_total as u64,
        })
        .collect()
}

/// The GPU that offloaded layers go to: the first one llama.cpp lists.
/// `None` on a CPU build, or a GPU build on a machine without a device.
pub fn gpu() -> Option<Device> {
    devices().into_iter().find(|d| d.gpu)
}

/// What computed a run, as llama.cpp registered it when the run started (not
/// what the binary was built for: a GPU build on a machine without a GPU
/// computes on the CPU).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compute {
    /// `cpu`, `cuda`, `vulkan` or `metal`: the backend of the GPU llama.cpp
    /// found, else `cpu`.
    pub backend: String,
    /// That GPU's label; `None` on the CPU alone.
    pub device: Option<String>,
    /// The CPU kernels that ran ([`cpu_features`]).
    pub cpu_features: Vec<String>,
}

/// What computes on this machine. A GPU takes part whenever llama.cpp
/// found one, offloaded layers or not: llama.cpp sends the large batches of
/// a prefill to it even with every layer in main memory (its operation
/// offload, on by default).
pub(crate) fn compute() -> Compute {
    Compute { cpu_features: cpu_features(), ..Compute::of(gpu()) }
}

impl Compute {
    pub fn of(gpu: Option<Device>) -> Compute {
        match gpu {
            Some(d) => Compute { backend: backend_name(&d.backend), device: Some(d.label()), cpu_features: Vec::new() },
            None => Compute { backend: "cpu".into(), device: None, cpu_features: Vec::new() },
        }
    }
}

/// The features of the CPU backend that llama.cpp loaded, as ggml names
/// them: the instruction sets its kernels were compiled for (`AVX2`,
/// `AVX512`, `AVX512_VNNI`, …) and the kernel families built in (`REPACK`,
/// `LLAMAFILE`, `OPENMP`), with a value where it is not simply on
/// (`NAME=value`). This is what ran, not what the machine could run: a
/// build for AVX2 lists AVX2 on an AVX-512 machine. Kernels for other
/// instruction sets sum in another order and round differently, so two
/// lists that differ are two different computations of the same model.
/// Empty when llama.cpp registered no CPU backend.
pub fn cpu_features() -> Vec<String> {
    let _ = super::backend();
    // SAFETY: ggml's registry lives for the whole process; a backend's
    // `ggml_backend_get_features` returns a static array that ends with a
    // null name, of NUL-terminated strings.
    unsafe {
        let reg = llama_cpp_sys_2::ggml_backend_reg_by_name(c"CPU".as_ptr());
        if reg.is_null() {
            return Vec::new();
        }
        let proc = llama_cpp_sys_2::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_get_features".as_ptr());
        if proc.is_null() {
            return Vec::new();
        }
        let get: llama_cpp_sys_2::ggml_backend_get_features_t = std::mem::transmute(proc);
        let Some(get) = get else { return Vec::new() };
        let mut out = Vec::new();
        let mut f = get(reg);
        while !f.is_null() && !(*f).name.is_null() {
            let name = std::ffi::CStr::from_ptr((*f).name).to_string_lossy();
            let value = match (*f).value.is_null() {
                true => String::new(),
                false => std::ffi::CStr::from_ptr((*f).value).to_string_lossy().into_owned(),
            };
            out.push(match value.as_str() {
                "1" => name.into_owned(),
                _ => format!("{name}={value}"),
            });
            f = f.add(1);
        }
        out
    }
}

/// posrecall's name of a ggml backend: lower case, and Metal's `MTL` as `metal`.
fn backend_name(ggml: &str) -> String {
    match ggml {
        "MTL" => "metal".into(),
        other => other.to_lowercase(),
    }
}

/// The bytes of a model's weights, by where llama.cpp can put them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WeightLayout {
    /// Each repeating layer's tensors (`blk.N.*`), by layer.
    pub layers: Vec<u64>,
    /// The output layer (norm and projection; the embeddings again when the
    /// model ties them), offloaded only with every layer.
    pub output: u64,
}

impl WeightLayout {
    /// Reads the tensor table of a GGUF model, every part of a split one
    /// (no weights are read).
    pub fn read(path: &Path) -> Result<WeightLayout> {
        let mut tensors = Vec::new();
        for part in super::gguf::parts(path)? {
            let header = super::gguf::Header::read(&part).with_context(|| format!("cannot read the tensor table of {}", part.display()))?;
            tensors.extend(header.tensors());
        }
        Ok(WeightLayout::of(tensors.iter().map(|(n, b)| (n.as_str(), *b))))
    }

    /// The layout of these (name, bytes) tensors.
    pub fn of<'a>(tensors: impl Iterator<Item = (&'a str, u64)>) -> WeightLayout {
        let (mut layers, mut output, mut embeddings, mut tied) = (Vec::<u64>::new(), 0, 0, true);
        for (name, bytes) in tensors {
            let layer = name.strip_prefix("blk.").and_then(|r| r.split('.').next()).and_then(|i| i.parse::<usize>().ok());
            match layer {
                Some(i) => {
                    if layers.len() <= i {
                        layers.resize(i + 1, 0);
                    }
                    layers[i] += bytes;
                }
                None if name.starts_with("token_embd.") => embeddings += bytes,
                None => {
                    tied &= !name.starts_with("output.weight");
                    if name.starts_with("output") {
                        output += bytes;
                    }
                }
            }
        }
        if tied {
            output += embeddings;
        }
        WeightLayout { layers, output }
    }

    pub(crate) fn n_layer(&self) -> u32 {
        self.layers.len() as u32
    }

    /// Device bytes for `n` offloaded layers: the last `n` layers, and the
    /// output layer when `n` is more than the layer count.
    pub(crate) fn offload_bytes(&self, n: u32) -> u64 {
        let k = (n as usize).min(self.layers.len());
        let layers: u64 = self.layers[self.layers.len() - k..].iter().sum();
        layers + if n > self.n_layer() { self.output } else { 0 }
    }

    /// The most layers (up to every layer and the output layer) whose
    /// weights take at most `bytes`.
    pub(crate) fn layers_within(&self, bytes: u64) -> u32 {
        (0..=self.n_layer() + 1).rev().find(|&n| self.offload_bytes(n) <= bytes).unwrap_or(0)
    }
}

/// Offloading that cannot work. The messages name no command-line flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeviceError {
    #[error(
        "{asked} offloaded layers need {} of weights on {device}, which has {} free; {fit} layers fit",
        size(*need), size(*free)
    )]
    ModelDoesNotFit { asked: u32, need: u64, free: u64, device: String, fit: u32 },
}

fn size(b: u64) -> String {
    bytesize::ByteSize(b).display().iec().to_string()
}

/// How many layers a load of this model offloads when `asked` for: none
/// without a GPU; with [`GPU_LAYERS_AUTO`], as many as fit in 90% of the
/// device's free memory (the rest is for the KV cache and compute buffers);
/// else what was asked, capped at every layer and the output layer, and
/// refused when the weights alone would not fit in the free memory.
pub(crate) fn resolve_layers(layout: &WeightLayout, asked: u32, gpu: Option<&Device>) -> Result<u32, DeviceError> {
    let Some(gpu) = gpu else { return Ok(0) };
    let all = layout.n_layer() + 1;
    if asked == GPU_LAYERS_AUTO {
        // A device that reports no memory figure gets every layer.
        return Ok(match gpu.free {
            0 => all,
            free => layout.layers_within(free / 10 * 9),
        });
    }
    let n = asked.min(all);
    let need = layout.offload_bytes(n);
    // Devices that report no memory figure (0) are not second-guessed.
    if gpu.free > 0 && need > gpu.free {
        return Err(DeviceError::ModelDoesNotFit {
            asked: n,
            need,
            free: gpu.free,
            device: gpu.label(),
            fit: layout.layers_within(gpu.free / 10 * 9),
        });
    }
    Ok(n)
}

/// Free memory where the KV cache will live, and that device's label: the
/// GPU when layers are offloaded to one, else main memory.
pub fn free_memory(gpu_offload: bool) -> Option<(u64, String)> {
    let gpu = gpu_offload.then(gpu).flatten().filter(|d| d.free > 0);
    match gpu {
        Some(d) => Some((d.free, d.label())),
        None => mem_available().map(|b| (b, "main memory".to_string())),
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
    devices().into_iter().find(|d| d.name == "CPU").map(|d| d.free).filter(|&b| b > 0)
}

impl Explain for DeviceError {
    fn explain(&self, n: &dyn Names) -> String {
        let DeviceError::ModelDoesNotFit { fit, .. } = self;
        match fit {
            0 => format!("{self}; run with {}", n.set(Setting::GpuLayers, "0")),
            fit => format!(
                "{self}; run with {}, or leave {} out to offload what fits",
                n.set(Setting::GpuLayers, &fit.to_string()),
                n.name(Setting::GpuLayers)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> WeightLayout {
        let t = [
            ("token_embd.weight", 1000),
            ("blk.0.attn_q.weight", 10),
            ("blk.0.ffn_up.weight", 20),
            ("blk.1.attn_q.weight", 10),
            ("blk.1.ffn_up.weight", 20),
            ("blk.2.attn_q.weight", 40),
            ("output_norm.weight", 1),
            ("output.weight", 100),
        ];
        WeightLayout::of(t.into_iter())
    }

    fn gpu(free: u64) -> Device {
        Device { name: "GPU0".into(), description: "test".into(), backend: "CUDA".into(), free, total: free, gpu: true }
    }

    #[test]
    fn the_compute_backend_is_the_gpus_or_the_cpu() {
        let c = Compute::of(Some(Device {
            name: "CUDA0".into(),
            description: "NVIDIA H200".into(),
            backend: "CUDA".into(),
            free: 1,
            total: 1,
            gpu: true,
        }));
        assert_eq!(c, Compute { backend: "cuda".into(), device: Some("CUDA0 (NVIDIA H200)".into()), cpu_features: Vec::new() });
        let m = Compute::of(Some(Device {
            name: "MTL0".into(),
            description: String::new(),
            backend: "MTL".into(),
            free: 0,
            total: 0,
            gpu: true,
        }));
        assert_eq!((m.backend.as_str(), m.device.as_deref()), ("metal", Some("MTL0")));
        assert_eq!(Compute::of(None), Compute { backend: "cpu".into(), device: None, cpu_features: Vec::new() });
    }

    #[test]
    fn layers_and_output_are_counted_apart_from_the_embeddings() {
        let l = layout();
        assert_eq!(l.layers, vec![30, 30, 40]);
        assert_eq!(l.output, 101);
        // The last layers go first.
        assert_eq!(l.offload_bytes(1), 40);
        assert_eq!(l.offload_bytes(3), 100);
        assert_eq!(l.offload_bytes(4), 201);
        assert_eq!(l.offload_bytes(999), 201);
    }

    #[test]
    fn tied_embeddings_count_as_the_output_layer() {
        let l = WeightLayout::of([("token_embd.weight", 500), ("blk.0.x", 5), ("output_norm.weight", 1)].into_iter());
        assert_eq!(l.output, 501);
    }

    #[test]
    fn auto_offloads_what_fits_in_nine_tenths_of_the_free_memory() {
        let l = layout();
        assert_eq!(resolve_layers(&l, GPU_LAYERS_AUTO, Some(&gpu(1000))).unwrap(), 4);
        // 90% of 120 is 108: three layers (100), not the output layer.
        assert_eq!(resolve_layers(&l, GPU_LAYERS_AUTO, Some(&gpu(120))).unwrap(), 3);
        assert_eq!(resolve_layers(&l, GPU_LAYERS_AUTO, Some(&gpu(30))).unwrap(), 0);
        assert_eq!(resolve_layers(&l, GPU_LAYERS_AUTO, None).unwrap(), 0);
        assert_eq!(resolve_layers(&l, GPU_LAYERS_AUTO, Some(&gpu(0))).unwrap(), 4);
    }

    #[test]
    fn an_asked_count_is_capped_and_refused_when_it_cannot_fit() {
        let l = layout();
        assert_eq!(resolve_layers(&l, 99, Some(&gpu(1000))).unwrap(), 4);
        assert_eq!(resolve_layers(&l, 2, Some(&gpu(80))).unwrap(), 2);
        assert_eq!(resolve_layers(&l, 99, None).unwrap(), 0);
        let e = resolve_layers(&l, 99, Some(&gpu(120))).unwrap_err();
        let DeviceError::ModelDoesNotFit { asked, need, fit, .. } = &e;
        assert_eq!((*asked, *need, *fit), (4, 201, 3));
        assert!(e.to_string().contains("3 layers fit"), "{e}");
    }
}
