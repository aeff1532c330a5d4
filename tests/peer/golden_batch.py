#!/usr/bin/env python3
"""Batch goldens for quest: mlx-lm 0.32.2 decoding several sequences at once, to check
`quest::lm` at batch > 1 (tests/testsuite/batch.rs).

    .venv-peer/bin/python tests/peer/golden_batch.py [--gguf PATH] [--mlx-dir /tmp/smollm2-mlx] [--out tests/fixtures]

Each case is mlx-lm's own model and cache (`make_prompt_cache`: KVCache for attention,
ArraysCache for Qwen3.5's gated delta layers) fed a `[B, L]` batch of same-length prompts:
one prefill, then greedy one token per row per step, `[B, 1]` at a time (the loop of
quest's `batch` lesson). Written to OUT/batch/golden.json (+ prefill_logits.f32: the
last-position logits of every row of every case, float32 little-endian, in case order).

  smollm2-same4:  SmolLM2-135M-Instruct (converted as golden.py does), the chat prompt
                  of golden.py broadcast to 4 rows.
  smollm2-two:    the same model, two different chat prompts of the same token length.
  qwen3_5-two:    tests/fixtures/qwen3_5-tiny-f32, two different id prompts of 12 tokens.
Also, per case, the batch-1 greedy ids of each row's prompt (mlx-lm's generate_step).
Idempotent like golden.py (whose helpers it uses).
"""

import argparse
import os
import shlex
import sys
from pathlib import Path

import numpy as np
import mlx.core as mx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden  # noqa: E402
import mlx_lm  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache  # noqa: E402
from mlx_lm.utils import load_model  # noqa: E402

STEPS = 32
QWEN3_5_STEPS = 16
SECOND_QUESTIONS = [
    "What is the capital of Italy? Answer in one sentence.",
    "What is the capital of Spain? Answer in one sentence.",
    "What is the capital of Japan? Answer in one sentence.",
]
QWEN3_5_PROMPTS = [[1, 17, 42, 99, 120, 200, 7, 250, 3, 64, 128, 5],
                   [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 255, 254]]


def versions():
    """golden.py's versions, less gguf (the conversion reads the GGUF with MLX alone)."""
    from importlib.metadata import version
    return {"python": sys.version.split()[0], "mlx": mx.__version__, "mlx-lm": mlx_lm.__version__,
            "transformers": version("transformers"), "tokenizers": version("tokenizers"),
            "numpy": np.__version__}


def batch_greedy(model, rows, n):
    """One prefill of `rows` ([B, L]), then n - 1 steps of [B, 1]: per row the greedy ids, and
    the prefill's last-position logits ([B, vocab], float32)."""
    cache = make_prompt_cache(model)
    logits = model(mx.array(rows, dtype=mx.uint32), cache=cache)
    prefill = logits[:, -1].astype(mx.float32)
    y = mx.argmax(logits[:, -1], axis=-1)
    mx.eval(prefill, y)
    out = [[int(t)] for t in np.array(y)]
    for _ in range(n - 1):
        logits = model(y[:, None], cache=cache)
        y = mx.argmax(logits[:, -1], axis=-1)
        mx.eval(y)
        for row, t in zip(out, np.array(y)):
            row.append(int(t))
    return out, np.array(prefill)


def case(name, model, rows, n, description):
    ids, prefill = batch_greedy(model, rows, n)
    single = [golden.greedy_tokens(model, row, n)[0] for row in rows]
    print(f"[{name}] batch ids row 0: {ids[0]}")
    print(f"[{name}] rows equal batch-1 runs: {[a == b for a, b in zip(ids, single)]}")
    doc = {"name": name, "description": description, "prompt_ids": rows, "greedy_ids": ids,
           "single_greedy_ids": single, "steps": n}
    return doc, prefill


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", type=Path)
    ap.add_argument("--out", type=Path, default=golden.REPO / "tests" / "fixtures")
    ap.add_argument("--mlx-dir", type=Path, default=Path("/tmp/smollm2-mlx"))
    ap.add_argument("--cache-dir", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quest-peer")
    args = ap.parse_args()
    mx.set_default_device(mx.cpu)
    command = shlex.join([".venv-peer/bin/python" if "venv-peer" in sys.executable else sys.executable,
                          os.path.relpath(__file__, Path.cwd()) if Path.cwd() == golden.REPO else __file__]
                         + sys.argv[1:])
    out = args.out.resolve() / "batch"
    written = []

    if not (args.mlx_dir / "config.json").is_file():
        gguf_path = (args.gguf or golden.fetch_gguf(args.cache_dir)).resolve()
        sha = golden.sha256_file(gguf_path)
        if sha != golden.GGUF_SHA256:
            sys.exit(f"{gguf_path}: sha256 {sha} != expected {golden.GGUF_SHA256}")
        golden.convert_smollm2(gguf_path, args.mlx_dir)
    model, tokenizer = mlx_lm.load(str(args.mlx_dir))

    def chat_ids(question):
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                             add_generation_prompt=True, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)

    first = chat_ids(golden.SMOL_MESSAGES[0]["content"])
    second = next(ids for ids in map(chat_ids, SECOND_QUESTIONS) if len(ids) == len(first) and ids != first)
    cases, prefills = [], []
    for doc, prefill in [
        case("smollm2-same4", model, [first] * 4, STEPS, "golden.py's chat prompt broadcast to 4 rows"),
        case("smollm2-two", model, [first, second], STEPS, "two chat prompts of one token length"),
    ]:
        cases.append(doc)
        prefills.append(prefill)
    qwen = load_model(golden.REPO / "tests" / "fixtures" / "qwen3_5-tiny-f32")[0]
    doc, prefill = case("qwen3_5-two", qwen, QWEN3_5_PROMPTS, QWEN3_5_STEPS,
                        "tests/fixtures/qwen3_5-tiny-f32, two id prompts of 12 tokens")
    cases.append(doc)
    prefills.append(prefill)

    for doc, prefill in zip(cases, prefills):
        doc["prefill_rows"] = int(prefill.shape[0])
        doc["vocab"] = int(prefill.shape[1])
    golden.write_if_changed(out / "prefill_logits.f32",
                            np.concatenate([p.reshape(-1) for p in prefills]).astype("<f4").tobytes(), written)
    golden.write_golden_json(out / "golden.json", {
        "description": "mlx-lm at batch > 1: prefill [B, L], then greedy [B, 1] steps with mlx-lm's cache",
        "cases": cases,
        "prefill_logits": "prefill_logits.f32: every case's [B, vocab] last-position logits, in order",
        "versions": versions(),
        "command": command,
        "date": golden.datetime.date.today().isoformat(),
    }, written)
    print(f"done: {len(written)} file(s) written")


if __name__ == "__main__":
    main()
