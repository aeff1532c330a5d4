"""Where does SmolLM2-135M go wrong on MLX's CUDA backend?

quest decodes garbage with the real SmolLM2 on the H200, quantized and dense alike, while
the same code on the CPU writes "The capital of France is Paris." This probe runs each
suspect on the GPU and on the CPU in one process, from the same inputs, and prints how far
apart they are (relative L2), so the first op that differs is named:

  tensors   every tensor MLX's GGUF reader made, read back on both devices
  ops       the ops of one decoder layer at SmolLM2's shapes (head dim 64, 9 query heads on
            3 KV heads, RoPE base 100000), as quest calls them: q/k/v as views into one
            fused projection, the KV cache as a view into a 256-position buffer
  model     mlx-lm's llama on the same weights in float16: hidden states layer by layer
            for the prompt, then 16 greedy tokens (twice on the GPU: are they repeatable?)

Run on the device from a course copy (docs/gpu/device.sh): python3 docs/gpu/smollm2_probe.py GGUF
Without a GPU it compares the CPU with itself (a smoke test of the script).
"""

import sys
from pathlib import Path

import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src" / "bench"))
import peer  # noqa: E402  (quest's Python peer: the GGUF -> mlx-lm loader)

# quest's mlx-path prompt for SmolLM2 (chat template included), as `quest bench` passes it.
PROMPT = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
          407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 19842, 281,
          582, 6330, 30, 2, 198, 1, 520, 9531, 198]
GPU = mx.gpu if mx.cuda.is_available() else mx.cpu


def rel(a, b):
    a, b = a.astype(mx.float32), b.astype(mx.float32)
    with mx.stream(mx.cpu):
        d = mx.linalg.norm((a - b).flatten()) / (mx.linalg.norm(b.flatten()) + 1e-30)
        return d.item()


def on(device, fn):
    with mx.stream(device):
        out = fn()
        mx.eval(out)
    return out


def both(name, fn, tol=5e-3):
    g, c = on(GPU, fn), on(mx.cpu, fn)
    g, c = (g if isinstance(g, (list, tuple)) else [g]), (c if isinstance(c, (list, tuple)) else [c])
    worst = max(rel(x, y) for x, y in zip(g, c))
    print(f"  {'DIFFERS' if worst > tol else 'ok     '} {name}: rel {worst:.2e}")
    return worst


def tensors(path):
    print("== tensors: MLX's GGUF reader, read on the GPU and on the CPU")
    raw = mx.load(path)
    bad = 0
    for name, a in sorted(raw.items()):
        zero = mx.array(0, a.dtype)
        g, c = on(GPU, lambda: a + zero), on(mx.cpu, lambda: a + zero)
        if not on(mx.cpu, lambda: mx.array_equal(g, c)).item():
            bad += 1
            print(f"  DIFFERS {name} {a.dtype} {a.shape}")
    print(f"  {len(raw) - bad} of {len(raw)} tensors read the same")


