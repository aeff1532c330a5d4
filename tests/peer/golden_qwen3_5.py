#!/usr/bin/env python3
"""Python/MLX peer for quest's Qwen3.5 (hybrid: gated delta + full attention) fixtures.

Run with the peer venv (tests/peer/setup.sh makes it):

    .venv-peer/bin/python tests/peer/golden_qwen3_5.py [--out tests/fixtures]

It builds a tiny seeded random-weights `qwen3_5` model with mlx-lm 0.32.2 (4 layers: linear, full,
linear, full), saves it as float32 and as 4-bit (group 32) MLX directories with a tiny byte-level
tokenizer and a ChatML chat template, and records mlx-lm's goldens -> OUT/qwen3_5-tiny-{f32,4bit}/.

Idempotent like golden.py (it reuses golden.py's writers): unchanged files are left alone.
"""

import argparse
import datetime
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np
import mlx.core as mx
from mlx.utils import tree_flatten

import mlx_lm
from mlx_lm.generate import generate_step
from mlx_lm.sample_utils import make_sampler
from mlx_lm.utils import _get_classes, quantize_model, save_config, save_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden as peer  # noqa: E402  (the shared writers and helpers)

REGEN_COMMAND = "bash tests/peer/setup.sh && .venv-peer/bin/python tests/peer/golden_qwen3_5.py"
MESSAGES = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
MAX_TOKENS = 16

# 256 byte tokens (id = byte value), then these.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

LAYERS = 4
FULL_ATTENTION_INTERVAL = 2  # mlx-lm: layer i is linear unless (i + 1) % interval == 0
TEXT_CONFIG = {
    "model_type": "qwen3_5_text",
    "vocab_size": 256 + len(SPECIAL_TOKENS),
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-6,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
    "full_attention_interval": FULL_ATTENTION_INTERVAL,
    "layer_types": ["full_attention" if (i + 1) % FULL_ATTENTION_INTERVAL == 0 else "linear_attention"
                    for i in range(LAYERS)],
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [1, 1, 0], "mrope_interleaved": True},
    "max_position_embeddings": 4096,
    "attention_bias": False,
    "tie_word_embeddings": True,
    "eos_token_id": 258,
}
CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": TEXT_CONFIG,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
}


def make_tiny_qwen3_5():
    """Seeded random qwen3_5. After mx.random.seed(0), every parameter is drawn from mx.random.normal
    in sorted name order (N below), then shaped per kind:
      norm weights (RMSNorm, q/k_norm, the gated norm): 1 + 0.2 N
      A_log: 0.5 N (decay rates exp(A_log) around 1);  dt_bias: 0.5 N
      conv1d.weight [channels, kernel, 1]: N / sqrt(kernel)
      embed_tokens (tied lm_head): 0.5 N;  linear weights [out, in]: 2 N / sqrt(in)
    """
    mx.random.seed(0)
    model_class, args_class = _get_classes(CONFIG)
    model = model_class(args_class.from_dict(json.loads(json.dumps(CONFIG))))
    params = []
    for name, p in sorted(tree_flatten(model.parameters()), key=lambda kv: kv[0]):
        n = mx.random.normal(p.shape, dtype=mx.float32)
        if "norm" in name:
            v = 1.0 + 0.2 * n
        elif name.endswith("A_log") or name.endswith("dt_bias"):
            v = 0.5 * n
        elif "conv1d" in name:
            v = n / (p.shape[1] ** 0.5)
        elif "embed_tokens" in name:
            v = 0.5 * n
        else:
            v = 2.0 * n / (p.shape[-1] ** 0.5)
        params.append((name, v))
    model.load_weights(params, strict=True)
    mx.eval(model.parameters())
    return model


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (what byte-level BPE vocabularies are written in)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def save_tokenizer(d: Path):
    """A byte-level BPE without merges: one token per byte (id = byte), plus the ChatML specials."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(256, 256 + len(SPECIAL_TOKENS)))
    tok.save(str(d / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 4096,
    }
    (d / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def greedy_with_logprobs(model, prompt_ids, n):
    """n greedy ids from mlx-lm's generate_step (cache: prefill, then one token at a time), with each
    step's full log-probabilities (float32) and top1 - top2 margin."""
    sampler = make_sampler(temp=0.0)
    out, logprobs_per_step, margins = [], [], []
    prompt = mx.array(prompt_ids, dtype=mx.uint32)
    for tok, logprobs in generate_step(prompt, model, max_tokens=n, sampler=sampler):
        lp = np.array(logprobs.astype(mx.float32))
        out.append(int(tok))
        logprobs_per_step.append(peer.f32_list(lp))
        top2 = np.sort(lp)[-2:]
        margins.append(round(float(top2[1] - top2[0]), 4))
    return out, logprobs_per_step, margins


