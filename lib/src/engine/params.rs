//! The one place a run's settings become llama.cpp's parameters: the
//! context's (sizes, threads, KV types, flash attention, RoPE) and the KV
//! cache's element type, which the memory estimates read too.

use crate::settings::{ContextConfig, FlashAttn, KvType, RopeScaling};
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams, RopeScalingType};
use std::num::NonZeroU32;

/// The one place a run's context parameters become llama.cpp's.
pub(super) fn llama_params(cfg: &ContextConfig) -> LlamaContextParams {
    let flash = match cfg.flash_attn {
        FlashAttn::Auto => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
        FlashAttn::On => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
        FlashAttn::Off => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
    };
    let mut params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(cfg.n_ctx))
        .with_n_batch(cfg.n_batch)
        .with_n_ubatch(cfg.n_ubatch)
        .with_n_seq_max(cfg.n_seq.max(1))
        .with_kv_unified(cfg.kv_unified)
        .with_n_threads(cfg.threads)
        .with_n_threads_batch(cfg.threads)
        .with_type_k(kv_cache_type(cfg.type_k))
        .with_type_v(kv_cache_type(cfg.type_v))
        .with_flash_attention_policy(flash)
        .with_swa_full(cfg.swa_full)
        // Without this, llama.cpp's own timings read 0.
        .with_no_perf(false);
    // Each RoPE setting not given stays llama.cpp's "from the model".
    let rope = &cfg.rope;
    if let Some(s) = rope.scaling {
        params = params.with_rope_scaling_type(match s {
            RopeScaling::None => RopeScalingType::None,
            RopeScaling::Linear => RopeScalingType::Linear,
            RopeScaling::Yarn => RopeScalingType::Yarn,
        });
    }
    if let Some(b) = rope.freq_base {
        params = params.with_rope_freq_base(b);
    }
    if let Some(s) = rope.freq_scale {
        params = params.with_rope_freq_scale(s);
    }
    if let Some(n) = rope.yarn_orig_ctx {
        params = params.with_yarn_orig_ctx(n);
    }
    params
}

pub(super) fn kv_cache_type(t: KvType) -> KvCacheType {
    match t {
        KvType::F32 => KvCacheType::F32,
        KvType::F16 => KvCacheType::F16,
        KvType::Bf16 => KvCacheType::BF16,
        KvType::Q8_0 => KvCacheType::Q8_0,
        KvType::Q5_1 => KvCacheType::Q5_1,
        KvType::Q5_0 => KvCacheType::Q5_0,
        KvType::Q4_1 => KvCacheType::Q4_1,
        KvType::Q4_0 => KvCacheType::Q4_0,
        KvType::Iq4Nl => KvCacheType::IQ4_NL,
    }
}
