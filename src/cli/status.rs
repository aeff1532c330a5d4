//! `quest status`: the header of the source page — level and name, XP, XP to the next
//! level with a bar, lessons done of total, achievements earned of total.

use anyhow::Result;

use quest::progress::{repair, Header, State};

use super::learner::Learner;
use super::Ctx;

const BAR_WIDTH: usize = 24;

/// The header's numbers, as `quest status`, `--json` and `quest serve` all show them.
pub fn header(ctx: &Ctx, learner: &Learner, state: &State) -> Header {
    Header::new(
        &ctx.course,
        &learner.levels,
        &learner.achievements,
        state,
        ctx.lang,
        quest::device::Backend::detect(),
    )
}

pub fn status(ctx: &Ctx, verbose: bool, repair_file: bool, json: bool) -> Result<()> {
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
    if json {
        let header = header(ctx, &learner, learner.store.state());
        println!("{}", serde_json::to_string_pretty(&header)?);
        return Ok(());
    }
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
    let h = header(ctx, learner, state);
    let mut out = format!("{} {} · {}\n", ctx.ui("level"), h.level, h.level_name);
    let filled = (h.bar_fraction * BAR_WIDTH as f64).round() as usize;
    let bar = format!(
        "{}{}",
        "█".repeat(filled.min(BAR_WIDTH)),
        "░".repeat(BAR_WIDTH - filled.min(BAR_WIDTH))
    );
    let next = match (&h.next_level_name, h.xp_to_go) {
        (Some(name), Some(missing)) => ctx.ui_with(
            "next_level",
            &[("xp", &missing.to_string()), ("level", name)],
        ),
        _ => ctx.ui("max_level").to_owned(),
    };
    out += &format!("{} {}  {bar}  {next}\n", ctx.ui("total_xp"), h.xp);
    out += &format!(
        "{} {}/{} ({})   {} {}/{}\n",
        ctx.ui("lessons"),
        h.lessons_done,
        h.lessons_total,
        ctx.ui_with(
            "percent_complete",
            &[("n", &h.percent_complete.to_string())]
        ),
        ctx.ui("achievements"),
        h.achievements_earned,
        h.achievements_total
    );
    if !h.lessons_elsewhere.is_empty() {
        out += &ctx.ui_with(
            "lessons_elsewhere",
            &[("lessons", &h.lessons_elsewhere.join(", "))],
        );
        out.push('\n');
    }
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
