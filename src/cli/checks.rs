//! `quest submit`'s checks as the learner reads them: each progress and outcome of
//! [`quest::judge`], said in the learner's language (the course's `ui:` texts and
//! the lesson's own messages). Prints; decides nothing.

use std::path::Path;

use quest::course::spec::{FeedRule, Move, Piece};
use quest::course::Lesson;
use quest::judge::rules::{self, Finding};
use quest::judge::{Effect, FeedProblem, LayersVerdict, LogitsGap, StepDraws};
use quest::judge::{
    Heading, LayersApart, Passed, PieceJudged, Progress, Refused, Rounds, TokensAgreed,
};

use super::said::{metric_name, number};
use super::Ctx;

/// A running check's progress: its heading, a measured round.
pub(crate) fn say_progress(ctx: &Ctx, progress: Progress) {
    let heading = match progress {
        Progress::Round {
            round,
            before,
            after,
            metric,
        } => {
            println!(
                "  {} {round}: {} / {} {}",
                ctx.ui("round"),
                number(before),
                number(after),
                metric.unit()
            );
            return;
        }
        Progress::Checking(heading) => heading,
    };
    let text = match heading {
        Heading::Rules => ctx.ui("submit_checking_code").to_owned(),
        Heading::Piece(Piece::Speculate) => ctx.ui("submit_checking_speculator").to_owned(),
        Heading::Piece(Piece::Prefill) => ctx.ui("submit_checking_prefill").to_owned(),
        Heading::Piece(Piece::Batching) => ctx.ui("submit_checking_batching").to_owned(),
        Heading::Piece(Piece::Server) => ctx.ui("submit_checking_server").to_owned(),
        Heading::Piece(_) => ctx.ui("submit_checking_piece").to_owned(),
        Heading::Logits {
            tolerance,
            measured,
        } => {
            if !measured {
                // Said before the check, so that a refusal by float16's rounding is read
                // as such.
                let tolerance = format!("{tolerance:.0e}");
                let note = ctx.ui_with("submit_logits_unmeasured", &[("tolerance", &tolerance)]);
                println!("  {note}");
            }
            ctx.ui("submit_checking_logits").to_owned()
        }
        Heading::Draws { per_step, sampling } => ctx.ui_with(
            "submit_checking_draws",
            &[
                ("per_step", &per_step.to_string()),
                ("sampling", &sampling.to_string()),
            ],
        ),
        Heading::Feeds => ctx.ui("submit_checking_feeds").to_owned(),
        Heading::Repeat => ctx.ui("submit_checking_repeat").to_owned(),
        Heading::Tokens => ctx.ui("submit_checking_tokens").to_owned(),
        Heading::Values => ctx.ui("values_checking").to_owned(),
        Heading::Measure {
            rounds,
            against_quest,
            piece,
            metric,
        } => ctx.ui_with(
            match (against_quest, piece) {
                (true, Some(Piece::Sample)) => "submit_measuring_sampler",
                (true, Some(Piece::Speculate)) => "submit_measuring_speculator",
                (true, Some(Piece::Prefill)) => "submit_measuring_prefill",
                (true, Some(Piece::Batching)) => "submit_measuring_batching",
                (true, Some(Piece::Server)) => "submit_measuring_server",
                (true, _) => "submit_measuring_pieces",
                (false, _) => "submit_measuring",
            },
            &[
                ("rounds", &rounds.to_string()),
                ("metric", &metric_name(ctx, metric)),
            ],
        ),
    };
    println!("{text}");
}

