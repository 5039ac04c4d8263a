"""Writes a copy of SmolLM2 whose vocabulary has `<think>` and `</think>` as
control tokens, as thinking models' vocabularies do, for the tests of
reasoning markers that arrive as control tokens (tests/think.rs).

    think_vocab.py SMOLLM2_GGUF OUT

SmolLM2's control tokens 15 (`<jupyter_script>`) and 16 (`<empty_output>`),
which no chat prompt of the tests uses, are renamed `<think>` and
`</think>`; every other key and every tensor is copied unchanged, so the
model computes what SmolLM2 computes, and the text "<think>" now tokenizes
to one control token, which llama.cpp renders as nothing unless asked for
special pieces.
"""
import sys

from gguf import GGUFReader, GGUFValueType, GGUFWriter, TokenType

RENAMED = {15: "<think>", 16: "</think>"}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: think_vocab.py SMOLLM2_GGUF OUT")
    reader = GGUFReader(sys.argv[1])
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(sys.argv[2], arch)
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    for i in RENAMED:
        if types[i] != TokenType.CONTROL:
            sys.exit(f"token {i} is not a control token in {sys.argv[1]}")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            value = [RENAMED.get(i, t) for i, t in enumerate(value)]
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(key, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, vtype)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
