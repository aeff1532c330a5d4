"""quest's Python peer for `quest bench`: the same decode on mlx-lm 0.32.2, same MLX.

Loads a llama GGUF into an mlx-lm model (MLX's own GGUF reader, names mapped, llama.cpp's
Q/K permutation undone, 4/8-bit affine with float32 scales) or builds a random-weights model
from a config, then times, for the prompt ids it is given:
  hand       the original lesson's Python hand loop: model(y[None], cache), argmax, y.item() every token
  generate   mlx_lm.generate.generate_step (what stream_generate runs), greedy
--weights dense dequantizes every quantized layer to float32 at load (quest's CPU default),
--weights quantized keeps mlx-lm's layout. Prints one JSON object: per loop, per round,
ttft_ms, decode_tok_s, token arrival times; and which BLAS library the process mapped.
quest writes this file into its peer venv and runs it there; it is not a test.
"""

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx.utils import tree_unflatten
from mlx_lm.utils import _get_classes, quantize_model

GGUF_TO_HF = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}


def scalar(md, key):
    v = md[key]
    return v.item() if isinstance(v, mx.array) else v


def unpermute(a, heads):
    return a.reshape(heads, a.shape[0] // heads // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def load_gguf(path):
    raw, md = mx.load(path, return_metadata=True)
    heads, kv = scalar(md, "llama.attention.head_count"), scalar(md, "llama.attention.head_count_kv")
    hidden = scalar(md, "llama.embedding_length")
    config = {
        "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": scalar(md, "llama.block_count"),
        "intermediate_size": scalar(md, "llama.feed_forward_length"), "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": hidden // heads,
        "rms_norm_eps": float(scalar(md, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(scalar(md, "llama.rope.freq_base")), "vocab_size": raw["token_embd.weight"].shape[0],
        "tie_word_embeddings": "output.weight" not in raw,
    }
    weights = {}
    for name, a in raw.items():
        p = name.split(".")
        if p[0] == "blk":
            new = f"model.layers.{p[1]}.{GGUF_TO_HF[p[2]]}.{p[3]}"
            if p[2] in ("attn_q", "attn_k"):
                a = unpermute(a, heads if p[2] == "attn_q" else kv)
        else:
            new = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}[p[0]] + "." + p[1]
        weights[new] = a.astype(mx.float32) if a.dtype in (mx.float16, mx.bfloat16) else a
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))

    def predicate(path, module):
        if f"{path}.scales" not in weights:
            return False
        bits = weights[f"{path}.weight"].shape[-1] * 32 // module.weight.shape[-1]
        return {"group_size": 32, "bits": bits, "mode": "affine"}

    with contextlib.redirect_stdout(sys.stderr):  # mlx-lm prints; stdout is the JSON
        model, _ = quantize_model(model, config, group_size=32, bits=4, quant_predicate=predicate)
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    return model


def random_model(config):
    """Random weights in the given shape, 4-bit (or the config's `quantization` bits) group
    32: decode speed depends on the shapes and bytes, not on the values."""
    mx.random.seed(0)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    # float32 on the CPU (bf16 is slow there and sums in bf16), float16 on a GPU: as quest does.
    model.set_dtype(mx.float32 if mx.default_device() == mx.cpu else mx.float16)
    with contextlib.redirect_stdout(sys.stderr):
        bits = config.get("quantization", {}).get("bits", 4)
        model, _ = quantize_model(model, dict(config), group_size=32, bits=bits)
    mx.eval(model.parameters())
    return model


def dequantize(model):
    """Every QuantizedLinear / QuantizedEmbedding becomes its float32 equivalent: the
    layout quest runs on the CPU by default (MLX's x86 quantized kernels are slow)."""
    swaps = []
    for path, m in model.named_modules():
        if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            w = mx.dequantize(m.weight, m.scales, m.biases, m.group_size, m.bits).astype(mx.float32)
            if isinstance(m, nn.QuantizedLinear):
                dense = nn.Linear(w.shape[1], w.shape[0], bias="bias" in m)
                if "bias" in m:
                    dense.bias = m.bias
            else:
                dense = nn.Embedding(w.shape[0], w.shape[1])
            dense.weight = w
            swaps.append((path, dense))
    if swaps:
        model.update_modules(tree_unflatten(swaps))
    mx.eval(model.parameters())
    return model


