# What Qwen3.5-0.8B keeps from one token to the next, counted from its config (quest's
# random:qwen3.5-0.8b, src/lm/random.rs), in float32 as on the CPU:
#   python3 state.py > state.txt
layers, interval = 24, 4
attention_layers = layers // interval
delta_layers = layers - attention_layers
kv_heads, head_dim = 2, 256
value_heads, key_dim, value_dim, conv_kernel = 16, 128, 128, 4
key_heads = 16
f32 = 4
state = value_heads * value_dim * key_dim * f32
conv_channels = 2 * key_heads * key_dim + value_heads * value_dim
window = (conv_kernel - 1) * conv_channels * f32
per_position = attention_layers * 2 * kv_heads * head_dim * f32
print(f"gated delta layers: {delta_layers}, full attention layers: {attention_layers}")
print(f"one gated delta layer's state: {value_heads} x {value_dim} x {key_dim} floats = {state} bytes = {state / 2**20:.2f} MiB")
print(f"one gated delta layer's conv window: {conv_kernel - 1} x {conv_channels} floats = {window} bytes = {window / 2**10:.0f} KiB")
fixed = delta_layers * (state + window)
print(f"all {delta_layers} gated delta layers: {fixed} bytes = {fixed / 2**20:.1f} MiB, at any context")
print(f"the {attention_layers} attention layers' KV cache: {per_position} bytes = {per_position / 2**10:.0f} KiB a position")
for context in [16, 4096, 32768]:
    kv = context * per_position
    print(f"  at {context} positions: {kv / 2**20:.1f} MiB of KV against {fixed / 2**20:.1f} MiB of state")
print(f"the KV cache outgrows the state from {fixed / per_position:.0f} positions on")
