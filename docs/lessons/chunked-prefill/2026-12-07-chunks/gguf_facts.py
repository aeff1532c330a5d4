"""Prints the shape facts the lesson's arithmetic uses, read from the model's GGUF header:
python3 gguf_facts.py ~/.cache/quest/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"""
import struct
import sys

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read(f, fmt):
    return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]


def string(f):
    return f.read(read(f, "Q")).decode("utf-8", "replace")


def value(f, kind):
    if kind in SCALARS:
        return read(f, SCALARS[kind])
    if kind == 8:
        return string(f)
    if kind == 9:
        inner, n = read(f, "I"), read(f, "Q")
        return [value(f, inner) for _ in range(n)]
    raise ValueError(f"GGUF value type {kind}")


with open(sys.argv[1], "rb") as f:
    assert f.read(4) == b"GGUF"
    read(f, "I")
    read(f, "Q")
    meta = {}
    for _ in range(read(f, "Q")):
        key = string(f)
        meta[key] = value(f, read(f, "I"))
print("vocabulary (tokenizer.ggml.tokens):", len(meta["tokenizer.ggml.tokens"]))
for key in ["llama.block_count", "llama.embedding_length", "llama.attention.head_count",
            "llama.attention.head_count_kv", "llama.feed_forward_length"]:
    print(f"{key}: {meta[key]}")
