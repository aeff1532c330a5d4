//! `quest bench` end to end on the real model, Rust side only and tiny (speed belongs in
//! benchmarks, not tests): it must build the three loops, run them, print the ratio table
//! and write JSON and SVG (into a fresh folder, so no earlier bench's files can pass it).
//! It benches a copy of the course, never the learner's own exercise.

use std::process::Command;

#[test]
fn bench_prints_the_ratio_table_and_writes_json_and_svg() {
    let home = tempfile::tempdir().unwrap();
    let root = crate::common::course_copy("bench");
    let dir = home.path().join("quest-bench");
    let out = Command::new(env!("CARGO_BIN_EXE_quest"))
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
        stdout.contains("ratio") && stdout.contains("×1.00") && stdout.contains("ceiling"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("mlx-path.json")).unwrap()).unwrap();
    assert_eq!(json["loops"].as_array().unwrap().len(), 3);
    assert!(json["ceiling"]["bandwidth_gb_s"].as_f64().unwrap() > 0.0);
    let svg = std::fs::read_to_string(dir.join("mlx-path.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("the lesson's solution"));
}
