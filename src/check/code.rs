//! Finds host syncs inside a decode loop by walking the Rust syntax tree.
//!
//! The decode loop is a `for` / `while` / `loop` whose body calls `.forward(…)`. Inside
//! it, anything that needs a token's value on the host — `.item()` and friends,
//! `as_slice`, `eval(…)` (but not `async_eval`), printing, detokenizing — waits for the
//! device every step. After it, the tokens must still reach the host and be decoded.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// Reading a value makes the host wait for the device.
const HOST_READS: &[&str] = &[
    "item",
    "item_exact",
    "item_cast",
    "try_item",
    "try_item_exact",
    "try_item_cast",
    "as_slice",
    "try_as_slice",
];
const PRINTS: &[&str] = &[
    "print", "println", "eprint", "eprintln", "write", "writeln", "dbg",
];

/// What a finding is about; the learner-facing text is course data keyed by these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A host read or blocking eval inside the decode loop.
    SyncInLoop { call: String },
    /// Printing inside the loop (it needs the value on the host).
    PrintInLoop { call: String },
    /// Detokenizing inside the loop.
    DecodeInLoop,
    /// No loop that calls `.forward(…)`.
    NoDecodeLoop,
    /// The tokens never come back to the host after the loop.
    NoHostReadAfterLoop,
    /// `tokenizer.decode(…)` is not called after the loop.
    NoDecodeAfterLoop,
    /// The file does not parse as Rust.
    Syntax { message: String },
}

impl Problem {
    /// The key of its text in the course's `ui:` strings.
    pub fn ui_key(&self) -> &'static str {
        match self {
            Problem::SyncInLoop { .. } => "check_sync_in_loop",
            Problem::PrintInLoop { .. } => "check_print_in_loop",
            Problem::DecodeInLoop => "check_decode_in_loop",
            Problem::NoDecodeLoop => "check_no_decode_loop",
            Problem::NoHostReadAfterLoop => "check_no_host_read_after",
            Problem::NoDecodeAfterLoop => "check_no_decode_after",
            Problem::Syntax { .. } => "check_syntax",
        }
    }

    /// The `{call}` placeholder's value.
    pub fn call(&self) -> &str {
        match self {
            Problem::SyncInLoop { call } | Problem::PrintInLoop { call } => call,
            Problem::Syntax { message } => message,
            _ => "",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub line: usize,
    pub problem: Problem,
}

/// Checks one lesson exercise for a per-step host sync in its decode loop.
pub fn check_decode_loop(source: &str) -> Vec<Finding> {
    let file = match syn::parse_file(source) {
        Ok(file) => file,
        Err(e) => {
            let line = e.span().start().line;
            return vec![Finding {
                line,
                problem: Problem::Syntax {
                    message: e.to_string(),
                },
            }];
        }
    };
    let mut loops = LoopFinder::default();
    loops.visit_file(&file);
    let Some((decode_loop, end_line)) = loops.decode_loop else {
        return vec![Finding {
            line: 1,
            problem: Problem::NoDecodeLoop,
        }];
    };
    let mut inside = Calls::default();
    inside.visit_block(&decode_loop);
    let mut findings: Vec<Finding> = inside
        .calls
        .iter()
        .filter_map(|(line, call)| {
            let problem = if HOST_READS.contains(&call.as_str()) || call == "eval" {
                Problem::SyncInLoop { call: call.clone() }
            } else if PRINTS.contains(&call.as_str()) {
                Problem::PrintInLoop {
                    call: format!("{call}!"),
                }
            } else if call == "decode" {
                Problem::DecodeInLoop
            } else {
                return None;
            };
            Some(Finding {
                line: *line,
                problem,
            })
        })
        .collect();

    // After the loop: every call in the file that starts below the loop's end.
    let mut all = Calls::default();
    all.visit_file(&file);
    let after: Vec<&String> = all
        .calls
        .iter()
        .filter(|(line, _)| *line > end_line)
        .map(|(_, c)| c)
        .collect();
    // (A loop that syncs already brought its tokens to the host; that is reported above.)
    let syncs_inside = findings
        .iter()
        .any(|f| matches!(f.problem, Problem::SyncInLoop { .. }));
    if !syncs_inside
        && !after
            .iter()
            .any(|c| HOST_READS.contains(&c.as_str()) || *c == "eval")
    {
        findings.push(Finding {
            line: end_line,
            problem: Problem::NoHostReadAfterLoop,
        });
    }
    if !after.iter().any(|c| *c == "decode") {
        findings.push(Finding {
            line: end_line,
            problem: Problem::NoDecodeAfterLoop,
        });
    }
    findings.sort_by_key(|f| f.line);
    findings
}

/// The first loop whose body calls `.forward(…)`: the decode loop.
#[derive(Default)]
struct LoopFinder {
    decode_loop: Option<(syn::Block, usize)>,
}

impl LoopFinder {
    fn consider(&mut self, body: &syn::Block, span: Span) {
        if self.decode_loop.is_none() {
            let mut calls = Calls::default();
            calls.visit_block(body);
            if calls.calls.iter().any(|(_, c)| c == "forward") {
                self.decode_loop = Some((body.clone(), span.end().line));
            }
        }
    }
}

impl<'ast> Visit<'ast> for LoopFinder {
    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        self.consider(&e.body, e.span());
        visit::visit_expr_for_loop(self, e);
    }
    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.consider(&e.body, e.span());
        visit::visit_expr_while(self, e);
    }
    fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
        self.consider(&e.body, e.span());
        visit::visit_expr_loop(self, e);
    }
}