/// A passed check, with what it found.
pub(crate) fn say_passed(ctx: &Ctx, lesson: &Lesson, passed: &Passed) {
    let ok = |text: &str| println!("  ✓ {text}");
    match passed {
        Passed::NotAsked
        | Passed::Copied
        | Passed::Build
        | Passed::Behaviour { held_back: None } => {}
        Passed::Behaviour {
            held_back: Some(held),
        } => println!("  ! {}", super::run::held_back_said(ctx, held)),
        Passed::Rules => ok(ctx.ui("submit_code_ok")),
        Passed::Piece(verdict) => {
            if let Some(piece) = lesson.spec.piece {
                super::piece::say(ctx, lesson, piece, Some(verdict), true);
            }
        }
        Passed::Logits {
            steps,
            largest,
            at_step,
            near_ties,
            tolerance,
        } => {
            ok(&ctx.ui_with(
                "submit_logits_ok",
                &[
                    ("steps", &steps.to_string()),
                    ("tolerance", &format!("{tolerance:.0e}")),
                    ("largest", &format!("{largest:.1e}")),
                    ("step", &at_step.to_string()),
                ],
            ));
            if !near_ties.is_empty() {
                let listed: Vec<String> = near_ties.iter().map(usize::to_string).collect();
                let gap = format!("{:.0e}", 2.0 * tolerance);
                let steps = listed.join(", ");
                let text = ctx.ui_with(
                    "submit_logits_near_ties",
                    &[("steps", &steps), ("gap", &gap)],
                );
                println!("    {text}");
            }
        }
        Passed::Draws {
            distance,
            honest,
            spread,
        } => ok(&draws_numbers(
            ctx,
            lesson,
            "submit_draws_ok",
            *distance,
            *honest,
            *spread,
        )),
        Passed::Feeds => ok(ctx.ui("submit_feeds_ok")),
        Passed::Repeat { n } => ok(&ctx.ui_with("submit_repeat_ok", &[("n", &n.to_string())])),
        Passed::Tokens(agreed) => match agreed {
            TokensAgreed::NotCompared => {}
            TokensAgreed::Same { n } => {
                ok(&ctx.ui_with("submit_tokens_ok", &[("n", &n.to_string())]))
            }
            TokensAgreed::NearTie(at) => {
                ok(&ctx.ui_with("submit_tokens_near_tie", &[("at", &at.to_string())]))
            }
            TokensAgreed::Quests => ok(ctx.ui("submit_tokens_quests")),
        },
        Passed::Values(compared) => {
            super::values::say(ctx, lesson, compared);
            ok(ctx.ui("values_ok"));
        }
        Passed::Measure {
            rounds,
            effect,
            backend,
        } => {
            say_rounds(ctx, rounds);
            if let Effect::Elsewhere(kinds) = effect {
                let expected: Vec<&str> = kinds.iter().map(|kind| kind.key()).collect();
                let text = ctx.ui_with(
                    "submit_effect_elsewhere",
                    &[
                        ("backend", backend.name()),
                        ("expected", &expected.join(", ")),
                    ],
                );
                println!("  {text}");
            }
        }
    }
}

