//! Every lesson of the course from `list` to a completed card, by one flow: listed in
//! its track, a measured answer refused before anything was measured, run as the lesson
//! gives it, refused by its own rules (snapshots, English and Korean), refused for each
//! wrong edit its row names, passed with its honest edit, every wrong quiz answer and an
//! invented number refused, the card completing the lesson once. The lessons are read
//! from the course, so a new one is held to the same flow; what differs between lessons
//! lives in its row of [`rows`]. Every edit goes to a copy of the course, never to the
//! learner's exercises.
//!
//! Wiring, not speed: one round, few tokens, small shapes, and each lesson's `at_least`
//! dropped from its copy (whether an effect shows is this machine's speed; the gate
//! itself is proven on the sleepy fixture in data_lessons.rs). No answer or number here
//! is copied from what quest printed as its verdict: measured answers are worked out
//! from the rounds quest recorded or the report the exercise wrote.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use quest::course::spec::{Answer, MeasuredAnswer, TokenCheck};
use quest::course::{sha256_hex, Course, Lang, Lesson};
use quest::progress::{CodeKind, State};
use serde_json::Value;

use crate::common::{
    card_numbers, course_copy, home, learners_own, progress, recorded_improvement, shows, text,
};

/// Where a values exercise's instrumented copy writes its report for the test.
const REPORT_COPY: &str = "QUEST_TEST_REPORT_COPY";

/// The lesson's starting code and its solution, that a row's edits start from.
struct Sources {
    starting: String,
    solution: String,
}

/// An edit the lesson refuses, and what the refusal says.
struct Refusal {
    /// What the edit does, for a failure's message.
    what: &'static str,
    edit: fn(&Sources) -> String,
    /// `run` (the exercise built and run) or `submit`.
    command: &'static str,
    stdout: &'static [&'static str],
    stderr: &'static [&'static str],
    /// A snapshot of what it printed; `masked`: its numbers are this machine's.
    snapshot: Option<&'static str>,
    masked: bool,
}

/// What differs from lesson to lesson; everything else is the flow's.
struct Row {
    id: &'static str,
    /// Given to every `run` and `submit`: fewer tokens, smaller shapes.
    args: &'static [&'static str],
    /// The starting code's first `quest run`, where it shows what it shows with less.
    run_args: Option<&'static [&'static str]>,
    /// Environment for quest (and so for the exercise).
    env: &'static [(&'static str, &'static str)],
    /// The edit the lesson asks for, from its sources.
    honest: fn(&Sources) -> String,
    refusals: &'static [Refusal],
    /// The answers that are the same on every machine (`question=choice`).
    answers: &'static [&'static str],
    /// More checks of the first run's output, and of the passing submission's (with the
    /// progress file after it).
    check_run: fn(&str),
    check_passed: fn(&str, &State),
    /// For a lesson with `values:`: the values its measured answers compare, worked out
    /// here from the report the exercise wrote (its inputs and its own values).
    values: fn(&Value) -> BTreeMap<String, f64>,
    /// Anything more, once the lesson is complete.
    after: fn(&Quest),
}

impl Row {
    fn of(id: &'static str) -> Row {
        Row {
            id,
            args: &[],
            run_args: None,
            env: &[],
            honest: |s| s.solution.clone(),
            refusals: &[],
            answers: &[],
            check_run: |_| {},
            check_passed: |_, _| {},
            values: |_| BTreeMap::new(),
            after: |_| {},
        }
    }
}

/// A piece of the model's passing submission: every step's logits within the inside
/// track's 1e-3 of quest's, and no near tie on the CPU (float32).
fn logits_within_tolerance(stdout: &str, _: &State) {
    assert!(
        stdout.contains("every logit within 1e-3 of quest's (largest")
            && !stdout.contains("a near tie"),
        "{stdout}"
    );
}

/// A decode values lesson's points, from its report: each shape's bytes per token (the
/// exercise's value) and its measured ms per token.
fn decode_points(report: &Value) -> Vec<(f64, f64)> {
    report["inputs"]["points"]
        .as_array()
        .expect("the exercise's inputs hold its points")
        .iter()
        .map(|p| {
            let bytes = format!("bytes_per_token[{}]", p["shape"]["name"].as_str().unwrap());
            (
                number(&report["values"][&bytes]),
                number(&p["ms_per_token"]),
            )
        })
        .collect()
}

/// What `submit` says where the piece check found a shape wrong.
const PIECE_WRONG: &str = "Your piece does not compute what quest's does on every shape yet";

/// What `submit` says where there is no piece of the learner's to check: never handed to
/// the model, still `todo!()`, or quest's own running in its place on every shape.
const PIECE_MISSING: &str = "There is no piece of yours in the model to judge yet";

/// What `submit` says to the solution copied over the exercise as it is: the one refusal
/// whose edit is the solution itself.
const COPIED_SOLUTION: &str = "This is the lesson's solution";

/// rms-norm's solution with its result computed by MLX's norm layer, built by a struct
/// literal of `layer` (a path to `mlx_rs::nn::RmsNorm`, or a name for it) and its trait
/// method.
fn fused_norm_by(s: &Sources, layer: &str) -> String {
    s.solution.replace(
        "Ok(normed.multiply(weight)?)",
        &format!(
            "let _ = normed;\n        \
             let mut layer = {layer} {{ weight: mlx_rs::module::Param::new(weight.clone()), eps }};\n        \
             Ok(mlx_rs::module::Module::forward(&mut layer, &x)?)"
        ),
    )
}

/// Eight tokens: enough for every token check, a fraction of the lesson's 32.
const FEW_TOKENS: &[&str] = &["--max-tokens", "8"];