/// Method names, the last segment of called function paths, and macro names, with lines.
#[derive(Default)]
struct Calls {
    calls: Vec<(usize, String)>,
}

impl<'ast> Visit<'ast> for Calls {
    fn visit_expr_method_call(&mut self, e: &'ast syn::ExprMethodCall) {
        self.calls
            .push((e.method.span().start().line, e.method.to_string()));
        visit::visit_expr_method_call(self, e);
    }
    fn visit_expr_call(&mut self, e: &'ast syn::ExprCall) {
        if let syn::Expr::Path(path) = &*e.func {
            if let Some(last) = path.path.segments.last() {
                self.calls
                    .push((last.ident.span().start().line, last.ident.to_string()));
            }
        }
        visit::visit_expr_call(self, e);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(last) = m.path.segments.last() {
            self.calls
                .push((last.ident.span().start().line, last.ident.to_string()));
        }
        // Arguments of format macros are expressions too (`println!("{}", y.item())`).
        if let Ok(args) = m.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
        visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAND_LOOP: &str = r#"
fn main() {
    let mut tokens = vec![y.item_exact::<u32>()];
    for _ in 1..n {
        let logits = model.forward(&y, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        tokens.push(y.item_exact::<u32>());
    }
    println!("{}", tokenizer.decode(&tokens)?);
}"#;

    const NO_SYNC: &str = r#"
fn main() {
    let mut ys = vec![y.clone()];
    for _ in 1..n {
        let logits = model.forward(&y, &mut cache)?;
        y = argmax_axis(lm::last_position(&logits), -1, None)?;
        async_eval([&y])?;
        ys.push(y.clone());
    }
    let tokens: Vec<u32> = ys.iter().map(|t| t.item_exact::<u32>()).collect();
    println!("{}", tokenizer.decode(&tokens)?);
}"#;

    #[test]
    fn the_hand_loop_syncs_every_step() {
        let findings = check_decode_loop(HAND_LOOP);
        assert_eq!(
            findings,
            vec![Finding {
                line: 7,
                problem: Problem::SyncInLoop {
                    call: "item_exact".into()
                }
            }]
        );
    }

    #[test]
    fn tokens_kept_on_the_device_pass() {
        assert_eq!(check_decode_loop(NO_SYNC), vec![]);
    }

    #[test]
    fn eval_prints_and_decodes_in_the_loop_are_syncs() {
        let source = NO_SYNC.replace(
            "async_eval([&y])?;",
            "eval([&y])?; println!(\"{}\", y); let _ = tokenizer.decode(&[1]);",
        );
        let problems: Vec<_> = check_decode_loop(&source)
            .into_iter()
            .map(|f| f.problem.ui_key())
            .collect();
        assert_eq!(
            problems,
            [
                "check_sync_in_loop",
                "check_print_in_loop",
                "check_decode_in_loop"
            ]
        );
    }

    #[test]
    fn a_print_argument_that_reads_the_token_is_found() {
        let source = NO_SYNC.replace(
            "async_eval([&y])?;",
            "println!(\"{}\", y.item_exact::<u32>());",
        );
        let calls: Vec<_> = check_decode_loop(&source)
            .into_iter()
            .map(|f| f.problem.call().to_owned())
            .collect();
        assert!(calls.contains(&"item_exact".to_owned()), "{calls:?}");
    }

    #[test]
    fn tokens_must_come_back_and_be_decoded() {
        let source = NO_SYNC
            .replace(
                "let tokens: Vec<u32> = ys.iter().map(|t| t.item_exact::<u32>()).collect();",
                "",
            )
            .replace("println!(\"{}\", tokenizer.decode(&tokens)?);", "");
        let problems: Vec<_> = check_decode_loop(&source)
            .into_iter()
            .map(|f| f.problem)
            .collect();
        assert_eq!(
            problems,
            [Problem::NoHostReadAfterLoop, Problem::NoDecodeAfterLoop]
        );
    }

    #[test]
    fn no_loop_and_bad_syntax_are_reported() {
        assert_eq!(
            check_decode_loop("fn main() {}")[0].problem,
            Problem::NoDecodeLoop
        );
        assert!(matches!(
            check_decode_loop("fn main( {")[0].problem,
            Problem::Syntax { .. }
        ));
    }

    #[test]
    fn the_original_hand_loop_is_found_to_sync() {
        let source = include_str!("../../solutions/mlx-path/hand_loop.rs");
        let findings = check_decode_loop(source);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].problem.ui_key(), "check_sync_in_loop");
    }
}
