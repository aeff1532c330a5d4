//! The your-server lesson's solution driven by the real `openai` Python client (from
//! PyPI, in a venv this test makes once): a streamed completion and the same one whole
//! must give the same greedy text, requests the API refuses must raise the client's
//! `BadRequestError` (status 400, OpenAI's error body naming the field), and the server
//! must go on serving after them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The client's version, pinned: what this test was written against.
const OPENAI: &str = "openai==3.63.0";

/// A venv with the pinned client, made once under target/.
fn client_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("target").join("openai-client-venv");
    let python = venv.join("bin").join("python");
    let ready = venv.join(OPENAI);
    if !ready.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 runs");
        assert!(made.success(), "python3 -m venv failed");
        let pip = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                OPENAI,
            ])
            .status()
            .expect("pip runs");
        assert!(
            pip.success(),
            "pip could not install {OPENAI} (no PyPI access?)"
        );
        std::fs::write(&ready, "").unwrap();
    }
    python
}

#[test]
#[ignore = "builds the your-server solution and installs the openai client; run with --include-ignored"]
fn the_openai_client_talks_to_the_solution_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = client_python();
    let binary = quest::lab::runner::build(
        &quest::lab::runner::workspace_root(),
        &root.join("solutions/your-server/server.rs"),
        true,
    )
    .unwrap();
    let mut server = Command::new(&binary)
        .env("QUEST_PORT", "0")
        .env_remove("QUEST_LINE")
        .env_remove("QUEST_REPORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    let port = said
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|port| port.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("the server said no port: {said:?}"));
    let out = Command::new(&python)
        .arg(root.join("tests/peer/openai_client.py"))
        .arg(port.to_string())
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    let streamed = seen["streamed"].as_str().unwrap();
    assert!(streamed.contains("Paris"), "{seen}");
    assert_eq!(seen["whole"], seen["streamed"], "{seen}");
    assert!(
        seen["finish"].is_string() && seen["whole_finish"].is_string(),
        "{seen}"
    );
    let refused = seen["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 3);
    for (r, param) in refused.iter().zip(["messages", "max_tokens", "messages"]) {
        assert_eq!(r["status"], 400, "{seen}");
        assert_eq!(r["param"], param, "{seen}");
        assert_eq!(r["type"], "invalid_request_error", "{seen}");
    }
    assert!(!seen["after"].as_str().unwrap().is_empty(), "{seen}");
}
