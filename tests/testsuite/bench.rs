//! `quest bench` end to end on the real model, Rust side only and tiny (speed belongs in
//! benchmarks, not tests): it must build the three loops, run them, print the ratio table
//! and write JSON and SVG (into a fresh folder, so no earlier bench's files can pass it).
//! It benches a copy of the course, never the learner's own exercise.

use crate::common::median;

#[test]
fn bench_prints_the_ratio_table_and_writes_json_and_svg() {
    let home = tempfile::tempdir().unwrap();
    let root = crate::common::course_copy("bench");
    let dir = home.path().join("quest-bench");
    let out = crate::common::quest_command()
        .args([
            "bench",
            "mlx-path",
            "--no-python",
            "--rounds",
            "1",
            "--max-tokens",
            "4",
        ])
        .arg("--out")
        .arg(&dir)
        .env("QUEST_HOME", home.path())
        .env("QUEST_ROOT", &root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("benchmarking the Rust side alone (--no-python)"),
        "{stderr}"
    );
    for row in [
        "Rust: the lesson's starting code",
        "Rust: the lesson's solution",
        "your exercise",
    ] {
        assert!(stdout.contains(row), "{stdout}");
    }
    assert!(
        stdout.contains("ratio") && stdout.contains("ceiling"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("mlx-path.json")).unwrap()).unwrap();
    let loops = json["loops"].as_array().unwrap();
    assert_eq!(loops.len(), 3);
    let ceiling = &json["ceiling"];
    let number = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v} in {json}"));
    assert!(number(&ceiling["bandwidth_gb_s"]) > 0.0);

    // Each row's ratio is its median rate over the starting code's (the baseline without
    // Python), its share its median over the ceiling: worked out here from the rounds
    // the JSON holds, so a row divided by itself or by the wrong loop shows.
    let median_rate = |l: &serde_json::Value| {
        let rates: Vec<f64> = l["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| number(&run["decode_tok_s"]))
            .collect();
        median(&rates)
    };
    let baseline = loops
        .iter()
        .find(|l| l["id"] == "rust-starting")
        .map(median_rate)
        .expect("the starting code's loop");
    let ceiling_tok_s = number(&ceiling["bandwidth_gb_s"]) * 1e9
        / (number(&ceiling["weight_bytes"]) + number(&ceiling["kv_bytes"]));
    for l in loops {
        let label = l["label"].as_str().unwrap();
        let row = stdout
            .lines()
            .find(|line| line.starts_with(label))
            .unwrap_or_else(|| panic!("no row `{label}` in:\n{stdout}"));
        let ratio = format!("×{:.2}", median_rate(l) / baseline);
        let share = format!("{:.1}%", 100.0 * median_rate(l) / ceiling_tok_s);
        assert!(
            row.split_whitespace().any(|w| w == ratio) && row.ends_with(&share),
            "`{label}` should read {ratio} and {share}:\n{stdout}"
        );
    }
    let svg = std::fs::read_to_string(dir.join("mlx-path.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("the lesson's solution"));
}
