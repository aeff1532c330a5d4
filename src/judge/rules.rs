//! Interprets a lesson's code rules (`rules:` in `lesson.yaml`) on the syntax tree of
//! the learner's file: which calls are forbidden or required in which region.
//!
//! A region is a loop (the first one whose body calls a given function), the code of
//! the same function before or after that loop, a named function, or the whole file.
//! Calls into functions and closures defined in the same file are followed, so moving
//! `.item()` into a helper does not hide it. Without types, calls are known by name:
//! `y.item()` is a host read whatever `y` is, and formatting anything (`format!`,
//! `.to_string()`) counts as reading it — Display and Debug of an array evaluate it.
//!
//! A function is known by what it is, not by the name it is called by here: `use`
//! renames (`use mlx_rs::transforms::eval as force;`, `use a::{b as c}`), a path through
//! an imported module (`transforms::eval`), a glob import and a function bound to a
//! local (`let f = eval;`) are resolved, so `force(…)` is a call of `eval`, whose full
//! path is `mlx_rs::transforms::eval`. A rule's `call:` with `::` in it names that full
//! path (`quest::stats::least_squares`), or with `::*` everything under one
//! (`quest::lm::Model::*`); without, the function's own name.

use std::collections::{BTreeMap, BTreeSet};

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::course::spec::{CallGroup, CallPattern, Region, Rule};

const HOST_READS: &[&str] = &[
    "item",
    "item_exact",
    "item_cast",
    "try_item",
    "try_item_exact",
    "try_item_cast",
    "as_slice",
    "try_as_slice",
    "to_vec",
    "to_string",
    "format",
    "format_args",
];
const PRINTS: &[&str] = &[
    "print", "println", "eprint", "eprintln", "write", "writeln", "dbg",
];

/// One broken rule, at a line of the learner's file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub line: usize,
    /// The rule's id; its message is in the lesson text. Two ids are quest's own:
    /// [`SYNTAX`] and [`NO_REGION`].
    pub rule: String,
    /// The call found (forbid), the call missing (require), the syntax error, or the
    /// function whose loop was not found.
    pub call: String,
    /// When the call sits in a helper: the line where the region calls that helper.
    pub via: Option<usize>,
}

/// The file does not parse as Rust.
pub const SYNTAX: &str = "syntax";
/// A rule's region does not exist (no loop calls the function, or no such function).
pub const NO_REGION: &str = "no_region";
/// A way out of the one file quest judges, in any lesson: code brought in from another
/// file (`include!`, `mod name;`, `#[path]`), an environment the exercise writes itself
/// (`std::env::set_var`: what runs is quest's to choose, on its line), and macros defined
/// in the file (`macro_rules!`: their bodies are not read, so a rule could not see into
/// them), and a way past the Rust quest reads: `unsafe` (the compiler refuses it too in an
/// exercise: quest builds one with `unsafe_code` forbidden), `extern crate` and `extern`
/// blocks (a crate or C function the exercise's package does not give it, MLX's C API
/// among them).
pub const ESCAPE: &str = "escape";

/// Every [`ESCAPE`] in `file`, by line.
fn escapes(file: &syn::File) -> Vec<Finding> {
    struct Escapes(Vec<Finding>);
    impl Escapes {
        fn found(&mut self, span: proc_macro2::Span, what: String) {
            self.0.push(Finding {
                line: span.start().line,
                rule: ESCAPE.into(),
                call: what,
                via: None,
            });
        }
    }
    const ENVIRONMENT: [&str; 2] = ["set_var", "remove_var"];
    const FILES: [&str; 3] = ["include", "include_str", "include_bytes"];
    impl<'ast> Visit<'ast> for Escapes {
        fn visit_path(&mut self, path: &'ast syn::Path) {
            if let Some(last) = path.segments.last() {
                let name = last.ident.to_string();
                if ENVIRONMENT.contains(&name.as_str()) {
                    self.found(path.span(), format!("std::env::{name}"));
                }
            }
            visit::visit_path(self, path);
        }
        fn visit_use_name(&mut self, name: &'ast syn::UseName) {
            if ENVIRONMENT.contains(&name.ident.to_string().as_str()) {
                self.found(name.ident.span(), format!("std::env::{}", name.ident));
            }
        }
        fn visit_use_rename(&mut self, rename: &'ast syn::UseRename) {
            if ENVIRONMENT.contains(&rename.ident.to_string().as_str()) {
                self.found(rename.ident.span(), format!("std::env::{}", rename.ident));
            }
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            if let Some(last) = m.path.segments.last() {
                let name = last.ident.to_string();
                if FILES.contains(&name.as_str()) {
                    self.found(m.path.span(), format!("{name}!"));
                }
            }
            visit::visit_macro(self, m);
        }
        fn visit_item_macro(&mut self, item: &'ast syn::ItemMacro) {
            if item.mac.path.is_ident("macro_rules") {
                self.found(item.mac.path.span(), "macro_rules!".into());
                return;
            }
            visit::visit_item_macro(self, item);
        }
        fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
            if item.content.is_none() {
                self.found(item.mod_token.span, format!("mod {};", item.ident));
            }
            visit::visit_item_mod(self, item);
        }
        fn visit_expr_unsafe(&mut self, block: &'ast syn::ExprUnsafe) {
            self.found(block.unsafe_token.span, "unsafe".into());
            visit::visit_expr_unsafe(self, block);
        }
        fn visit_signature(&mut self, sig: &'ast syn::Signature) {
            if let Some(token) = &sig.unsafety {
                self.found(token.span, "unsafe".into());
            }
            visit::visit_signature(self, sig);
        }
        fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
            if let Some(token) = &item.unsafety {
                self.found(token.span, "unsafe".into());
            }
            visit::visit_item_impl(self, item);
        }
        fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
            self.found(
                item.extern_token.span,
                format!("extern crate {}", item.ident),
            );
        }
        fn visit_item_foreign_mod(&mut self, item: &'ast syn::ItemForeignMod) {
            self.found(item.abi.extern_token.span, "extern".into());
        }
        fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
            if attr.path().is_ident("path") {
                self.found(attr.span(), "#[path]".into());
            }
            visit::visit_attribute(self, attr);
        }
    }
    let mut escapes = Escapes(Vec::new());
    escapes.visit_file(file);
    escapes.0
}

