//! The judge's decisions on a card, a quiz, tokens, logits and effects, tested as the pure
//! functions they are.
use crate::course::spec::{FeedRule, LessonSpec, Move, TokenCheck};
use crate::course::{Lesson, Metric};
use crate::device::{Backend, BackendKind};
use crate::progress::{Card, CodeKind, CodeRef, LessonRecord, Timestamp};

#[test]
fn an_inside_figure_over_the_clocks_step_cannot_be() {
    // Building 20 ms of a 100 ms step: within the clock.
    assert_eq!(
        inside_figure_over_clock(&[20.0, 21.0], &[100.0, 98.0], 0.05),
        None
    );
    // A build time of 150 ms in steps quest timed at 100 ms: written, not measured.
    assert_eq!(
        inside_figure_over_clock(&[150.0], &[100.0], 0.05),
        Some((150.0, 100.0))
    );
    assert_eq!(inside_figure_over_clock(&[], &[100.0], 0.05), None);
}

#[test]
fn a_piece_counts_only_where_the_model_called_yours_in_every_layer() {
    use crate::course::spec::Piece;
    use crate::lm::Calls;
    let counted = |seam, quest| {
        let mut calls = std::collections::BTreeMap::new();
        calls.insert(
            Piece::Rope,
            Calls {
                seam,
                quest,
                ..Default::default()
            },
        );
        calls
    };
    let rope = |calls: Option<std::collections::BTreeMap<Piece, Calls>>| {
        piece_calls_problem(Piece::Rope, calls.as_ref(), 30)
    };
    assert_eq!(rope(Some(counted(60 * 33, 0))), None);
    assert_eq!(rope(None), Some(CallsProblem::NotCounted));
    assert_eq!(
        rope(Some(Default::default())),
        Some(CallsProblem::NeverCalled)
    );
    assert_eq!(
        rope(Some(counted(1980, 1980))),
        Some(CallsProblem::QuestRan {
            quest: 1980,
            seam: 1980
        })
    );
    assert_eq!(
        rope(Some(counted(29, 0))),
        Some(CallsProblem::TooFew {
            seam: 29,
            layers: 30
        })
    );
    // The graph of an output showed MLX's fused op, or nothing (evaluated): refused
    // before anything else, with what was seen.
    let seen = |fused, fused_op, evaluated| {
        let mut calls = counted(1980, 0);
        let rope = calls.get_mut(&Piece::Rope).unwrap();
        (rope.fused, rope.fused_op, rope.evaluated) = (fused, fused_op, evaluated);
        Some(calls)
    };
    assert_eq!(
        rope(seen(3, Some(crate::lm::graph::Fused::Rope), 0)),
        Some(CallsProblem::Fused {
            op: crate::lm::graph::Fused::Rope,
            fused: 3,
            seam: 1980
        })
    );
    assert_eq!(
        rope(seen(0, None, 5)),
        Some(CallsProblem::Evaluated {
            evaluated: 5,
            seam: 1980
        })
    );
    // A sampler is called once a step.
    let mut sampled = std::collections::BTreeMap::new();
    sampled.insert(
        Piece::Sample,
        Calls {
            seam: 8,
            ..Default::default()
        },
    );
    assert_eq!(piece_calls_problem(Piece::Sample, Some(&sampled), 30), None);
}

use super::*;

#[test]
fn layers_are_compared_relative_to_quests_largest_value() {
    let reference = vec![vec![100.0, -1.0], vec![200.0, 3.0], vec![50.0, 1.0]];
    // 0.05 on a layer whose largest is 100 is within 1e-3 of it; 1.0 at layer 1 is not.
    let close = vec![vec![100.05, -1.0], vec![200.0, 2.0], vec![0.0, 0.0]];
    assert_eq!(
        layers_compared(&reference, &close, 1e-3),
        LayersVerdict::First {
            layer: 1,
            by: 1.0,
            largest: 200.0
        }
    );
    assert_eq!(
        layers_compared(&reference, &reference, 1e-3),
        LayersVerdict::AfterLast { layers: 3 }
    );
    let nan = vec![vec![f32::NAN, -1.0], vec![200.0, 3.0], vec![50.0, 1.0]];
    assert!(matches!(
        layers_compared(&reference, &nan, 1e3),
        LayersVerdict::First { layer: 0, .. }
    ));
    assert_eq!(
        layers_compared(&reference, &reference[..2], 1e-3),
        LayersVerdict::Unlike
    );
    assert_eq!(layers_compared(&[], &[], 1e-3), LayersVerdict::Unlike);
}

