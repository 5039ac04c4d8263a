"""Writes small random-weight GGUF models of the hybrid architectures.

Used by scripts/dev/make-tiny-models; run with the Python that has the pinned
`gguf` package. Usage: tiny_models.py TOKENIZER_GGUF NAME OUT

The models are test fixtures for the engine (snapshot, restore, sequence
copies, saved states) on llama.cpp's recurrent and hybrid memory: their
answers are noise and they are never used to report recall. Each one has a
few layers, at least one recurrent (gated DeltaNet) layer and one full
attention layer, the vocabulary and tokenizer of a real model (copied from
TOKENIZER_GGUF, so a corpus tokenizes as it would for that model), and
weights drawn from a fixed seed, so the same inputs give the same file.

Tensor names and shapes follow llama.cpp's loader for each architecture
(src/models/qwen35.cpp, qwen35moe.cpp). Shapes below are written in ggml
order (fastest dimension first), as the loader states them; numpy's order
is the reverse.
"""

import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

# Shared dimensions: 4 layers, every 2nd one full attention, so the model has
# recurrent layers 0 and 2 and attention layers 1 and 3.
N_EMBD = 64
N_LAYER = 4
FULL_ATTN_INTERVAL = 2
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = 32
N_ROT = 16
ROPE_SECTIONS = [3, 3, 2, 0]  # pairs per section; they add up to N_ROT / 2
N_FF = 128
# Gated DeltaNet: key heads (groups), value heads, head size, conv kernel.
SSM_GROUPS = 2
SSM_V_HEADS = 4
SSM_HEAD = 16
SSM_CONV = 4
# Mixture of experts.
N_EXPERT = 4
N_EXPERT_USED = 2
N_FF_EXP = 64
N_FF_SHEXP = 64
CTX_TRAIN = 32768
SEED = {"qwen35": 3501, "qwen35moe": 3502}


def copy_tokenizer(reader, writer):
    """The real model's tokenizer.* keys, with their value types."""
    for key, field in reader.fields.items():
        # No chat template: the completion probe ends on each target's own
        # header, which a random model's answer depends on far more than on
        # a chat turn's closing tokens, the same for every question.
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(key, field.contents(), vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, field.contents(), vtype)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    return len(tokens.data)


class Tensors:
    """Random tensors from one seeded generator, in the order they are added."""

    def __init__(self, writer, seed):
        self.writer = writer
        self.rng = np.random.default_rng(seed)

    def normal(self, name, ggml_shape, std=0.02, dtype=np.float16):
        a = self.rng.normal(0.0, std, size=tuple(reversed(ggml_shape)))
        self.writer.add_tensor(name, a.astype(dtype))

    def const(self, name, ggml_shape, value):
        self.writer.add_tensor(name, np.full(tuple(reversed(ggml_shape)), value, dtype=np.float32))

    def uniform(self, name, ggml_shape, low, high):
        a = self.rng.uniform(low, high, size=tuple(reversed(ggml_shape)))
        self.writer.add_tensor(name, a.astype(np.float32))