def save_tiny(model, config, tmp: Path, name: str, out: Path, command: str, written: list):
    d_tmp = tmp / name
    save_model(d_tmp, model)
    save_config(json.loads(json.dumps(config)), d_tmp / "config.json")
    save_tokenizer(d_tmp)
    # Goldens from a fresh load of the saved directory (exercises the on-disk layout and tokenizer).
    loaded, tokenizer = mlx_lm.load(str(d_tmp))
    for k, v in tree_flatten(loaded.parameters()):
        assert v.dtype in (mx.float32, mx.uint32), (k, v.dtype)
    prompt_text = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer.encode(prompt_text, add_special_tokens=False)
    assert prompt_ids == [256 + SPECIAL_TOKENS.index("<|im_start|>")] + list(b"user\n") + prompt_ids[6:]
    logits = peer.prefill_logits(loaded, prompt_ids)
    assert np.isfinite(logits).all()
    greedy, step_logprobs, margins = greedy_with_logprobs(loaded, prompt_ids, MAX_TOKENS)
    assert greedy[0] == int(np.argmax(logits))
    print(f"[{name}] greedy ids: {greedy}  logits std {logits.std():.3f}  min margin {min(margins)}")
    with open(d_tmp / "model.safetensors", "rb") as f:
        st_header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    tensors = {k: f"{v['dtype']} {v['shape']}" for k, v in sorted(st_header.items()) if k != "__metadata__"}
    doc = {
        "description": f"tiny random-weights qwen3_5 ({name}), seeded; see tests/fixtures/README.md",
        "config": json.loads((d_tmp / "config.json").read_text()),
        "layer_kinds": ["linear" if layer.is_linear else "full" for layer in loaded.layers],
        "tensors": tensors,
        "messages": MESSAGES,
        "prompt_text": prompt_text,
        "prompt_ids": prompt_ids,
        "max_tokens": MAX_TOKENS,
        "sampler": "greedy (argmax), mlx_lm.generate.generate_step with its cache (KVCache for full attention, "
                   "ArraysCache for gated delta); prefill, then one token at a time",
        "greedy_ids": greedy,
        "greedy_top1_top2_margins": margins,
        "greedy_text": tokenizer.decode(greedy),
        "prefill_logits": peer.f32_list(logits),
        "prefill_logits_top10": peer.topk(logits, 10),
        "greedy_logprobs": step_logprobs,
        "versions": peer.versions(),
        "command": command,
        "regenerate": REGEN_COMMAND,
        "date": datetime.date.today().isoformat(),
    }
    peer.copy_tree_if_changed(d_tmp, out / name, written)
    peer.write_golden_json(out / name / "golden.json", doc, written)
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=peer.REPO / "tests" / "fixtures")
    args = ap.parse_args()

    mx.set_default_device(mx.cpu)
    command = shlex.join([".venv-peer/bin/python" if "venv-peer" in sys.executable else sys.executable,
                          os.path.relpath(__file__, Path.cwd()) if Path.cwd() == peer.REPO else __file__]
                         + sys.argv[1:])
    out = args.out.resolve()
    written = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        save_tiny(make_tiny_qwen3_5(), CONFIG, tmp, "qwen3_5-tiny-f32", out, command, written)
        qmodel, qconfig = quantize_model(make_tiny_qwen3_5(), json.loads(json.dumps(CONFIG)), group_size=32, bits=4)
        mx.eval(qmodel.parameters())
        save_tiny(qmodel, qconfig, tmp, "qwen3_5-tiny-4bit", out, command, written)
    print(f"done: {len(written)} file(s) written" + ("".join(f"\n  {w}" for w in written)))


if __name__ == "__main__":
    main()