#[test]
fn logits_are_judged_at_the_first_step_beyond_the_tolerance() {
    let reference = vec![
        vec![0.0, 1.0, 0.5],
        vec![2.0, 0.0, 0.0],
        vec![0.0, 0.0, 3.0],
    ];
    let mut close = reference.clone();
    close[1][1] += 4e-4;
    assert_eq!(
        logits_compared(&reference, &close, 1e-3, 10),
        LogitsVerdict::Within {
            steps: 3,
            largest: close[1][1],
            at_step: 1,
            near_ties: vec![]
        }
    );
    let mut off = reference.clone();
    off[1][2] -= 0.25;
    off[2][0] += 9.0;
    assert_eq!(
        logits_compared(&reference, &off, 1e-3, 10),
        LogitsVerdict::Beyond(LogitsGap {
            step: 1,
            position: 10,
            id: 2,
            by: 0.25,
            reference_argmax: 0,
            argmax: 0
        })
    );
    // Within the tolerance, but the argmax moved: a near tie, listed, not refused.
    let mut flipped = reference.clone();
    flipped[0][2] = 1.0 + 1e-4;
    let LogitsVerdict::Within { near_ties, .. } = logits_compared(&reference, &flipped, 1.0, 10)
    else {
        panic!("a near tie within the tolerance was refused");
    };
    assert_eq!(near_ties, vec![0]);
    // The same move beyond a smaller tolerance: refused, with both argmaxes.
    let LogitsVerdict::Beyond(gap) = logits_compared(&reference, &flipped, 0.1, 10) else {
        panic!("a moved argmax beyond the tolerance passed");
    };
    assert_eq!((gap.step, gap.reference_argmax, gap.argmax), (0, 1, 2));
    // A NaN is never within.
    let mut nan = reference.clone();
    nan[2][1] = f32::NAN;
    let LogitsVerdict::Beyond(gap) = logits_compared(&reference, &nan, 1e3, 10) else {
        panic!("a NaN passed");
    };
    assert_eq!((gap.step, gap.id, gap.by), (2, 1, f32::INFINITY));
    // Fewer steps, or another vocabulary: missing, never judged.
    assert_eq!(
        logits_compared(&reference, &reference[..2], 1e-3, 10),
        LogitsVerdict::Missing {
            steps: 2,
            expected: 3
        }
    );
}

#[test]
fn free_running_tokens_may_leave_quests_only_at_a_near_tie() {
    let quest = [5, 6, 7, 8];
    assert_eq!(
        tokens_against_quest(&quest, &quest, &[]),
        AgainstQuest::Same
    );
    // Another pick at step 2, where the logits check saw a tie: what follows is free.
    assert_eq!(
        tokens_against_quest(&quest, &[5, 6, 9, 1], &[2, 3]),
        AgainstQuest::NearTie(2)
    );
    // Another pick where no tie was seen, or a tie seen later than the difference.
    assert_eq!(
        tokens_against_quest(&quest, &[5, 0, 7, 8], &[2]),
        AgainstQuest::Apart(1)
    );
    // A run that stops early differs where its tokens end.
    assert_eq!(
        tokens_against_quest(&quest, &[5, 6], &[]),
        AgainstQuest::Apart(2)
    );
}