/// Checks `source` against `rules`; no findings means it passes.
pub fn check(source: &str, rules: &[Rule]) -> Vec<Finding> {
    let file = match syn::parse_file(source) {
        Ok(file) => file,
        Err(error) => {
            return vec![Finding {
                line: error.span().start().line,
                rule: SYNTAX.into(),
                call: error.to_string(),
                via: None,
            }]
        }
    };
    let program = Program::read(&file);
    let mut findings: Vec<Finding> = escapes(&file);
    let mut fired = BTreeSet::new();
    // Rules with `unless` run after the rule they depend on.
    let (plain, conditional): (Vec<&Rule>, Vec<&Rule>) =
        rules.iter().partition(|rule| rule.unless.is_none());
    for rule in plain.into_iter().chain(conditional) {
        if rule
            .unless
            .as_ref()
            .is_some_and(|other| fired.contains(other))
        {
            continue;
        }
        let found = check_rule(&program, rule);
        if !found.is_empty() {
            fired.insert(rule.id.clone());
        }
        for finding in found {
            if !findings.contains(&finding) {
                findings.push(finding);
            }
        }
    }
    // By line, then in the lesson's order of rules.
    let order = |id: &str| rules.iter().position(|rule| rule.id == id);
    findings.sort_by_key(|finding| (finding.line, order(&finding.rule)));
    findings
}

