//! Loading a GGUF model, its metadata, and a cached sha256 of the file.

use anyhow::{Context, Result, bail};
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One file of a split model.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub sha256: String,
}

/// A loaded model and what the run manifest says about it.
pub struct Model {
    pub model: LlamaModel,
    /// The file given: the model, or the first part of a split model.
    pub path: PathBuf,
    /// The model's identity: its file's sha256, or for a split model the
    /// sha256 of its parts' sha256s (see [`split_identity`]).
    pub sha256: String,
    /// Bytes of every file of the model.
    pub size_bytes: u64,
    /// A split model's parts, in order (empty for a model in one file, and
    /// for a vocabulary-only load).
    pub parts: Vec<Part>,
    pub architecture: Option<String>,
    pub name: Option<String>,
    pub file_type: Option<String>,
    pub n_params: u64,
    pub n_ctx_train: u32,
    /// The Jinja chat template stored in the GGUF, if any.
    pub chat_template: Option<String>,
    pub recurrent_or_hybrid: bool,
    /// The attention window of a sliding-window model (0: none).
    pub n_swa: u32,
    /// Milliseconds spent hashing (0 when the hash came from the cache).
    pub hash_ms: f64,
    /// Layers offloaded to the GPU: what was asked for, resolved against
    /// the device (see [`super::device::resolve_layers`]); 0 without one.
    pub gpu_layers: u32,
    /// Milliseconds llama.cpp spent loading the weights (the run file's
    /// `load_ms` is this plus [`Model::hash_ms`]).
    pub weights_ms: f64,
    /// The hub reference the file was resolved from (`None`: a path was
    /// given). Set by whoever resolved it, before the model is used: the
    /// run's manifest records it.
    pub origin: Option<crate::support::hub::Origin>,
}

/// Loads `path` with `gpu_layers` layers offloaded ([`GPU_LAYERS_AUTO`]:
/// as many as fit). A model whose asked layers do not fit the device is
/// refused before llama.cpp tries, with the number of layers that would.
///
/// [`GPU_LAYERS_AUTO`]: super::device::GPU_LAYERS_AUTO
pub fn load(path: &Path, gpu_layers: u32) -> Result<Model> {
    load_with(path, gpu_layers, false)
}

/// Loads only `path`'s vocabulary and metadata: enough to render and
/// tokenize prompts, nothing to compute with. The file is not hashed
/// (`sha256` is empty).
pub fn load_vocab(path: &Path) -> Result<Model> {
    load_with(path, 0, true)
}

/// How many of `path`'s layers a load asked for `asked` offloads on this
/// machine (see [`super::device::resolve_layers`]), without loading it.
pub(crate) fn resolve_gpu_layers(path: &Path, asked: u32) -> Result<u32> {
    if asked == 0 {
        return Ok(0);
    }
    let Some(gpu) = super::device::gpu() else { return Ok(0) };
    let layout = super::device::WeightLayout::read(path)?;
    Ok(super::device::resolve_layers(&layout, asked, Some(&gpu))?)
}

fn load_with(path: &Path, gpu_layers: u32, vocab_only: bool) -> Result<Model> {
    check_gguf(path)?;
    let files = super::gguf::parts(path)?;
    let mut size_bytes = 0;
    for f in &files {
        size_bytes += std::fs::metadata(f).with_context(|| format!("cannot read {}", f.display()))?.len();
    }
    let t = Instant::now();
    let (sha256, parts) = if vocab_only { (String::new(), Vec::new()) } else { identity(&files)? };
    let hash_ms = t.elapsed().as_secs_f64() * 1e3;

    let backend = super::backend()?;
    let gpu_layers = match vocab_only {
        true => 0,
        false => resolve_gpu_layers(path, gpu_layers)?,
    };
    let t = Instant::now();
    let params = LlamaModelParams::default().with_n_gpu_layers(gpu_layers).with_vocab_only(vocab_only);
    let model = LlamaModel::load_from_file(backend, path, &params).with_context(|| match files.len() {
        1 => format!(
            "llama.cpp could not load {} (a truncated or corrupt GGUF, or an architecture this llama.cpp does not know)",
            path.display()
        ),
        // llama.cpp names no part; each was checked whole and in place, so
        // what is left is a part of another model, or corrupt contents.
        n => format!(
            "llama.cpp could not load the split model {} or one of its other {} parts (a part from another model or a \
             corrupt one, or an architecture this llama.cpp does not know)",
            path.display(),
            n - 1
        ),
    })?;
    let weights_ms = t.elapsed().as_secs_f64() * 1e3;

    let meta = |k: &str| model.meta_val_str(k).ok().filter(|s| !s.is_empty());
    let file_type = meta("general.file_type").map(|v| match v.parse::<u32>() {
        Ok(n) => file_type_name(n),
        Err(_) => v,
    });
    let chat_template = model.chat_template(None).ok().and_then(|t| t.to_string().ok()).filter(|t| !t.trim().is_empty());
    Ok(Model {
        path: path.to_path_buf(),
        sha256,
        size_bytes,
        parts,
        architecture: meta("general.architecture"),
        name: meta("general.name"),
        file_type,
        n_params: model.n_params(),
        // A vocabulary-only load leaves the hyperparameters unread: the metadata has it.
        n_ctx_train: match model.n_ctx_train() {
            0 => meta_u32(&model, "context_length").unwrap_or(0),
            n => n,
        },
        chat_template,
        recurrent_or_hybrid: model.is_recurrent() || model.is_hybrid(),
        n_swa: meta_u32(&model, "attention.sliding_window").unwrap_or(0),
        gpu_layers,
        hash_ms,
        weights_ms,
        model,
        origin: None,
    })
}

