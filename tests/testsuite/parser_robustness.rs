//! The two parsers a learner's files go through must answer every input with a value or
//! an error, never a panic: truncations and byte flips of real files, deterministically.
//! (The fuzz targets in tests/fuzz explore further: see README.)

use std::path::Path;

fn mutations(original: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for cut in (0..original.len()).step_by(61) {
        out.push(original[..cut].to_vec());
    }
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..400 {
        let mut bytes = original.to_vec();
        for _ in 0..3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % bytes.len() as u64) as usize;
            bytes[at] = (seed >> 32) as u8;
        }
        out.push(bytes);
    }
    out
}

#[test]
fn lesson_parser_never_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = quest::course::LessonSpec::load(&root.join("lessons"), "mlx-path").unwrap();
    for lang in ["en", "ko"] {
        let path = root.join(format!("lessons/mlx-path/{lang}.md"));
        let original = std::fs::read(&path).unwrap();
        for bytes in mutations(&original) {
            let source = String::from_utf8_lossy(&bytes).into_owned();
            let _ = quest::course::Lesson::parse(&path, source, spec.clone());
        }
    }
}

#[test]
fn progress_parser_never_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let original = std::fs::read(root.join("tests/fixtures/progress/halfway.json")).unwrap();
    for bytes in mutations(&original) {
        if let Ok(state) = quest::progress::parse(&bytes) {
            quest::progress::serialize(&state).unwrap();
        }
    }
}
