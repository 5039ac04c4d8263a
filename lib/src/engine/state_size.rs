//! How many bytes a saved sequence state takes, from a model's
//! hyperparameters: the host memory a snapshot holds (`--restore full` or
//! `lean`), estimated before any model work and shown for models too large to
//! run here (docs/PERFORMANCE.md).
//!
//! What llama.cpp writes for one sequence (`llama_state_seq_get_data`): for
//! each full-attention layer, K and V rows of every cell the sequence holds;
//! for each sliding-window layer, only the cells still inside the window
//! (n_swa + 1 positions, whether or not the cache is window-only); for each
//! recurrent layer, one f32 state (the conv rows and the SSM state). The
//! lean snapshot is the last two. A few bytes of position and sequence ids
//! per cell come on top and are not counted.

use serde::Serialize;

/// The hyperparameters that size a sequence's saved state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateShape {
    /// Layers with a full-attention cache.
    pub full_attn_layers: u64,
    /// Layers with a sliding-window cache.
    pub swa_layers: u64,
    /// The sliding window, in tokens (0: none).
    pub n_swa: u64,
    /// K plus V bytes of one cell in one attention layer.
    pub kv_bytes_per_layer_cell: u64,
    /// Recurrent layers.
    pub recurrent_layers: u64,
    /// Bytes of one recurrent layer's state.
    pub recurrent_bytes_per_layer: u64,
}

impl StateShape {
    /// The sliding-window and recurrent parts (the lean snapshot).
    pub(crate) fn partial_bytes(&self, prefix_tokens: u64) -> u64 {
        let window_cells = prefix_tokens.min(self.n_swa + 1);
        self.swa_layers * self.kv_bytes_per_layer_cell * window_cells + self.recurrent_layers * self.recurrent_bytes_per_layer
    }

    /// The whole sequence state (the full snapshot).
    pub fn full_bytes(&self, prefix_tokens: u64) -> u64 {
        self.full_attn_layers * self.kv_bytes_per_layer_cell * prefix_tokens + self.partial_bytes(prefix_tokens)
    }

    /// The snapshot that [`crate::settings::RestoreMode`] keeps. A lean
    /// snapshot of a model with no window or recurrent layer is empty.
    pub fn snapshot_bytes(&self, prefix_tokens: u64, mode: crate::settings::RestoreMode) -> u64 {
        match mode {
            crate::settings::RestoreMode::Full => self.full_bytes(prefix_tokens),
            crate::settings::RestoreMode::Lean => self.partial_bytes(prefix_tokens),
        }
    }
}

/// One gated DeltaNet or Mamba-2 layer's state in bytes: the conv rows
/// ((kernel − 1) × (inner + 2 × groups × state)) and the SSM state
/// (state × inner), all f32 as llama.cpp keeps them.
pub(crate) fn recurrent_layer_bytes(conv_kernel: u64, inner: u64, state: u64, groups: u64) -> u64 {
    4 * (conv_kernel.saturating_sub(1) * (inner + 2 * groups * state) + state * inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::RestoreMode;

    fn gemma3_270m() -> StateShape {
        // 18 layers, every 6th global; one KV head of 256; f16: 1 KiB per cell.
        StateShape {
            full_attn_layers: 3,
            swa_layers: 15,
            n_swa: 512,
            kv_bytes_per_layer_cell: 1024,
            recurrent_layers: 0,
            recurrent_bytes_per_layer: 0,
        }
    }

    #[test]
    fn sliding_window_layers_count_the_window_only() {
        let g = gemma3_270m();
        assert_eq!(g.partial_bytes(100), 15 * 1024 * 100);
        assert_eq!(g.partial_bytes(10_000), 15 * 1024 * 513);
        assert_eq!(g.full_bytes(10_000), 3 * 1024 * 10_000 + 15 * 1024 * 513);
        assert_eq!(g.snapshot_bytes(10_000, RestoreMode::Lean), g.partial_bytes(10_000));
    }

    #[test]
    fn plain_attention_has_no_partial_state() {
        let s = StateShape {
            full_attn_layers: 30,
            swa_layers: 0,
            n_swa: 0,
            kv_bytes_per_layer_cell: 768,
            recurrent_layers: 0,
            recurrent_bytes_per_layer: 0,
        };
        assert_eq!(s.partial_bytes(4000), 0);
        assert_eq!(s.full_bytes(4000), 30 * 768 * 4000);
    }

    #[test]
    fn recurrent_state_does_not_grow_with_the_prefix() {
        let r = recurrent_layer_bytes(4, 64, 16, 2);
        assert_eq!(r, 4 * (3 * (64 + 64) + 16 * 64));
        let s = StateShape {
            full_attn_layers: 2,
            swa_layers: 0,
            n_swa: 0,
            kv_bytes_per_layer_cell: 256,
            recurrent_layers: 2,
            recurrent_bytes_per_layer: r,
        };
        assert_eq!(s.partial_bytes(10), s.partial_bytes(100_000));
        assert_eq!(s.full_bytes(1000) - s.partial_bytes(1000), 2 * 256 * 1000);
    }

    /// The computed table in docs/PERFORMANCE.md (108,000-token prefix):
    /// Gemma 3 27B (62 layers, one global in 6, 16 KV heads of 128, window
    /// 1024) and Qwen 3.5 35B A3B (40 layers, full attention every 4th,
    /// 2 KV heads of 256; DeltaNet: 16 key and 32 value heads of 128,
    /// conv kernel 4). K+V bytes per cell and layer: f16 2 bytes a value,
    /// q8_0 34 bytes per 32 values.
    #[test]
    fn the_plans_models_at_108k_tokens() {
        let gemma = |cell| StateShape {
            full_attn_layers: 10,
            swa_layers: 52,
            n_swa: 1024,
            kv_bytes_per_layer_cell: cell,
            recurrent_layers: 0,
            recurrent_bytes_per_layer: 0,
        };
        let qwen = |cell| StateShape {
            full_attn_layers: 10,
            swa_layers: 0,
            n_swa: 0,
            kv_bytes_per_layer_cell: cell,
            recurrent_layers: 30,
            recurrent_bytes_per_layer: recurrent_layer_bytes(4, 32 * 128, 128, 16),
        };
        let p = 108_000;
        assert_eq!((gemma(8192).full_bytes(p), gemma(8192).partial_bytes(p)), (9_283_993_600, 436_633_600));
        assert_eq!((gemma(4352).full_bytes(p), gemma(4352).partial_bytes(p)), (4_932_121_600, 231_961_600));
        assert_eq!((qwen(2048).full_bytes(p), qwen(2048).partial_bytes(p)), (2_277_703_680, 65_863_680));
        assert_eq!((qwen(1088).full_bytes(p), qwen(1088).partial_bytes(p)), (1_240_903_680, 65_863_680));
    }
}