def ops():
    print("== ops at SmolLM2's shapes, float16, GPU against CPU")
    mx.random.seed(1)
    f16 = mx.float16
    L, H, KV, D, hidden = 42, 9, 3, 64, 576
    for length in (L, 1):
        qkv = on(mx.cpu, lambda: mx.random.normal((1, length, (H + 2 * KV) * D)).astype(f16))

        def views():
            q, k, v = mx.split(qkv, [H * D, (H + KV) * D], axis=-1)
            q = q.reshape(1, length, H, D).transpose(0, 2, 1, 3)
            k = k.reshape(1, length, KV, D).transpose(0, 2, 1, 3)
            v = v.reshape(1, length, KV, D).transpose(0, 2, 1, 3)
            return q, k, v

        offset = 0 if length > 1 else L
        rope = lambda t: mx.fast.rope(t, D, traditional=False, base=100000.0, scale=1.0, offset=offset)  # noqa: E731
        both(f"rope, q as a view of the fused projection, L={length}", lambda: rope(views()[0]))
        both(f"rope, k as a view of the fused projection, L={length}", lambda: rope(views()[1]))
        both(f"rope, q contiguous, L={length}", lambda: rope(mx.contiguous(views()[0])))

    # Prefill: the causal SDPA over the prompt, k/v read from a 256-position cache buffer.
    def cache_views(t, k, v):
        kb = mx.zeros((1, KV, 256, D), f16)
        vb = mx.zeros((1, KV, 256, D), f16)
        kb[:, :, :t, :] = k
        vb[:, :, :t, :] = v
        return kb[:, :, :t, :], vb[:, :, :t, :]

    q = on(mx.cpu, lambda: mx.random.normal((1, H, L, D)).astype(f16))
    k = on(mx.cpu, lambda: mx.random.normal((1, KV, L, D)).astype(f16))
    v = on(mx.cpu, lambda: mx.random.normal((1, KV, L, D)).astype(f16))
    sdpa = mx.fast.scaled_dot_product_attention
    both("sdpa prefill, causal, contiguous q/k/v", lambda: sdpa(q, k, v, scale=D**-0.5, mask="causal"))
    both("sdpa prefill, causal, k/v views of the cache", lambda: sdpa(q, *cache_views(L, k, v), scale=D**-0.5, mask="causal"))
    q_t = on(mx.cpu, lambda: mx.contiguous(q.transpose(0, 2, 1, 3)))
    both("sdpa prefill, causal, q [B,H,L,D] as a transposed view",
         lambda: sdpa(q_t.transpose(0, 2, 1, 3), *cache_views(L, k, v), scale=D**-0.5, mask="causal"))
    q1 = q[:, :, -1:, :]
    both("sdpa decode, k/v views of the cache", lambda: sdpa(q1, *cache_views(L, k, v), scale=D**-0.5))

    # 4-bit (and 8-bit) matmuls at the model's sizes, and the tied head's 49152 rows.
    for rows, cols, bits in ((960, 576, 4), (3072, 576, 4), (576, 1536, 4), (49152, 576, 4), (960, 576, 8)):
        w = on(mx.cpu, lambda: mx.random.normal((rows, cols)) * 0.05)
        wq, s, b = on(mx.cpu, lambda: mx.quantize(w, group_size=32, bits=bits))
        s, b = s.astype(f16), b.astype(f16)
        for length in (1, L):
            x = on(mx.cpu, lambda: mx.random.normal((1, length, cols)).astype(f16))
            both(f"quantized_matmul {rows}x{cols} {bits}-bit, {length} rows",
                 lambda: mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=32, bits=bits))
    x = on(mx.cpu, lambda: mx.random.normal((1, 1, hidden)).astype(f16))
    wn = on(mx.cpu, lambda: (1 + 0.1 * mx.random.normal((hidden,))).astype(f16))
    both("rms_norm 576", lambda: mx.fast.rms_norm(x, wn, 1e-5))
    ids = mx.array([[1, 9690, 198, 49151]])
    emb, es, eb = on(mx.cpu, lambda: mx.quantize(mx.random.normal((49152, hidden)), group_size=32, bits=4))
    es, eb = es.astype(f16), eb.astype(f16)
    both("embedding rows (take + dequantize)",
         lambda: mx.dequantize(emb[ids], es[ids], eb[ids], group_size=32, bits=4))


def model(path):
    print("== mlx-lm's llama on the GGUF's weights: GPU (float16, float32) against the CPU (float32)")
    raw, md = mx.load(path, return_metadata=True)
    vocab = md.get("tokenizer.ggml.tokens")
    text = lambda ids: "".join(vocab[i] for i in ids).replace("\u0120", " ").replace("\u010a", "\\n") if vocab else str(ids)  # noqa: E731
    from mlx_lm.models.cache import make_prompt_cache

    m32 = peer.load_gguf(path)  # float scales and norms in float32 (MLX's CPU is slow in float16)
    m16 = peer.load_gguf(path)
    m16.set_dtype(mx.float16)  # what quest runs on a GPU
    mx.eval(m16.parameters())

    def hidden_states(m):
        cache = make_prompt_cache(m)
        h = m.model.embed_tokens(mx.array([PROMPT]))
        out = [h]
        for layer, c in zip(m.model.layers, cache):
            h = layer(h, "causal", c)
            out.append(h)
        out.append(m.model.embed_tokens.as_linear(m.model.norm(h))[:, -1, :])
        return out

    reference = on(mx.cpu, lambda: hidden_states(m32))
    for label, m in (("float16", m16), ("float32", m32)):
        g = on(GPU, lambda: hidden_states(m))
        print(f"  GPU {label}, the prompt's hidden states against the CPU's:")
        for i, (x, y) in enumerate(zip(g, reference)):
            name = "embedding" if i == 0 else ("logits (last position)" if i == len(g) - 1 else f"after layer {i - 1}")
            r = rel(x, y)
            print(f"    {'DIFFERS' if r > 3e-2 else 'ok     '} {name}: rel {r:.2e}")
        print(f"    argmax of the last logits: GPU {mx.argmax(g[-1]).item()}, CPU {mx.argmax(reference[-1]).item()}")

    def greedy(m, device):
        with mx.stream(device):
            return [int(t) for t, _ in peer.generate_step(mx.array(PROMPT), m, max_tokens=16,
                                                        sampler=lambda x: mx.argmax(x, axis=-1))]

    runs = (("GPU float16", m16, GPU), ("GPU float16 again", m16, GPU), ("GPU float32", m32, GPU),
            ("CPU float32", m32, mx.cpu))
    for name, m, device in runs:
        ids = greedy(m, device)
        print(f"  {name}: {ids}\n    {text(ids)!r}")


def main():
    path = sys.argv[1]
    print(f"mlx {mx.__version__}, GPU: {GPU}")
    for step in (tensors, ops, model):
        try:
            step(path) if step is not ops else step()
        except Exception as e:  # keep going: the next step may still say something
            print(f"  {step.__name__} stopped: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
