//! Older progress files, brought up to the current schema as plain JSON before
//! they are typed. Nothing earned is dropped: every award, run, card and submission
//! of a schema-1 file has a place in schema 2, of a schema-2 file in schema 3, and of a
//! schema-3 file in schema 4. The store keeps the original file as a backup the first time it writes the migrated one.

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};

use super::SCHEMA;

/// Migrates `file` (any schema up to [`SCHEMA`]) to the current schema.
pub fn to_current(mut file: Value) -> Result<Value> {
    loop {
        let schema = file.get("schema").and_then(Value::as_u64).unwrap_or(0);
        file = match schema {
            1 => v1_to_v2(file)?,
            2 => v2_to_v3(file),
            3 => v3_to_v4(file),
            s if s == u64::from(SCHEMA) => return Ok(file),
            s => bail!("no migration from schema {s}"),
        };
    }
}

/// Schema 1 had decode-speed cards and runs with fixed fields; schema 2 names
/// its numbers (`metrics`, `numbers`, `answers`) so that any lesson can use them.
fn v1_to_v2(mut file: Value) -> Result<Value> {
    if let Some(lessons) = file.get_mut("lessons").and_then(Value::as_object_mut) {
        for lesson in lessons.values_mut() {
            let Some(lesson) = lesson.as_object_mut() else {
                continue;
            };
            if let Some(runs) = lesson.get_mut("runs").and_then(Value::as_array_mut) {
                for run in runs.iter_mut().filter_map(Value::as_object_mut) {
                    let mut metrics = Map::new();
                    for (old, new) in [
                        ("ttft_ms", "ttft_ms"),
                        ("decode_tok_s", "decode_tok_s"),
                        ("library_tok_s", "library_decode_tok_s"),
                    ] {
                        if let Some(value) = run.remove(old).filter(|v| !v.is_null()) {
                            metrics.insert(new.into(), value);
                        }
                    }
                    run.insert("metrics".into(), Value::Object(metrics));
                }
            }
            if let Some(card) = lesson.get_mut("card").and_then(Value::as_object_mut) {
                let at = card.remove("at").unwrap_or(Value::Null);
                let before = card.remove("before_tok_s").unwrap_or(Value::Null);
                let after = card.remove("after_tok_s").unwrap_or(Value::Null);
                let term = card.remove("which_term").unwrap_or(Value::Null);
                *card = json!({
                    "at": at,
                    "metric": "decode_tok_s",
                    "numbers": {"before": before, "after": after},
                    "answers": {"term": term},
                })
                .as_object()
                .cloned()
                .unwrap_or_default();
            }
        }
    }
    file["schema"] = json!(2);
    Ok(file)
}

/// Schema 3 records every quiz answer (`attempts`, absent means none) and, for "faster
/// than the library", the learner's rate on the library's own kernels
/// (`same_kernels_decode_tok_s`). A schema-2 run beside the library on a CPU or Metal ran
/// MLX's kernels only (quest's own are CUDA's), so its rate is that; on CUDA quest's
/// kernels may have run, and no rate is claimed for it. Awards are kept as they are.
fn v2_to_v3(mut file: Value) -> Value {
    if let Some(lessons) = file.get_mut("lessons").and_then(Value::as_object_mut) {
        let runs = lessons
            .values_mut()
            .filter_map(|lesson| lesson.get_mut("runs")?.as_array_mut())
            .flatten()
            .filter_map(Value::as_object_mut);
        for run in runs {
            let off_cuda = run
                .get("backend")
                .and_then(Value::as_str)
                .is_some_and(|backend| backend != "mlx-cuda");
            let Some(metrics) = run.get_mut("metrics").and_then(Value::as_object_mut) else {
                continue;
            };
            if let (true, true, Some(yours)) = (
                off_cuda,
                metrics.contains_key("library_decode_tok_s"),
                metrics.get("decode_tok_s").cloned(),
            ) {
                metrics.insert("same_kernels_decode_tok_s".into(), yours);
            }
        }
    }
    file["schema"] = json!(3);
    file
}