/// The identity of a model in `files`, and its parts when it is split: one
/// file's sha256, or [`split_identity`] of the parts'.
fn identity(files: &[PathBuf]) -> Result<(String, Vec<Part>)> {
    if let [one] = files {
        return Ok((crate::support::fsutil::cached_sha256(one)?, Vec::new()));
    }
    let mut parts = Vec::with_capacity(files.len());
    for f in files {
        let size_bytes = std::fs::metadata(f)?.len();
        parts.push(Part { path: f.clone(), size_bytes, sha256: crate::support::fsutil::cached_sha256(f)? });
    }
    let shas: Vec<&str> = parts.iter().map(|p| p.sha256.as_str()).collect();
    Ok((split_identity(&shas), parts))
}

/// A split model's identity: the sha256 of `split:` and its parts' sha256s
/// (hex), one per line, in order. It changes when any part does, and is
/// never a single file's sha256, so the prefix-cache, reference and resume
/// keys tell the split model from the file it was split from.
pub(crate) fn split_identity(part_sha256s: &[&str]) -> String {
    let mut text = String::from("split:\n");
    for s in part_sha256s {
        text.push_str(s);
        text.push('\n');
    }
    crate::support::fsutil::sha256_hex(text.as_bytes())
}

/// `{architecture}.{key}` as a number, when the GGUF has it as one.
fn meta_u32(model: &LlamaModel, key: &str) -> Option<u32> {
    let arch = model.meta_val_str("general.architecture").ok()?;
    model.meta_val_str(&format!("{arch}.{key}")).ok()?.trim().parse().ok()
}

/// A missing file or one without the GGUF magic fails here, with a message,
/// before llama.cpp sees it.
fn check_gguf(path: &Path) -> Result<()> {
    if !path.exists() {
        bail!("model file {} does not exist", path.display());
    }
    if !path.is_file() {
        bail!("model path {} is not a file", path.display());
    }
    let mut magic = [0u8; 4];
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open model {}", path.display()))?;
    if f.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
        bail!("{} is not a GGUF model file", path.display());
    }
    Ok(())
}

/// The name llama.cpp gives a `general.file_type` value (the quantisation).
fn file_type_name(n: u32) -> String {
    let name = match n {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return format!("type {n}"),
    };
    name.to_string()
}

impl Model {
    /// Estimated KV-cache bytes per cell (one token of one sequence) at
    /// these K and V types: every layer's K and V rows. An upper bound for
    /// sliding-window models, whose window layers keep fewer cells.
    pub(crate) fn kv_bytes_per_cell(&self, type_k: crate::settings::KvType, type_v: crate::settings::KvType) -> u64 {
        let m = &self.model;
        let head_dim = (m.n_embd() as u32 / m.n_head().max(1)).max(1);
        let k_len = meta_u32(m, "attention.key_length").unwrap_or(head_dim) as i64;
        let v_len = meta_u32(m, "attention.value_length").unwrap_or(head_dim) as i64;
        let heads = m.n_head_kv().max(1) as i64;
        let row = |t: crate::settings::KvType, len: i64| {
            let ggml: llama_cpp_sys_2::ggml_type = super::params::kv_cache_type(t).into();
            // SAFETY: a pure function of a valid type id and a count.
            unsafe { llama_cpp_sys_2::ggml_row_size(ggml, heads * len) as u64 }
        };
        m.n_layer() as u64 * (row(type_k, k_len) + row(type_v, v_len))
    }