/// The rows, one per lesson.
fn rows() -> Vec<Row> {
    vec![
        // A model of Qwen3.5-0.8B's shape, made anew in every process: among the slowest.
        Row {
            args: FEW_TOKENS,
            // S k and S q as matrix products: another order of the same sums (1.5e-5 from
            // quest's, measured in docs/lessons/linear-attention/2026-12-03-cpu/).
            honest: |s| {
                s.solution
                    .replace(
                        "            let recalled = state.multiply(&k_row)?.sum_axis(-1, None)?; // S k: [B, H, Dv]",
                        "            let recalled = matmul(&state, k_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?;",
                    )
                    .replace(
                        "            let y = state.multiply(q_t.expand_dims(-2)?)?.sum_axis(-1, None)?; // S q",
                        "            let y = matmul(&state, q_t.expand_dims(-1)?)?.squeeze_axes(&[-1])?;",
                    )
                    .replace("{broadcast_to, stack}", "{broadcast_to, matmul, stack}")
            },
            refusals: &[
                Refusal {
                    what: "the query reading the state before the token is written",
                    edit: |s| {
                        s.solution
                            .replace(
                                "            state = state.multiply(&g_t)?;\n",
                                "            let read = state.multiply(q_t.expand_dims(-2)?)?.sum_axis(-1, None)?;\n            state = state.multiply(&g_t)?;\n",
                            )
                            .replace(
                                "            ys.push(y.as_dtype(queries.dtype())?);",
                                "            let _ = y;\n            ys.push(read.as_dtype(queries.dtype())?);",
                            )
                    },
                    command: "submit",
                    stdout: &["· float32: differs from quest's by", "0 of 6 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("linear_attention_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "quest's own recurrence called from yours",
                    edit: |s| {
                        s.solution.replace(
                            "        let shape = queries.shape();",
                            "        return quest::lm::QuestPieces.gated_delta(queries, keys, values, g, beta, state);\n        #[allow(unreachable_code)]\n        let shape = queries.shape();",
                        )
                    },
                    command: "submit",
                    stdout: &["hands the work to another recurrence"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["state-bytes=1-mib", "at-4096=same"],
            check_passed: logits_within_tolerance,
            ..Row::of("linear-attention")
        },
        Row {
            // The smallest full-attention shape beside the smallest hybrid.
            args: &["--model", "SmolLM2-135M,Qwen3.5-0.8B", "--max-tokens", "2"],
            // The starting code's values are wrong on any shape: its run needs no hybrid,
            // whose random weights take most of a run (40 s of 55 on 2 vCPUs).
            run_args: Some(&["--model", "SmolLM2-135M", "--max-tokens", "2"]),
            env: &[("QUEST_CONTEXTS", "8,64")],
            refusals: &[Refusal {
                what: "every layer counted as full attention",
                edit: |s| {
                    s.solution.replace(
                        "shape.num_hidden_layers / shape.full_attention_interval",
                        "shape.num_hidden_layers",
                    )
                },
                command: "submit",
                stdout: &["✗"],
                stderr: &["Some values differ"],
                snapshot: Some("context_slope_values_refused"),
                masked: true,
            }],
            answers: &["pays-slope=attention"],
            // The full-attention shape's slope through its measured points, against the
            // one its KV bytes predict (the exercise's own value).
            values: |report| {
                let full = report["inputs"]["shapes"]
                    .as_array()
                    .expect("the exercise's inputs hold its shapes")
                    .iter()
                    .find(|s| s["config"]["full_attention_interval"].as_u64().unwrap_or(1) <= 1)
                    .expect("a full-attention shape among those measured");
                let points: Vec<(f64, f64)> = full["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| (number(&p[0]), number(&p[1])))
                    .collect();
                let predicted = format!(
                    "predicted_ms_per_1k[{}]",
                    full["shape"]["name"].as_str().unwrap()
                );
                BTreeMap::from([
                    (
                        "full_measured_ms_per_1k".to_owned(),
                        least_squares(&points).1 * 1000.0,
                    ),
                    (
                        "full_predicted_ms_per_1k".to_owned(),
                        number(&report["values"][&predicted]),
                    ),
                ])
            },
            ..Row::of("context-slope")
        },
        Row {
            args: &["--model", "SmolLM2-135M,SmolLM2-360M", "--max-tokens", "3"],
            refusals: &[Refusal {
                what: "the solution forgetting the output head",
                edit: |s| {
                    s.solution.replace(
                        "layers * layer_matrices + head",
                        "layers * layer_matrices",
                    )
                },
                command: "submit",
                stdout: &["✗"],
                stderr: &["Some values differ"],
                snapshot: Some("decode_ceiling_values_refused"),
                masked: true,
            }],
            answers: &["ceiling-is=bound"],
            // The line through (bytes, ms per token): its intercept against the largest
            // shape's bytes times its slope.
            values: |report| {
                let line = decode_points(report);
                let (intercept, slope) = least_squares(&line);
                let largest = line.iter().map(|p| p.0).fold(0.0, f64::max);
                // The ceiling's two terms on that shape, from the measured rates.
                let name = report["inputs"]["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["shape"]["name"].as_str().unwrap())
                    .find(|n| number(&report["values"][&format!("bytes_per_token[{n}]")]) == largest)
                    .unwrap();
                let ops = number(&report["values"][&format!("ops_per_token[{name}]")]);
                let inputs = &report["inputs"];
                BTreeMap::from([
                    ("fixed_term_ms".to_owned(), intercept),
                    ("bytes_term_ms".to_owned(), largest * slope),
                    (
                        "ceiling_bytes_ms".to_owned(),
                        largest / (number(&inputs["bandwidth_gb_s"]) * 1e6),
                    ),
                    (
                        "ceiling_operations_ms".to_owned(),
                        ops / (number(&inputs["compute_gmac_s"]) * 1e6),
                    ),
                ])
            },
            ..Row::of("decode-ceiling")
        },
        Row {
            args: &["--model", "SmolLM2-135M,SmolLM2-360M", "--max-tokens", "3"],
            // The knee as the fixed term times the fitted bandwidth: the same number.
            honest: |s| {
                s.solution.replace(
                    "let knee_mb = fixed_ms / ms_per_byte / 1e6;",
                    "let gb_s = 1e-6 / ms_per_byte;\n    let knee_mb = fixed_ms * gb_s;",
                )
            },
            refusals: &[Refusal {
                what: "the knee in bytes, not MB",
                edit: |s| {
                    s.solution.replace(
                        "let knee_mb = fixed_ms / ms_per_byte / 1e6;",
                        "let knee_mb = fixed_ms / ms_per_byte;",
                    )
                },
                command: "submit",
                stdout: &["✗ knee_mb"],
                stderr: &["Some values differ"],
                snapshot: None,
                masked: false,
            }],
            answers: &["knee-h200=beyond-8b", "halve-bytes=about-the-same"],
            // The line through (bytes, ms per token): its intercept against the smallest
            // shape's bytes times its slope.
            values: |report| {
                let line = decode_points(report);
                let (intercept, slope) = least_squares(&line);
                let smallest = line.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
                BTreeMap::from([
                    ("smallest_fixed_term_ms".to_owned(), intercept),
                    ("smallest_bytes_term_ms".to_owned(), smallest * slope),
                ])
            },
            ..Row::of("host-or-device")
        },
        Row {
            args: FEW_TOKENS,
            refusals: &[
            Refusal {
                what: "4 bits in groups of 64, from a file already 4-bit: the answer is lost",
                edit: |s| requantized(&s.starting, "lm::Layout::q4(64)?"),
                command: "submit",
                stdout: &["differ from the reference from token 0"],
                // The lesson's own reason.
                stderr: &["groups of 64"],
                snapshot: None,
                masked: false,
            },
            Refusal {
                what: "Layout::Dense: on a CPU the model already loads dense, so nothing is read in fewer bytes",
                edit: |s| requantized(&s.starting, "lm::Layout::Dense"),
                command: "submit",
                // Measured beside the starting code, then refused for reading no fewer bytes.
                stdout: &["the model is not held in fewer bytes"],
                stderr: &["did not make the change the lesson measures"],
                snapshot: None,
                masked: false,
            }],
            answers: &["where=streaming"],
            check_run: |stdout| {
                if quest::device::Backend::detect() == quest::device::Backend::Cpu {
                    assert!(
                        stdout.contains("dense-f32 weights, 538 MB/token"),
                        "{stdout}"
                    );
                }
            },
            check_passed: |stdout, _| {
                let bytes_line = stdout
                    .lines()
                    .find(|l| l.contains("weights read per token (MB)"))
                    .unwrap_or_else(|| panic!("no bytes line: {stdout}"));
                if quest::device::Backend::detect() == quest::device::Backend::Cpu {
                    assert!(bytes_line.contains("538.06 → 101.00 MB"), "{bytes_line}");
                }
            },
            ..Row::of("bits-per-weight")
        },
        Row {
            args: FEW_TOKENS,
            // The source's own edit: the tokens kept on the device in one MLX array, read
            // once after the loop (without_sync keeps one array a token, as the solution).
            honest: |s| in_one_array(&s.starting),
            refusals: &[
                Refusal {
                    what: "a blocking eval in the loop, renamed on import",
                    edit: |s| {
                        format!(
                            "use mlx_rs::transforms::eval as force;\n{}",
                            without_sync(&s.starting)
                                .replace("mlx_rs::transforms::async_eval([&y])?;", "force([&y])?;")
                        )
                    },
                    command: "submit",
                    stdout: &["`eval` inside the decode loop makes the host wait"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "no sync, but the loop stops one token short",
                    edit: |s| {
                        without_sync(&s.starting).replace(
                            "for _ in 1..run.max_tokens {",
                            "for _ in 2..run.max_tokens {",
                        )
                    },
                    command: "submit",
                    stdout: &["differ from the reference from token 7"],
                    stderr: &[],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "a build error, shown as cargo prints it",
                    edit: |s| {
                        s.starting.replace(
                            "argmax_axis(lm::last_position(&logits), -1, None)?;",
                            "argmax_axis(;",
                        )
                    },
                    command: "run",
                    stdout: &[],
                    stderr: &["error", "did not build"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["term=fixed"],
            check_run: |stdout| {
                let results = &stdout[stdout.find("Output:").expect(stdout)..];
                assert!(
                    results.contains(" weights, ") && results.contains(" MB/token)"),
                    "the run says which weight layout ran and its bytes per token: {results}"
                );
                assert_snapshot_redacted("run_mlx_path", results);
            },
            after: |quest| {
                // The same run in Korean: the lesson, the UI and the numbers.
                let out = quest.ko(&["run", "mlx-path", "--max-tokens", "4"]);
                let (stdout, stderr) = text(&out);
                assert!(out.status.success(), "{stderr}");
                assert!(stdout.starts_with("MLX 경로"), "{stdout}");
                assert!(
                    stdout.contains("첫 토큰까지") && stdout.contains("tok/s"),
                    "{stdout}"
                );
                // The solution with its first token handed over after the loop, beside the
                // others: quest times the decode from the first step asked for, so the
                // hold is in the time to first token, and named.
                let solution =
                    std::fs::read_to_string(quest.root.join("solutions/mlx-path/decode_loop.rs"))
                        .unwrap();
                let first = "        timer.first_token(first);\n";
                let done = "        timer.done();\n";
                assert!(solution.contains(first) && solution.contains(done));
                let held = solution
                    .replace(first, "")
                    .replace(done, &format!("{first}{done}"));
                std::fs::write(quest.root.join("exercises/mlx-path/decode_loop.rs"), held)
                    .unwrap();
                let out = quest.en(&["run", "mlx-path", "--no-lesson", "--max-tokens", "8"]);
                let (stdout, stderr) = text(&out);
                assert!(out.status.success(), "{stdout}{stderr}");
                assert!(
                    stdout.contains("when 7 decode steps had already been asked for")
                        && stdout.contains("it was held back"),
                    "{stdout}"
                );
            },
            ..Row::of("mlx-path")
        },
        Row {
            args: FEW_TOKENS,
            refusals: &[
                Refusal {
                    what: "four rows, but one forward per row inside each step",
                    edit: |s| {
                        s.starting
                            .replace(
                                "let prompts = lm::tokens_array(&prompt_ids);",
                                "let prompts = mlx_rs::ops::broadcast_to(lm::tokens_array(&prompt_ids), &[4, prompt_ids.len() as i32])?;",
                            )
                            .replace(
                                "let logits = model.forward(&y.reshape(&[batch, 1])?, &mut cache)?;",
                                "let mut parts = Vec::new();\n        for row in 0..batch {\n            parts.push(model.forward(&y.index(row..row + 1).reshape(&[1, 1])?, &mut cache)?);\n        }\n        let logits = mlx_rs::ops::concatenate(&parts, 0)?;",
                            )
                    },
                    command: "submit",
                    stdout: &[],
                    stderr: &["fix those lines"],
                    snapshot: Some("batch_per_row_refused"),
                    masked: false,
                },
                Refusal {
                    what: "a batch of two: it keeps the rules, but the lesson asks for four",
                    edit: |s| {
                        s.solution.replace(
                            "&[4, prompt_ids.len() as i32]",
                            "&[2, prompt_ids.len() as i32]",
                        )
                    },
                    command: "submit",
                    stdout: &[
                        "Your run decoded 2 sequence(s) at once; this lesson asks for a batch of 4",
                    ],
                    stderr: &[],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["reads=weights-once"],
            check_passed: |stdout, state| {
                assert!(stdout.contains("decode tok/s per sequence"), "{stdout}");
                let recorded = state.lessons["batch"]
                    .runs
                    .iter()
                    .any(|run| run.metrics.contains_key("per_seq_tok_s"));
                assert!(recorded, "no run recorded per_seq_tok_s");
            },
            ..Row::of("batch")
        },
        Row {
            args: FEW_TOKENS,
            // One token a step, made another way than the solution's `y.reshape(&[1, 1])`:
            // the model is fed one position either way.
            honest: |s| {
                s.solution.replace(
                    "let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;",
                    "let last = *tokens.last().unwrap();\n        let logits = model.forward(&lm::tokens_array(&[last]), &mut cache)?;",
                )
            },
            refusals: &[Refusal {
                what: "the cache made once, but every step feeds the whole sequence again",
                edit: |s| {
                    s.solution.replace(
                        "let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;",
                        "let mut ids = prompt_ids.clone();\n        ids.extend(&tokens);\n        let logits = model.forward(&lm::tokens_array(&ids), &mut cache)?;",
                    )
                },
                command: "submit",
                stdout: &["Decode step 1 fed `forward`", "positions"],
                stderr: &["what it fed the model"],
                snapshot: None,
                masked: false,
            }],
            answers: &["trade=memory", "grows=positions"],
            ..Row::of("kv-cache")
        },
        Row {
            args: FEW_TOKENS,
            // A cache that concatenates every step and never preallocates: slower at long
            // contexts, and right, so allowed (and measured).
            honest: |s| {
                s.solution.replace(
                    "        let mut k = grown(self.keys.as_ref(), previous, needed, keys)?;\n        let mut v = grown(self.values.as_ref(), previous, needed, values)?;\n        k.try_index_mut((.., .., previous..needed, ..), keys)?;\n        v.try_index_mut((.., .., previous..needed, ..), values)?;",
                    "        let join = |held: Option<&Array>, new: &Array| -> Result<Array> {\n            Ok(match held {\n                Some(h) => concatenate(&[h.index((.., .., ..previous, ..)), new.clone()], 2)?,\n                None => new.clone(),\n            })\n        };\n        let (k, v) = (join(self.keys.as_ref(), keys)?, join(self.values.as_ref(), values)?);\n        let _ = grown;",
                )
            },
            refusals: &[
                Refusal {
                    what: "a trim that leaves the offset where it was: the dropped positions come back",
                    edit: |s| {
                        s.solution.replace(
                            "        self.offset -= n;\n        n",
                            "        n",
                        )
                    },
                    command: "submit",
                    stdout: &["3 of 6 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "an offset one past the positions held",
                    edit: |s| {
                        s.solution.replace(
                            "    fn offset(&self) -> i32 {\n        self.offset\n",
                            "    fn offset(&self) -> i32 {\n        self.offset + 1\n",
                        )
                    },
                    command: "submit",
                    stdout: &["0 of 6 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's own cache through a helper",
                    edit: |s| {
                        s.solution
                            .replace(
                                "#[derive(Clone, Default)]\nstruct MyCache {\n    keys: Option<Array>,\n    values: Option<Array>,\n    offset: i32,\n}",
                                "#[derive(Clone, Default)]\nstruct MyCache {\n    keys: Option<Array>,\n    values: Option<Array>,\n    offset: i32,\n    inner: Helper,\n}\n\n#[derive(Clone, Default)]\nstruct Helper(lm::KvCache);",
                            )
                            .replace(
                                "        let previous = self.offset;\n",
                                "        if keys.ndim() == 4 {\n            let fetched = self.inner.0.update_and_fetch(keys, values)?;\n            self.offset = self.inner.0.offset;\n            return Ok(fetched);\n        }\n        let previous = self.offset;\n",
                            )
                    },
                    command: "submit",
                    stdout: &["quest's own `update_and_fetch` ran inside yours"],
                    stderr: &[PIECE_MISSING],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the cache never handed to the model: `.with_cache(MyCache::default)` deleted",
                    edit: |s| {
                        s.solution
                            .replace("    let model = model.with_cache(MyCache::default);\n", "")
                    },
                    command: "submit",
                    stdout: &["never handed its `update_and_fetch` to the model"],
                    stderr: &[PIECE_MISSING],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["step=copies", "term=bytes"],
            check_passed: logits_within_tolerance,
            ..Row::of("kv-cache-by-hand")
        },
        Row {
            args: FEW_TOKENS,
            // The agreeing guesses counted with a loop of its own, not `take_while`: the
            // same tokens kept.
            honest: |s| {
                s.solution.replace(
                    "        let agreed = proposed\n            .iter()\n            .zip(&picks)\n            .take_while(|(guess, pick)| guess == pick)\n            .count();",
                    "        let mut agreed = 0;\n        while agreed < proposed.len() && proposed[agreed] == picks[agreed] {\n            agreed += 1;\n        }",
                )
            },
            refusals: &[
                Refusal {
                    what: "every guess kept, whatever the model picks",
                    edit: |s| {
                        s.solution.replace(
                            ".take_while(|(guess, pick)| guess == pick)",
                            ".take_while(|_| true)",
                        )
                    },
                    command: "submit",
                    stdout: &["2 of 4 proposals right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the rejected guesses left in the cache",
                    edit: |s| {
                        s.solution.replace(
                            "        lm::trim_prompt_cache(cache, (proposed.len() - agreed) as i32);\n",
                            "",
                        )
                    },
                    command: "submit",
                    stdout: &["proposals right.", "where greedy decoding gives"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "nothing ever proposed: greedy decoding's tokens, one a forward call",
                    edit: |s| {
                        s.solution.replace(
                            "        for n in (1..=MAX_NGRAM).rev() {",
                            "        for n in (1..=MAX_NGRAM).rev().filter(|_| false) {",
                        )
                    },
                    command: "submit",
                    stdout: &["your guesses were never kept"],
                    stderr: &["did not make the change the lesson measures"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "each guess verified in a forward call of its own",
                    edit: |s| {
                        s.solution.replace(
                            "        let mut input = vec![last];\n        input.extend_from_slice(proposed);\n        let logits = model.forward(&lm::tokens_array(&input), cache)?;\n        let picks = argmax_axis(&logits, -1, None)?;\n        let picks: Vec<u32> = picks.as_slice::<u32>().to_vec();",
                            "        let mut picks = Vec::new();\n        let mut input = last;\n        for i in 0..=proposed.len() {\n            let logits = model.forward(&lm::tokens_array(&[input]), cache)?;\n            let pick = argmax_axis(&logits, -1, None)?.as_slice::<u32>()[0];\n            picks.push(pick);\n            if i == proposed.len() || proposed[i] != pick {\n                break;\n            }\n            input = pick;\n        }\n        let proposed = &proposed[..picks.len().min(proposed.len())];\n        let cache_held = picks.len() - 1;\n        let _ = cache_held;",
                        )
                    },
                    command: "submit",
                    stdout: &["your guesses were never kept"],
                    stderr: &["did not make the change the lesson measures"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's baseline called for the verify",
                    edit: |s| {
                        s.solution
                            .replace(
                                "use quest::lm::speculate::Speculator;",
                                "use quest::lm::speculate::{ProposesNothing as Plain, Speculator};",
                            )
                            .replace(
                                "        let mut input = vec![last];\n",
                                "        if proposed.is_empty() {\n            return Plain.verify(model, cache, last, proposed);\n        }\n        let mut input = vec![last];\n",
                            )
                    },
                    command: "submit",
                    stdout: &["not a verify of yours"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["exact=greedy", "term=bytes"],
            ..Row::of("prompt-lookup")
        },
        Row {
            // A learner's keep that takes the rows and keeps every column: right, only
            // wider than it needs to be.
            honest: |s| {
                s.solution.replace(
                    "let drop = rows.iter().map(|&r| batch.padding[r]).min().unwrap_or(0);",
                    "let drop = 0;",
                )
            },
            refusals: &[
                Refusal {
                    what: "the old rows' padding not grown when a longer row joins",
                    edit: |s| {
                        s.solution.replace(
                            "batch.padding.iter().map(|p| p + width - a).collect();",
                            "batch.padding.to_vec();",
                        )
                    },
                    command: "submit",
                    stdout: &["cases right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the rows kept, their paddings left as the batch's first rows' were",
                    edit: |s| {
                        s.solution.replace(
                            "let padding = rows.iter().map(|&r| batch.padding[r] - drop).collect();",
                            "let padding = batch.padding[..rows.len()].iter().map(|p| p - drop).map(|p| p.max(0)).collect();",
                        )
                    },
                    command: "submit",
                    stdout: &["cases right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's static batching called for the loop",
                    edit: |s| {
                        s.solution
                            .replace(
                                "use quest::lm::batching::{Batch, Engine, Requests, Scheduler};",
                                "use quest::lm::batching::{Batch, Engine, Requests, Scheduler, StaticBatches as Plain};",
                            )
                            .replace(
                                "        let mut batch = Batch::empty();\n        while",
                                "        if requests.unfinished() > 0 {\n            return Plain.serve(engine, requests);\n        }\n        let mut batch = Batch::empty();\n        while",
                            )
                    },
                    command: "submit",
                    stdout: &["quest's own scheduler"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the loop ends before every request is finished",
                    edit: |s| {
                        s.solution.replace(
                            "while requests.unfinished() > 0 {",
                            "while requests.unfinished() > 4 {",
                        )
                    },
                    command: "submit",
                    stdout: &[],
                    stderr: &["requests unfinished"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "another first token emitted than the prefill's",
                    edit: |s| {
                        s.solution.replace(
                            "requests.emit(request.id, row.last[0])?",
                            "requests.emit(request.id, row.last[0] ^ 1)?",
                        )
                    },
                    command: "submit",
                    stdout: &[],
                    stderr: &["token"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["exact=greedy", "term=bytes"],
            ..Row::of("continuous-batching")
        },
        Row {
            // A learner's own check of max_tokens: a range, not two comparisons.
            honest: |s| {
                s.solution.replace(
                    "Some(n) if n >= 1 && n <= MAX_TOKENS as u64 => n as usize,",
                    "Some(n) if (1..=MAX_TOKENS as u64).contains(&n) => n as usize,",
                )
            },
            refusals: &[
                Refusal {
                    what: "max_tokens 0 read as a request",
                    edit: |s| s.solution.replace("Some(n) if n >= 1 && n <= MAX_TOKENS as u64", "Some(n) if n <= MAX_TOKENS as u64"),
                    command: "submit",
                    stdout: &["max_tokens 0: read as"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "an event without its blank line",
                    edit: |s| s.solution.replace("format!(\"data: {data}\\n\\n\")", "format!(\"data: {data}\\n\")"),
                    command: "submit",
                    stdout: &["ends with a blank line"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's own edge called for the chunk",
                    edit: |s| {
                        s.solution.replace(
                            "        format!(\"data: {data}\\n\\n\")\n",
                            "        let _ = data;\n        format!(\"data: {}\\n\\n\", quest::lm::serving::chunk_json(chunk))\n",
                        )
                    },
                    command: "submit",
                    stdout: &["quest's own edge"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["bad-request=error-400", "between-tokens=prefill"],
            ..Row::of("your-server")
        },
        Row {
            args: FEW_TOKENS,
            // The chunks walked by index, not by `chunks`: the same calls.
            honest: |s| {
                s.solution.replace(
                    "        for part in prompt.chunks(chunk) {",
                    "        let starts: Vec<usize> = (0..prompt.len()).step_by(chunk).collect();\n        for start in starts {\n            let part = &prompt[start..(start + chunk).min(prompt.len())];",
                )
            },
            refusals: &[
                Refusal {
                    what: "the whole prompt in one call, whatever the chunk",
                    edit: |s| {
                        s.solution
                            .replace("prompt.chunks(chunk)", "prompt.chunks(prompt.len().max(1))")
                    },
                    command: "submit",
                    stdout: &["more than the chunk of 64", "1 of 3 chunk sizes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "each chunk into a fresh cache: the earlier chunks forgotten",
                    edit: |s| {
                        s.solution.replace(
                            "            let logits = model.forward(&lm::tokens_array(part), cache)?;",
                            "            let mut fresh = model.make_cache();\n            let logits = model.forward(&lm::tokens_array(part), &mut fresh)?;\n            cache.clone_from_slice(&fresh);",
                        )
                    },
                    command: "submit",
                    stdout: &["1 of 3 chunk sizes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's peak counter reset inside the prefill",
                    edit: |s| {
                        s.solution.replace(
                            "        let mut last = None;\n",
                            "        let mut last = None;\n        mlx_rs::memory::reset_peak_memory()?;\n",
                        )
                    },
                    command: "submit",
                    stdout: &["MLX's memory counter"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's one-shot prefill called for the prefill",
                    edit: |s| {
                        s.solution
                            .replace(
                                "use quest::lm::prefill::Prefill;",
                                "use quest::lm::prefill::{OneShot, Prefill};",
                            )
                            .replace(
                                "        let mut last = None;\n",
                                "        if prompt.len() < 2 {\n            return OneShot.prefill(model, cache, prompt, chunk);\n        }\n        let mut last = None;\n",
                            )
                    },
                    command: "submit",
                    stdout: &["one-shot prefill: not a prefill of yours"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["holds=logits", "small-chunks=bytes"],
            ..Row::of("chunked-prefill")
        },
        Row {
            // The partials merged one at a time, a running max rescaling the running sums
            // (an online softmax over the blocks), where the solution rescales every
            // partial to the largest max at once.
            honest: |s| {
                let start = s.solution.find("        // The largest score of all").unwrap();
                let end = s.solution.find("        // [B, KV, n, L, D] -> [B, H, L, D].").unwrap();
                let online = "        let mut partials = partials.into_iter();\n        \
                    let first = partials.next().unwrap();\n        \
                    let (mut top, mut out, mut sum) = (first.max, first.out, first.sum);\n        \
                    for p in partials {\n            \
                    let next = maximum(&top, &p.max)?;\n            \
                    let (old, new) = (exp(top.subtract(&next)?)?, exp(p.max.subtract(&next)?)?);\n            \
                    out = out.multiply(&old)?.add(p.out.multiply(&new)?)?;\n            \
                    sum = sum.multiply(&old)?.add(p.sum.multiply(&new)?)?;\n            \
                    top = next;\n        }\n";
                format!("{}{online}{}", &s.solution[..start], &s.solution[end..])
            },
            refusals: &[
                Refusal {
                    what: "each block's own max never rescaled: the blocks added as they are",
                    edit: |s| s.solution.replace("let rescale = exp(p.max.subtract(&top)?)?;", "let rescale = Array::from_f32(1.0);"),
                    command: "submit",
                    stdout: &["of 20 shapes right"],
                    stderr: &[],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the block's keys kept in its partial, attention done over all of them in combine",
                    edit: |s| s.solution.replace("Ok(Partial { out, max, sum })", "Ok(Partial { out: keys.squeeze_axes(&[2])?, max, sum })"),
                    command: "submit",
                    stdout: &["a partial must not grow with its block"],
                    stderr: &[],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's fused attention inside a block",
                    edit: |s| {
                        s.solution.replace(
                            "        let max = scores.max_axis(-1, true)?;",
                            "        let _ = mlx_rs::fast::scaled_dot_product_attention(queries, &keys, &values, scale, None, None)?;\n        let max = scores.max_axis(-1, true)?;",
                        )
                    },
                    command: "submit",
                    stdout: &["MLX's fused attention"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's loop built by hand: the blocks handed to the model directly",
                    edit: |s| {
                        s.solution.replace(
                            "    run.decode_in_blocks(model, &tokenizer, MyBlocks)",
                            "    let model = model.with_pieces(quest::lm::blocks::InBlocks::new(MyBlocks, 100_000));\n    run.decode(&model, &tokenizer)",
                        )
                    },
                    command: "submit",
                    stdout: &["quest's loop around your blocks"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["term=fixed", "why-blocks=parallel"],
            // The piece check reads the peak of one long query both ways.
            check_passed: |stdout, _| {
                assert!(
                    stdout.contains("One decode query over 16384 keys")
                        && stdout.contains("MB through your blocks"),
                    "{stdout}"
                );
            },
            ..Row::of("attention-blocks")
        },
        Row {
            args: FEW_TOKENS,
            // The mean of the squares as a sum over n, then a square root and a division:
            // another order of the same arithmetic (6.2e-5 from quest's at most, measured).
            honest: |s| {
                s.solution
                    .replace(
                        "let squares = x.square()?;",
                        "let n = *x.shape().last().unwrap() as f32;\n        let squares = x.multiply(&x)?;",
                    )
                    .replace(
                        "let mean_square = squares.mean_axis(-1, true)?;",
                        "let mean_square = squares.sum_axis(-1, true)?.divide(Array::from_f32(n))?;",
                    )
                    .replace(
                        "let inverse_rms = mean_square.add(Array::from_f32(eps))?.rsqrt()?;",
                        "let rms = mean_square.add(Array::from_f32(eps))?.sqrt()?;",
                    )
                    .replace(
                        "let normed = x.multiply(&inverse_rms)?;",
                        "let normed = x.divide(&rms)?;",
                    )
            },
            refusals: &[
                Refusal {
                    what: "eps left out: every argmax the same, the logits off by more than the tolerance",
                    edit: |s| {
                        s.solution.replace(
                            "mean_square.add(Array::from_f32(eps))?.rsqrt()?",
                            "{\n            let _ = eps;\n            mean_square.rsqrt()?\n        }",
                        )
                    },
                    command: "submit",
                    // Within the piece check's 1e-4 on its random tensors (eps 1e-5 beside
                    // a mean square near 1), not in the model: layer by layer the first norm
                    // already differs (measured: docs/lessons/rms-norm/2026-12-02-layers/).
                    stdout: &[
                        "7 of 7 shapes right.",
                        "At step 0 (predicting from position",
                        "the lesson allows 1e-3",
                        "the first layer whose output is off is layer 0 of 30",
                    ],
                    // The lesson's own reason.
                    stderr: &["does not compute RMSNorm yet"],
                    snapshot: Some("rms_norm_logits_refused"),
                    masked: true,
                },
                Refusal {
                    what: "the weight left out: the piece check finds it before the model runs",
                    edit: |s| {
                        s.solution.replace(
                            "Ok(normed.multiply(weight)?)",
                            "let _ = weight;\n        Ok(normed)",
                        )
                    },
                    command: "submit",
                    stdout: &["differs from quest's by", "0 of 7 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("rms_norm_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "the squares summed in the input's dtype: float16's large values overflow",
                    edit: |s| {
                        s.solution
                            .replace("let x = x.as_dtype(Dtype::Float32)?;", "let x = x.clone();")
                            .replace("let normed = normed.as_dtype(dtype)?;", "let _ = dtype;")
                    },
                    command: "submit",
                    // Right on the CPU's float32 model and on float16 values under 256.
                    stdout: &["values to ±1000: differs from quest's by", "6 of 7 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the norm never handed to the model: `.with_pieces(MyNorm)` deleted",
                    edit: |s| {
                        s.solution
                            .replace("    let model = model.with_pieces(MyNorm);\n", "")
                    },
                    command: "submit",
                    stdout: &["never handed its `rms_norm` to the model"],
                    stderr: &[PIECE_MISSING],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the norm handed to one model, the tokens decoded by another",
                    edit: |s| {
                        s.solution.replace(
                            "    let model = model.with_pieces(MyNorm);\n",
                            "    let _yours = model.with_pieces(MyNorm);\n    let (model, _) = lm::load(&run.model)?;\n",
                        )
                    },
                    command: "submit",
                    stdout: &["The model never called your `rms_norm` in this run"],
                    stderr: &[],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's fused norm through its `_device` variant",
                    edit: |s| {
                        s.solution.replace(
                            "Ok(normed.multiply(weight)?)",
                            "let _ = normed;\n        Ok(mlx_rs::fast::rms_norm_device(&x, weight, eps, mlx_rs::Stream::new())?)",
                        )
                    },
                    command: "submit",
                    stdout: &["`rms_norm_device` is MLX's fused norm"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's fused norm, renamed on import",
                    edit: |s| {
                        format!(
                            "use mlx_rs::fast::rms_norm as norm;\n{}",
                            s.solution.replace(
                                "Ok(normed.multiply(weight)?)",
                                "let _ = normed;\n        Ok(norm(&x, Some(weight), eps)?)",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["MLX's fused norm"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's layer by a struct literal: `nn::RmsNorm { weight, eps }.forward(x)`",
                    edit: |s| fused_norm_by(s, "mlx_rs::nn::RmsNorm"),
                    command: "submit",
                    // A type's path in a literal counts as a call of it.
                    stdout: &["MLX's fused norm"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the same, run: its graph names MLX's norm on every shape",
                    edit: |s| fused_norm_by(s, "mlx_rs::nn::RmsNorm"),
                    command: "run",
                    stdout: &["MLX's fused `RMSNorm` computed your output", "0 of 7 shapes right."],
                    stderr: &["Nothing was run"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's layer through a type alias no rule reads: the graph names it",
                    edit: |s| {
                        format!(
                            "type Layer = mlx_rs::nn::RmsNorm;\n{}",
                            fused_norm_by(s, "Layer")
                        )
                    },
                    command: "submit",
                    stdout: &["Your code keeps every rule of the lesson.", "MLX's fused `RMSNorm` computed your output"],
                    stderr: &["MLX's own op computed your piece"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "yours on the check's seven calls, MLX's layer after: the model's own graphs name it",
                    edit: |s| {
                        let fused = fused_norm_by(s, "Layer");
                        format!(
                            "type Layer = mlx_rs::nn::RmsNorm;\nstatic CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);\n{}",
                            fused.replace(
                                "        let _ = normed;\n",
                                "        if CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 7 {\n            return Ok(normed.multiply(weight)?);\n        }\n",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["7 of 7 shapes right.", "In the model's run, MLX's fused `RMSNorm` computed"],
                    stderr: &[],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's C API under mlx-rs: `mlx_sys::mlx_fast_rms_norm`",
                    edit: |s| {
                        s.solution.replace(
                            "Ok(normed.multiply(weight)?)",
                            "let _ = normed;\n        let mut res = unsafe { mlx_sys::mlx_array_new() };\n        \
                             let stream = mlx_rs::Stream::new();\n        \
                             unsafe { mlx_sys::mlx_fast_rms_norm(&mut res, x.as_ptr(), weight.as_ptr(), eps, stream.as_ptr()) };\n        \
                             Ok(unsafe { Array::from_ptr(res) })",
                        )
                    },
                    command: "submit",
                    stdout: &["`unsafe` is not allowed in an exercise"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the same, run: the compiler refuses it (no mlx-sys in the exercise's package)",
                    edit: |s| {
                        s.solution.replace(
                            "Ok(normed.multiply(weight)?)",
                            "let _ = normed;\n        let mut res = unsafe { mlx_sys::mlx_array_new() };\n        \
                             let stream = mlx_rs::Stream::new();\n        \
                             unsafe { mlx_sys::mlx_fast_rms_norm(&mut res, x.as_ptr(), weight.as_ptr(), eps, stream.as_ptr()) };\n        \
                             Ok(unsafe { Array::from_ptr(res) })",
                        )
                    },
                    command: "run",
                    stdout: &[],
                    stderr: &["mlx_sys"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["term=fixed"],
            check_passed: logits_within_tolerance,
            ..Row::of("rms-norm")
        },
        Row {
            args: FEW_TOKENS,
            // The angles through `power(base, -2i/dims)`: another order of the same
            // arithmetic (7.8e-5 from quest's at most, measured).
            honest: |s| {
                s.solution
                    .replace(
                        "let freq = pair.multiply(Array::from_f32(base.ln()))?.exp()?;",
                        "let freq = power(Array::from_f32(base), &pair)?;",
                    )
                    .replace("cos, sin, split_at_indices", "cos, power, sin, split_at_indices")
            },
            refusals: &[
                Refusal {
                    what: "the other layout: neighbours paired where the model pairs halves",
                    edit: |s| s.solution.replace("if traditional {", "if !traditional {"),
                    command: "submit",
                    // The piece check rotates both layouts: every row wrong.
                    stdout: &["· split-half · base", "differs from quest's by", "0 of 12 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("rope_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "positions restarting at 0 every call: the prompt right, decode wrong",
                    edit: |s| {
                        s.solution.replace(
                            "arange::<_, f32>(offset, offset + l, None)",
                            "arange::<_, f32>(0, l, None)",
                        )
                    },
                    command: "submit",
                    // The piece check's rows at offset 0 are right, the others wrong.
                    stdout: &["· offset 0 · float32: largest difference", "differs from quest's by"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "every position one further on: the model's logits barely see it (RoPE is relative), the piece check does",
                    edit: |s| {
                        s.solution.replace(
                            "arange::<_, f32>(offset, offset + l, None)",
                            "arange::<_, f32>(offset + 1, offset + 1 + l, None)",
                        )
                    },
                    command: "submit",
                    stdout: &["differs from quest's by", "0 of 12 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "an empty `impl Pieces for MyRope {}`, the learner's `rope` moved to an inherent impl: quest's own ran",
                    edit: |s| {
                        s.solution
                            .replace("impl Pieces for MyRope {", "impl Pieces for MyRope {}\n\n#[allow(dead_code)]\nimpl MyRope {")
                    },
                    command: "submit",
                    stdout: &["every shape: quest's own `rope` ran inside yours", "0 of 12 shapes right."],
                    stderr: &[PIECE_MISSING],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the solution copied as it is",
                    edit: |s| s.solution.clone(),
                    command: "submit",
                    stdout: &["Your code keeps every rule of the lesson."],
                    stderr: &[COPIED_SOLUTION],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's fused RoPE, renamed on import",
                    edit: |s| {
                        format!(
                            "use mlx_rs::fast::rope as turn;\n{}",
                            s.solution.replace(
                                "        let shape = x.shape().to_vec();",
                                "        return Ok(turn(x, dims, traditional, base, 1.0, offset, None)?);\n        #[allow(unreachable_code)]\n        let shape = x.shape().to_vec();",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["MLX's fused RoPE"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["layout=split-half", "restart=step-1"],
            check_passed: logits_within_tolerance,
            ..Row::of("rope")
        },
        Row {
            args: FEW_TOKENS,
            // The Gumbel-max trick by hand: the same distribution, other tokens from the
            // same key (docs/lessons/sampling/2026-12-03-cpu/draws.txt).
            honest: |s| {
                s.solution.replace(
                    "        Ok(categorical(&z, -1, ShapeOrCount::Count(draws), key)?)",
                    "        let noise = mlx_rs::random::gumbel::<f32>(&[rows, draws, vocab][..], key)?;\n        \
                     Ok(argmax_axis(&z.expand_dims(1)?.add(&noise)?, -1, false)?)",
                )
            },
            refusals: &[
                Refusal {
                    what: "top-p forgotten: the tokens past the nucleus drawn",
                    edit: |s| {
                        s.solution
                            .replace("if sampling.top_p < 1.0 {", "if false && sampling.top_p < 1.0 {")
                    },
                    command: "submit",
                    // The rows with top-p below 1 draw tokens past the nucleus.
                    stdout: &["· top-p 0.5 · min-p 0 · top-k 0 · 2000 draws:", "of the draws differ from quest's with the same key", "5 of 6 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("sampling_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "min-p forgotten: the tokens under its floor drawn",
                    edit: |s| {
                        s.solution
                            .replace("if sampling.min_p > 0.0 {", "if false && sampling.min_p > 0.0 {")
                    },
                    command: "submit",
                    stdout: &["· min-p 0.2 · top-k 0 · 2000 draws: ", "of the draws differ from quest's with the same key"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the other order, the temperature first: the filters read tempered probabilities",
                    edit: |s| {
                        s.solution.replace(
                            "let mut logprobs = logits.subtract(logsumexp_axis(logits, -1, true)?)?;",
                            "let tempered = logits.multiply(Array::from_f32(1.0 / sampling.temperature))?;\n        \
                             let mut logprobs = tempered.subtract(logsumexp_axis(&tempered, -1, true)?)?;",
                        )
                    },
                    command: "submit",
                    // Below temperature 1 top-p and min-p keep fewer tokens, above it more.
                    stdout: &["· top-p 0.9 · min-p 0.05 · top-k 12 · 2000 draws:", "of 6 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "drawn from MLX's global random state, not the key",
                    edit: |s| {
                        s.solution.replace(
                            "categorical(&z, -1, ShapeOrCount::Count(draws), key)",
                            "categorical(&z, -1, ShapeOrCount::Count(draws), None)",
                        )
                    },
                    command: "submit",
                    // The piece check compares the tokens drawn, not which draw drew them:
                    // the draws from the same seed differ run to run.
                    stdout: &["6 of 6 shapes right.", "The same seed drew other tokens from token"],
                    stderr: &["draw with the `key` it is given"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's own sampler, renamed on import",
                    edit: |s| {
                        format!(
                            "use quest::lm::QuestSampler as Theirs;\n{}",
                            s.solution.replace(
                                "        let (rows, vocab) = (logits.shape()[0], logits.shape()[1]);",
                                "        return Theirs.sample(logits, sampling, draws, key);\n        \
                                 #[allow(unreachable_code)]\n        \
                                 let (rows, vocab) = (logits.shape()[0], logits.shape()[1]);",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["quest's own sampler"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["at-most=20", "same-seed=same", "same-tokens=same-draw"],
            check_passed: |stdout, _| {
                assert!(stdout.contains("Your draws are"), "{stdout}");
                assert!(stdout.contains("The same seed, the same 8 tokens."), "{stdout}");
            },
            ..Row::of("sampling")
        },
        Row {
            args: FEW_TOKENS,
            // An additive mask (0 or −∞ added to the scores) and the softmax written out,
            // exp(scores − max) over its sum: another order of the same arithmetic (8.8e-5
            // from quest's at most for the softmax, measured in
            // docs/lessons/attention/2026-12-03-softmax/).
            honest: |s| {
                s.solution
                    .replace(
                        "                select(le(&key, &query)?, &scores, hidden)?",
                        "                let zero = Array::from_f32(0.0);\n                scores.add(select(le(&key, &query)?, zero, hidden)?)?",
                    )
                    .replace(
                        "        let weights = softmax_axis(&scores, -1, true)?.as_dtype(values.dtype())?;",
                        "        let shifted = scores.subtract(scores.max_axis(-1, true)?)?.exp()?;\n        let weights = shifted.divide(shifted.sum_axis(-1, true)?)?.as_dtype(values.dtype())?;",
                    )
                    .replace(", softmax_axis}", "}")
            },
            refusals: &[
                Refusal {
                    what: "the mask one key late: every argmax but one the same",
                    edit: |s| {
                        s.solution
                            .replace("arange::<_, i32>(s - l, s, None)", "arange::<_, i32>(s - l + 1, s + 1, None)")
                    },
                    command: "submit",
                    // The unmasked rows are right, the causal ones wrong.
                    stdout: &[
                        "· no mask · float32: largest difference",
                        "· causal · float32: differs from quest's by",
                        "6 of 14 shapes right.",
                    ],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("attention_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "key heads tiled, not grouped: query head h reads key head h mod 3",
                    edit: |s| {
                        s.solution
                            .replace(
                                "queries.reshape(&[b, kv_heads, heads / kv_heads, l, d])",
                                "queries.reshape(&[b, heads / kv_heads, kv_heads, l, d])",
                            )
                            .replace(
                                "(keys.expand_dims(2)?, values.expand_dims(2)?)",
                                "(keys.expand_dims(1)?, values.expand_dims(1)?)",
                            )
                    },
                    command: "submit",
                    // Right where every query head has its own key head, or one serves all.
                    stdout: &["k, v [1, 3, 12, 64] · no mask · float32: differs from quest's by"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's own pieces asked for from inside: `QUEST_PIECES` set in `main`",
                    edit: |s| {
                        s.starting.replace(
                            "    let run = Exercise::from_env()?;",
                            "    std::env::set_var(\"QUEST_PIECES\", \"quest\");\n    let run = Exercise::from_env()?;",
                        )
                    },
                    command: "submit",
                    // Refused by the rules every exercise keeps; and were it not, quest
                    // chooses the pieces on its line, never through the environment
                    // (data_lessons.rs: `the_environment_does_not_choose_the_pieces`).
                    stdout: &["`std::env::set_var` is not allowed in an exercise"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's fused attention, renamed on import",
                    edit: |s| {
                        format!(
                            "use mlx_rs::fast::scaled_dot_product_attention as sdpa;\n{}",
                            s.solution.replace(
                                "        let weights = softmax_axis(&scores, -1, true)?.as_dtype(values.dtype())?;",
                                "        let _ = scores;\n        let weights = sdpa(queries, &keys, &values, scale, None, None)?;\n        return Ok(weights);\n        #[allow(unreachable_code)]\n        let weights = softmax_axis(&scores, -1, true)?;",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["MLX's fused attention"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["mask-step=step-0", "term=bytes"],
            check_passed: logits_within_tolerance,
            ..Row::of("attention")
        },
        Row {
            args: FEW_TOKENS,
            // silu as gate / (1 + e^-gate), where the solution multiplies the gate by its
            // sigmoid: another order of the same arithmetic (6.9e-5 from quest's at most,
            // measured: docs/lessons/mlp/2026-12-03-gate-ops/).
            honest: |s| {
                s.solution.replace(
                    "        let sigmoid = one.divide(one.add(&decay)?)?;\n        let silu = gate.multiply(&sigmoid)?;",
                    "        let silu = gate.divide(one.add(&decay)?)?;",
                )
            },
            refusals: &[
                Refusal {
                    what: "silu's x forgotten: sigmoid(gate) · up",
                    edit: |s| s.solution.replace("let silu = gate.multiply(&sigmoid)?;", "let silu = sigmoid;"),
                    command: "submit",
                    stdout: &["differs from quest's by", "0 of 8 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("mlp_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "gate and up swapped: silu(up) · gate",
                    edit: |s| {
                        s.solution.replace(
                            "let gate = layers.gate_proj(x)?;\n        let up = layers.up_proj(x)?;",
                            "let gate = layers.up_proj(x)?;\n        let up = layers.gate_proj(x)?;",
                        )
                    },
                    command: "submit",
                    stdout: &["differs from quest's by", "0 of 8 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the constant left in float32: a float16 MLP comes back float32",
                    edit: |s| {
                        s.solution.replace(
                            "let one = Array::from_f32(1.0).as_dtype(dtype)?;",
                            "let one = Array::from_f32(1.0);\n        let _ = dtype;",
                        )
                    },
                    command: "submit",
                    // Right in float32, where the model runs on the CPU; the piece check's
                    // float16 rows say the dtype.
                    stdout: &["4 of 8 shapes right.", "keep the input's dtype"],
                    stderr: &[PIECE_WRONG],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "mlx-rs's silu hidden in a macro of the file's own",
                    edit: |s| {
                        format!(
                            "macro_rules! gated {{\n    ($g:expr) => {{\n        mlx_rs::nn::silu($g)\n    }};\n}}\n{}",
                            s.solution.replace("let silu = gate.multiply(&sigmoid)?;", "let silu = gated!(&gate)?;")
                        )
                    },
                    command: "submit",
                    stdout: &["`macro_rules!` is not allowed in an exercise"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "mlx-rs's silu, renamed on import",
                    edit: |s| {
                        format!(
                            "use mlx_rs::nn::silu as act;\n{}",
                            s.solution.replace("let silu = gate.multiply(&sigmoid)?;", "let silu = act(&gate)?;")
                        )
                    },
                    command: "submit",
                    stdout: &["its SiLU among them"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's own gate, renamed on import",
                    edit: |s| {
                        format!(
                            "use quest::lm::models::activations::swiglu as fused;\n{}",
                            s.solution.replace("let hidden = silu.multiply(&up)?;", "let hidden = fused(&gate, &up)?;")
                        )
                    },
                    command: "submit",
                    stdout: &["quest's own model code (its SiLU or SwiGLU among it)"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's own MLP called from yours",
                    edit: |s| {
                        s.solution.replace(
                            "        layers.down_proj(&hidden)\n",
                            "        let _ = hidden;\n        quest::lm::QuestPieces.mlp(x, layers)\n",
                        )
                    },
                    command: "submit",
                    stdout: &["hands the work to another gate or MLP"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["share=three-fifths", "term=bytes"],
            check_passed: logits_within_tolerance,
            ..Row::of("mlp")
        },
        Row {
            args: FEW_TOKENS,
            // The integers peeled off the low bits one at a time: another way to the same
            // values (6.7e-5 from quest's dense model, as the solution, measured in
            // docs/lessons/dequant-matvec/2026-12-03-cpu/).
            honest: |s| {
                s.solution.replace(
                    "        let places: Vec<u32> = (0..per_word).map(|j| 1u32 << (bits * j)).collect();\n        let places = Array::from_slice(&places, &[1, 1, per_word]);\n        let levels = Array::from_slice(&[1u32 << bits], &[1]);\n        let q = remainder(floor_divide(weight.expand_dims(-1)?, &places)?, &levels)?;",
                    "        let levels = Array::from_slice(&[1u32 << bits], &[1]);\n        let mut rest = weight.clone();\n        let mut values = Vec::new();\n        for _ in 0..per_word {\n            values.push(remainder(&rest, &levels)?);\n            rest = floor_divide(&rest, &levels)?;\n        }\n        let q = mlx_rs::ops::stack(&values, -1)?;",
                )
            },
            refusals: &[
                Refusal {
                    what: "a word's values read from the top bits down",
                    edit: |s| s.solution.replace("(0..per_word).map(", "(0..per_word).rev().map("),
                    command: "submit",
                    stdout: &["· 4 bits, group 64 · float32: differs from quest's by", "0 of 8 shapes right."],
                    stderr: &[PIECE_WRONG],
                    snapshot: Some("dequant_matvec_piece_refused"),
                    masked: true,
                },
                Refusal {
                    what: "MLX's quantized matmul, renamed on import",
                    edit: |s| {
                        format!(
                            "use mlx_rs::ops::quantized_matmul as qmm;\n{}",
                            s.solution.replace(
                                "        let per_word = 32 / bits;",
                                "        return Ok(qmm(x, weight, scales, biases, true, group_size, bits)?);\n        #[allow(unreachable_code)]\n        let per_word = 32 / bits;",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["MLX's own 4-bit arithmetic"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the model held dense, where the matvec never runs",
                    edit: |s| {
                        s.solution.replace(
                            "lm::load_with(&run.model, lm::Hold::Quantized)?",
                            "lm::load(&run.model)?",
                        )
                    },
                    command: "submit",
                    stdout: &["your matvec never runs"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["bytes-per-weight=0.75", "term=fixed"],
            check_passed: logits_within_tolerance,
            ..Row::of("dequant-matvec")
        },
        Row {
            args: FEW_TOKENS,
            // The gate as gate / (1 + e^-gate) · up, compiled once: another formula for the
            // same numbers (6.9e-5 from quest's at most, measured).
            honest: |s| {
                s.solution.replace(
                    "        |(gate, up): (&Array, &Array)| gate.multiply(mlx_rs::ops::sigmoid(gate)?)?.multiply(up),",
                    "        |(gate, up): (&Array, &Array)| {\n            let one = Array::from_f32(1.0);\n            gate.divide(one.add(mlx_rs::ops::exp(gate.negative()?)?)?)?.multiply(up)\n        },",
                )
            },
            refusals: &[
                Refusal {
                    what: "compiled, but anew inside every call",
                    edit: |s| {
                        s.solution.replace(
                            "        Ok(GATE.with(|f| (f.borrow_mut())((gate, up)))?)",
                            "        let mut fresh = compiled_gate();\n        Ok(fresh((gate, up))?)",
                        )
                    },
                    command: "submit",
                    stdout: &["compiles on every call again"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the gate's own factor left out: sigmoid(gate) · up",
                    edit: |s| {
                        s.solution.replace(
                            "gate.multiply(mlx_rs::ops::sigmoid(gate)?)?.multiply(up)",
                            "mlx_rs::ops::sigmoid(gate)?.multiply(up)",
                        )
                    },
                    command: "submit",
                    stdout: &[
                        "At step 0 (predicting from position",
                        "the first layer whose output is off is layer 0 of 30",
                    ],
                    stderr: &["does not compute silu(gate)"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["term=fixed"],
            check_run: |stdout| {
                assert!(stdout.contains("µs/layer"), "{stdout}");
                // An eager load: its first forward is paid before the prompt, timed apart.
                assert!(stdout.contains("then a warm-up, a 16-token prompt's forward and one token's"), "{stdout}");
            },
            ..Row::of("compile")
        },
        Row {
            args: FEW_TOKENS,
            // The square as x · x inside the compiled norm: another order of the same
            // arithmetic, the same ops compiled.
            honest: |s| s.solution.replace("x.square()?", "x.multiply(x)?"),
            refusals: &[
                Refusal {
                    what: "the norm compiled anew inside every call",
                    edit: |s| {
                        s.solution.replace(
                            "        Ok(NORM.with(|f| (f.borrow_mut())((x, weight, &eps)))?)",
                            "        let mut fresh = compiled_norm();\n        Ok(fresh((x, weight, &eps))?)",
                        )
                    },
                    command: "submit",
                    stdout: &["compiles on every call again"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the weight left out of the compiled norm",
                    edit: |s| {
                        s.solution.replace(
                            "x.multiply(&inverse_rms)?.multiply(weight)",
                            "let _ = weight;\n            x.multiply(&inverse_rms)",
                        )
                    },
                    command: "submit",
                    stdout: &["At step 0 (predicting from position", "the lesson allows 1e-3"],
                    stderr: &["does not compute x · rsqrt(mean(x²) + eps) · weight"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["term=fixed", "fused-here=its-ops"],
            check_run: |stdout| {
                assert!(stdout.contains("Ops per decode step:"), "{stdout}");
            },
            ..Row::of("ops-cost")
        },
        Row {
            args: FEW_TOKENS,
            // `with_stream` kept, handed the default stream: not the solution's text.
            honest: |s| {
                s.starting
                    .replace("use mlx_rs::{Device, Stream};", "use mlx_rs::Stream;")
                    .replace(
                        "let stream = Stream::new_with_device(&Device::try_default()?);",
                        "let stream = Stream::new();",
                    )
            },
            refusals: &[
                Refusal {
                    what: "a new stream, its type renamed on import",
                    edit: |s| {
                        s.starting
                            .replace("use mlx_rs::{Device, Stream};", "use mlx_rs::{Device, Stream as Queue};")
                            .replace("Stream::new_with_device(", "Queue::new_with_device(")
                    },
                    command: "submit",
                    stdout: &["a stream of its own"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the default stream, and a host read in the loop",
                    edit: |s| {
                        s.solution.replace(
                            "            async_eval([&y])?;",
                            "            async_eval([&y])?;\n            let _ = y.item_exact::<u32>();",
                        )
                    },
                    command: "submit",
                    stdout: &["waits for the device every token"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["why=fences"],
            ..Row::of("streams")
        },
        // A CUDA kernel: on the CPU it compiles and stops (`runs_on: [cuda]`), so the flow
        // goes as far as that (`runs_elsewhere`).
        Row {
            // The warp's sum gathered into lane 0 (`__shfl_down_sync`), where the solution
            // spreads it to every lane: the same sum, another exchange.
            honest: |s| s.solution.replace("__shfl_xor_sync", "__shfl_down_sync"),
            refusals: &[
                Refusal {
                    what: "eps misspelt in the kernel's body",
                    edit: |s| s.solution.replace("eps[0]);", "epsilon[0]);"),
                    command: "run",
                    stdout: &[],
                    stderr: &[
                        "your kernel `my_norm` does not compile",
                        "identifier \"epsilon\" is undefined",
                    ],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's fused norm, renamed on import",
                    edit: |s| {
                        s.solution
                            .replace("use mlx_rs::{Array, Dtype};", "use mlx_rs::{fast::rms_norm as fused, Array, Dtype};")
                            .replace(
                                "        NORM.launch(",
                                "        let _ = fused(x, Some(&weight), 1e-5)?;\n        NORM.launch(",
                            )
                    },
                    command: "submit",
                    stdout: &["MLX's fused norm"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            ..Row::of("custom-kernel")
        },
        // The 4-bit product as a CUDA kernel: on the CPU it compiles and stops, as
        // custom-kernel does.
        Row {
            // Each weight dequantized, scale · q + bias, before its multiply: the
            // textbook order, where the solution adds the bias once a group through Σ x.
            honest: |s| {
                s.solution
                    .replace(
                        "    float dot = 0.0f;\n    float x_sum = 0.0f;",
                        "    const int g = c * 32 / GROUP;\n    const float scale = __half2float(scale_row[g]);\n    const float bias = __half2float(bias_row[g]);\n    float dot = 0.0f;",
                    )
                    .replace(
                        "        dot += (float)((words[i] >> (4 * j)) & 15u) * v;\n        x_sum += v;",
                        "        dot += (scale * (float)((words[i] >> (4 * j)) & 15u) + bias) * v;",
                    )
                    .replace(
                        "    const int g = c * 32 / GROUP;\n    sum += __half2float(scale_row[g]) * dot + __half2float(bias_row[g]) * x_sum;",
                        "    sum += dot;",
                    )
            },
            refusals: &[
                Refusal {
                    what: "x's row misnamed in the kernel's body",
                    edit: |s| s.solution.replace("const __half* xs = x_row + c * 32;", "const __half* xs = xrow + c * 32;"),
                    command: "run",
                    stdout: &[],
                    stderr: &[
                        "your kernel `my_matvec` does not compile",
                        "identifier \"xrow\" is undefined",
                    ],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "MLX's quantized matmul, renamed on import",
                    edit: |s| {
                        s.solution
                            .replace("use mlx_rs::{Array, Dtype};", "use mlx_rs::{ops::quantized_matmul as qmm, Array, Dtype};")
                            .replace(
                                "        Ok(y.as_dtype(x.dtype())?)",
                                "        let _ = y;\n        Ok(qmm(x, weight, scales, biases, true, group_size, bits)?)",
                            )
                    },
                    command: "submit",
                    stdout: &["is MLX's (or quest's) own product"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the kernel launched, its result dropped for a product of MLX's",
                    edit: |s| {
                        s.solution.replace(
                            "        Ok(y.as_dtype(x.dtype())?)",
                            "        let _ = y;\n        let w = weight.as_dtype(Dtype::Float32)?;\n        Ok(x.matmul(&w.t())?)",
                        )
                    },
                    command: "submit",
                    stdout: &["computes the product with MLX's ops"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the model held dense: the product never called",
                    edit: |s| {
                        s.solution.replace(
                            "lm::load_with(&run.model, lm::Hold::Quantized)?",
                            "lm::load(&run.model)?",
                        )
                    },
                    command: "submit",
                    stdout: &["your product would never be called"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            ..Row::of("matvec-kernel")
        },
        Row {
            args: FEW_TOKENS,
            // The gate as gate / (1 + e^-gate): another formula for the same SiLU (7.1e-5
            // from quest's at most, measured).
            honest: |s| {
                s.solution
                    .replace(
                        "let silu = gate.multiply(sigmoid(&gate)?)?;",
                        "let one = Array::from_f32(1.0);\n        let silu = gate.divide(mlx_rs::ops::exp(gate.negative()?)?.add(one)?)?;",
                    )
                    .replace("quantized_matmul, sigmoid, sin}", "quantized_matmul, sin}")
            },
            refusals: &[
                Refusal {
                    what: "the cache not updated: step 0 right, step 1 on its own",
                    edit: |s| {
                        s.solution.replace(
                            "    Ok(cache.update_and_fetch(k, v)?)",
                            "    let _ = cache;\n    Ok((k.clone(), v.clone()))",
                        )
                    },
                    command: "submit",
                    stdout: &[
                        "At step 1 (predicting from position",
                        "the lesson allows 1e-3",
                        "does not report its layers",
                    ],
                    stderr: &["step 0 right and step 1 wrong is the cache"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "the causal mask left out of the prompt",
                    edit: |s| {
                        s.solution.replace(
                            "    if l == 1 {\n        return Ok(None);\n    }",
                            "    if l >= 1 {\n        return Ok(None);\n    }",
                        )
                    },
                    command: "submit",
                    stdout: &["At step 0 (predicting from position", "the lesson allows 1e-3"],
                    stderr: &["does not compute what quest's model computes"],
                    snapshot: None,
                    masked: false,
                },
                Refusal {
                    what: "quest's model, renamed on import",
                    edit: |s| {
                        format!(
                            "use quest::lm::load as load_model;\n{}",
                            s.solution.replace(
                                "    run.decode_yours(&model, &read, &tokenizer)",
                                "    let (quest, _) = load_model(&run.model)?;\n    let _ = (model, read);\n    run.decode(&quest, &tokenizer)",
                            )
                        )
                    },
                    command: "submit",
                    stdout: &["quest's own model"],
                    stderr: &["fix those lines"],
                    snapshot: None,
                    masked: false,
                },
            ],
            answers: &["term=fixed"],
            check_passed: logits_within_tolerance,
            ..Row::of("your-model")
        },
        Row {
            args: FEW_TOKENS,
            answers: &["paid-by=first-forward"],
            // The starting code's eager load: its first forward paid before the prompt.
            check_run: |stdout| {
                assert!(stdout.contains("then a warm-up, a 16-token prompt's forward and one token's"), "{stdout}");
            },
            ..Row::of("mapped-lazy")
        },
        Row {
            args: FEW_TOKENS,
            // The split written another way than the solution's `split_at`.
            honest: |s| {
                s.starting.replace(
                    "        let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;",
                    "        let n = prompt_ids.len();\n        model.forward(&lm::tokens_array(&prompt_ids[..n - 1]), &mut cache)?;\n        mlx_rs::transforms::eval(cache.iter().flat_map(lm::LayerCache::state))?;\n        let logits = model.forward(&lm::tokens_array(&prompt_ids[n - 1..]), &mut cache)?;",
                )
            },
            refusals: &[Refusal {
                what: "the whole prompt in one call, then the caches evaluated: the head still ran on every position",
                edit: |s| {
                    s.starting.replace(
                        "        let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;",
                        "        let logits = model.forward(&lm::tokens_array(&prompt_ids), &mut cache)?;\n        mlx_rs::transforms::eval(cache.iter().flat_map(|c| c.state()))?;",
                    )
                },
                command: "submit",
                stdout: &["Your first token came from one forward call of"],
                stderr: &["what it fed the model"],
                snapshot: None,
                masked: false,
            }],
            answers: &["skipped=head", "saved=arithmetic"],
            ..Row::of("lazy-prefill")
        },
    ]
}

/// Each lesson's walk is a test of its own, named after it, so that the runner filters
/// and parallelises them (`cargo test -- --include-ignored all_lessons::walk::rms_norm`).
/// The whole walk takes most of half an hour on two cores: it is `#[ignore]`d, and
/// `.ci/run` runs it with `--include-ignored`. `default` marks one lesson per track whose
/// walk also runs in the plain `cargo test` (few tokens, the smallest model): the
/// mechanisms each track's submit uses, end to end.
macro_rules! walks {
    ($($kind:ident $name:ident: $id:literal,)*) => {
        /// The lessons a walk test is written for.
        const WALKED: &[&str] = &[$($id),*];
        mod walk {
            $(walks!(@test $kind $name $id);)*
        }
    };
    (@test default $name:ident $id:literal) => {
        #[test]
        fn $name() {
            super::walk($id)
        }
    };
    (@test ignored $name:ident $id:literal) => {
        #[test]
        #[ignore = "the course walk: `.ci/run` runs it (cargo test -- --include-ignored)"]
        fn $name() {
            super::walk($id)
        }
    };
}

walks! {
    default mapped_lazy: "mapped-lazy",
    ignored kv_cache: "kv-cache",
    ignored mlx_path: "mlx-path",
    ignored lazy_prefill: "lazy-prefill",
    ignored rms_norm: "rms-norm",
    ignored rope: "rope",
    default attention: "attention",
    ignored mlp: "mlp",
    ignored dequant_matvec: "dequant-matvec",
    ignored sampling: "sampling",
    ignored linear_attention: "linear-attention",
    ignored your_model: "your-model",
    default decode_ceiling: "decode-ceiling",
    ignored bits_per_weight: "bits-per-weight",
    ignored context_slope: "context-slope",
    ignored batch: "batch",
    ignored ops_cost: "ops-cost",
    default compile: "compile",
    ignored streams: "streams",
    ignored custom_kernel: "custom-kernel",
    ignored matvec_kernel: "matvec-kernel",
    ignored host_or_device: "host-or-device",
    default kv_cache_by_hand: "kv-cache-by-hand",
    ignored prompt_lookup: "prompt-lookup",
    ignored continuous_batching: "continuous-batching",
    ignored your_server: "your-server",
    ignored chunked_prefill: "chunked-prefill",
    ignored attention_blocks: "attention-blocks",
}

/// Every lesson of the course has a row and a walk test, and every row a lesson: a new
/// lesson is held to the same flow (this runs in the plain `cargo test`).
#[test]
fn every_lesson_has_a_walk() {
    let course = Course::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")).unwrap();
    let ids: Vec<&str> = course.lesson_ids().collect();
    let rows = rows();
    for id in &ids {
        assert!(
            rows.iter().any(|row| row.id == *id) && WALKED.contains(id),
            "lesson `{id}` has no row or no walk test in all_lessons.rs: add both (its row: \
             its honest edit, its answers; its test: one line of `walks!`)"
        );
    }
    for row in &rows {
        assert!(
            ids.contains(&row.id),
            "all_lessons.rs has a row for `{}`, which the course does not list",
            row.id
        );
    }
    for id in WALKED {
        assert!(
            ids.contains(id),
            "all_lessons.rs has a walk test for `{id}`, which the course does not list"
        );
    }
}

/// The lesson's row through the whole flow, timed.
fn walk(id: &str) {
    let rows = rows();
    let row = rows
        .iter()
        .find(|row| row.id == id)
        .unwrap_or_else(|| panic!("no row for `{id}` in all_lessons.rs"));
    let started = std::time::Instant::now();
    flow(row);
    eprintln!("{id}: {:.1} s", started.elapsed().as_secs_f64());
}

/// `quest` on one lesson's course copy, in a language.
struct Quest<'a> {
    root: &'a Path,
    home: &'a Path,
    env: Vec<(&'a str, String)>,
}

impl Quest<'_> {
    fn with(&self, lang: Lang, args: &[&str]) -> Output {
        crate::common::quest_command()
            .args(["--lang", &lang.to_string()])
            .args(args)
            .env("QUEST_ROOT", self.root)
            .env("QUEST_HOME", self.home)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "80")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    }
    fn en(&self, args: &[&str]) -> Output {
        self.with(Lang::En, args)
    }
    fn ko(&self, args: &[&str]) -> Output {
        self.with(Lang::Ko, args)
    }
}

/// One lesson through the whole flow.
fn flow(row: &Row) {
    let id = row.id;
    let root = course_copy(&format!("flow-{id}"));
    drop_effect_gate(&root, id);
    let home = home(&format!("flow-{id}"));
    let report_copy = home.join("report-copy.json");
    let mut env: Vec<(&str, String)> = row.env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    env.push((REPORT_COPY, report_copy.display().to_string()));
    let quest = Quest {
        root: &root,
        home: &home,
        env,
    };
    let course = Course::load(&root.join("lessons")).unwrap();
    let lesson = course.lesson(id, Lang::En).unwrap();
    let spec = &lesson.spec;
    let snake = id.replace('-', "_");

    // Listed in its track.
    let track = course
        .tracks
        .iter()
        .find(|t| t.lessons.iter().any(|l| l == id))
        .unwrap();
    let (stdout, stderr) = text(&quest.en(&["list"]));
    assert!(
        stdout.contains(track.title.get(Lang::En)) && stdout.contains(id),
        "{stdout}{stderr}"
    );

    // A measured answer before anything was measured: measure first.
    if let Some(question) = spec
        .quiz
        .iter()
        .find(|q| matches!(q.answer, Answer::Measured { .. }))
    {
        let answer = format!("{}={}", question.id, question.choices[0]);
        let out = quest.en(&["card", id, "--answer", &answer]);
        let (stdout, _) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        assert!(
            stdout.contains(&format!("run `quest submit {id}`")),
            "{stdout}"
        );
    }

    let Some(exercise) = lesson.exercise_path() else {
        // A reading-only lesson: its quiz alone completes it.
        complete(&quest, &lesson, row, &[], None);
        return;
    };
    let sources = Sources {
        starting: std::fs::read_to_string(&exercise).unwrap(),
        solution: std::fs::read_to_string(lesson.solution_path().unwrap()).unwrap(),
    };
    let run = [&["run", id][..], row.run_args.unwrap_or(row.args)].concat();
    let submit = [&["submit", id][..], row.args, &["--rounds", "1"]].concat();
    if !spec.runs_on_backend(quest::device::Backend::Cpu) {
        return runs_elsewhere(&quest, row, &lesson, &exercise, &sources, &run, &submit);
    }

    // The starting code runs, after the lesson's text; a piece still `todo!()` is checked
    // alone, and no model runs without it.
    let out = quest.en(&run);
    let (stdout, stderr) = text(&out);
    assert!(stdout.starts_with(&lesson.meta.title), "{stdout}");
    // A whole model still `todo!()` (no piece to check alone) stops at its first call.
    let unwritten = spec.piece.is_none() && sources.starting.contains("todo!(");
    if spec.piece.is_some() {
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(stdout.contains("is still `todo!()`"), "{stdout}");
        assert!(stderr.contains("Nothing was run"), "{stderr}");
    } else if unwritten {
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(
            stderr.contains("Your exercise stopped with an error")
                && stderr.contains("not yet implemented"),
            "{stderr}"
        );
    } else if spec.values.is_some() {
        assert!(out.status.success(), "{stdout}{stderr}");
        // quest marks each value it computed, ✗ where the exercise's differs.
        assert!(
            stdout.contains("Checking your values") && stdout.contains("✗"),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("`quest hint {id}`")), "{stdout}");
        assert!(
            !stdout.contains("Time to first token"),
            "no decode timing of its own: {stdout}"
        );
    } else {
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("Time to first token"), "{stdout}");
    }
    (row.check_run)(&stdout);

    // The starting code breaks its own rules, in either language.
    let out = quest.en(&submit);
    let (refused, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{refused}{stderr}");
    assert!(
        stderr.contains("fix those lines")
            || stderr.contains("what it fed the model")
            // A piece of the model keeps its rules from the start; its logits are wrong.
            // A piece still `todo!()` is refused by the piece check.
            || spec.piece.is_some() && refused.contains("is still `todo!()`")
            || unwritten && stderr.contains("not yet implemented")
            || spec.logits.is_some() && refused.contains("your logits differ from quest's")
            // A sampler keeps its rules from the start too; its draws are wrong.
            || spec.draws.is_some() && refused.contains("above honest draws'")
            // So may a values lesson's: its values are wrong.
            || spec.values.is_some() && stderr.contains("Some values differ"),
        "{refused}{stderr}"
    );
    // A logits, draws or values refusal's numbers are this machine's arithmetic (and
    // kernels, and measurements).
    let snapshot = |name: String, text: &str| {
        if spec.logits.is_some() || spec.draws.is_some() || spec.values.is_some() {
            masked(text, |s| insta::assert_snapshot!(name, s))
        } else {
            insta::assert_snapshot!(name, text)
        }
    };
    snapshot(format!("{snake}_refused"), &refused);
    let out = quest.ko(&submit);
    let (refused, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{refused}{stderr}");
    snapshot(format!("{snake}_refused_ko"), &refused);

    // Each wrong edit the row names is refused, saying why.
    let run_alone = [&["run", id, "--no-lesson"][..], row.args].concat();
    wrong_edits_refused(&quest, row, &exercise, &sources, &run_alone, &submit);

    // The honest edit passes every check.
    let mut honest = (row.honest)(&sources);
    if quest::judge::same_as_solution(&honest, &sources.solution) {
        honest = learners_own(&honest);
    }
    if spec.values.is_some() {
        honest = copying_its_report(&honest);
    }
    std::fs::write(&exercise, &honest).unwrap();
    let _ = std::fs::remove_file(&report_copy);
    let out = quest.en(&submit);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let tokens = max_tokens(row, &lesson);
    match spec.tokens {
        // A served trace: every request's tokens, each of its own length.
        TokenCheck::Exact
            if matches!(
                spec.piece,
                Some(quest::course::spec::Piece::Batching | quest::course::spec::Piece::Server)
            ) =>
        {
            assert!(
                stdout.contains("greedy tokens as the reference"),
                "{stdout}"
            )
        }
        TokenCheck::Exact => assert_same_tokens(&stdout, tokens),
        TokenCheck::First(n) => assert_same_tokens(&stdout, n.min(tokens)),
        TokenCheck::Repeatable => assert!(
            stdout.contains(&format!("The same seed, the same {tokens} tokens.")),
            "{stdout}"
        ),
        TokenCheck::None => {}
    }
    if spec.values.is_some() {
        assert!(
            stdout.contains("Every value you computed is quest's."),
            "{stdout}"
        );
        assert!(!stdout.contains("✗"), "{stdout}");
    }
    (row.check_passed)(&stdout, &progress(&home));
    let report = spec.values.as_ref().map(|_| {
        let text = std::fs::read_to_string(&report_copy).expect("the exercise's report copy");
        serde_json::from_str::<Value>(&text).unwrap()
    });
    let numbers = spec
        .card
        .as_ref()
        .filter(|card| !card.numbers.is_empty())
        .map(|_| card_numbers(&stdout, id));
    let code = sha256_hex(honest.as_bytes());
    let measured = measured_answers(&root, &home, &lesson, &code, report.as_ref(), row);
    complete(&quest, &lesson, row, &measured, numbers);
    (row.after)(&quest);
}

/// Each wrong edit of the row, written over the exercise, refused by `run` or `submit`
/// (its command) with what it must say; its snapshot where it has one.
fn wrong_edits_refused(
    quest: &Quest,
    row: &Row,
    exercise: &Path,
    sources: &Sources,
    run: &[&str],
    submit: &[&str],
) {
    for refusal in row.refusals {
        let source = (refusal.edit)(sources);
        let copied = refusal.stderr.contains(&COPIED_SOLUTION);
        assert!(
            source != sources.starting && (source != sources.solution || copied),
            "{}: the edit `{}` no longer applies to the lesson's code; update its row",
            row.id,
            refusal.what
        );
        std::fs::write(exercise, &source).unwrap();
        let args = match refusal.command {
            "run" => run,
            _ => submit,
        };
        let out = quest.en(args);
        let (stdout, stderr) = text(&out);
        let what = refusal.what;
        assert_eq!(out.status.code(), Some(1), "{what}:\n{stdout}{stderr}");
        for said in refusal.stdout {
            assert!(stdout.contains(said), "{what}: no `{said}` in\n{stdout}");
        }
        for said in refusal.stderr {
            assert!(stderr.contains(said), "{what}: no `{said}` in\n{stderr}");
        }
        match refusal.snapshot {
            Some(name) if refusal.masked => masked(&stdout, |s| insta::assert_snapshot!(name, s)),
            Some(name) => insta::assert_snapshot!(name, stdout),
            None => {}
        }
    }
}

/// A lesson whose exercise does not run on the CPU (`runs_on`), as far as the CPU goes:
/// `run` compiles the starting code's kernel and stops, saying so; `submit` refuses the
/// starting code by its rules; each wrong edit is refused; the honest edit keeps the
/// rules and compiles, and submit stops there. Nothing is recorded as passed.
fn runs_elsewhere(
    quest: &Quest,
    row: &Row,
    lesson: &Lesson,
    exercise: &Path,
    sources: &Sources,
    run: &[&str],
    submit: &[&str],
) {
    let id = row.id;
    let stops_compiled = |stderr: &str| {
        assert!(
            stderr.contains("compiles for sm_90a with NVRTC 13.")
                && stderr.contains("runs on an NVIDIA GPU only"),
            "{stderr}"
        );
    };
    let out = quest.en(run);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.starts_with(&lesson.meta.title), "{stdout}");
    stops_compiled(&stderr);
    for lang in ["en", "ko"] {
        let out = if lang == "en" {
            quest.en(submit)
        } else {
            quest.ko(submit)
        };
        let (refused, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{refused}{stderr}");
        let file = exercise.file_name().unwrap().to_str().unwrap();
        assert!(refused.contains(&format!("{file}:")), "{refused}{stderr}");
        let name = format!(
            "{}_refused{}",
            id.replace('-', "_"),
            if lang == "en" { "" } else { "_ko" }
        );
        insta::assert_snapshot!(name, refused);
    }
    let run_alone = [&["run", id, "--no-lesson"][..], row.args].concat();
    wrong_edits_refused(quest, row, exercise, sources, &run_alone, submit);
    let honest = (row.honest)(sources);
    assert!(
        honest != sources.solution,
        "{id}: the honest edit no longer applies"
    );
    std::fs::write(exercise, &honest).unwrap();
    let out = quest.en(submit);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("keeps every rule"), "{stdout}");
    stops_compiled(&stderr);
    let state = progress(quest.home);
    assert!(
        state
            .lessons
            .get(id)
            .is_none_or(|l| l.card.is_none() && l.submissions.iter().all(|s| !s.checks_passed)),
        "{id}: recorded as passed where it does not run"
    );
}

/// The answers quest must find right for the code `code` on this machine, worked out
/// from what was measured: the rounds quest recorded, the bytes its runs read, the
/// values computed here from the exercise's report.
fn measured_answers(
    root: &Path,
    home: &Path,
    lesson: &Lesson,
    code: &str,
    report: Option<&Value>,
    row: &Row,
) -> Vec<String> {
    let id = lesson.meta.id.as_str();
    let mut answers = Vec::new();
    for question in &lesson.spec.quiz {
        let Answer::Measured { measured, from } = &question.answer else {
            continue;
        };
        let choice = match measured {
            MeasuredAnswer::EffectShows => shows(recorded_improvement(root, home, id)).to_owned(),
            MeasuredAnswer::Improvement => {
                let ratio = recorded_improvement(root, home, id);
                let (choice, _) = from
                    .iter()
                    .filter(|(_, least)| ratio >= **least)
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap_or_else(|| panic!("{id}: no band holds ×{ratio}"));
                choice.clone()
            }
            MeasuredAnswer::FewerBytesFaster => {
                // The weight bytes per token the latest runs of each code read.
                let state = progress(home);
                let runs = &state.lessons[id].runs;
                let read = |original: bool| {
                    runs.iter()
                        .rev()
                        .filter(|r| (r.code.kind == CodeKind::Original) == original)
                        .filter(|r| original || r.code.sha256 == code)
                        .find_map(|r| r.metrics.get("weight_mb_per_token").copied())
                        .unwrap_or_else(|| panic!("{id}: no run recorded its weight bytes"))
                };
                let (before, after) = (read(true), read(false));
                let ratio = recorded_improvement(root, home, id);
                let fewer_gained = if after < before {
                    ratio
                } else if before < after {
                    1.0 / ratio
                } else {
                    0.0
                };
                shows(fewer_gained).to_owned()
            }
            MeasuredAnswer::Largest(of) => {
                let values = (row.values)(report.expect("a values lesson's report"));
                of.iter()
                    .map(|(choice, name)| {
                        let value = *values
                            .get(name)
                            .unwrap_or_else(|| panic!("{id}: its row computes no `{name}`"));
                        (choice, value)
                    })
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap()
                    .0
                    .clone()
            }
        };
        answers.push(format!("{}={choice}", question.id));
    }
    answers
}

/// The card: each wrong answer refused (and recorded) and an invented number refused,
/// then the honest card completes the lesson, once, without the first-try bonus that
/// the wrong first answers cost.
fn complete(
    quest: &Quest,
    lesson: &Lesson,
    row: &Row,
    measured: &[String],
    numbers: Option<(String, String)>,
) {
    let id = lesson.meta.id.as_str();
    let spec = &lesson.spec;
    let mut answers: Vec<String> = row.answers.iter().map(|a| (*a).to_owned()).collect();
    answers.extend(measured.iter().cloned());
    for question in &spec.quiz {
        assert!(
            answers
                .iter()
                .any(|a| a.starts_with(&format!("{}=", question.id))),
            "{id}: its row answers no `{}`",
            question.id
        );
    }
    let card = |numbers: Option<(&str, &str)>, answers: &[String]| {
        let mut args = vec!["card".to_owned(), id.to_owned()];
        if let Some((before, after)) = numbers {
            args.extend([
                "--before".into(),
                before.into(),
                "--after".into(),
                after.into(),
            ]);
        }
        for answer in answers {
            args.extend(["--answer".to_owned(), answer.clone()]);
        }
        quest.en(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let numbers = numbers.as_ref().map(|(b, a)| (b.as_str(), a.as_str()));

    // Each question answered wrong, the rest right: refused with that question's reason.
    for question in &spec.quiz {
        let right = answers
            .iter()
            .find_map(|a| a.strip_prefix(&format!("{}=", question.id)))
            .unwrap();
        let wrong = question.choices.iter().find(|c| *c != right).unwrap();
        let mut given = answers.clone();
        given.retain(|a| !a.starts_with(&format!("{}=", question.id)));
        given.push(format!("{}={wrong}", question.id));
        let out = card(numbers, &given);
        let (stdout, _) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{id} {}={wrong}: {stdout}",
            question.id
        );
        // The answers are recorded, the wrong one too, then the refusal names it.
        let reason = &lesson.meta.quiz[&question.id].wrong;
        let (said, recorded) = stdout.trim().split_once('\n').unwrap_or((&stdout, ""));
        assert_eq!(said.trim(), reason.trim(), "{id} {}={wrong}", question.id);
        assert!(
            recorded.contains("Your answers are recorded, the wrong ones too"),
            "{id}: {stdout}"
        );
        let attempts = &progress(quest.home).lessons[id].attempts;
        assert!(
            attempts
                .iter()
                .any(|a| a.question == question.id && &a.choice == wrong && a.right == Some(false)),
            "{id}: {attempts:?}"
        );
    }

    // A number no run backs: three times the largest the starting code measured.
    if let Some((before, after)) = numbers {
        let metric = spec.measure.as_ref().unwrap().metric.key();
        let state = progress(quest.home);
        let largest = state.lessons[id]
            .runs
            .iter()
            .filter(|r| r.code.kind == CodeKind::Original)
            .filter_map(|r| r.metrics.get(metric).copied())
            .fold(before.parse::<f64>().unwrap(), f64::max);
        let invented = format!("{}", largest * 3.0);
        let out = card(Some((&invented, after)), &answers);
        let (stdout, _) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        let tolerance = spec.card.as_ref().unwrap().tolerance * 100.0;
        assert!(
            stdout.contains(&format!("is not within {tolerance:.0} %")) && stdout.contains(before),
            "{stdout}"
        );
    }

    let out = card(numbers, &answers);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("Lesson {id} complete: +{} XP", spec.xp)),
        "{stdout}"
    );
    let awarded = progress(quest.home).awards;
    assert!(
        awarded.contains_key(&format!("lesson:{id}:complete")),
        "{awarded:?}"
    );
    // Guessed, wrong first: complete, without what a right first answer earns.
    assert!(
        stdout.contains("without its first-try bonus"),
        "{id}: {stdout}"
    );
    assert!(
        !awarded.contains_key(&format!("lesson:{id}:first-try")),
        "{awarded:?}"
    );

    // Again: nothing is awarded twice.
    let out = card(numbers, &answers);
    assert!(
        text(&out).0.contains("already complete"),
        "{}",
        text(&out).0
    );
    assert_eq!(progress(quest.home).awards, awarded);
    let (stdout, _) = text(&quest.en(&["list"]));
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(id) && l.contains("[done]")),
        "{stdout}"
    );
}

/// The tokens each run writes: the row's `--max-tokens`, else the lesson's.
fn max_tokens(row: &Row, lesson: &Lesson) -> usize {
    row.args
        .iter()
        .position(|a| *a == "--max-tokens")
        .map_or(lesson.spec.max_tokens, |at| {
            row.args[at + 1].parse().unwrap()
        })
}

fn assert_same_tokens(stdout: &str, n: usize) {
    assert!(
        stdout.contains(&format!("The same {n} greedy tokens as the reference")),
        "{stdout}"
    );
}

/// Takes the lesson's `at_least` out of its copy: the effect then need not show here.
fn drop_effect_gate(root: &Path, id: &str) {
    let path = root.join("lessons").join(id).join("lesson.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = yaml
        .lines()
        .filter(|l| !l.trim_start().starts_with("at_least:"))
        .collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
}

/// `source` that, where `QUEST_TEST_REPORT_COPY` names a file, also copies the report it
/// gave quest there: the inputs quest measured, and the values the code computed. (Its
/// own report file, copied: an exercise may not write its environment.)
fn copying_its_report(source: &str) -> String {
    let call = "run.report_values(";
    let at = source
        .rfind(call)
        .expect("a values exercise reports with `run.report_values(…)`");
    let end = at + source[at..].find(')').unwrap() + 1;
    format!(
        "{}?;
    if let Ok(copy) = std::env::var({REPORT_COPY:?}) {{
        std::fs::copy(std::env::var(\"QUEST_REPORT\")?, copy)?;
    }}
    Ok(()){}",
        &source[..end],
        &source[end..]
    )
}

/// The least-squares line through `points`: (intercept, slope).
fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mean_x, mean_y) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let slope = sxy / sxx;
    (mean_y - slope * mean_x, slope)
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The bits-per-weight lesson's starting code, its model put in `layout` (Rust) after load.
fn requantized(starting: &str, layout: &str) -> String {
    starting
        .replace(
            "let (model, tokenizer) = lm::load(&run.model)?;",
            "let (mut model, tokenizer) = lm::load(&run.model)?;",
        )
        .replace(
            "    // REQUANTIZE: here.",
            &format!("    model.requantize({layout})?;\n    // REQUANTIZE: here."),
        )
}

/// The mlx-path lesson's edit: no sync inside the decode loop.
fn without_sync(original: &str) -> String {
    let hand = "    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        let token = y.item_exact::<u32>(); // a GPU sync per token — the hand loop's cost
        tokens.push(token);
        timer.token(token); // this token is on the host now: quest sees each one arrive
    }";
    assert!(
        original.contains(hand),
        "the exercise's decode loop changed; update this test"
    );
    original.replace(
        hand,
        "    let mut on_device = Vec::new();
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        mlx_rs::transforms::async_eval([&y])?;
        on_device.push(y.clone());
    }
    tokens.extend(on_device.iter().map(|t| t.item_exact::<u32>()));",
    )
}

/// The mlx-path lesson's edit as the source words it: each token kept on the device,
/// appended to one MLX array, read once after the loop.
fn in_one_array(original: &str) -> String {
    let kept_apart = without_sync(original);
    let apart = "    let mut on_device = Vec::new();
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        mlx_rs::transforms::async_eval([&y])?;
        on_device.push(y.clone());
    }
    tokens.extend(on_device.iter().map(|t| t.item_exact::<u32>()));";
    assert!(
        kept_apart.contains(apart),
        "without_sync changed; update this test"
    );
    kept_apart.replace(
        apart,
        "    let mut on_device: Option<mlx_rs::Array> = None;
    for _ in 1..run.max_tokens {
        let logits = model.forward(&y.reshape(&[1, 1])?, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        on_device = Some(match on_device {
            Some(kept) => mlx_rs::ops::concatenate(&[kept, y.clone()], 0)?,
            None => y.clone(),
        });
    }
    if let Some(kept) = &on_device {
        tokens.extend_from_slice(kept.as_slice::<u32>());
    }",
    )
}

/// What a refusal said, with this machine's numbers masked.
fn masked(text: &str, body: impl FnOnce(&str)) {
    insta::with_settings!({filters => vec![
        // A number after a space, `(` or `=`, signed or not; not the digits of a name.
        (r"([\s(])[+-]?\d+(\.\d+)?(e-?\d+)?", "$1[n]"),
    ]}, {
        body(text);
    });
}

/// Timings vary run to run, and the device machine to machine; everything else in
/// `quest run`'s output must not.
fn assert_snapshot_redacted(name: &str, s: &str) {
    let mut settings = insta::Settings::clone_current();
    // The device, and the weight layout that depends on it (dense f32 on a CPU).
    settings.add_filter(
        r"(?m)^(Model: .*) \((?:cpu|metal|cuda)(?:, [^)]*)?\)$",
        "$1 ([DEVICE], [WEIGHTS])",
    );
    // What ran the matmuls: the BLAS and the kernels it chose for this CPU, or on CUDA
    // which of quest's kernels ran.
    settings.add_filter(
        r"(?m)^(?:CPU matmuls on|quest's own CUDA kernels): .*$",
        "[WHAT RAN THE MATMULS]",
    );
    // A growth's sign is noise as much as its size (the hand loop marks every token).
    settings.add_filter(r"growing [+-]\d+\.\d+ ms", "growing [GROWTH] ms");
    settings.add_filter(r"\d+\.\d+ ms", "[TTFT] ms");
    settings.add_filter(r"\d+\.\d+ tok/s", "[RATE] tok/s");
    settings.bind(|| insta::assert_snapshot!(name, s));
}