fn check_rule(program: &Program, rule: &Rule) -> Vec<Finding> {
    let Some(region) = program.region(&rule.region) else {
        let name = match &rule.region {
            Region::Loop(f)
            | Region::BeforeLoop(f)
            | Region::AfterLoop(f)
            | Region::InnerLoop(f)
            | Region::Fn(f) => f,
            Region::File => "",
        };
        return vec![Finding {
            line: 1,
            rule: NO_REGION.into(),
            call: name.to_owned(),
            via: None,
        }];
    };
    let calls = program.expand(&region.calls);
    if !rule.forbid.is_empty() {
        // One finding per line and rule: `println!("{}", y.item())` is one mistake.
        let mut lines = BTreeSet::new();
        calls
            .iter()
            .filter(|call| rule.forbid.iter().any(|pattern| call.matches(pattern)))
            .filter(|call| lines.insert(call.line))
            .map(|call| Finding {
                line: call.line,
                rule: rule.id.clone(),
                call: call.shown(),
                via: call.via,
            })
            .collect()
    } else if calls
        .iter()
        .any(|call| rule.require.iter().any(|pattern| call.matches(pattern)))
    {
        Vec::new()
    } else {
        vec![Finding {
            line: region.line,
            rule: rule.id.clone(),
            call: rule.require[0].to_string(),
            via: None,
        }]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallKind {
    Method,
    Function,
    Macro,
}

/// One call in the source: `x.name(…)`, `path::name(…)` or `name!(…)`.
#[derive(Clone, Debug)]
struct Call {
    /// The called function's own name, through any rename (`force` → `eval`).
    name: String,
    /// The name written at the call, which a helper of this file is known by.
    written: String,
    /// The paths the call may resolve to (`mlx_rs::transforms::eval`): one, or one per
    /// glob import a bare name may come from. Empty for a method.
    paths: Vec<String>,
    kind: CallKind,
    line: usize,
    /// Set when reached by following a call into a helper of this file.
    via: Option<usize>,
}

impl Call {
    fn matches(&self, pattern: &CallPattern) -> bool {
        let name = self.name.as_str();
        match pattern {
            CallPattern::Call { call } => {
                let call = call.trim_end_matches('!');
                if let Some(prefix) = call.strip_suffix("::*") {
                    // Everything under a path: a module's functions, a type's methods.
                    let prefix = format!("{prefix}::");
                    self.paths.iter().any(|path| path.starts_with(&prefix))
                } else if call.contains("::") {
                    self.paths.iter().any(|path| path == call)
                } else {
                    call == name
                }
            }
            CallPattern::Group(CallGroup::HostRead) => HOST_READS.contains(&name),
            CallPattern::Group(CallGroup::Eval) => name == "eval" && self.kind != CallKind::Macro,
            CallPattern::Group(CallGroup::Print) => {
                self.kind == CallKind::Macro && PRINTS.contains(&name)
            }
            CallPattern::Group(CallGroup::Detokenize) => {
                self.kind == CallKind::Method && name.starts_with("decode")
            }
        }
    }

    fn shown(&self) -> String {
        match self.kind {
            CallKind::Macro => format!("{}!", self.name),
            _ => self.name.clone(),
        }
    }
}

/// The calls of one region, and the line a missing call is reported at.
struct RegionCalls {
    calls: Vec<Call>,
    line: usize,
}

/// What the checker knows of a file: its functions and closures, by name.
struct Program<'a> {
    file: &'a syn::File,
    /// Bodies of `fn` items (free functions and methods) and of closures bound with
    /// `let name = |…| …`, by name.
    helpers: BTreeMap<String, Vec<Call>>,
    aliases: Aliases,
}

impl<'a> Program<'a> {
    fn read(file: &'a syn::File) -> Self {
        let mut aliases = Aliases::default();
        aliases.visit_file(file);
        let mut finder = HelperFinder {
            aliases: &aliases,
            helpers: BTreeMap::new(),
        };
        finder.visit_file(file);
        let helpers = finder.helpers;
        Program {
            file,
            helpers,
            aliases,
        }
    }

    fn calls_in(&self, visit: impl FnOnce(&mut Calls)) -> Vec<Call> {
        calls_in(&self.aliases, visit)
    }

    fn region(&self, region: &Region) -> Option<RegionCalls> {
        match region {
            Region::File => Some(RegionCalls {
                calls: self.calls_in(|calls| calls.visit_file(self.file)),
                line: 1,
            }),
            Region::Fn(name) => {
                let function = self.functions().find(|(ident, _)| ident == name)?;
                Some(RegionCalls {
                    calls: self.calls_in(|calls| calls.visit_block(function.1)),
                    line: function.1.span().end().line,
                })
            }
            Region::Loop(target)
            | Region::BeforeLoop(target)
            | Region::AfterLoop(target)
            | Region::InnerLoop(target) => {
                let (body, found) = self.functions().find_map(|(_, body)| {
                    let mut loops = LoopFinder {
                        target,
                        program: self,
                        found: None,
                    };
                    loops.visit_block(body);
                    loops.found.map(|found| (body, found))
                })?;
                let in_function = || self.calls_in(|calls| calls.visit_block(body));
                Some(match region {
                    Region::Loop(_) => RegionCalls {
                        calls: found.calls,
                        line: found.end,
                    },
                    Region::InnerLoop(_) => RegionCalls {
                        calls: found.inner.unwrap_or_default(),
                        line: found.end,
                    },
                    Region::BeforeLoop(_) => RegionCalls {
                        calls: in_function()
                            .into_iter()
                            .filter(|call| call.line < found.start)
                            .collect(),
                        line: found.start,
                    },
                    _ => RegionCalls {
                        calls: in_function()
                            .into_iter()
                            .filter(|call| call.line > found.end)
                            .collect(),
                        line: found.end,
                    },
                })
            }
        }
    }

    /// Every function body of the file, `main` first.
    fn functions(&self) -> impl Iterator<Item = (String, &'a syn::Block)> {
        let mut functions = Vec::new();
        for item in &self.file.items {
            match item {
                syn::Item::Fn(f) => functions.push((f.sig.ident.to_string(), &*f.block)),
                syn::Item::Impl(block) => {
                    for item in &block.items {
                        if let syn::ImplItem::Fn(f) = item {
                            functions.push((f.sig.ident.to_string(), &f.block));
                        }
                    }
                }
                _ => {}
            }
        }
        functions.sort_by_key(|(name, _)| name != "main");
        functions.into_iter()
    }

    /// `calls` plus, for each call of a helper of this file, the helper's own calls
    /// (followed to any depth, each helper once), marked with the line that called it.
    fn expand(&self, calls: &[Call]) -> Vec<Call> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for call in calls {
            out.push(call.clone());
            self.follow(call, call.line, &mut seen, &mut out);
        }
        out
    }

    fn follow(&self, call: &Call, origin: usize, seen: &mut BTreeSet<String>, out: &mut Vec<Call>) {
        if call.kind == CallKind::Macro || !seen.insert(call.written.clone()) {
            return;
        }
        let Some(body) = self.helpers.get(&call.written) else {
            return;
        };
        for inner in body {
            out.push(Call {
                via: Some(origin),
                ..inner.clone()
            });
            self.follow(inner, origin, seen, out);
        }
    }
}

fn calls_in(aliases: &Aliases, visit: impl FnOnce(&mut Calls)) -> Vec<Call> {
    let mut calls = Calls {
        aliases,
        calls: Vec::new(),
    };
    visit(&mut calls);
    calls.calls
}

/// Where a loop is: its first and last line, and the calls of its body.
struct FoundLoop {
    start: usize,
    end: usize,
    calls: Vec<Call>,
    /// The calls of the first loop inside it that calls the target too, if any.
    inner: Option<Vec<Call>>,
}

/// The first loop whose body (following helpers) calls `target`.
struct LoopFinder<'p, 'a> {
    target: &'p str,
    program: &'p Program<'a>,
    found: Option<FoundLoop>,
}

impl LoopFinder<'_, '_> {
    fn consider(&mut self, body: &syn::Block, span: proc_macro2::Span) {
        if self.found.is_some() {
            return;
        }
        let calls = self.program.calls_in(|calls| calls.visit_block(body));
        let expanded = self.program.expand(&calls);
        if expanded.iter().any(|call| call.name == self.target) {
            let mut nested = LoopFinder {
                target: self.target,
                program: self.program,
                found: None,
            };
            nested.visit_block(body);
            self.found = Some(FoundLoop {
                start: span.start().line,
                end: span.end().line,
                calls,
                inner: nested.found.map(|inner| inner.calls),
            });
        }
    }
}