    /// The head sizes of K and V rows, as llama.cpp reads them: the
    /// `key_length`/`value_length` metadata, else the embedding over the
    /// heads; `None` where sliding-window layers have other sizes.
    pub(crate) fn head_sizes(&self) -> super::rotation::HeadSizes {
        let m = &self.model;
        let head_dim = m.n_embd() as u32 / m.n_head().max(1);
        let k = meta_u32(m, "attention.key_length").unwrap_or(head_dim);
        let v = meta_u32(m, "attention.value_length").unwrap_or(head_dim);
        let same = |n: u32, swa: Option<u32>| match swa {
            Some(s) if s != n => None,
            _ => Some(n),
        };
        super::rotation::HeadSizes {
            k: same(k, meta_u32(m, "attention.key_length_swa")),
            v: same(v, meta_u32(m, "attention.value_length_swa")),
        }
    }

    /// What llama.cpp will do about rotating a KV cache of these types for
    /// this model when `asked` ([`super::rotation::predict`]).
    pub fn rotation(
        &self,
        asked: crate::settings::KvRotation,
        type_k: crate::settings::KvType,
        type_v: crate::settings::KvType,
    ) -> crate::settings::Rotation {
        super::rotation::predict(asked, self.head_sizes(), type_k, type_v)
    }

    /// Bytes of the KV cache a context of `cfg` keeps on the GPU: the
    /// offloaded layers' share of the whole cache (sliding-window layers
    /// keep their window only, unless `swa_full`; recurrent layers keep
    /// their fixed state). An estimate that errs high.
    pub(crate) fn device_kv_bytes(&self, cfg: &crate::settings::ContextConfig) -> u64 {
        let n_layer = (self.model.n_layer() as u64).max(1);
        let cells = cfg.n_ctx as u64;
        let bytes = match cfg.swa_full {
            true => self.kv_bytes_per_cell(cfg.type_k, cfg.type_v) * cells,
            false => self.state_shape(cfg.type_k, cfg.type_v).full_bytes(cells),
        };
        bytes / n_layer * (cfg.gpu_layers as u64).min(n_layer)
    }

    /// What sizes this model's saved sequence state at these K and V types
    /// (see [`super::state_size`]). Where the metadata does not say which
    /// layers are which, the estimate errs high: every layer full attention
    /// for the full snapshot, every layer windowed for the lean one.
    pub fn state_shape(&self, type_k: crate::settings::KvType, type_v: crate::settings::KvType) -> super::state_size::StateShape {
        let m = &self.model;
        let n_layer = m.n_layer() as u64;
        let per_layer = self.kv_bytes_per_cell(type_k, type_v) / n_layer.max(1);
        let key = |k: &str| meta_u32(m, k).map(u64::from);
        let arch = self.architecture.as_deref().unwrap_or("");
        let (mut full, mut swa, mut recurrent, mut recurrent_bytes) = (n_layer, 0, 0, 0);
        if self.recurrent_or_hybrid {
            // Hybrids of the Qwen 3.5 family: full attention every
            // `full_attention_interval` layers (llama.cpp's default 4).
            full = match (m.is_recurrent(), key("full_attention_interval")) {
                (true, _) => 0,
                (false, Some(i)) if i > 0 => n_layer / i,
                (false, _) if arch.starts_with("qwen3") => n_layer / 4,
                (false, _) => n_layer,
            };
            recurrent = n_layer - full;
            recurrent_bytes = super::state_size::recurrent_layer_bytes(
                key("ssm.conv_kernel").unwrap_or(0),
                key("ssm.inner_size").unwrap_or(0),
                key("ssm.state_size").unwrap_or(0),
                key("ssm.group_count").unwrap_or(0),
            );
        } else if self.n_swa > 0 {
            // Gemma 3: one global layer in 6 (llama.cpp's fixed pattern).
            let pattern = key("attention.sliding_window_pattern").or((arch == "gemma3").then_some(6));
            match pattern {
                Some(p) if p > 0 => {
                    full = n_layer / p;
                    swa = n_layer - full;
                }
                _ => swa = n_layer,
            }
        }
        super::state_size::StateShape {
            full_attn_layers: full,
            swa_layers: swa,
            n_swa: self.n_swa as u64,
            kv_bytes_per_layer_cell: per_layer,
            recurrent_layers: recurrent,
            recurrent_bytes_per_layer: recurrent_bytes,
        }
    }

    /// The text of the BOS token, as a chat template refers to it.
    pub fn bos_text(&self) -> String {
        let vocab = self.model.vocab();
        String::from_utf8_lossy(&vocab.token_to_piece(vocab.bos(), true, None)).into_owned()
    }