def blas_library():
    """The BLAS this process mapped (what libmlx calls): OpenBLAS with the kernel family it
    chose for this CPU, or the wheel's libblas."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "unknown"
    for name, prefix in (("libscipy_openblas", "scipy_"), ("libopenblas", ""), ("libblas-", None)):
        for line in maps.splitlines():
            if name in line:
                path = line.split()[-1]
                if prefix is None:
                    return path
                try:
                    import ctypes
                    corename = getattr(ctypes.CDLL(path), prefix + "openblas_get_corename")
                    corename.restype = ctypes.c_char_p
                    return f"{path} ({corename().decode()} kernels)"
                except (OSError, AttributeError):
                    return path
    return "unknown"


def hand_loop(model, prompt, n):
    cache = make_prompt_cache(model)
    start = time.perf_counter()
    logits = model(prompt[None], cache=cache)
    y = mx.argmax(logits[:, -1, :], axis=-1)
    tokens, arrivals = [y.item()], [time.perf_counter()]
    for _ in range(n - 1):
        logits = model(y[None], cache=cache)
        y = mx.argmax(logits[:, -1, :], axis=-1)
        tokens.append(y.item())  # a sync per token: the hand loop's cost
        arrivals.append(time.perf_counter())
    return start, tokens, arrivals


def library_loop(model, prompt, n):
    start = time.perf_counter()
    tokens, arrivals = [], []
    for token, _ in generate_step(prompt, model, max_tokens=n, sampler=lambda x: mx.argmax(x, axis=-1)):
        tokens.append(int(token))
        arrivals.append(time.perf_counter())
    return start, tokens, arrivals


LOOPS = {"hand": hand_loop, "generate": library_loop}


def measure(loop, model, prompt, n):
    start, tokens, arrivals = loop(model, prompt, n)
    first, last = arrivals[0], arrivals[-1]
    return {
        "ttft_ms": (first - start) * 1e3,
        "decode_tok_s": (len(tokens) - 1) / (last - first) if len(tokens) > 1 and last > first else 0.0,
        "tokens": tokens,
        "token_ms": [(t - first) * 1e3 for t in arrivals],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf")
    ap.add_argument("--mlx-dir", help="an MLX model directory")
    ap.add_argument("--config", help="JSON config of a random-weights model")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", default="hand,generate")
    ap.add_argument("--weights", choices=["quantized", "dense"], default="quantized")
    ap.add_argument("--serve", action="store_true",
                    help="load once, then one round per `round` line on stdin (a JSON line each)")
    args = ap.parse_args()
    if args.gguf:
        model = load_gguf(args.gguf)
    elif args.mlx_dir:
        from mlx_lm.utils import load_model
        model, _ = load_model(Path(args.mlx_dir))
    else:
        model = random_model(json.loads(args.config))
    if args.weights == "dense":
        model = dequantize(model)
    prompt = mx.array([int(t) for t in args.prompt_ids.split(",")])
    loops = args.loops.split(",")
    for name in loops if args.warmup else []:  # warm-up (kernels, allocator), kept short
        measure(LOOPS[name], model, prompt[:4], 2)
    if args.serve:
        # Rounds on demand, so that a caller can interleave them with its own: the model is
        # made once, and nothing runs between two requests.
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if line.strip() != "round":
                break
            results = {name: [measure(LOOPS[name], model, prompt, args.max_tokens)] for name in loops}
            print(json.dumps({"results": results}), flush=True)
        return
    results = {name: [] for name in loops}
    for _ in range(args.rounds):
        for name in loops:
            results[name].append(measure(LOOPS[name], model, prompt, args.max_tokens))
    json.dump({"mlx": mx.__version__, "device": str(mx.default_device()), "blas": blas_library(),
               "weights": args.weights, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