/// A refused check: what it found, said; then why it refused, for the learner to read
/// last.
pub(crate) fn say_refused(ctx: &Ctx, lesson: &Lesson, refused: &Refused) -> String {
    match refused {
        Refused::Rules(findings) => {
            for finding in findings {
                println!("  {}", finding_text(ctx, lesson, finding));
            }
            ctx.ui("submit_code_failed").to_owned()
        }
        Refused::Copied => {
            ctx.ui_with("submit_copied_solution", &[("id", lesson.meta.id.as_str())])
        }
        Refused::Piece { judged, verdict } => {
            if let Some(piece) = lesson.spec.piece {
                super::piece::say(ctx, lesson, piece, verdict.as_ref(), true);
            }
            let why = match judged {
                PieceJudged::Wrong => "submit_piece_failed",
                PieceJudged::Fused => "submit_piece_fused",
                _ => "submit_piece_missing",
            };
            ctx.ui(why).to_owned()
        }
        Refused::Calls(problem) => {
            let piece = lesson.spec.piece.expect("only a lesson's piece is counted");
            let text = super::piece::calls_said(ctx, piece, problem);
            println!("  ✗ {text}");
            text
        }
        Refused::LogitsBeyond {
            gap,
            tolerance,
            apart,
        } => {
            say_logits_beyond(ctx, gap, *tolerance, apart);
            // A lesson may say what such a difference usually is (`messages: logits:`).
            lesson_says(
                ctx,
                lesson,
                quest::course::LOGITS_MESSAGE,
                "submit_logits_failed",
            )
            .to_owned()
        }
        Refused::LogitsMissing { steps, expected } => {
            say_missing(ctx, "submit_logits_missing", *steps, *expected);
            ctx.ui("submit_logits_failed").to_owned()
        }
        Refused::DrawsBeyond {
            distance,
            honest,
            spread,
            worst,
        } => {
            let beyond = draws_numbers(
                ctx,
                lesson,
                "submit_draws_beyond",
                *distance,
                *honest,
                *spread,
            );
            println!("  ✗ {beyond}");
            println!("    {}", draws_step(ctx, worst));
            // A lesson may say what such a gap usually is (`messages: draws:`).
            lesson_says(
                ctx,
                lesson,
                quest::course::DRAWS_MESSAGE,
                "submit_draws_failed",
            )
            .to_owned()
        }
        Refused::DrawsMissing { steps, expected } => {
            say_missing(ctx, "submit_draws_missing", *steps, *expected);
            ctx.ui("submit_draws_failed").to_owned()
        }
        // A figure timed inside the process is trusted only within quest's clock.
        Refused::InsideOverClock { build, step } => {
            let text = super::run::inside_over_clock_said(ctx, *build, *step);
            println!("  ✗ {text}");
            text
        }
        Refused::ClockDisagrees(disagreement) => {
            println!("  ✗ {}", super::run::disagreement_said(ctx, disagreement));
            ctx.ui("submit_clock_failed").to_owned()
        }
        Refused::Batch { got, batch } => {
            let text = ctx.ui_with(
                "submit_batch_differs",
                &[("got", &got.to_string()), ("batch", &batch.to_string())],
            );
            println!("  {text}");
            ctx.ui("submit_batch_failed").to_owned()
        }
        Refused::Feeds(problems) => {
            for problem in problems {
                println!("  {}", feed_text(ctx, lesson, problem));
            }
            ctx.ui("submit_feeds_failed").to_owned()
        }
        Refused::Repeat { at, first, again } => {
            let text = ctx.ui_with("submit_repeat_differs", &[("at", &at.to_string())]);
            println!("  ✗ {text}");
            println!("    1: {first}");
            println!("    2: {again}");
            ctx.ui("submit_repeat_failed").to_owned()
        }
        Refused::Tokens { at, expected, got } => {
            let text = ctx.ui_with("submit_tokens_differ", &[("at", &at.to_string())]);
            println!("  {text}");
            println!("    {}: {expected}", ctx.ui("submit_expected"));
            println!("    {}: {got}", ctx.ui("submit_got"));
            // A lesson may say why its tokens must agree (`messages: tokens:`).
            lesson_says(
                ctx,
                lesson,
                quest::course::TOKENS_MESSAGE,
                "submit_behaviour_failed",
            )
            .to_owned()
        }
        Refused::Values { compared, .. } => {
            super::values::say(ctx, lesson, compared);
            ctx.ui("values_failed").to_owned()
        }
        Refused::Unmoved { rounds, unmoved } => {
            say_rounds(ctx, rounds);
            say_unmoved(lesson, unmoved);
            ctx.ui("submit_moves_failed").to_owned()
        }
        Refused::EffectMissing {
            rounds,
            ratio,
            at_least,
        } => say_effect_missing(ctx, rounds, *ratio, *at_least),
    }
}

/// The medians, and the effect missing where the lesson says it shows: its ratio
/// against the one asked for.
fn say_effect_missing(ctx: &Ctx, rounds: &Rounds, ratio: Option<f64>, at_least: f64) -> String {
    say_rounds(ctx, rounds);
    let ratio = format!("{:.2}", ratio.unwrap_or(0.0));
    let at_least = format!("{at_least:.2}");
    let text = ctx.ui_with(
        "submit_effect_missing",
        &[("ratio", &ratio), ("at_least", &at_least)],
    );
    println!("  {text}");
    ctx.ui("submit_measure_failed").to_owned()
}