def write(arch, tokenizer_path, out):
    reader = GGUFReader(tokenizer_path)
    w = GGUFWriter(out, arch)
    w.add_name(f"posrecall tiny random {arch}")
    n_vocab = copy_tokenizer(reader, w)
    w.add_uint32(f"{arch}.context_length", CTX_TRAIN)
    w.add_uint32(f"{arch}.embedding_length", N_EMBD)
    w.add_uint32(f"{arch}.block_count", N_LAYER)
    w.add_uint32(f"{arch}.feed_forward_length", N_FF)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD_KV)
    w.add_uint32(f"{arch}.attention.key_length", HEAD_DIM)
    w.add_uint32(f"{arch}.attention.value_length", HEAD_DIM)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32(f"{arch}.rope.freq_base", 10000000.0)
    w.add_uint32(f"{arch}.rope.dimension_count", N_ROT)
    w.add_array(f"{arch}.rope.dimension_sections", ROPE_SECTIONS)
    w.add_uint32(f"{arch}.full_attention_interval", FULL_ATTN_INTERVAL)
    w.add_uint32(f"{arch}.ssm.conv_kernel", SSM_CONV)
    w.add_uint32(f"{arch}.ssm.state_size", SSM_HEAD)
    w.add_uint32(f"{arch}.ssm.group_count", SSM_GROUPS)
    w.add_uint32(f"{arch}.ssm.time_step_rank", SSM_V_HEADS)
    w.add_uint32(f"{arch}.ssm.inner_size", SSM_HEAD * SSM_V_HEADS)
    moe = arch == "qwen35moe"
    if moe:
        w.add_uint32(f"{arch}.expert_count", N_EXPERT)
        w.add_uint32(f"{arch}.expert_used_count", N_EXPERT_USED)
        w.add_uint32(f"{arch}.expert_feed_forward_length", N_FF_EXP)
        w.add_uint32(f"{arch}.expert_shared_feed_forward_length", N_FF_SHEXP)

    t = Tensors(w, SEED[arch])
    # Embeddings large enough that the tied output gives clear greedy choices.
    t.normal("token_embd.weight", (N_EMBD, n_vocab), std=1.0)
    t.const("output_norm.weight", (N_EMBD,), 1.0)
    key_dim = SSM_HEAD * SSM_GROUPS
    value_dim = SSM_HEAD * SSM_V_HEADS
    conv_dim = 2 * key_dim + value_dim
    for il in range(N_LAYER):
        b = f"blk.{il}"
        t.const(f"{b}.attn_norm.weight", (N_EMBD,), 1.0)
        t.const(f"{b}.post_attention_norm.weight", (N_EMBD,), 1.0)
        if (il + 1) % FULL_ATTN_INTERVAL != 0:
            # Gated DeltaNet (recurrent) layer.
            t.normal(f"{b}.attn_qkv.weight", (N_EMBD, conv_dim), std=0.2)
            t.normal(f"{b}.attn_gate.weight", (N_EMBD, value_dim), std=0.2)
            t.normal(f"{b}.ssm_conv1d.weight", (SSM_CONV, conv_dim), std=0.5, dtype=np.float32)
            t.uniform(f"{b}.ssm_dt.bias", (SSM_V_HEADS,), -1.0, 1.0)
            # A is negative (llama.cpp stores -exp(A_log)): a decaying state.
            t.uniform(f"{b}.ssm_a", (SSM_V_HEADS,), -1.5, -0.5)
            t.normal(f"{b}.ssm_beta.weight", (N_EMBD, SSM_V_HEADS), std=0.2)
            t.normal(f"{b}.ssm_alpha.weight", (N_EMBD, SSM_V_HEADS), std=0.2)
            t.const(f"{b}.ssm_norm.weight", (SSM_HEAD,), 1.0)
            t.normal(f"{b}.ssm_out.weight", (value_dim, N_EMBD), std=0.2)
        else:
            # Full attention with an output gate (Q and gate share attn_q).
            t.normal(f"{b}.attn_q.weight", (N_EMBD, HEAD_DIM * N_HEAD * 2), std=0.2)
            t.normal(f"{b}.attn_k.weight", (N_EMBD, HEAD_DIM * N_HEAD_KV), std=0.2)
            t.normal(f"{b}.attn_v.weight", (N_EMBD, HEAD_DIM * N_HEAD_KV), std=0.2)
            t.normal(f"{b}.attn_output.weight", (HEAD_DIM * N_HEAD, N_EMBD), std=0.2)
            t.const(f"{b}.attn_q_norm.weight", (HEAD_DIM,), 1.0)
            t.const(f"{b}.attn_k_norm.weight", (HEAD_DIM,), 1.0)
        if moe:
            t.normal(f"{b}.ffn_gate_inp.weight", (N_EMBD, N_EXPERT), std=0.5, dtype=np.float32)
            t.normal(f"{b}.ffn_gate_exps.weight", (N_EMBD, N_FF_EXP, N_EXPERT), std=0.2)
            t.normal(f"{b}.ffn_up_exps.weight", (N_EMBD, N_FF_EXP, N_EXPERT), std=0.2)
            t.normal(f"{b}.ffn_down_exps.weight", (N_FF_EXP, N_EMBD, N_EXPERT), std=0.2)
            t.normal(f"{b}.ffn_gate_inp_shexp.weight", (N_EMBD,), std=0.5, dtype=np.float32)
            t.normal(f"{b}.ffn_gate_shexp.weight", (N_EMBD, N_FF_SHEXP), std=0.2)
            t.normal(f"{b}.ffn_up_shexp.weight", (N_EMBD, N_FF_SHEXP), std=0.2)
            t.normal(f"{b}.ffn_down_shexp.weight", (N_FF_SHEXP, N_EMBD), std=0.2)
        else:
            t.normal(f"{b}.ffn_gate.weight", (N_EMBD, N_FF), std=0.2)
            t.normal(f"{b}.ffn_up.weight", (N_EMBD, N_FF), std=0.2)
            t.normal(f"{b}.ffn_down.weight", (N_FF, N_EMBD), std=0.2)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in SEED:
        sys.exit(f"usage: tiny_models.py TOKENIZER_GGUF {{{'|'.join(SEED)}}} OUT")
    write(sys.argv[2], sys.argv[1], sys.argv[3])


if __name__ == "__main__":
    main()