#[test]
fn tokens_differ_at_the_first_position_either_lacks_or_changes() {
    assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3], 3), None);
    assert_eq!(first_difference(&[1, 2, 3], &[1, 9, 3], 3), Some(1));
    // A shorter run differs where it stops; past `n` nothing is compared.
    assert_eq!(first_difference(&[1, 2, 3], &[1, 2], 3), Some(2));
    assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 7], 2), None);
    assert_eq!(tokens_compared(TokenCheck::Exact, 5, 7), Some(7));
    assert_eq!(tokens_compared(TokenCheck::First(6), 32, 32), Some(6));
    assert_eq!(tokens_compared(TokenCheck::None, 32, 32), None);
}

fn feeds(yaml: &str) -> Vec<FeedRule> {
    serde_yaml::from_str(yaml).unwrap()
}

#[test]
fn the_first_token_comes_from_the_last_prompt_position_alone() {
    let rules = feeds("[{id: split-prefill, first_token: 1}]");
    let split = &rules[0];
    // The unchanged prefill (whatever it evaluates after): all 42 positions in one
    // call, the first token from its logits.
    assert_eq!(
        feed_problems(&rules, &[42], &[1, 1, 1]),
        [FeedProblem::FirstToken {
            rule: split,
            positions: 42,
            limit: 1
        }]
    );
    // The split: 41 positions, then the last alone; or in chunks, then the last.
    assert_eq!(feed_problems(&rules, &[41, 1], &[1, 1]), []);
    assert_eq!(feed_problems(&rules, &[16, 16, 9, 1], &[1]), []);
    // A split that runs the last two together still reads two rows of the head.
    assert_eq!(feed_problems(&rules, &[40, 2], &[1]).len(), 1);
    // A run that recorded nothing is not taken on trust.
    assert_eq!(feed_problems(&rules, &[], &[]), [FeedProblem::NotRecorded]);
    assert_eq!(feed_problems(&[], &[], &[]), []);
}

#[test]
fn a_decode_step_feeds_one_position_whatever_makes_its_input() {
    let rules = feeds("[{id: one-token, step: 1}]");
    // One token a step, however the array was made (`y.reshape(&[1, 1])` or
    // `lm::tokens_array(&[last])`): the model sees one position either way.
    assert_eq!(feed_problems(&rules, &[42], &[1, 1, 1]), []);
    // The whole sequence again at every step: refused at the first step, saying how many.
    assert_eq!(
        feed_problems(&rules, &[42], &[43, 44, 45]),
        [FeedProblem::Step {
            rule: &rules[0],
            step: 1,
            positions: 43,
            limit: 1
        }]
    );
    // The last two tokens from the third step on.
    assert_eq!(
        feed_problems(&rules, &[42], &[1, 1, 2, 2]),
        [FeedProblem::Step {
            rule: &rules[0],
            step: 3,
            positions: 2,
            limit: 1
        }]
    );
}

#[test]
fn a_change_that_leaves_the_bytes_as_they_were_is_not_the_lessons_change() {
    let moves: Vec<Move> =
        serde_yaml::from_str("[{id: fewer-bytes, metric: weight_mb_per_token, expect: lower}]")
            .unwrap();
    let measured = |before: f64, after: f64| {
        move |_: Metric, yours: bool| Some(if yours { after } else { before })
    };
    // `Layout::Dense` on the CPU, where the model already loads dense: the same bytes.
    assert_eq!(
        unmoved(&moves, measured(538.06, 538.06)),
        [(&moves[0], Some(538.06), Some(538.06))]
    );
    // More bytes (8 bits over a model stored in 4) is the other way.
    assert_eq!(unmoved(&moves, measured(101.0, 150.0)).len(), 1);
    // q4 over dense: fewer.
    assert_eq!(unmoved(&moves, measured(538.06, 101.0)), []);
    // Not reported: not taken on trust.
    assert_eq!(unmoved(&moves, |_, _| None).len(), 1);
}

fn spec(shows_on: &str, at_least: Option<f64>) -> LessonSpec {
    let at_least = at_least.map_or(String::new(), |r| format!("  at_least: {r}\n"));
    let yaml = format!(
        "minutes: 1\nxp: 1\ntags: []\nshows_on: {shows_on}\nexercise: e.rs\nsolution: s.rs\n\
         measure:\n  metric: decode_tok_s\n  expect: higher\n{at_least}"
    );
    serde_yaml::from_str(&yaml).unwrap()
}