/// A check's output for `steps` steps where quest's ran `expected`, said in `key`.
fn say_missing(ctx: &Ctx, key: &str, steps: usize, expected: usize) {
    let text = ctx.ui_with(
        key,
        &[
            ("steps", &steps.to_string()),
            ("expected", &expected.to_string()),
        ],
    );
    println!("  ✗ {text}");
}

/// Each metric the change is about that did not move, in the lesson's words, with the
/// starting code's median and this code's.
fn say_unmoved(lesson: &Lesson, unmoved: &[(&Move, Option<f64>, Option<f64>)]) {
    for (moved, before, after) in unmoved {
        let shown = |v: &Option<f64>| v.map_or_else(|| "?".to_owned(), number);
        let template = lesson
            .meta
            .messages
            .get(&moved.id)
            .map_or(moved.id.as_str(), String::as_str);
        let text = quest::course::fill_placeholders(
            template,
            &[("before", &shown(before)), ("after", &shown(after))],
        );
        println!("  ✗ {text}");
    }
}

/// The medians of the interleaved rounds, and of the lesson's other metrics.
fn say_rounds(ctx: &Ctx, rounds: &Rounds) {
    let unit = rounds.metric.unit();
    println!(
        "  {}: {} → {} {unit} (×{:.2})",
        ctx.ui("submit_medians"),
        number(rounds.median_before),
        number(rounds.median_after),
        rounds.improvement.unwrap_or(f64::NAN)
    );
    for &(also, before, after) in &rounds.also {
        let name = metric_name(ctx, also);
        println!("  {name}: {before:.2} → {after:.2} {}", also.unit());
    }
}

/// The first step whose logits left quest's: where, by how much, both argmaxes where
/// they differ, and the first layer apart.
fn say_logits_beyond(ctx: &Ctx, gap: &LogitsGap, tolerance: f32, apart: &LayersApart) {
    let text = ctx.ui_with(
        "submit_logits_differ",
        &[
            ("step", &gap.step.to_string()),
            ("position", &gap.position.to_string()),
            ("by", &format!("{:.3e}", gap.by)),
            ("id", &gap.id.to_string()),
            ("tolerance", &format!("{tolerance:.0e}")),
        ],
    );
    println!("  ✗ {text}");
    if gap.argmax != gap.reference_argmax {
        let text = ctx.ui_with(
            "submit_logits_argmax",
            &[
                ("reference", &gap.reference_argmax.to_string()),
                ("yours", &gap.argmax.to_string()),
            ],
        );
        println!("    {text}");
    }
    println!("    {}", layers_text(ctx, apart));
}

/// Which layer of the refused step first differs, in words.
fn layers_text(ctx: &Ctx, apart: &LayersApart) -> String {
    let LayersApart::Compared {
        step,
        layers,
        verdict,
    } = apart
    else {
        return ctx.ui("submit_layers_unknown").to_owned();
    };
    let step = step.to_string();
    match verdict {
        LayersVerdict::First { layer, by, largest } => ctx.ui_with(
            "submit_layers_first",
            &[
                ("step", &step),
                ("layer", &layer.to_string()),
                ("layers", &layers.to_string()),
                ("by", &format!("{by:.3e}")),
                ("largest", &format!("{largest:.3e}")),
            ],
        ),
        LayersVerdict::AfterLast { layers } => ctx.ui_with(
            "submit_layers_after_last",
            &[("step", &step), ("layers", &layers.to_string())],
        ),
        LayersVerdict::Unlike => ctx.ui("submit_layers_unknown").to_owned(),
    }
}

