//! `quest status`: the header of the source page — level and name, XP, XP to the next
//! level with a bar, lessons done of total, achievements earned of total.

use anyhow::Result;

use quest::progress::{repair, State};

use super::learner::Learner;
use super::Ctx;

const BAR_WIDTH: usize = 24;

pub fn status(ctx: &Ctx, verbose: bool, repair_file: bool) -> Result<()> {
    if repair_file {
        let path = quest::progress::default_path()?;
        match repair(&path)? {
            Some(backup) => println!(
                "{}",
                ctx.ui_with(
                    "repaired",
                    &[
                        ("path", &path.display().to_string()),
                        ("backup", &backup.display().to_string())
                    ]
                )
            ),
            None => println!(
                "{}",
                ctx.ui_with(
                    "nothing_to_repair",
                    &[("path", &path.display().to_string())]
                )
            ),
        }
        return Ok(());
    }
    let learner = Learner::open(ctx)?;
    print!("{}", render(ctx, &learner, learner.store.state(), verbose));
    if verbose {
        println!(
            "{}: {}",
            ctx.ui("progress_file"),
            learner.store.path().display()
        );
    }
    Ok(())
}

/// The status text (no colour, stable: snapshot-tested).
pub fn render(ctx: &Ctx, learner: &Learner, state: &State, verbose: bool) -> String {
    let xp = state.total_xp();
    let levels = &learner.levels;
    let level = levels.level_for(xp);
    let number = levels.number_for(xp) - 1; // the course counts from level 0
    let mut out = format!(
        "{} {number} · {}\n",
        ctx.ui("level"),
        level.name.get(ctx.lang)
    );
    let filled = (levels.progress_fraction(xp) * BAR_WIDTH as f64).round() as usize;
    let bar = format!(
        "{}{}",
        "█".repeat(filled.min(BAR_WIDTH)),
        "░".repeat(BAR_WIDTH - filled.min(BAR_WIDTH))
    );
    let next = match (levels.next_level(xp), levels.xp_to_next(xp)) {
        (Some(next), Some(missing)) => ctx.ui_with(
            "next_level",
            &[
                ("xp", &missing.to_string()),
                ("level", next.name.get(ctx.lang)),
            ],
        ),
        _ => ctx.ui("max_level").to_owned(),
    };
    out += &format!("{} {xp}  {bar}  {next}\n", ctx.ui("total_xp"));
    let lessons: Vec<&str> = ctx.course.lesson_ids().collect();
    let done = lessons
        .iter()
        .filter(|id| state.lesson(id).is_some_and(|r| r.is_done()))
        .count();
    let earned = learner
        .achievements
        .iter()
        .filter(|a| state.has_award(&a.award_key()))
        .count();
    let percent = (100 * done).checked_div(lessons.len()).unwrap_or(0);
    out += &format!(
        "{} {done}/{} ({})   {} {earned}/{}\n",
        ctx.ui("lessons"),
        lessons.len(),
        ctx.ui_with("percent_complete", &[("n", &percent.to_string())]),
        ctx.ui("achievements"),
        learner.achievements.len()
    );
    if verbose {
        for a in &learner.achievements {
            let mark = if state.has_award(&a.award_key()) {
                "✓"
            } else {
                " "
            };
            out += &format!(
                "  [{mark}] {} — {} ({} XP)\n",
                a.name.get(ctx.lang),
                a.description.get(ctx.lang),
                a.xp
            );
        }
    }
    out
}