    /// The text of the EOS token.
    pub(crate) fn eos_text(&self) -> String {
        let vocab = self.model.vocab();
        String::from_utf8_lossy(&vocab.token_to_piece(vocab.eos(), true, None)).into_owned()
    }

    /// Tokenizes the start of a prompt: BOS is added when the model wants one
    /// and the text does not already begin with it (a chat template that writes
    /// `{{ bos_token }}` itself), so BOS appears exactly once.
    pub fn tokenize_prefix(&self, text: &str) -> Vec<llama_cpp_2::token::LlamaToken> {
        let vocab = self.model.vocab();
        let bos = self.bos_text();
        let add_bos = vocab.should_add_bos() && (bos.is_empty() || !text.starts_with(&bos));
        vocab.tokenize(text.as_bytes(), add_bos, true)
    }

    /// Tokenizes text that continues a prompt: no BOS; special tokens of a
    /// chat template are parsed as such.
    pub fn tokenize_rest(&self, text: &str) -> Vec<llama_cpp_2::token::LlamaToken> {
        self.model.vocab().tokenize(text.as_bytes(), false, true)
    }

    /// Tokenizes plain text (no BOS, no special tokens), for cost estimates.
    pub fn tokenize_plain(&self, text: &str) -> Vec<llama_cpp_2::token::LlamaToken> {
        self.model.vocab().tokenize(text.as_bytes(), false, false)
    }

    /// The byte length of each token's text, to map tokens back to bytes.
    pub(crate) fn piece_lengths(&self, tokens: &[llama_cpp_2::token::LlamaToken]) -> Vec<usize> {
        let vocab = self.model.vocab();
        let mut buf = Vec::new();
        tokens
            .iter()
            .map(|&t| {
                buf.clear();
                vocab.token_to_piece_into(t, &mut buf, false, None);
                buf.len()
            })
            .collect()
    }

    /// The byte length of each generated token's text in an answer
    /// ([`answer_piece`]: control tokens that spell part of the reasoning
    /// `markers` count), to find where the answer starts.
    pub(crate) fn answer_piece_lengths(&self, tokens: &[llama_cpp_2::token::LlamaToken], markers: &[String]) -> Vec<usize> {
        let vocab = self.model.vocab();
        tokens.iter().map(|&t| answer_piece(&vocab, t, markers).len()).collect()
    }

    /// The vocabulary's size and a sha256 over every token's text in id order
    /// (special tokens rendered): two models with the same fingerprint give
    /// the same ids to the same text, so their distributions compare.
    pub(crate) fn vocab_fingerprint(&self) -> (usize, String) {
        let n = self.model.n_vocab().max(0);
        let vocab = self.model.vocab();
        let (mut all, mut piece) = (Vec::new(), Vec::new());
        for id in 0..n {
            piece.clear();
            vocab.token_to_piece_into(llama_cpp_2::token::LlamaToken(id), &mut piece, true, None);
            all.extend_from_slice(&(piece.len() as u32).to_le_bytes());
            all.extend_from_slice(&piece);
        }
        (n as usize, crate::support::fsutil::sha256_hex(&all))
    }

    /// llama.cpp's built-in chat renderer, used only when Jinja rendering fails.
    pub(crate) fn render_builtin(&self, content: &str) -> Result<String> {
        use llama_cpp_2::model::LlamaChatMessage;
        let tmpl = self.model.chat_template(None).context("no chat template")?;
        let msg = LlamaChatMessage::new("user".into(), content.into()).context("the question cannot be a chat message")?;
        self.model.apply_chat_template(&tmpl, &[msg], true).context("llama.cpp could not apply the chat template")
    }
}

/// The text a generated token adds to an answer. llama.cpp renders a control
/// token as nothing unless asked for special pieces; kept are those that
/// spell part of a reasoning marker of the template (`<think>` where the
/// vocabulary makes it a control token, gpt-oss's `<|channel|>`), since the
/// reasoning is split off the answer by its markers' text. Other control
/// tokens stay out of the text, which is scored as code.
pub(crate) fn answer_piece(vocab: &llama_cpp_2::vocab::LlamaVocab<'_>, tok: llama_cpp_2::token::LlamaToken, markers: &[String]) -> Vec<u8> {
    let piece = vocab.token_to_piece(tok, false, None);
    if !piece.is_empty() || markers.is_empty() {
        return piece;
    }
    let special = vocab.token_to_piece(tok, true, None);
    let kept = !special.is_empty() && markers.iter().any(|m| m.as_bytes().windows(special.len()).any(|w| w == special.as_slice()));
    if kept { special } else { piece }
}
