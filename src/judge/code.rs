//! A lesson's code as data, read from the syntax tree (nothing built or run): whether its
//! starting code and solution are what the lesson needs, and whether your file is the
//! solution's.

use super::rules;
use crate::course::Lesson;

/// What is wrong with a lesson's code as data, read from the syntax tree alone (nothing
/// built or run): its starting code must break one of its rules unless the lesson judges
/// by numbers (a piece, logits, draws, values: running both proves those), its solution must keep
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
    let judged_by_numbers = lesson.spec.piece.is_some()
        || lesson.spec.logits.is_some()
        || lesson.spec.draws.is_some()
        || lesson.spec.values.is_some();
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

/// Whether your file (`yours`) is `solution`'s as the compiler reads it: the same syntax
/// tree, comments (doc comments too) and formatting aside. Either file unreadable as
/// Rust: not the same.
pub fn same_as_solution(yours: &str, solution: &str) -> bool {
    fn tree(source: &str) -> Option<String> {
        let mut file = syn::parse_file(source).ok()?;
        strip_docs(&mut file);
        Some(quote::ToTokens::to_token_stream(&file).to_string())
    }
    // Doc comments are attributes in the tree: out, as the other comments are.
    fn strip_docs(file: &mut syn::File) {
        use syn::visit_mut::VisitMut;
        struct NoDocs;
        impl VisitMut for NoDocs {
            fn visit_attributes_mut(&mut self, attrs: &mut Vec<syn::Attribute>) {
                attrs.retain(|a| !a.path().is_ident("doc"));
                for attr in attrs.iter_mut() {
                    self.visit_attribute_mut(attr);
                }
            }
        }
        NoDocs.visit_file_mut(file);
    }
    matches!((tree(yours), tree(solution)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod same_as_solution_tests {
    use super::same_as_solution;

    const SOLUTION: &str =
        "// the solution\nfn main() {\n    let x = 1 + 2;\n    println!(\"{x}\");\n}\n";

    #[test]
    fn comments_and_formatting_aside_a_copy_is_the_solution() {
        assert!(same_as_solution(SOLUTION, SOLUTION));
        let reformatted =
            "/// mine, honest\nfn main() { let x = 1 + 2; // sum\n println!(\"{x}\"); }";
        assert!(same_as_solution(reformatted, SOLUTION));
    }

    #[test]
    fn any_change_of_the_code_is_not() {
        assert!(!same_as_solution(
            &SOLUTION.replace("1 + 2", "2 + 1"),
            SOLUTION
        ));
        assert!(!same_as_solution(
            &SOLUTION.replace("let x", "let y").replace("{x}", "{y}"),
            SOLUTION
        ));
        assert!(!same_as_solution("fn main() {", SOLUTION));
    }
}