#[test]
fn the_effect_must_show_where_the_lesson_says_it_shows() {
    let gpu_only = spec("[gpu]", Some(1.1));
    assert_eq!(effect(&gpu_only, Backend::Cuda, Some(1.1)), Effect::Shown);
    assert_eq!(
        effect(&gpu_only, Backend::Cuda, Some(1.09)),
        Effect::Missing {
            ratio: Some(1.09),
            at_least: 1.1
        }
    );
    assert_eq!(
        effect(&gpu_only, Backend::Cuda, None),
        Effect::Missing {
            ratio: None,
            at_least: 1.1
        }
    );
    // Elsewhere a slower edit passes, and the learner is told where it shows.
    assert_eq!(
        effect(&gpu_only, Backend::Cpu, Some(0.5)),
        Effect::Elsewhere(vec![BackendKind::Gpu])
    );
    assert_eq!(
        effect(&spec("[]", Some(1.1)), Backend::Cpu, Some(0.5)),
        Effect::Shown
    );
    assert_eq!(
        effect(&spec("[cpu]", None), Backend::Cpu, Some(0.5)),
        Effect::Shown
    );
}

use crate::progress::{Measurement, Submission};

/// A lesson with a fixed question (`term`) and a measured one (`shows`).
fn quiz_lesson() -> Lesson {
    let spec: LessonSpec = serde_yaml::from_str(
        "minutes: 1\nxp: 40\ntags: []\nexercise: e.rs\nsolution: s.rs\n\
         measure: {metric: decode_tok_s, expect: higher}\n\
         quiz:\n  - {id: term, choices: [fixed, bytes], answer: fixed}\n  \
         - {id: shows, choices: [\"yes\", \"no\"], answer: {measured: effect_shows}}\n",
    )
    .unwrap();
    let text = "---\nid: q\nlang: en\ntitle: Q\nquiz:\n  term:\n    question: Which?\n    \
                choices: {fixed: f, bytes: b}\n    wrong: Not bytes.\n  shows:\n    \
                question: Shows?\n    choices: {\"yes\": y, \"no\": n}\n    wrong: Look.\n\
                ---\n\nIntro.\n\n## Exercise {#exercise}\n\n```rust exercise=main\nfn main() {}\n```\n\n\
                ## Hint {#hint}\n\nH.\n";
    Lesson::parse(std::path::Path::new("q/en.md"), text.into(), spec).unwrap()
}

fn given(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(q, c)| ((*q).to_owned(), (*c).to_owned()))
        .collect()
}

fn code() -> CodeRef {
    CodeRef::of(CodeKind::Exercise, b"mine")
}

/// `record` after a submission of `code()` whose checks passed, measured ×`ratio`.
fn measured(mut record: LessonRecord, ratio: f64) -> LessonRecord {
    record.submissions.push(Submission {
        at: Timestamp::now(),
        code: Some(code()),
        passed: false,
        checks_passed: true,
        lang: crate::course::Lang::En,
        measurement: Some(Measurement {
            metric: "decode_tok_s".into(),
            before: vec![10.0],
            after: vec![10.0 * ratio],
        }),
    });
    record
}

fn card(answers: &[(&str, &str)]) -> Card {
    Card {
        at: Timestamp::now(),
        metric: None,
        numbers: Default::default(),
        answers: given(answers).into_iter().collect(),
    }
}