/// A draws verdict's numbers in the text `key`, with the lesson's tolerance.
fn draws_numbers(
    ctx: &Ctx,
    lesson: &Lesson,
    key: &str,
    distance: f64,
    honest: f64,
    spread: f64,
) -> String {
    let tolerance = lesson.spec.draws.map_or(0.0, |check| check.tolerance);
    ctx.ui_with(
        key,
        &[
            ("distance", &format!("{distance:.3}")),
            ("honest", &format!("{honest:.3}")),
            ("spread", &format!("{spread:.3}")),
            ("tolerance", &format!("{tolerance}")),
        ],
    )
}

/// The step whose draws are furthest from the distribution, and the token most over-drawn.
fn draws_step(ctx: &Ctx, worst: &StepDraws) -> String {
    let percent = |share: f64| format!("{:.1}", 100.0 * share);
    ctx.ui_with(
        "submit_draws_step",
        &[
            ("step", &worst.step.to_string()),
            ("distance", &format!("{:.3}", worst.distance)),
            ("honest", &format!("{:.3}", worst.honest)),
            ("token", &worst.token.to_string()),
            ("share", &percent(worst.share)),
            ("probability", &percent(worst.probability)),
            ("outside", &percent(worst.outside)),
        ],
    )
}

/// What the lesson says in `messages:` under `key` (why a check usually fails there), or
/// quest's own `fallback` text.
fn lesson_says<'a>(ctx: &'a Ctx, lesson: &'a Lesson, key: &str, fallback: &'a str) -> &'a str {
    lesson
        .meta
        .messages
        .get(key)
        .map_or_else(|| ctx.ui(fallback), String::as_str)
}

/// The text of a finding, in the learner's language, with where it is.
pub fn finding_text(ctx: &Ctx, lesson: &Lesson, finding: &Finding) -> String {
    let text = match finding.rule.as_str() {
        rules::SYNTAX => ctx.ui_with("check_syntax", &[("call", &finding.call)]),
        rules::NO_REGION => ctx.ui_with("check_no_region", &[("call", &finding.call)]),
        rules::ESCAPE => ctx.ui_with("check_escape", &[("call", &finding.call)]),
        rule => {
            let template = lesson.meta.messages.get(rule).map_or(rule, String::as_str);
            quest::course::fill_placeholders(template, &[("call", &finding.call)])
        }
    };
    let via = finding.via.map_or_else(String::new, |line| {
        format!(
            " {}",
            ctx.ui_with("check_via", &[("line", &line.to_string())])
        )
    });
    let file = lesson
        .spec
        .exercise
        .as_deref()
        .unwrap_or(Path::new("exercise"))
        .display();
    format!("{file}:{}: {text}{via}", finding.line)
}

/// What a broken feed rule says, in the learner's language, with the exercise's path.
fn feed_text(ctx: &Ctx, lesson: &Lesson, problem: &FeedProblem) -> String {
    let message = |rule: &FeedRule, fills: &[(&str, &str)]| {
        let template = lesson
            .meta
            .messages
            .get(&rule.id)
            .map_or(rule.id.as_str(), String::as_str);
        quest::course::fill_placeholders(template, fills)
    };
    let text = match problem {
        FeedProblem::NotRecorded => ctx.ui("submit_feeds_unrecorded").to_owned(),
        FeedProblem::FirstToken {
            rule,
            positions,
            limit,
        } => message(
            rule,
            &[
                ("positions", &positions.to_string()),
                ("limit", &limit.to_string()),
            ],
        ),
        FeedProblem::Prefill {
            rule,
            call,
            positions,
            limit,
        } => message(
            rule,
            &[
                ("call", &call.to_string()),
                ("positions", &positions.to_string()),
                ("limit", &limit.to_string()),
            ],
        ),
        FeedProblem::Step {
            rule,
            step,
            positions,
            limit,
        } => message(
            rule,
            &[
                ("step", &step.to_string()),
                ("positions", &positions.to_string()),
                ("limit", &limit.to_string()),
            ],
        ),
    };
    let file = lesson
        .spec
        .exercise
        .as_deref()
        .unwrap_or(Path::new("exercise"))
        .display();
    format!("{file}: {text}")
}
