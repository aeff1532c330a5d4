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

/// `quest fit` writes its JSON after every shape, so a run stopped early keeps what it
/// measured: the test stops it once the first shape is in the file, and the file then
/// says which shape is measured, which are left, and the bandwidth it was measured beside.
#[test]
fn fit_keeps_each_shape_as_it_is_measured() {
    let home = tempfile::tempdir().unwrap();
    let root = crate::common::course_copy("fit-partial");
    let json = root.join("target/quest-bench/fit-cpu.json");
    let mut child = crate::common::quest_command()
        .args(["fit", "--shapes", "SmolLM2-135M,Qwen3-0.6B"])
        .args(["--max-tokens", "2", "--rounds", "1"])
        .env("QUEST_HOME", home.path())
        .env("QUEST_ROOT", &root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let partial: serde_json::Value = loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("quest fit ended ({status}) before its first shape was in {json:?}: {stderr}");
        }
        // Written whole or not at all (a rename), so a file that exists parses.
        if let Ok(bytes) = std::fs::read(&json) {
            break serde_json::from_slice(&bytes).unwrap();
        }
        assert!(
            started.elapsed().as_secs() < 600,
            "no {json:?} after 10 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // The second shape takes seconds (its weights, its runs, the rates measured after):
    // the first file seen is the one written after the first shape.
    assert_eq!(partial["complete"], false, "{partial}");
    let points = partial["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{partial}");
    assert_eq!(points[0]["shape"], "SmolLM2-135M");
    assert_eq!(partial["shapes_left"], serde_json::json!(["Qwen3-0.6B"]));
    let bandwidth = partial["rates"]["bandwidth_gb_s"].as_f64().unwrap();
    let fraction = points[0]["fraction_of_bandwidth"].as_f64().unwrap();
    let bytes = points[0]["bytes_per_token"].as_f64().unwrap();
    let rate = points[0]["pipelined_tok_s"].as_f64().unwrap();
    // The fraction is the point's own bytes × rate over the file's own bandwidth.
    assert!(
        (fraction - bytes * rate / (bandwidth * 1e9)).abs() <= 1e-9 * fraction.abs().max(1.0),
        "{partial}"
    );
    assert!(fraction > 0.0, "{partial}");
}
