# The weights one decode step of SmolLM2-135M reads, counted from its config, and the MLP's
# share of them. On the CPU quest holds every matrix dense in f32 (it dequantizes the Q4_1
# GGUF at load): 4 bytes a weight, the same for every matrix, so the byte share is the
# weight share. Against the reports' weight_bytes_per_token (speed-rounds.txt), and against
# the decode-ceiling lesson's measured rates (docs/lessons/decode-ceiling/2026-12-02-roofline/).
#   python3 docs/lessons/mlp/2026-12-03-share/bytes.py > docs/lessons/mlp/2026-12-03-share/bytes.txt
hidden, inter, layers, heads, kv_heads, head_dim, vocab = 576, 1536, 30, 9, 3, 64, 49152
f32 = 4
mlp = 3 * hidden * inter                      # gate_proj, up_proj, down_proj
attn = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim  # q, o; k, v
norms = 2 * hidden
head = vocab * hidden                         # tied: the embedding table, read whole by the head
total = layers * (mlp + attn + norms) + hidden + head
print(f"a layer: MLP {mlp} weights, attention {attn}, norms {norms}")
print(f"a step: MLP {layers * mlp} weights, attention {layers * attn}, norms {layers * norms + hidden}, head {head}: {total} weights")
print(f"a step at {f32} bytes a weight: {total * f32} bytes = {total * f32 / 1e6:.1f} MB; "
      f"the MLP's {layers * mlp * f32} bytes = {layers * mlp * f32 / 1e6:.1f} MB")
for name, n in [("MLP", layers * mlp), ("attention", layers * attn), ("head", head), ("norms", layers * norms + hidden)]:
    print(f"share {name}: {100 * n / total:.2f} %")
narrow = 32
removed = layers * 3 * hidden * (inter - narrow) * f32
print(f"MLP {inter} -> {narrow} wide: {removed} bytes fewer = {removed / 1e6:.1f} MB = {100 * removed / (total * f32):.1f} % of the step's bytes")
# The decode-ceiling lesson's rates on this machine (its report.json): 7.91 GB/s through
# matrix-vector products, 47.9 G multiply-adds/s through matmuls.
bandwidth, compute = 7.91e9, 47.9e9
print(f"the MLP's bytes at 7.91 GB/s: {layers * mlp * f32 / bandwidth * 1e3:.1f} ms; "
      f"its {layers * mlp} multiply-adds at 47.9 G/s: {layers * mlp / compute * 1e3:.2f} ms")
print(f"the whole step's bytes at 7.91 GB/s: {total * f32 / bandwidth * 1e3:.1f} ms")
