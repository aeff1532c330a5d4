//! A lesson's `values:`: quest recomputes what the exercise computed, from the inputs it
//! reported, and says which value differs and by how much.

use anyhow::Result;

use quest::course::Lesson;
use quest::judge::ValuesCompared;
use quest::lab::{self, Report, Values};

use super::Ctx;

/// What the check found: quest's own values (recorded with the run, for measured quiz
/// answers) and whether every checked value agrees.
pub struct ValuesChecked {
    pub quest: Values,
    pub ok: bool,
}

/// Checks `report`'s values against quest's and prints one line per value, in the
/// learner's language; `None` when the lesson has no `values:`.
pub fn check(ctx: &Ctx, lesson: &Lesson, report: &Report) -> Result<Option<ValuesChecked>> {
    let Some(spec) = &lesson.spec.values else {
        return Ok(None);
    };
    let compared = quest::judge::compare_values(spec, report)
        .map_err(|e| super::said::explain_check_error(ctx, e))?;
    println!("{}", ctx.ui("values_checking"));
    say(ctx, lesson, &compared);
    let ok = compared.agree();
    Ok(Some(ValuesChecked {
        quest: compared.quest,
        ok,
    }))
}

/// Each checked value, the run's beside quest's, and what quest computed beside them.
pub fn say(ctx: &Ctx, lesson: &Lesson, compared: &ValuesCompared) {
    let names = lesson
        .spec
        .values
        .as_ref()
        .map_or(&[][..], |spec| &spec.check[..]);
    for c in &compared.checked {
        let line = match c.yours {
            None => ctx.ui_with(
                "values_missing",
                &[("name", &c.key), ("quest", &shown(c.quest))],
            ),
            Some(yours) if c.ok => {
                ctx.ui_with("values_same", &[("name", &c.key), ("value", &shown(yours))])
            }
            Some(yours) => ctx.ui_with(
                "values_differ",
                &[
                    ("name", &c.key),
                    ("yours", &shown(yours)),
                    ("quest", &shown(c.quest)),
                    ("diff", &shown(yours - c.quest)),
                    (
                        "percent",
                        &format!("{:+.3}", 100.0 * (yours - c.quest) / c.quest.abs()),
                    ),
                ],
            ),
        };
        let mark = if c.ok { "✓" } else { "✗" };
        println!("  {mark} {line}");
    }
    // What quest computed beside them (the measured slope, the terms of the line).
    let also: Vec<String> = compared
        .quest
        .0
        .iter()
        .filter(|(key, _)| !names.iter().any(|n| n == lab::base_name(key)))
        .map(|(key, value)| format!("{key} = {}", shown(*value)))
        .collect();
    if !also.is_empty() {
        println!("  {}", ctx.ui("values_also"));
        for line in also {
            println!("    {line}");
        }
    }
}

/// A value with six significant digits, however large or small.
fn shown(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e6).contains(&magnitude) {
        format!("{value:.5e}")
    } else {
        let digits = if magnitude < 1.0 {
            6
        } else {
            (5 - magnitude.log10().floor() as i32).max(0) as usize
        };
        format!("{value:.digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn values_show_six_significant_digits() {
        assert_eq!(shown(539_227_648.0), "5.39228e8");
        assert_eq!(shown(12.345678), "12.3457");
        assert_eq!(shown(-0.0123456), "-0.012346");
        assert_eq!(shown(0.0), "0.000000");
        assert_eq!(shown(123456.7), "123457");
    }
}