/// Schema 4 remembers how far each lesson's hint was read (`hint_level`, absent means no
/// level yet): a schema-3 file holds nothing that changes. Its number changes all the same,
/// so that an older quest calls a file with hint levels newer, not damaged.
fn v3_to_v4(mut file: Value) -> Value {
    file["schema"] = json!(4);
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_1_run_and_card_keep_every_number() {
        let v1 = json!({
            "schema": 1,
            "lessons": {"mlx-path": {
                "runs": [{"at": "t", "code": {"kind": "original", "sha256": "a"}, "backend": "mlx-cpu",
                          "ttft_ms": 5000.0, "decode_tok_s": 7.5, "tokens_generated": 32,
                          "prompt_tokens": 42, "lang": "en", "library_tok_s": 7.7}],
                "card": {"at": "t", "before_tok_s": 7.5, "after_tok_s": 7.7, "which_term": "fixed"}
            }}
        });
        let v2 = v1_to_v2(v1).unwrap();
        assert_eq!(v2["schema"], 2);
        let lesson = &v2["lessons"]["mlx-path"];
        assert_eq!(
            lesson["runs"][0]["metrics"],
            json!({"ttft_ms": 5000.0, "decode_tok_s": 7.5, "library_decode_tok_s": 7.7})
        );
        assert_eq!(
            lesson["card"]["numbers"],
            json!({"before": 7.5, "after": 7.7})
        );
        assert_eq!(lesson["card"]["answers"], json!({"term": "fixed"}));
        assert_eq!(lesson["card"]["metric"], "decode_tok_s");
    }

    #[test]
    fn a_schema_2_file_keeps_its_awards_and_only_off_cuda_library_runs_count() {
        let run = |backend: &str| {
            json!({"at": "2026-03-01T12:00:00Z", "code": {"kind": "exercise", "sha256": "a"},
                   "backend": backend, "tokens_generated": 32, "prompt_tokens": 12, "lang": "en",
                   "metrics": {"decode_tok_s": 150.0, "library_decode_tok_s": 120.0}})
        };
        let v2 = json!({
            "schema": 2,
            "lang": "ko",
            "lessons": {"mlx-path": {
                "runs": [run("mlx-cpu"), run("mlx-cuda")],
                "card": {"at": "2026-03-01T12:00:00Z", "metric": "decode_tok_s",
                         "numbers": {"before": 100.0, "after": 150.0},
                         "answers": {"term": "fixed", "shows-here": "yes"}},
                "submissions": [{"at": "2026-03-01T12:00:00Z", "code": {"kind": "exercise", "sha256": "a"},
                                 "passed": true, "checks_passed": true, "lang": "ko"}]
            }},
            "awards": {
                "lesson:mlx-path:complete": {"xp": 100, "at": "2026-03-01T12:00:00Z"},
                "achievement:beat-the-library": {"xp": 60, "at": "2026-03-01T12:00:00Z"}
            }
        });
        let v3 = v2_to_v3(v2.clone());
        assert_eq!(v3["schema"], 3);
        assert_eq!(v3["awards"], v2["awards"], "every award kept as it was");
        let runs = &v3["lessons"]["mlx-path"]["runs"];
        assert_eq!(runs[0]["metrics"]["same_kernels_decode_tok_s"], 150.0);
        assert!(
            runs[1]["metrics"]
                .get("same_kernels_decode_tok_s")
                .is_none(),
            "on CUDA quest's kernels may have run: {runs}"
        );
        // Typed, it loads: nothing in it is refused or dropped.
        let state: crate::progress::State =
            serde_json::from_value(to_current(v3).unwrap()).unwrap();
        assert_eq!(state.total_xp(), 160);
        assert_eq!(
            state
                .lesson("mlx-path")
                .unwrap()
                .card
                .as_ref()
                .unwrap()
                .answers
                .len(),
            2
        );
        assert!(state.lesson("mlx-path").unwrap().is_done());
    }

    /// A schema-3 file, as the quest before hint levels wrote it (a lesson done with its
    /// quiz and a prediction, another begun): every field kept, no hint level yet, and the
    /// file written again reads back the same.
    #[test]
    fn a_schema_3_file_keeps_everything_and_has_no_hint_level_yet() {
        let v3 = json!({
            "schema": 3,
            "lang": "ko",
            "lessons": {
                "rope": {
                    "runs": [{"at": "2026-12-01T10:00:00Z", "code": {"kind": "exercise", "sha256": "b"},
                              "backend": "mlx-cpu", "tokens_generated": 32, "prompt_tokens": 20,
                              "lang": "ko", "metrics": {"decode_tok_s": 90.0}}],
                    "card": {"at": "2026-12-01T10:05:00Z", "metric": "decode_tok_s",
                             "numbers": {"before": 100.0, "after": 90.0},
                             "answers": {"layout": "split-half"}},
                    "submissions": [{"at": "2026-12-01T10:04:00Z", "code": {"kind": "exercise", "sha256": "b"},
                                     "passed": true, "checks_passed": true, "lang": "ko",
                                     "measurement": {"metric": "decode_tok_s", "before": [100.0], "after": [90.0]}}],
                    "attempts": [{"at": "2026-12-01T10:01:00Z", "question": "layout", "choice": "split-half",
                                  "predicted": true, "measured": false, "right": true}]
                },
                "attention": {"runs": [], "submissions": []}
            },
            "awards": {"lesson:rope:complete": {"xp": 120, "at": "2026-12-01T10:05:00Z"}}
        });
        let v4 = to_current(v3.clone()).unwrap();
        assert_eq!(v4["schema"], 4);
        let mut unchanged = v4.clone();
        unchanged["schema"] = json!(3);
        assert_eq!(unchanged, v3, "nothing but the number changes");
        let state: crate::progress::State = serde_json::from_value(v4).unwrap();
        assert_eq!(state.total_xp(), 120);
        let rope = state.lesson("rope").unwrap();
        assert!(rope.is_done() && rope.right_first_time());
        assert_eq!(rope.hint_level, 0);
        let bytes = crate::progress::serialize(&state).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("hint_level"));
        assert_eq!(crate::progress::parse(&bytes).unwrap(), state);
    }
}
