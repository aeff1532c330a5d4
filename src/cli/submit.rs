//! `quest submit` and `quest card`: the lesson's payoff. A submission passes when the
//! decode loop has no per-step host sync (read from the syntax tree), produces the
//! reference solution's tokens, has been measured beside the original hand loop, and
//! the card carries numbers quest measured and the right term.

use anyhow::{bail, Result};

use quest::check::card::{check_claim, median, Refused, Term, CARD_TOLERANCE, CORRECT_TERM};
use quest::check::code::check_decode_loop;
use quest::course::Lesson;
use quest::lab::{self, Code, Report, RunRequest};
use quest::progress::{Card, CodeKind, CodeRef, Run, State, Submission, Timestamp};

use super::learner::{current_exercise, run_record, Learner};
use super::{original_exercise, Ctx};

/// The award key for finishing a lesson (its XP is the lesson's `xp`).
fn lesson_award(id: &str) -> String {
    format!("lesson:{id}:complete")
}

pub struct SubmitOptions {
    pub model: Option<String>,
    pub max_tokens: usize,
    pub rounds: usize,
}

pub fn submit(ctx: &Ctx, lesson: &Lesson, options: &SubmitOptions) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let (source, code) = current_exercise(ctx, lesson)?;
    let mut learner = Learner::open(ctx)?;

    // 1. The code.
    println!("{}", ctx.ui("submit_checking_code"));
    let findings = check_decode_loop(&String::from_utf8_lossy(&source));
    for finding in &findings {
        let text = ctx.ui_with(
            finding.problem.ui_key(),
            &[("call", finding.problem.call())],
        );
        println!(
            "  {}:{}: {text}",
            lesson.meta.exercise.display(),
            finding.line
        );
    }
    if !findings.is_empty() {
        record_submission(ctx, &mut learner, id, code, false, false)?;
        bail!(ctx.ui("submit_code_failed").to_owned());
    }
    println!("  ✓ {}", ctx.ui("submit_code_ok"));

    // 2. Build all three: the learner's loop, the original hand loop, the reference.
    let exercise = lab::build(&ctx.root, id, Code::Exercise, true)?;
    let hand_loop = lab::build(&ctx.root, id, Code::HandLoop, true)?;
    let solution = lab::build(&ctx.root, id, Code::Solution, true)?;
    let request = RunRequest {
        model: options
            .model
            .clone()
            .unwrap_or_else(|| lesson.meta.model.clone()),
        prompt: lab::DEFAULT_PROMPT.into(),
        max_tokens: options.max_tokens,
    };

    // 3. The behaviour: the reference's greedy tokens, exactly.
    println!("{}", ctx.ui("submit_checking_tokens"));
    let reference = lab::run(&solution, &request)?;
    let yours = lab::run(&exercise, &request)?;
    if let Some(at) = first_difference(&reference.tokens, &yours.tokens) {
        println!(
            "  {}",
            ctx.ui_with("submit_tokens_differ", &[("at", &at.to_string())])
        );
        println!(
            "    {}: {}",
            ctx.ui("submit_expected"),
            reference.text.trim()
        );
        println!("    {}: {}", ctx.ui("submit_got"), yours.text.trim());
        record_submission(ctx, &mut learner, id, code, false, false)?;
        bail!(ctx.ui("submit_behaviour_failed").to_owned());
    }
    println!(
        "  ✓ {}",
        ctx.ui_with(
            "submit_tokens_ok",
            &[("n", &yours.tokens.len().to_string())]
        )
    );

    // 4. The measurements: original and yours, interleaved, medians.
    println!(
        "{}",
        ctx.ui_with(
            "submit_measuring",
            &[("rounds", &options.rounds.to_string())]
        )
    );
    let original_code = CodeRef::of(CodeKind::Original, original_exercise(lesson)?.as_bytes());
    let mut before = Vec::new();
    let mut after = vec![yours];
    for round in 0..options.rounds {
        before.push(lab::run(&hand_loop, &request)?);
        if round + 1 < options.rounds {
            after.push(lab::run(&exercise, &request)?);
        }
        println!(
            "  {} {}: {:.2} / {:.2} {}",
            ctx.ui("round"),
            round + 1,
            before[round].decode_tok_s,
            after[round].decode_tok_s,
            ctx.ui("tok_per_s")
        );
    }
    let rate = |runs: &[Report]| median(&runs.iter().map(|r| r.decode_tok_s).collect::<Vec<_>>());
    let (median_before, median_after) = (rate(&before), rate(&after));
    println!(
        "  {}: {median_before:.2} → {median_after:.2} {} (×{:.2})",
        ctx.ui("submit_medians"),
        ctx.ui("tok_per_s"),
        median_after / median_before
    );

    // 5. Record everything measured, then look at the card.
    let card_ok = learner.update(ctx, |state| {
        let record = state.lesson_mut(id);
        record.runs.extend(
            before
                .iter()
                .map(|r| run_record(r, original_code.clone(), ctx.lang)),
        );
        record
            .runs
            .extend(after.iter().map(|r| run_record(r, code.clone(), ctx.lang)));
        Ok(card_accepted(state, id, &code))
    })?;
    record_submission(ctx, &mut learner, id, code, true, card_ok)?;
    if card_ok {
        finish(ctx, &mut learner, lesson)
    } else {
        println!(
            "\n{}",
            ctx.ui_with(
                "submit_fill_card",
                &[
                    ("id", id),
                    ("before", &format!("{median_before:.2}")),
                    ("after", &format!("{median_after:.2}"))
                ]
            )
        );
        Ok(())
    }
}

