//! A submission's checks, interpreted from the lesson's data: the code rules (read
//! from the syntax tree with syn, not a regex), and the card and quiz. Knows nothing
//! of the progress file: callers hand it plain numbers.

pub mod card;
pub mod figures;
pub mod glossary;
pub mod rules;

use crate::course::Lesson;

/// What is wrong with a lesson's code as data, read from the syntax tree alone (nothing
/// built or run): its starting code must break one of its rules unless the lesson judges
/// by numbers (logits, draws, values: running both proves those), its solution must keep
/// every rule and differ from the starting code, and neither may start with `//!` or
/// `#![…]` (quest includes exercise files, where those are not allowed). `solution` is
/// the solution's path and text, where the lesson has one. `quest dev check` runs this
/// before it builds anything; a test runs it on every lesson in a second.
pub fn lesson_code(
    lesson: &Lesson,
    starting: &str,
    solution: Option<(&std::path::Path, &str)>,
) -> Vec<String> {
    let id = &lesson.meta.id;
    let rules_of = &lesson.spec.rules;
    let mut problems = Vec::new();
    let starting_breaks_rules = !rules::check(starting, rules_of).is_empty();
    let judged_by_numbers =
        lesson.spec.logits.is_some() || lesson.spec.draws.is_some() || lesson.spec.values.is_some();
    if !rules_of.is_empty() && !judged_by_numbers && !starting_breaks_rules {
        problems.push(format!(
            "{id}: the starting code already keeps every rule: the exercise asks nothing"
        ));
    }
    let mut sources = vec![("starting code".to_owned(), starting)];
    if let Some((path, solution)) = solution {
        for finding in rules::check(solution, rules_of) {
            problems.push(format!(
                "{}:{}: the solution breaks rule `{}` ({})",
                path.display(),
                finding.line,
                finding.rule,
                finding.call
            ));
        }
        if solution == starting {
            problems.push(format!("{id}: the solution is the starting code"));
        }
        sources.push((path.display().to_string(), solution));
    }
    for (what, source) in sources {
        if let Ok(file) = syn::parse_file(source) {
            if !file.attrs.is_empty() || file.shebang.is_some() {
                problems.push(format!(
                    "{id}: the {what} starts with `//!` or `#![…]`; quest includes exercise files \
                     with `include!`, where those are not allowed: use `//` comments"
                ));
            }
        }
    }
    problems
}
