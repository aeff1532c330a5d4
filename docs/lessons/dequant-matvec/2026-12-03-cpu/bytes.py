# What the lesson's solution writes and reads a decode step, counted from SmolLM2-135M's
# config as every op's output going to memory and back (python3 bytes.py > bytes.txt).
hidden, inter, layers, heads, kv_heads, head_dim = 576, 1536, 30, 9, 3, 64
q, kv = heads * head_dim, kv_heads * head_dim
# Each layer's matrices, [out, in]: q, k, v, o, gate, up, down.
matrices = [(q, hidden), (kv, hidden), (kv, hidden), (hidden, q),
            (inter, hidden), (inter, hidden), (hidden, inter)]
weights = layers * sum(o * i for o, i in matrices)
packed = 0.5 + 8 / 32  # 4 bits, and a float32 scale and bias per 32
steps = {  # bytes a weight each op reads and writes
    "floor_divide (reads the packed word, writes a uint32)": 0.5 + 4,
    "remainder (uint32 in, uint32 out)": 8,
    "as_dtype float32": 8,
    "multiply by the scale": 8,
    "add the bias": 8,
    "matmul reads the float32 matrix": 4,
}
per_weight = sum(steps.values())
for what, b in steps.items():
    print(f"{b:5.1f} B a weight  {what}")
print(f"{per_weight:.1f} bytes a weight in all, against {packed} read by a fused kernel and 4 by the dense model")
print(f"layers' matrices: {weights} weights")
print(f"the solution's graph, counted: {weights * per_weight / 1e9:.1f} GB a step")
print(f"the dense model's layers: {weights * 4 / 1e9:.2f} GB a step (its whole step, head included: 0.54 GB)")
# gate and up are one stacked matrix in quest's MLP: its float32 intermediate, the largest.
largest = 2 * inter * hidden * 4
print(f"the largest projection's float32 intermediate (gate and up stacked): {largest / 1e6:.1f} MB, about {round(largest / 1e6)} MB")
