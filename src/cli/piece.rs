//! The piece check and the seam's counts, as the learner reads them: `quest run` shows the
//! verdict before the run, `quest submit` refuses on it, and on counts that do not show
//! the learner's code ran ([`quest::judge::piece_calls_problem`]).

use std::path::Path;

use anyhow::Result;
use quest::course::spec::Piece;
use quest::course::Lesson;
use quest::judge::CallsProblem;
use quest::judge::PieceJudged;
use quest::lab::runner::RunRequest;
use quest::lab::Report;
use quest::lm::piece_check::{Found, Row, Verdict};

use super::Ctx;

/// Runs the piece check of `lesson` (its `piece:`) on `binary` and prints it: every row
/// with `all_rows`, else the summary and the first wrong rows.
pub(crate) fn check(
    ctx: &Ctx,
    lesson: &Lesson,
    binary: &Path,
    request: &RunRequest,
    all_rows: bool,
) -> Result<Option<PieceJudged>> {
    let Some(piece) = lesson.spec.piece else {
        return Ok(None);
    };
    let verdict = quest::lab::runner::check_piece(binary, request, piece)
        .map_err(|e| super::said::explain_run_error(ctx, e))?;
    Ok(Some(say(ctx, lesson, piece, verdict.as_ref(), all_rows)))
}

/// The piece check's verdict on `piece` (`None`: never handed to the model), printed:
/// every row with `all_rows`, else the summary and the first wrong rows; and how it
/// judges the piece ([`quest::judge::judge_piece`]).
pub(crate) fn say(
    ctx: &Ctx,
    lesson: &Lesson,
    piece: Piece,
    verdict: Option<&Verdict>,
    all_rows: bool,
) -> PieceJudged {
    let id = lesson.meta.id.as_str();
    let judged = quest::judge::judge_piece(verdict);
    let Some(verdict) = verdict else {
        println!(
            "  ✗ {}",
            ctx.ui_with("piece_not_handed", &[("piece", piece.method())])
        );
        return judged;
    };
    println!(
        "{}",
        ctx.ui_with(
            match piece {
                Piece::Speculate => "piece_checking_speculate",
                Piece::Prefill => "piece_checking_prefill",
                Piece::Batching => "piece_checking_batching",
                Piece::Server => "piece_checking_server",
                _ => "piece_checking",
            },
            &[
                ("piece", piece.method()),
                ("cases", &verdict.rows.len().to_string())
            ]
        )
    );
    match judged {
        PieceJudged::NotWritten => {
            println!(
                "  ✗ {}",
                ctx.ui_with(
                    "piece_not_written",
                    &[("piece", piece.method()), ("id", id)]
                )
            );
            return judged;
        }
        // The trait's default (or quest's pieces) ran on every shape: one line says it.
        PieceJudged::QuestRan => {
            let every = ctx.ui("piece_every_shape");
            println!(
                "  ✗ {}",
                ctx.ui_with(
                    "piece_row_quest_ran",
                    &[("case", every), ("piece", piece.method())]
                )
            );
            println!("  {}", summary(ctx, piece, verdict));
            return judged;
        }
        _ => {}
    }
    let wrong: Vec<&Row> = verdict
        .rows
        .iter()
        .filter(|row| !row.found.is_right())
        .collect();
    let shown = if all_rows { verdict.rows.len() } else { 3 };
    for row in verdict
        .rows
        .iter()
        .filter(|row| all_rows || !row.found.is_right())
        .take(shown)
    {
        println!("  {}", row_text(ctx, piece, row));
    }
    if !all_rows && wrong.len() > shown {
        println!(
            "  {}",
            ctx.ui_with(
                "piece_more_wrong",
                &[("n", &(wrong.len() - shown).to_string()), ("id", id)]
            )
        );
    }
    println!("  {}", summary(ctx, piece, verdict));
    if let Some(peaks) = &verdict.peaks {
        let mb = |bytes: u64| format!("{:.2}", bytes as f64 / 1e6);
        println!(
            "  {}",
            ctx.ui_with(
                "piece_scores_peak",
                &[
                    ("keys", &peaks.keys.to_string()),
                    ("one_call", &mb(peaks.one_call_bytes)),
                    ("blocks", &mb(peaks.blocks_bytes)),
                ]
            )
        );
    }
    judged
}

fn summary(ctx: &Ctx, piece: Piece, verdict: &Verdict) -> String {
    ctx.ui_with(
        match piece {
            Piece::Speculate => "piece_summary_proposals",
            Piece::Prefill => "piece_summary_chunks",
            Piece::Batching => "piece_summary_batching",
            Piece::Server => "piece_summary_server",
            _ => "piece_summary",
        },
        &[
            ("right", &verdict.right().to_string()),
            ("total", &verdict.rows.len().to_string()),
        ],
    )
}