#[test]
fn a_prediction_is_recorded_before_the_measurement_and_judged_by_it() {
    let lesson = quiz_lesson();
    let mut record = LessonRecord::default();
    let at = Timestamp::now();
    let predicted = predictions(
        &lesson,
        &record,
        &given(&[("shows", "yes"), ("term", "fixed")]),
        at,
    )
    .unwrap();
    assert_eq!(predicted.len(), 2);
    // The measured answer waits for its measurement; the fixed one is judged now.
    assert_eq!(predicted[0].right, None);
    assert!(predicted[0].predicted && predicted[0].measured);
    assert_eq!(predicted[1].right, Some(true));
    record.attempts = predicted;
    assert!(
        judge_waiting(&lesson, &record, &code()).is_empty(),
        "nothing measured yet"
    );
    // The same command again (after a refused submission) records nothing new.
    assert_eq!(
        predictions(&lesson, &record, &given(&[("shows", "yes")]), at),
        Ok(vec![])
    );
    // The measurement judges it: ×1.3 shows, ×1.02 does not.
    let shown = measured(record.clone(), 1.3);
    assert_eq!(judge_waiting(&lesson, &shown, &code()), vec![(0, true)]);
    let not_shown = measured(record.clone(), 1.02);
    assert_eq!(
        judge_waiting(&lesson, &not_shown, &code()),
        vec![(0, false)]
    );
    // Once measured, a measured question can no longer be predicted, and an answered
    // one can have no other first answer.
    let problems = predictions(
        &lesson,
        &measured(LessonRecord::default(), 1.3),
        &given(&[("shows", "yes"), ("term", "fixed")]),
        at,
    )
    .unwrap_err();
    assert_eq!(
        problems,
        [PredictionProblem::AlreadyMeasured("shows".into())]
    );
    let problems = predictions(&lesson, &record, &given(&[("shows", "no")]), at).unwrap_err();
    assert_eq!(
        problems,
        [PredictionProblem::AlreadyAnswered {
            question: "shows".into(),
            choice: "yes".into()
        }]
    );
    let problems = predictions(
        &lesson,
        &LessonRecord::default(),
        &given(&[
            ("term", "fixed"),
            ("term", "bytes"),
            ("terms", "x"),
            ("shows", "maybe"),
        ]),
        at,
    )
    .unwrap_err();
    assert_eq!(problems.len(), 3, "{problems:?}");
}

#[test]
fn a_refused_card_names_wrong_answers_only_when_nothing_else_is_wrong() {
    let lesson = quiz_lesson();
    let record = measured(LessonRecord::default(), 1.3);
    let problems = |record: &LessonRecord, answers: &[(&str, &str)]| -> Vec<String> {
        card_problems(&lesson, record, &code(), &card(answers))
            .iter()
            .map(|p| match p {
                CardProblem::Wrong(q) => format!("wrong {q}"),
                CardProblem::MissingAnswer(q) => format!("missing {q}"),
                CardProblem::NotMeasured => "not measured".into(),
                _ => "other".into(),
            })
            .collect()
    };
    assert_eq!(
        problems(&record, &[("term", "bytes"), ("shows", "yes")]),
        ["wrong term"]
    );
    assert!(problems(&record, &[("term", "fixed"), ("shows", "yes")]).is_empty());
    // A missing answer, or one that needs a measurement: the wrong one is not named.
    assert_eq!(problems(&record, &[("term", "bytes")]), ["missing shows"]);
    assert_eq!(
        problems(
            &LessonRecord::default(),
            &[("term", "bytes"), ("shows", "yes")]
        ),
        ["not measured"]
    );
    // Each answer becomes an attempt, judged; a measured one is not a prediction.
    let attempts = card_attempts(
        &lesson,
        &record,
        &code(),
        &card(&[("term", "bytes"), ("shows", "yes")]),
        Timestamp::now(),
    );
    let verdicts: Vec<_> = attempts
        .iter()
        .map(|a| (a.question.as_str(), a.right, a.predicted, a.measured))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("term", Some(false), false, false),
            ("shows", Some(true), false, true)
        ]
    );
}

#[test]
fn the_first_try_bonus_is_a_share_of_the_lesson() {
    assert_eq!(first_try_bonus(100, 50), 50);
    assert_eq!(first_try_bonus(30, 50), 15);
    assert_eq!(first_try_bonus(15, 50), 8);
    assert_eq!(first_try_bonus(40, 0), 0);
}