impl<'ast> Visit<'ast> for LoopFinder<'_, '_> {
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

/// Functions (free and in `impl` blocks) and named closures of the file.
struct HelperFinder<'x> {
    aliases: &'x Aliases,
    helpers: BTreeMap<String, Vec<Call>>,
}

impl<'ast> Visit<'ast> for HelperFinder<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let calls = calls_in(self.aliases, |calls| calls.visit_block(&f.block));
        self.helpers.insert(f.sig.ident.to_string(), calls);
        visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let calls = calls_in(self.aliases, |calls| calls.visit_block(&f.block));
        self.helpers.insert(f.sig.ident.to_string(), calls);
        visit::visit_impl_item_fn(self, f);
    }
    fn visit_local(&mut self, local: &'ast syn::Local) {
        if let (syn::Pat::Ident(name), Some(init)) = (&local.pat, &local.init) {
            if let syn::Expr::Closure(closure) = &*init.expr {
                let calls = calls_in(self.aliases, |calls| calls.visit_expr(&closure.body));
                self.helpers.insert(name.ident.to_string(), calls);
            }
        }
        visit::visit_local(self, local);
    }
}

/// The names this file gives to items of other paths: `use` declarations (renamed,
/// grouped, nested, anywhere in the file), their glob imports, and functions bound to a
/// local (`let f = eval;`). One table for the whole file: a rename inside one function
/// is taken to hold everywhere, which can only find more, never hide a call.
#[derive(Default)]
struct Aliases {
    /// Local name → the path it stands for, as written in the `use` or the `let`.
    names: BTreeMap<String, Vec<String>>,
    /// The paths of `use path::*;`.
    globs: Vec<Vec<String>>,
}

impl Aliases {
    fn add_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.add_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let ident = name.ident.to_string();
                if ident == "self" {
                    if let Some(last) = prefix.last() {
                        self.names.insert(last.clone(), prefix.clone());
                    }
                } else {
                    let mut path = prefix.clone();
                    path.push(ident.clone());
                    self.names.insert(ident, path);
                }
            }
            syn::UseTree::Rename(rename) => {
                let mut path = prefix.clone();
                let ident = rename.ident.to_string();
                if ident == "self" {
                    if prefix.is_empty() {
                        return;
                    }
                } else {
                    path.push(ident);
                }
                if rename.rename != "_" {
                    self.names.insert(rename.rename.to_string(), path);
                }
            }
            syn::UseTree::Glob(_) => self.globs.push(prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.add_tree(prefix, tree);
                }
            }
        }
    }

    /// The full path `written` stands for (its first segment's alias followed, to a few
    /// levels), and the paths a bare name may come from through a glob import.
    fn resolve(&self, written: &[String]) -> Vec<Vec<String>> {
        let mut path = written.to_vec();
        let mut renamed = false;
        for _ in 0..8 {
            let Some(target) = self.names.get(&path[0]) else {
                break;
            };
            if target[..] == path[..1] {
                break;
            }
            let mut longer = target.clone();
            longer.extend_from_slice(&path[1..]);
            path = longer;
            renamed = true;
        }
        let mut paths = vec![path.clone()];
        if !renamed {
            // Not imported by name: it may come from a glob.
            paths.extend(self.globs.iter().map(|glob| {
                let mut through = glob.clone();
                through.extend_from_slice(&path);
                through
            }));
        }
        paths
    }
}

fn path_segments(path: &syn::Path) -> Vec<String> {
    path.segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .filter(|segment| segment != "crate" && segment != "self")
        .collect()
}

impl<'ast> Visit<'ast> for Aliases {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.add_tree(&mut Vec::new(), &item.tree);
    }
    /// `let f = eval;` (or `let f: fn(…) = mlx_rs::transforms::eval;`).
    fn visit_local(&mut self, local: &'ast syn::Local) {
        let name = match &local.pat {
            syn::Pat::Ident(name) => Some(&name.ident),
            syn::Pat::Type(typed) => match &*typed.pat {
                syn::Pat::Ident(name) => Some(&name.ident),
                _ => None,
            },
            _ => None,
        };
        if let (Some(name), Some(init)) = (name, &local.init) {
            if let syn::Expr::Path(path) = &*init.expr {
                let target = path_segments(&path.path);
                if !target.is_empty() && target != [name.to_string()] {
                    self.names.insert(name.to_string(), target);
                }
            }
        }
        visit::visit_local(self, local);
    }
}

/// Method names, called paths (resolved through the file's aliases) and macro names,
/// with lines.
struct Calls<'x> {
    aliases: &'x Aliases,
    calls: Vec<Call>,
}

impl Calls<'_> {
    fn push(&mut self, ident: &syn::Ident, kind: CallKind) {
        self.calls.push(Call {
            name: ident.to_string(),
            written: ident.to_string(),
            paths: Vec::new(),
            kind,
            line: ident.span().start().line,
            via: None,
        });
    }

    /// A call of a path (a function, or a macro): known by what the path resolves to.
    fn push_path(&mut self, path: &syn::Path, kind: CallKind) {
        let Some(last) = path.segments.last() else {
            return;
        };
        let written = path_segments(path);
        if written.is_empty() {
            return;
        }
        let paths = self.aliases.resolve(&written);
        let name = paths[0]
            .last()
            .cloned()
            .unwrap_or_else(|| last.ident.to_string());
        self.calls.push(Call {
            name,
            written: last.ident.to_string(),
            paths: paths.iter().map(|path| path.join("::")).collect(),
            kind,
            line: last.ident.span().start().line,
            via: None,
        });
    }
}