fn row_text(ctx: &Ctx, piece: Piece, row: &Row) -> String {
    let shape = row.shape.as_str();
    // A sampler's difference is a share of its draws, not of a value.
    let (right_key, wrong_key) = match piece {
        Piece::Sample => ("piece_row_right_draws", "piece_row_wrong_draws"),
        // A speculative decoder is right in tokens, not within a difference.
        Piece::Speculate => ("piece_row_right_tokens", "piece_row_wrong"),
        _ => ("piece_row_right", "piece_row_wrong"),
    };
    match &row.found {
        Found::Right { difference } => format!(
            "✓ {}",
            ctx.ui_with(
                right_key,
                &[
                    ("case", shape),
                    ("difference", &format!("{difference:.1e}"))
                ]
            )
        ),
        Found::Wrong {
            difference,
            allowed,
        } => format!(
            "✗ {}",
            ctx.ui_with(
                wrong_key,
                &[
                    ("case", shape),
                    ("difference", &format!("{difference:.2e}")),
                    ("allowed", &format!("{allowed:.0e}"))
                ]
            )
        ),
        Found::WrongShape { got, want } => format!(
            "✗ {}",
            ctx.ui_with(
                "piece_row_wrong_shape",
                &[
                    ("case", shape),
                    ("got", &format!("{got:?}")),
                    ("want", &format!("{want:?}"))
                ]
            )
        ),
        Found::QuestRan => format!(
            "✗ {}",
            ctx.ui_with(
                "piece_row_quest_ran",
                &[("case", shape), ("piece", piece.method())]
            )
        ),
        Found::Fused { op, evaluated } => format!(
            "✗ {}",
            ctx.ui_with(
                if *evaluated {
                    "piece_row_fused_evaluated"
                } else {
                    "piece_row_fused"
                },
                &[("case", shape), ("op", op.primitive()), ("path", op.path())]
            )
        ),
        Found::Evaluated => format!(
            "✗ {}",
            ctx.ui_with("piece_row_evaluated", &[("case", shape)])
        ),
        Found::NotWritten { message } => format!(
            "✗ {}",
            ctx.ui_with(
                "piece_row_not_written",
                &[("case", shape), ("message", message)]
            )
        ),
        Found::OtherTokens { got, want } => format!(
            "✗ {}",
            ctx.ui_with(
                "piece_row_other_tokens",
                &[
                    ("case", shape),
                    ("got", &format!("{got:?}")),
                    ("want", &format!("{want:?}"))
                ]
            )
        ),
        Found::Failed { message } => format!(
            "✗ {}",
            ctx.ui_with("piece_row_failed", &[("case", shape), ("message", message)])
        ),
    }
}

/// Where `report`'s counts (quest's seam's, from its line) do not show that the model
/// called the learner's piece of `lesson` in every layer: what that means, to print.
pub(crate) fn calls_text(ctx: &Ctx, lesson: &Lesson, report: &Report) -> Option<String> {
    let piece = lesson.spec.piece?;
    let problem = quest::judge::piece_calls_problem(piece, report.calls.as_ref(), report.layers)?;
    Some(calls_said(ctx, piece, &problem))
}

/// What a problem with the seam's counts of `piece` means, in the learner's language.
pub(crate) fn calls_said(ctx: &Ctx, piece: Piece, problem: &CallsProblem) -> String {
    let method = piece.method();
    match *problem {
        CallsProblem::NotCounted => ctx.ui("calls_not_counted").to_owned(),
        CallsProblem::NeverCalled => ctx.ui_with("calls_never", &[("piece", method)]),
        CallsProblem::QuestRan { quest, seam } => ctx.ui_with(
            "calls_quest_ran",
            &[
                ("piece", method),
                ("quest", &quest.to_string()),
                ("seam", &seam.to_string()),
            ],
        ),
        CallsProblem::Fused { op, fused, seam } => ctx.ui_with(
            "calls_fused",
            &[
                ("piece", method),
                ("op", op.primitive()),
                ("path", op.path()),
                ("fused", &fused.to_string()),
                ("seam", &seam.to_string()),
            ],
        ),
        CallsProblem::Evaluated { evaluated, seam } => ctx.ui_with(
            "calls_evaluated",
            &[
                ("piece", method),
                ("evaluated", &evaluated.to_string()),
                ("seam", &seam.to_string()),
            ],
        ),
        CallsProblem::TooFew { seam, layers } => ctx.ui_with(
            "calls_too_few",
            &[
                ("piece", method),
                ("seam", &seam.to_string()),
                ("layers", &layers.to_string()),
            ],
        ),
    }
}
