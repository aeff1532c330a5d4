# The variants docs/lessons/linear-attention/2026-12-03-cpu/measure.sh builds, as edits of
# the lesson's solution (python3 variants.py SOLUTION OUT): each must change the file.
import sys

solution, out = sys.argv[1], sys.argv[2]
s = open(solution).read()
RECALL = "            let recalled = state.multiply(&k_row)?.sum_axis(-1, None)?; // S k: [B, H, Dv]\n"
READ = "            let y = state.multiply(q_t.expand_dims(-2)?)?.sum_axis(-1, None)?; // S q\n"
variants = {
    # S k and S q as matrix products: another order of the same sums.
    "honest": s.replace(RECALL, "            let recalled = matmul(&state, k_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?;\n")
    .replace(READ, "            let y = matmul(&state, q_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?;\n")
    .replace("{broadcast_to, stack}", "{broadcast_to, matmul, stack}"),
    # The query reads the state before this token is written into it.
    "read-first": s.replace("            state = state.multiply(&g_t)?;\n",
                            "            let read = state.multiply(q_t.expand_dims(-2)?)?.sum_axis(-1, None)?;\n"
                            "            state = state.multiply(&g_t)?;\n")
    .replace("            ys.push(y.as_dtype(queries.dtype())?);",
             "            let _ = y;\n            ys.push(read.as_dtype(queries.dtype())?);"),
}
for name, text in variants.items():
    assert text != s and text.count("matmul") != 1, name
    open(f"{out}/{name}.rs", "w").write(text)