fn first_difference(a: &[u32], b: &[u32]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

fn record_submission(
    ctx: &Ctx,
    learner: &mut Learner,
    id: &str,
    code: CodeRef,
    checks_passed: bool,
    passed: bool,
) -> Result<()> {
    learner.update(ctx, |state| {
        let submission = Submission {
            at: Timestamp::now(),
            code,
            passed,
            checks_passed,
            lang: ctx.lang,
        };
        state.lesson_mut(id).submissions.push(submission);
        Ok(())
    })
}

/// Awards the lesson itself (once, by key) and says so.
fn finish(ctx: &Ctx, learner: &mut Learner, lesson: &Lesson) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let xp = lesson.meta.xp;
    let new = learner.update(ctx, |state| {
        Ok(state.award(&lesson_award(id), xp, Timestamp::now()))
    })?;
    if new {
        println!(
            "✓ {}",
            ctx.ui_with("lesson_complete", &[("id", id), ("xp", &xp.to_string())])
        );
    } else {
        println!(
            "✓ {}",
            ctx.ui_with("lesson_already_complete", &[("id", id)])
        );
    }
    Ok(())
}

/// Claimed numbers that no recorded run backs: `before` against the original hand loop,
/// `after` against this version of the learner's code.
fn unbacked_numbers(runs: &[Run], code: &CodeRef, before: f64, after: f64) -> Vec<Refused> {
    let yours: Vec<Run> = runs.iter().filter(|r| r.code == *code).cloned().collect();
    [
        check_claim("before", before, runs, CodeKind::Original),
        check_claim("after", after, &yours, code.kind),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect()
}

/// Whether the saved card holds measured numbers for this code and the right term.
fn card_accepted(state: &State, id: &str, code: &CodeRef) -> bool {
    let Some(record) = state.lesson(id) else {
        return false;
    };
    let Some(card) = &record.card else {
        return false;
    };
    card.which_term == CORRECT_TERM.as_str()
        && unbacked_numbers(&record.runs, code, card.before_tok_s, card.after_tok_s).is_empty()
}

pub fn card(ctx: &Ctx, lesson: &Lesson, before: f64, after: f64, term: Term) -> Result<()> {
    let id = lesson.meta.id.as_str();
    let (_, code) = current_exercise(ctx, lesson)?;
    let mut learner = Learner::open(ctx)?;

    // The numbers must be ones quest measured here (for this version of the code).
    let runs = learner
        .store
        .state()
        .lesson(id)
        .map(|r| r.runs.clone())
        .unwrap_or_default();
    let refused = unbacked_numbers(&runs, &code, before, after);
    if !refused.is_empty() {
        for r in &refused {
            let measured: Vec<String> = r.measured.iter().map(|m| format!("{m:.2}")).collect();
            let measured = if measured.is_empty() {
                ctx.ui("card_nothing_measured").to_owned()
            } else {
                measured.join(", ")
            };
            println!(
                "  {}",
                ctx.ui_with(
                    "card_refused",
                    &[
                        ("which", ctx.ui(&format!("card_{}", r.which))),
                        ("claimed", &format!("{:.2}", r.claimed)),
                        ("measured", &measured),
                        ("tolerance", &format!("{:.0}", CARD_TOLERANCE * 100.0)),
                    ]
                )
            );
        }
        bail!(ctx.ui_with("card_not_saved", &[("id", id)]));
    }
    if term != CORRECT_TERM {
        println!("{}", ctx.ui("card_wrong_term"));
        bail!(ctx.ui_with("card_not_saved", &[("id", id)]));
    }

    let checks_passed = learner.update(ctx, |state| {
        let record = state.lesson_mut(id);
        record.card = Some(Card {
            at: Timestamp::now(),
            before_tok_s: before,
            after_tok_s: after,
            which_term: term.as_str().into(),
        });
        Ok(record
            .submissions
            .iter()
            .any(|s| s.checks_passed && s.code == code))
    })?;
    println!("✓ {}", ctx.ui_with("card_saved", &[("id", id)]));
    if checks_passed {
        record_submission(ctx, &mut learner, id, code, true, true)?;
        finish(ctx, &mut learner, lesson)
    } else {
        println!("{}", ctx.ui_with("card_then_submit", &[("id", id)]));
        Ok(())
    }
}
