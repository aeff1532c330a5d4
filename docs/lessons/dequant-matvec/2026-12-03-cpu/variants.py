# The variants docs/lessons/dequant-matvec/2026-12-03-cpu/measure.sh builds, as edits of
# the lesson's solution (python3 variants.py SOLUTION OUT): each must change the file.
import sys

solution, out = sys.argv[1], sys.argv[2]
s = open(solution).read()
UNPACK = """        let places: Vec<u32> = (0..per_word).map(|j| 1u32 << (bits * j)).collect();
        let places = Array::from_slice(&places, &[1, 1, per_word]);
        let levels = Array::from_slice(&[1u32 << bits], &[1]);
        let q = remainder(floor_divide(weight.expand_dims(-1)?, &places)?, &levels)?;
"""
variants = {
    # Another way to the same integers: peel one value off the low bits at a time.
    "honest": s.replace(UNPACK, """        let levels = Array::from_slice(&[1u32 << bits], &[1]);
        let mut rest = weight.clone();
        let mut values = Vec::new();
        for _ in 0..per_word {
            values.push(remainder(&rest, &levels)?);
            rest = floor_divide(&rest, &levels)?;
        }
        let q = mlx_rs::ops::stack(&values, -1)?;
"""),
    # The values of a word read from the top bits down: every weight of a word misplaced.
    "reversed": s.replace("(0..per_word).map(", "(0..per_word).rev().map("),
}
for name, text in variants.items():
    assert text != s, name
    open(f"{out}/{name}.rs", "w").write(text)
