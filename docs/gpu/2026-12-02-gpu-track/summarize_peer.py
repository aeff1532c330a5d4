"""Per shape from a `quest fit --peer` JSON: quest's pipelined rate, mlx-lm's, their ratio,
the fraction of the copy bandwidth, and the host's time per layer split into graph building
and async_eval.   python3 summarize_peer.py peer-1/fit-peer-1.json > peer-1/summary.txt"""
import json
import sys

d = json.load(open(sys.argv[1]))
print(f"complete: {d['complete']}; shapes left: {d.get('shapes_left')}; "
      f"copy bandwidth {d['rates']['bandwidth_gb_s']:.0f} GB/s ({d['bandwidth_method']})")
print("shape           quest tok/s  mlx-lm tok/s  ratio  % of copy bw  host us/layer (build + async_eval)")
for p in d["points"]:
    h, n = p["host"], p["layers"]
    print(f"{p['shape']:<15} {p['pipelined_tok_s']:>11.1f} {p['mlx_lm_tok_s']:>13.1f} {p['pipelined_tok_s'] / p['mlx_lm_tok_s']:>6.2f}"
          f" {100 * p['fraction_of_bandwidth']:>13.1f}  {1000 * (h['build_ms'] + h['eval_ms']) / n:>6.1f} ({1000 * h['build_ms'] / n:.1f} + {1000 * h['eval_ms'] / n:.1f})")
