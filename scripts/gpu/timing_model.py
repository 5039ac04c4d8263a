"""A timing model: a real model's GGUF header (metadata, tokenizer, tensor
table) with random weights of the same types, so that a machine that cannot
be sent the model (the GPU machine takes 64 MiB a call) can time its exact
shapes. How fast llama.cpp computes does not depend on the weights' values;
what the model answers does, so a timing model's answers are noise.

    timing_model.py header MODEL OUT      # here: OUT.header and OUT.json
    timing_model.py expand OUT.header OUT.json MODEL_OUT   # there, seconds

`header` keeps the bytes before the tensor data and lists each tensor's
type, offset and size (read with the gguf package). `expand` needs only
numpy: it writes the header, then every tensor's bytes from a PCG64 stream
(numpy's bit generators give the same raw stream in every version), with
each quantised block's scales set to small fixed values so that no weight
is NaN or infinite and activations stay finite through every layer. The
same header gives the same file, byte for byte, on any machine: `expand`
checks the sha256 that `header` recorded.
"""

import hashlib
import json
import sys

import numpy as np

# Block layouts (bytes per block, elements per block) and where each block's
# float16 scales sit, with the value written there. Weights come out at about
# 0.01 in magnitude: each layer adds a fraction of its input to the residual.
BLOCKS = {
    # d, then 32 signed bytes: w = d * q, q in [-128, 127]
    "Q8_0": (34, 32, [(0, 0.01 / 64)]),
    # d, 4 bytes of high bits, 16 bytes of nibbles: q in [-16, 15]
    "Q5_0": (22, 32, [(0, 0.01 / 8)]),
    "Q4_0": (18, 32, [(0, 0.01 / 4)]),
    # d, then m (w = d * q + m, q in [0, 15] or [0, 31]), high bits, nibbles
    "Q4_1": (20, 32, [(0, 0.01 / 8), (2, -0.01)]),
    "Q5_1": (24, 32, [(0, 0.01 / 16), (2, -0.01)]),
    # d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
    "Q4_K": (144, 256, [(0, 0.01 / 256), (2, 0.01 / 256)]),
    "Q5_K": (176, 256, [(0, 0.01 / 512), (2, 0.01 / 512)]),
    # 128 + 64 bytes of quants, 16 signed scales, then d
    "Q6_K": (210, 256, [(208, 0.01 / 1024)]),
}
SEED = 20261204


def header(model, out):
    from gguf import GGUFReader

    r = GGUFReader(model)
    tensors = []
    for t in r.tensors:
        tensors.append(
            {
                "name": t.name,
                "type": t.tensor_type.name,
                "offset": int(t.data_offset - r.data_offset),
                "n_bytes": int(t.n_bytes),
            }
        )
        if t.tensor_type.name not in BLOCKS and t.tensor_type.name not in ("F32", "F16"):
            sys.exit(f"timing_model: {t.name} has type {t.tensor_type.name}, which expand cannot fill")
    with open(model, "rb") as f:
        head = f.read(r.data_offset)
    with open(out + ".header", "wb") as f:
        f.write(head)
    meta = {"source": model.rsplit("/", 1)[-1], "data_offset": r.data_offset, "tensors": tensors}
    with open(out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def fill(kind, name, n_bytes, rng):
    """The bytes of one tensor of `kind`, `n_bytes` long."""
    words = (n_bytes + 7) // 8
    raw = rng.random_raw(words).view(np.uint8)[:n_bytes].copy()
    if kind == "F32":
        u = raw.view(np.uint32).astype(np.float64) / 2**32  # [0, 1)
        # Norm weights near 1, biases near 0.
        v = 0.5 + u if "norm" in name else (u - 0.5) * 0.02
        return v.astype("<f4").tobytes()
    if kind == "F16":
        u = raw.view(np.uint16).astype(np.float64) / 2**16
        return ((u - 0.5) * 0.02).astype("<f2").tobytes()
    size, _, scales = BLOCKS[kind]
    if n_bytes % size:
        sys.exit(f"timing_model: {name}: {n_bytes} bytes is no whole number of {kind} blocks")
    blocks = raw.reshape(-1, size)
    for at, value in scales:
        blocks[:, at : at + 2] = np.frombuffer(np.array([value], dtype="<f2").tobytes(), dtype=np.uint8)
    return blocks.tobytes()


def expand(head_path, meta_path, out):
    with open(meta_path) as f:
        meta = json.load(f)
    with open(head_path, "rb") as f:
        head = f.read()
    if len(head) != meta["data_offset"]:
        sys.exit("timing_model: the header and its table do not belong together")
    rng = np.random.PCG64(SEED)
    sha = hashlib.sha256()
    with open(out + ".part", "wb") as f:

        def put(b):
            f.write(b)
            sha.update(b)

        put(head)
        at = 0
        for t in sorted(meta["tensors"], key=lambda t: t["offset"]):
            if t["offset"] < at:
                sys.exit(f"timing_model: {t['name']} overlaps the tensor before it")
            put(b"\0" * (t["offset"] - at))
            data = fill(t["type"], t["name"], t["n_bytes"], rng)
            put(data)
            at = t["offset"] + len(data)
    import os

    os.replace(out + ".part", out)
    return sha.hexdigest()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "header":
        meta = header(sys.argv[2], sys.argv[3])
        # Expand once here to record the sha256 every expansion must give.
        tmp = sys.argv[3] + ".check.gguf"
        meta["sha256"] = expand(sys.argv[3] + ".header", sys.argv[3] + ".json", tmp)
        import os

        os.remove(tmp)
        with open(sys.argv[3] + ".json", "w") as f:
            json.dump(meta, f, indent=1)
        print(meta["sha256"])
    elif len(sys.argv) == 5 and sys.argv[1] == "expand":
        with open(sys.argv[3]) as f:
            want = json.load(f).get("sha256")
        got = expand(sys.argv[2], sys.argv[3], sys.argv[4])
        if want and got != want:
            sys.exit(f"timing_model: expanded to sha256 {got}, not the {want} the header recorded")
        print(got)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