impl<'ast> Visit<'ast> for Calls<'_> {
    fn visit_expr_method_call(&mut self, e: &'ast syn::ExprMethodCall) {
        self.push(&e.method, CallKind::Method);
        visit::visit_expr_method_call(self, e);
    }
    fn visit_expr_call(&mut self, e: &'ast syn::ExprCall) {
        match &*e.func {
            syn::Expr::Path(path) => self.push_path(&path.path, CallKind::Function),
            func => self.visit_expr(func),
        }
        for arg in &e.args {
            self.visit_expr(arg);
        }
    }
    /// `iter.map(LayerCache::state)`: a function passed by its path is called there; so
    /// is one a local is bound to (`let f = eval;`), or a renamed one passed by name.
    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        let renamed = e.path.segments.len() == 1
            && e.path
                .get_ident()
                .is_some_and(|ident| self.aliases.names.contains_key(&ident.to_string()));
        if e.path.segments.len() > 1 || renamed {
            self.push_path(&e.path, CallKind::Function);
        }
        visit::visit_expr_path(self, e);
    }
    /// `mlx_rs::nn::RmsNorm { weight, eps }`: a value of a type built by its literal is
    /// that type's, as if its constructor were called.
    fn visit_expr_struct(&mut self, e: &'ast syn::ExprStruct) {
        if e.path.segments.len() > 1
            || e.path
                .get_ident()
                .is_some_and(|ident| self.aliases.names.contains_key(&ident.to_string()))
        {
            self.push_path(&e.path, CallKind::Function);
        }
        visit::visit_expr_struct(self, e);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.push_path(&m.path, CallKind::Macro);
        // Arguments of format macros are expressions too (`println!("{}", y.item())`).
        if let Ok(args) = m.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) {
            for arg in &args {
                self.visit_expr(arg);
            }
        } else if let Ok(items) = m.parse_body::<syn::File>() {
            // Item macros hold items: `thread_local! { static F: … = compile(…); }`.
            self.visit_file(&items);
        }
        visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mlx-path's rules, as its lesson.yaml gives them.
    fn rules() -> Vec<Rule> {
        serde_yaml::from_str(
            r#"
- id: sync-in-loop
  forbid: [host_read, eval]
  in: {loop: forward}
- id: print-in-loop
  forbid: [print]
  in: {loop: forward}
- id: decode-in-loop
  forbid: [detokenize]
  in: {loop: forward}
- id: read-after-loop
  require: [host_read, eval]
  in: {after_loop: forward}
  unless: sync-in-loop
- id: decode-after-loop
  require: [detokenize]
  in: {after_loop: forward}
"#,
        )
        .unwrap()
    }

    fn ids(source: &str) -> Vec<(usize, String)> {
        check(source, &rules())
            .into_iter()
            .map(|f| (f.line, f.rule))
            .collect()
    }

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
    fn a_loop_of_forwards_inside_the_decode_loop_is_its_inner_loop() {
        let rule: Vec<Rule> = serde_yaml::from_str(
            "- {id: per-row, forbid: [{call: forward}], in: {inner_loop: forward}}",
        )
        .unwrap();
        // One forward per step for the whole batch: no inner loop, nothing found.
        assert_eq!(check(HAND_LOOP, &rule), []);
        // A forward per row inside each step.
        let per_step = HAND_LOOP.replace(
            "let logits = model.forward(&y, &mut cache)?;",
            "for row in 0..4 {\n let logits = model.forward(&y, &mut caches[row])?;\n }",
        );
        let lines: Vec<usize> = check(&per_step, &rule).iter().map(|f| f.line).collect();
        assert_eq!(lines, [6]);
        // A whole decode loop per row, inside a loop over the rows.
        let per_row = format!(
            "fn main() {{ for row in 0..4 {{ let logits = model.forward(&p, &mut c)?;\n{}; }} }}",
            HAND_LOOP.replace("fn main()", "let _ = ")
        );
        let found = check(&per_row, &rule);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].call, "forward");
    }

    #[test]
    fn the_hand_loop_syncs_every_step() {
        let findings = check(HAND_LOOP, &rules());
        assert_eq!(
            findings,
            [Finding {
                line: 7,
                rule: "sync-in-loop".into(),
                call: "item_exact".into(),
                via: None
            }]
        );
    }

    #[test]
    fn tokens_kept_on_the_device_pass() {
        assert_eq!(check(NO_SYNC, &rules()), []);
    }

    #[test]
    fn eval_prints_decodes_and_formatting_in_the_loop_are_found() {
        let source = NO_SYNC.replace(
            "async_eval([&y])?;",
            "eval([&y])?;\n println!(\"{}\", y);\n let _ = tokenizer.decode(&[1]);\n let s = format!(\"{}\", y);\n let t = y.to_string();",
        );
        assert_eq!(
            ids(&source),
            [
                (7, "sync-in-loop".into()),
                (8, "print-in-loop".into()),
                (9, "decode-in-loop".into()),
                (10, "sync-in-loop".into()),
                (11, "sync-in-loop".into()),
            ]
        );
    }

    #[test]
    fn a_read_inside_a_print_is_one_finding_per_rule() {
        let source = NO_SYNC.replace(
            "async_eval([&y])?;",
            "println!(\"{}\", y.item_exact::<u32>());",
        );
        assert_eq!(
            ids(&source),
            [(7, "sync-in-loop".into()), (7, "print-in-loop".into())]
        );
    }

    #[test]
    fn a_read_moved_into_a_helper_or_closure_is_followed() {
        let helper = NO_SYNC.replace("async_eval([&y])?;", "peek(&y);")
            + "\nfn peek(y: &Array) -> u32 { inner(y) }\nfn inner(y: &Array) -> u32 { y.item::<u32>() }\n";
        let findings = check(&helper, &rules());
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            (findings[0].line, findings[0].via, findings[0].call.as_str()),
            (14, Some(7), "item")
        );

        let closure = NO_SYNC
            .replace(
                "let mut ys",
                "let read = |t: &Array| t.item_exact::<u32>();\n    let mut ys",
            )
            .replace("async_eval([&y])?;", "let _ = read(&y);");
        let findings = check(&closure, &rules());
        assert_eq!(
            findings
                .iter()
                .map(|f| (f.rule.as_str(), f.via))
                .collect::<Vec<_>>(),
            [("sync-in-loop", Some(8))]
        );
    }

    #[test]
    fn a_step_moved_into_a_helper_still_makes_the_loop() {
        let source = r#"
fn step(model: &Model, y: &Array) -> Array { model.forward(y) }
fn main() {
    for _ in 0..n {
        y = step(&model, &y);
        tokens.push(y.item_exact::<u32>());
    }
    println!("{}", tokenizer.decode(&tokens)?);
}"#;
        assert_eq!(ids(source), [(6, "sync-in-loop".into())]);
    }

    #[test]
    fn tokens_must_come_back_and_be_decoded() {
        let source = NO_SYNC
            .replace(
                "let tokens: Vec<u32> = ys.iter().map(|t| t.item_exact::<u32>()).collect();",
                "",
            )
            .replace("println!(\"{}\", tokenizer.decode(&tokens)?);", "");
        assert_eq!(
            ids(&source),
            [
                (9, "read-after-loop".into()),
                (9, "decode-after-loop".into())
            ]
        );
    }

    #[test]
    fn before_loop_and_named_function_regions() {
        let rules: Vec<Rule> = serde_yaml::from_str(
            r#"
- id: cache-once
  require: [{call: make_prompt_cache}]
  in: {before_loop: forward}
- id: no-cache-in-loop
  forbid: [{call: make_prompt_cache}]
  in: {loop: forward}
- id: helper-quiet
  forbid: [print]
  in: {fn: helper}
"#,
        )
        .unwrap();
        let fresh_each_step = r#"
fn main() {
    for _ in 0..n {
        let mut cache = lm::make_prompt_cache(&model);
        model.forward(&x, &mut cache);
    }
}
fn helper() { println!("hi"); }"#;
        let found: Vec<_> = check(fresh_each_step, &rules)
            .into_iter()
            .map(|f| (f.line, f.rule))
            .collect();
        assert_eq!(
            found,
            [
                (3, "cache-once".into()),
                (4, "no-cache-in-loop".into()),
                (8, "helper-quiet".into())
            ]
        );
        let once = fresh_each_step
            .replace(
                "    for _ in 0..n {\n        let mut cache",
                "    let mut cache",
            )
            .replace("(&model);\n", "(&model);\n    for _ in 0..n {\n")
            .replace("println!(\"hi\");", "");
        assert_eq!(check(&once, &rules), []);
    }

    #[test]
    fn a_function_passed_by_its_path_counts_as_called() {
        let rules: Vec<Rule> = serde_yaml::from_str(
            "[{id: eval-caches, require: [{call: state}], in: {before_loop: forward}}]",
        )
        .unwrap();
        let source = |eval: &str| {
            format!(
                "fn main() {{\n    {eval}\n    for _ in 0..n {{ model.forward(&y, &mut cache); }}\n}}"
            )
        };
        let by_path = source("eval(cache.iter().flat_map(lm::LayerCache::state))?;");
        assert_eq!(check(&by_path, &rules), []);
        let by_method = source("eval(cache.iter().flat_map(|c| c.state()))?;");
        assert_eq!(check(&by_method, &rules), []);
        assert_eq!(check(&source("eval(&logits)?;"), &rules).len(), 1);
    }

    /// `NO_SYNC` with `eval` called in the loop by `call`, after `head` at the top of the
    /// file (a `use`) or of `main` (a `let`).
    fn renamed_eval(head: &str, local: &str, call: &str) -> Vec<(usize, String)> {
        let source = format!(
            "{head}\n{}",
            NO_SYNC
                .replace("fn main() {", &format!("fn main() {{\n    {local}"))
                .replace("async_eval([&y])?;", &format!("{call}([&y])?;"))
        );
        ids(&source)
    }

    #[test]
    fn a_forbidden_call_is_found_through_any_local_name() {
        let sync = |line| vec![(line, "sync-in-loop".to_owned())];
        // The case quoted in the lesson's review: a renamed import.
        assert_eq!(
            renamed_eval("use mlx_rs::transforms::eval as force;", "", "force"),
            sync(9)
        );
        // Grouped and nested imports, renamed.
        assert_eq!(
            renamed_eval(
                "use mlx_rs::transforms::{async_eval, eval as force};",
                "",
                "force"
            ),
            sync(9)
        );
        assert_eq!(
            renamed_eval(
                "use mlx_rs::{transforms::{eval as force}, Array};",
                "",
                "force"
            ),
            sync(9)
        );
        // A path to the same item, through the crate or an imported module.
        assert_eq!(renamed_eval("", "", "mlx_rs::transforms::eval"), sync(9));
        assert_eq!(
            renamed_eval("use mlx_rs::transforms as t;", "", "t::eval"),
            sync(9)
        );
        // A function bound to a local, directly or through a rename.
        assert_eq!(renamed_eval("", "let f = eval;", "f"), sync(9));
        assert_eq!(
            renamed_eval(
                "use mlx_rs::transforms::eval as force;",
                "let f = force;",
                "f"
            ),
            sync(9)
        );
        // A `use` inside the function counts too.
        assert_eq!(
            renamed_eval("", "use mlx_rs::transforms::eval as force;", "force"),
            sync(9)
        );
        // A rename of something else is not `eval`: `async_eval` renamed stays allowed.
        assert_eq!(
            renamed_eval("use mlx_rs::transforms::async_eval as start;", "", "start"),
            []
        );
        // Macros are resolved too.
        let print = NO_SYNC.replace("async_eval([&y])?;", "say!(\"x\");");
        let found = ids(&format!("use std::println as say;\n{print}"));
        assert_eq!(found, [(8, "print-in-loop".to_owned())]);
    }

    #[test]
    fn a_rule_may_name_a_full_path() {
        let rules: Vec<Rule> = serde_yaml::from_str(
            "[{id: own, forbid: [{call: quest::stats::least_squares}, {call: quest::physics::compute}], in: file}]",
        )
        .unwrap();
        let found = |source: &str| -> Vec<String> {
            check(source, &rules).into_iter().map(|f| f.call).collect()
        };
        let body = |call: &str| format!("fn main() {{ let line = {call}(&points); }}");
        // Written in full, through an imported module, renamed, grouped, by glob, by a local.
        assert_eq!(
            found(&body("quest::stats::least_squares")),
            ["least_squares"]
        );
        assert_eq!(
            found(&format!(
                "use quest::stats;\n{}",
                body("stats::least_squares")
            )),
            ["least_squares"]
        );
        assert_eq!(
            found(&format!(
                "use quest::stats::least_squares as fit;\n{}",
                body("fit")
            )),
            ["least_squares"]
        );
        assert_eq!(
            found(&format!(
                "use quest::{{physics::{{self, Shape}}, stats::{{least_squares as fit}}}};\n{}",
                body("fit")
            )),
            ["least_squares"]
        );
        assert_eq!(
            found(&format!("use quest::physics::*;\n{}", body("compute"))),
            ["compute"]
        );
        assert_eq!(
            found("use quest::physics;\nfn main() { let f = physics::compute; let v = f(c, &i); }"),
            ["compute"]
        );
        // The learner's own function of the same name is not quest's.
        assert_eq!(
            found("fn least_squares(p: &[(f64, f64)]) -> (f64, f64) { (0.0, 0.0) }\nfn main() { least_squares(&points); }"),
            Vec::<String>::new()
        );
    }

    /// `path::*` forbids everything under the path (a type's associated functions, a
    /// module's items), however imported, and nothing beside it.
    #[test]
    fn a_rule_may_name_everything_under_a_path() {
        let rules: Vec<Rule> = serde_yaml::from_str(
            "[{id: own, forbid: [{call: quest::lm::Model::*}, {call: quest::lm::models::*}], in: file}]",
        )
        .unwrap();
        let found = |source: &str| -> Vec<String> {
            check(source, &rules).into_iter().map(|f| f.call).collect()
        };
        assert_eq!(
            found("use quest::lm;\nfn main() { let m = lm::Model::with_pieces(m, p); }"),
            ["with_pieces"]
        );
        assert_eq!(
            found("use quest::lm::models::llama as ll;\nfn main() { let m = ll::build(&w); }"),
            ["build"]
        );
        assert_eq!(
            found("use quest::lm::models::*;\nfn main() { let m = llama::build(&w); }"),
            ["build"]
        );
        // A sibling of the path, or a name that only starts like it, is not under it.
        assert_eq!(
            found("use quest::lm;\nfn main() { let c = lm::load_weights(&m); lm::Modelled::x(); }"),
            Vec::<String>::new()
        );
    }

    /// A type built by its struct literal is named by its path, as a call of it would be:
    /// rms-norm's `mlx_rs::nn::RmsNorm { weight, eps }`, written out or imported; the
    /// learner's own struct is not.
    #[test]
    fn a_struct_literal_is_named_by_its_path() {
        let rules: Vec<Rule> =
            serde_yaml::from_str("[{id: own, forbid: [{call: mlx_rs::nn::*}], in: file}]").unwrap();
        let found = |source: &str| -> Vec<(usize, String)> {
            check(source, &rules)
                .into_iter()
                .map(|f| (f.line, f.call))
                .collect()
        };
        assert_eq!(
            found("fn f(w: &Array) {\n    let n = mlx_rs::nn::RmsNorm { weight: Param::new(w.clone()), eps: 1e-5 };\n}"),
            [(2, "RmsNorm".to_owned())]
        );
        assert_eq!(
            found("use mlx_rs::nn::{RmsNorm as N};\nfn f(w: Param<Array>) { let n = N { weight: w, eps: 1e-5 }; }"),
            [(2, "RmsNorm".to_owned())]
        );
        assert_eq!(
            found("struct MyNorm { eps: f32 }\nfn f() { let n = MyNorm { eps: 1e-5 }; }"),
            Vec::<(usize, String)>::new()
        );
    }

    /// A unit struct used as a value is named by its path too: mlp's `Silu.forward(x)`,
    /// imported or written out, is mlx-rs's `Silu` module, and quest's `QuestSampler`
    /// handed on is quest's sampler.
    #[test]
    fn a_unit_struct_used_as_a_value_is_found() {
        let rules: Vec<Rule> = serde_yaml::from_str(
            "[{id: own, forbid: [{call: mlx_rs::nn::Silu}, {call: quest::lm::QuestSampler}], in: file}]",
        )
        .unwrap();
        let found = |source: &str| -> Vec<String> {
            check(source, &rules).into_iter().map(|f| f.call).collect()
        };
        assert_eq!(
            found("use mlx_rs::nn::Silu;\nfn f(x: &Array) { Silu.forward(x); }"),
            ["Silu"]
        );
        assert_eq!(
            found("fn f(x: &Array) { mlx_rs::nn::Silu.forward(x); }"),
            ["Silu"]
        );
        assert_eq!(
            found("use quest::lm::QuestSampler as Theirs;\nfn f() { Theirs.sample(l, s, 1, k); }"),
            ["QuestSampler"]
        );
        assert_eq!(
            found("fn f(x: &Array) { Silu.forward(x); }"),
            Vec::<String>::new()
        );
    }

    /// A call inside an item macro's items counts: the compile lesson's
    /// `thread_local! { static GATE: … = …compile(…); }` calls `compile`.
    #[test]
    fn calls_inside_thread_local_are_seen() {
        let rules: Vec<Rule> = serde_yaml::from_str(
            "- id: compiled-once\n  require: [{call: mlx_rs::transforms::compile::compile}]\n  in: file",
        )
        .unwrap();
        let inside = "use mlx_rs::transforms::compile::compile as trace;\n\
            thread_local! {\n    static GATE: RefCell<Gate> = RefCell::new(Box::new(trace(|x| x, true)));\n}\n\
            fn main() {}";
        assert!(
            check(inside, &rules).is_empty(),
            "{:?}",
            check(inside, &rules)
        );
        let nowhere = "thread_local! { static GATE: u32 = 1; }\nfn main() {}";
        assert_eq!(check(nowhere, &rules)[0].rule, "compiled-once");
    }

    #[test]
    fn no_loop_and_bad_syntax_are_reported() {
        let no_loop = check("fn main() {}", &rules());
        assert_eq!(no_loop[0].rule, NO_REGION);
        assert_eq!(no_loop[0].call, "forward");
        assert_eq!(check("fn main( {", &rules())[0].rule, SYNTAX);
    }
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    fn escaped(source: &str) -> Vec<(usize, String)> {
        check(source, &[])
            .into_iter()
            .filter(|f| f.rule == ESCAPE)
            .map(|f| (f.line, f.call))
            .collect()
    }

    /// Every way out of the judged file is named at its line, under any name it is
    /// imported by; honest code has none.
    #[test]
    fn every_way_out_of_the_file_is_named() {
        let rows: &[(&str, Option<(usize, &str)>)] = &[
            ("fn main() { let x = std::env::var(\"A\"); }", None),
            (
                "fn main() {\n    std::env::set_var(\"QUEST_PIECES\", \"quest\");\n}",
                Some((2, "std::env::set_var")),
            ),
            (
                "use std::env::{remove_var as forget};\nfn main() { forget(\"A\"); }",
                Some((1, "std::env::remove_var")),
            ),
            (
                "fn main() {\n    let f = std::env::set_var::<&str, &str>;\n}",
                Some((2, "std::env::set_var")),
            ),
            (
                "include!(\"../../solutions/rope/rope.rs\");",
                Some((1, "include!")),
            ),
            (
                "const S: &str = include_str!(\"x.rs\");",
                Some((1, "include_str!")),
            ),
            ("mod helper;", Some((1, "mod helper;"))),
            ("mod helper { pub fn f() {} }", None),
            (
                "#[path = \"../x.rs\"]\nmod helper { }",
                Some((1, "#[path]")),
            ),
            (
                "macro_rules! hide { () => { fast::rope() } }\nfn main() {}",
                Some((1, "macro_rules!")),
            ),
            (
                "fn f(x: &Array) {\n    let r = unsafe { mlx_sys::mlx_fast_rms_norm(x.as_ptr()) };\n}",
                Some((2, "unsafe")),
            ),
            ("unsafe fn f() {}", Some((1, "unsafe"))),
            ("unsafe impl Send for S {}", Some((1, "unsafe"))),
            ("extern crate mlx_sys;", Some((1, "extern crate mlx_sys"))),
            (
                "extern \"C\" {\n    fn mlx_fast_rms_norm();\n}",
                Some((1, "extern")),
            ),
            ("fn f(x: &Array) -> Array { x.clone() }", None),
        ];
        for (source, expected) in rows {
            let expected: Vec<(usize, String)> = expected
                .iter()
                .map(|(line, call)| (*line, (*call).to_owned()))
                .collect();
            assert_eq!(escaped(source), expected, "{source}");
        }
    }
}
