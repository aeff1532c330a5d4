//! quest: a Rust workbook for LLM inference on MLX.
pub mod bench;
pub mod course;
pub mod device;
pub mod judge;
pub mod kernels;
pub mod lab;
pub mod line;
pub mod lm;
pub mod physics;
pub mod progress;
pub mod render;
pub mod serve;
pub mod settings;
pub mod stats;

/// Every `.rs` file under `src/`, as (its path relative to `src/`, its text): for the
/// tests that read the code itself.
#[cfg(test)]
pub(crate) fn rust_sources() -> Vec<(std::path::PathBuf, String)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.strip_prefix(&src).unwrap().to_path_buf(), text));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// The rooms' graph: each top-level module of the library (`src/a/…` or `src/a.rs`)
    /// and the modules its `crate::…` paths name outside its tests.
    fn room_graph() -> BTreeMap<String, BTreeSet<String>> {
        let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (rel, text) in super::rust_sources() {
            let rel = rel.to_string_lossy();
            let top = rel
                .split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_owned();
            if ["lib", "main", "cli"].contains(&top.as_str()) {
                continue;
            }
            let names = deps.entry(top.clone()).or_default();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if name != top && !name.is_empty() {
                    names.insert(name);
                }
            }
        }
        deps
    }

    /// The rooms depend one way (docs/ARCHITECTURE.md): the graph between top-level
    /// modules has no cycle.
    #[test]
    fn no_module_depends_on_one_that_depends_on_it() {
        let deps = room_graph();
        // Depth-first: a module met again on the current path is a cycle.
        fn visit<'a>(
            m: &'a str,
            deps: &'a BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
        ) {
            if done.contains(m) {
                return;
            }
            assert!(!path.contains(&m), "a cycle: {} → {m}", path.join(" → "));
            path.push(m);
            for d in deps.get(m).into_iter().flatten() {
                visit(d, deps, path, done);
            }
            path.pop();
            done.insert(m);
        }
        let mut done = BTreeSet::new();
        for m in deps.keys() {
            visit(m, &deps, &mut Vec::new(), &mut done);
        }
        assert!(
            deps["device"].iter().all(|d| d == "settings"),
            "device depends only on settings"
        );
    }

    /// docs/ARCHITECTURE.md draws the rooms as the code has them: its graph block gives
    /// every room of the library, each with exactly the rooms its code names.
    #[test]
    fn the_architecture_draws_the_rooms_the_code_has() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ARCHITECTURE.md"))
                .unwrap();
        let block = doc
            .split("```\n")
            .find(|b| b.starts_with("cli "))
            .expect("ARCHITECTURE.md's graph block, opening with `cli ──▶`");
        let mut drawn: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in block.lines() {
            let (room, names) = line
                .split_once("──▶")
                .unwrap_or_else(|| panic!("`{line}`: write `room ──▶ rooms (why)`"));
            let room = room.trim();
            // The binary's own room, above every other.
            if room == "cli" {
                continue;
            }
            let names = names.split('(').next().unwrap().trim();
            let names = match names {
                "nothing of quest's" => BTreeSet::new(),
                names => names.split(", ").map(|n| n.trim().to_owned()).collect(),
            };
            assert!(
                drawn.insert(room.to_owned(), names).is_none(),
                "{room} drawn twice"
            );
        }
        let code = room_graph();
        for (room, names) in &code {
            assert_eq!(
                drawn.get(room),
                Some(names),
                "docs/ARCHITECTURE.md's line for `{room}` is not what its code names"
            );
        }
        for room in drawn.keys() {
            assert!(
                code.contains_key(room),
                "ARCHITECTURE.md draws `{room}`, which src/ has not"
            );
        }
        // "`course` knows nothing of MLX": no path of mlx-rs outside its tests.
        for (rel, text) in super::rust_sources() {
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            assert!(
                !(rel.starts_with("course") && code.contains("mlx_rs")),
                "{} names mlx_rs: course knows nothing of MLX (ARCHITECTURE.md)",
                rel.display()
            );
        }
    }

    /// A module path's use tree read from `code` at `at` (`crate::a::{b, c::D as E}`, a
    /// path in an expression): each leaf's segments and the name it is given (`as`).
    fn use_tree(code: &str, at: usize) -> Vec<(Vec<String>, Option<String>)> {
        // Tokens: identifiers (with `$crate`'s `$`), `::`, and any one other character.
        fn token(code: &str, at: &mut usize) -> String {
            let rest = &code[*at..];
            let skipped = rest.len() - rest.trim_start().len();
            let rest = &rest[skipped..];
            let len = if rest.starts_with("::") {
                2
            } else {
                let word = rest
                    .char_indices()
                    .find(|&(i, c)| !(c.is_alphanumeric() || c == '_' || (i == 0 && c == '$')))
                    .map_or(rest.len(), |(i, _)| i);
                word.max(rest.chars().next().map_or(0, char::len_utf8))
            };
            *at += skipped + len;
            rest[..len].to_owned()
        }
        fn tree(
            code: &str,
            at: &mut usize,
            prefix: Vec<String>,
            out: &mut Vec<(Vec<String>, Option<String>)>,
        ) {
            let mut path = prefix;
            loop {
                let mut peek = *at;
                let t = token(code, &mut peek);
                if t == "{" {
                    *at = peek;
                    loop {
                        tree(code, at, path.clone(), out);
                        let mut peek = *at;
                        match token(code, &mut peek).as_str() {
                            "," => *at = peek,
                            "}" => {
                                *at = peek;
                                return;
                            }
                            _ => return,
                        }
                        let mut after = *at;
                        if token(code, &mut after) == "}" {
                            *at = after;
                            return;
                        }
                    }
                }
                // A glob, or the end of the path (`(`, `;`, `<`…).
                if t == "*" || !t.starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '$') {
                    if t == "*" {
                        *at = peek;
                    }
                    out.push((path, None));
                    return;
                }
                *at = peek;
                path.push(t.trim_start_matches('$').to_owned());
                let mut next = *at;
                match token(code, &mut next).as_str() {
                    "::" => *at = next,
                    "as" => {
                        *at = next;
                        out.push((path, Some(token(code, at))));
                        return;
                    }
                    _ => {
                        out.push((path, None));
                        return;
                    }
                }
            }
        }
        let mut out = Vec::new();
        tree(code, &mut at.clone(), Vec::new(), &mut out);
        out
    }

    /// A file's code as the file graph reads it: outside its `mod tests`, without comments
    /// (doc comments and their `[`…`]` links included).
    fn code_of(text: &str) -> String {
        let mut code = String::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            let is_tests = line.starts_with("#[cfg(")
                && line.contains("test")
                && lines.peek().is_some_and(|l| l.starts_with("mod tests"));
            if is_tests {
                // rustfmt closes a top-level module at the line's start.
                lines.by_ref().find(|l| *l == "}");
                continue;
            }
            if !line.trim_start().starts_with("//") {
                code += line;
                code += "\n";
            }
        }
        code
    }

    /// A file's text with its comments and the insides of its string and char literals
    /// blanked, lines kept: what remains are the code's names.
    fn names_of(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        let (mut in_string, mut in_comment) = (false, false);
        while let Some(c) = chars.next() {
            if c == '\n' {
                in_comment = false;
                out.push(c);
            } else if in_comment {
                out.push(' ');
            } else if in_string {
                if c == '\\' {
                    chars.next();
                    out.push(' ');
                } else if c == '"' {
                    in_string = false;
                }
                out.push(' ');
            } else if c == '/' && chars.peek() == Some(&'/') {
                in_comment = true;
                out.push(' ');
            } else if c == '"' {
                in_string = true;
                out.push(' ');
            } else if c == '\'' {
                // A char literal ('x', '\n', '"'), not a lifetime ('a): blanked.
                let ahead: Vec<char> = chars.clone().take(3).collect();
                let length = match ahead.as_slice() {
                    ['\\', _, '\''] => 3,
                    [_, '\'', ..] => 2,
                    _ => 0,
                };
                for _ in 0..length {
                    chars.next();
                }
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        out
    }

    /// The names in `src/` say one word per idea (docs/ARCHITECTURE.md's glossary): your
    /// code is `yours`, never `own`, `theirs` or `learners`; the socket is the line
    /// (`QUEST_LINE`); `Outcome` names one type, the judge's. Read from the code, comments and
    /// string literals aside, tests included.
    #[test]
    fn the_code_says_one_word_per_idea() {
        let refused_parts = ["own", "theirs", "learners", "ours"];
        let mut found = Vec::new();
        for (path, text) in crate::rust_sources() {
            for (n, code) in names_of(&text).lines().enumerate() {
                let names = code
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty());
                for name in names {
                    let snake = name.to_lowercase();
                    let parts: Vec<&str> = snake.split('_').collect();
                    // English in a test's name: "its own", "their own".
                    let refused = parts.iter().enumerate().any(|(i, p)| {
                        refused_parts.contains(p)
                            && !(*p == "own" && i > 0 && ["its", "their"].contains(&parts[i - 1]))
                    });
                    let camel_refused = !name.contains('_')
                        && name.chars().next().is_some_and(char::is_uppercase)
                        && ["Own", "Theirs", "Ours", "Learners"].iter().any(|w| {
                            name.match_indices(w).any(|(at, _)| {
                                name[at + w.len()..]
                                    .chars()
                                    .next()
                                    .is_none_or(char::is_uppercase)
                            })
                        });
                    if refused || camel_refused {
                        found.push(format!("src/{}:{}: `{name}`", path.display(), n + 1));
                    }
                    if name == "QUEST_CLOCK" {
                        found.push(format!(
                            "src/{}:{}: `{name}` (the line is QUEST_LINE)",
                            path.display(),
                            n + 1
                        ));
                    }
                }
                let defines_outcome = ["enum Outcome", "struct Outcome", "type Outcome"]
                    .iter()
                    .any(|d| code.contains(d));
                if defines_outcome && path != std::path::Path::new("judge/outcome.rs") {
                    found.push(format!(
                        "src/{}:{}: a second type named `Outcome`",
                        path.display(),
                        n + 1
                    ));
                }
            }
        }
        assert!(
            found.is_empty(),
            "names the glossary refuses:\n{}",
            found.join("\n")
        );
    }

    /// The files depend one way too: from each file's `crate::…` and `super::…` paths
    /// (outside its tests and comments), the graph between files (`src/a/b.rs` is the module
    /// `a::b`, `src/a/mod.rs` or `src/a.rs` the module `a`) has no cycle. A path through an
    /// item a module re-exports (`pub use`) leads to the file that defines it.
    #[test]
    fn no_file_depends_on_one_that_depends_on_it() {
        let module_of = |rel: &std::path::Path| -> String {
            let rel = rel.to_string_lossy().replace('\\', "/");
            let rel = rel.trim_end_matches(".rs");
            rel.trim_end_matches("/mod").replace('/', "::")
        };
        // The library's files and the binary's `cli/` (another crate, whose paths into the
        // library are `quest::…`, not read here; its files reach each other by `super::`).
        let files: BTreeMap<String, (String, String)> = super::rust_sources()
            .into_iter()
            .filter(|(rel, _)| !rel.starts_with("main.rs"))
            .filter(|(rel, _)| !rel.starts_with("lib.rs"))
            .map(|(rel, text)| (module_of(&rel), (rel.display().to_string(), code_of(&text))))
            .collect();
        let parent = |m: &[String]| m[..m.len().saturating_sub(1)].to_vec();
        let split = |m: &str| -> Vec<String> { m.split("::").map(str::to_owned).collect() };
        // A path read in module `m`, from the crate's root.
        let absolute = |m: &str, path: &[String]| -> Option<Vec<String>> {
            let mut at = split(m);
            let mut rest = path;
            match rest.first().map(String::as_str) {
                Some("crate") => {
                    at.clear();
                    rest = &rest[1..];
                }
                Some("self") => rest = &rest[1..],
                Some("super") => {
                    while rest.first().is_some_and(|s| s == "super") {
                        at = parent(&at);
                        rest = &rest[1..];
                    }
                }
                Some(child) if files.contains_key(&format!("{m}::{child}")) => {}
                _ => return None,
            }
            at.extend(rest.iter().filter(|s| *s != "self").cloned());
            Some(at)
        };
        // What each module re-exports: (module, name) → the path it names.
        let mut exports: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (m, (_, code)) in &files {
            for (at, _) in code.match_indices("use ") {
                // `pub use` or `pub(…) use`: what the module gives others.
                let before = code[..at].trim_end();
                let visibility = before.rfind("pub").map(|i| &before[i + 3..]);
                let exported = visibility.is_some_and(|v| {
                    v.is_empty() || v.starts_with('(') && v.ends_with(')') && !v[1..].contains('(')
                });
                if !exported {
                    continue;
                }
                for (path, alias) in use_tree(code, at + 4) {
                    let name = match (alias, path.last()) {
                        (Some(alias), _) => alias,
                        (None, Some(last)) if last == "self" => path[path.len() - 2].clone(),
                        (None, Some(last)) => last.clone(),
                        (None, None) => continue,
                    };
                    if let Some(target) = absolute(m, &path) {
                        exports.insert((m.clone(), name), target);
                    }
                }
            }
        }
        // The file a path leads to: the longest prefix that is a file, through re-exports.
        let file_of = |mut path: Vec<String>| -> Option<String> {
            for _ in 0..8 {
                let k = (1..=path.len())
                    .rev()
                    .find(|&k| files.contains_key(&path[..k].join("::")))?;
                let m = path[..k].join("::");
                match path
                    .get(k)
                    .and_then(|name| exports.get(&(m.clone(), name.clone())))
                {
                    Some(target) => path = [target.clone(), path[k + 1..].to_vec()].concat(),
                    None => return Some(m),
                }
            }
            None
        };
        let mut deps: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (m, (_, code)) in &files {
            for word in ["crate::", "super::"] {
                for (at, _) in code.match_indices(word) {
                    let before = code[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    for (path, _) in use_tree(code, at) {
                        let found = absolute(m, &path).and_then(&file_of);
                        if let Some(file) = found.filter(|f| f != m) {
                            deps.entry(m).or_default().insert(file);
                        }
                    }
                }
            }
        }
        // Depth-first: a file met again on the current path closes a cycle.
        fn visit<'a>(
            m: &'a str,
            deps: &'a BTreeMap<&str, BTreeSet<String>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
            cycles: &mut Vec<Vec<&'a str>>,
        ) {
            if done.contains(m) {
                return;
            }
            if let Some(from) = path.iter().position(|p| *p == m) {
                cycles.push([&path[from..], &[m]].concat());
                return;
            }
            path.push(m);
            for d in deps.get(m).into_iter().flatten() {
                visit(d, deps, path, done, cycles);
            }
            path.pop();
            done.insert(m);
        }
        let (mut done, mut cycles) = (BTreeSet::new(), Vec::new());
        for m in deps.keys() {
            visit(m, &deps, &mut Vec::new(), &mut done, &mut cycles);
        }
        let named: Vec<String> = cycles
            .iter()
            .map(|c| {
                let names: Vec<&str> = c.iter().map(|m| files[*m].0.as_str()).collect();
                format!("src/{}", names.join(" → src/"))
            })
            .collect();
        assert!(named.is_empty(), "files in a cycle:\n{}", named.join("\n"));
        // The path reader reads groups, renames and re-exports.
        let tree = use_tree("crate::lm::{self, models::{a, b as c}, Pieces};", 0);
        let leaves: Vec<String> = tree
            .iter()
            .map(|(p, a)| format!("{}{a:?}", p.join("::")))
            .collect();
        assert_eq!(
            leaves,
            [
                "crate::lm::selfNone",
                "crate::lm::models::aNone",
                "crate::lm::models::bSome(\"c\")",
                "crate::lm::PiecesNone"
            ]
        );
        assert_eq!(file_of(split("lm::Pieces")).as_deref(), Some("lm::pieces"));
    }

    /// Files whose comments still hold measurements, edited on another branch: their
    /// figures move to docs once that branch is merged. Each is named with its reason.
    const HISTORY_LEFT: &[(&str, &str)] = &[];

    /// What a comment line says that belongs in docs, not in the source: an issue number,
    /// a date, a measured rate (tok/s, TB/s, GB/s, MB/s, ms per token) or a measured ratio
    /// (`×1.2`). Inline code (an example of a format) and `docs/…` paths (where the
    /// evidence is) are not read. `next` is the start of the following comment line, so a
    /// number and its unit split across lines are read together.
    fn history_in(line: &str, next: &str) -> Option<&'static str> {
        let prose = |text: &str| -> String {
            let outside_code: String = text.split('`').step_by(2).collect();
            outside_code
                .split_whitespace()
                .filter(|word| !word.contains("docs/"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let text = prose(line) + " " + &prose(next);
        let lower = text.to_lowercase();
        if lower.match_indices("issue #").any(|(at, m)| {
            lower[at + m.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        }) {
            return Some("an issue number");
        }
        let chars: Vec<char> = text.chars().collect();
        let is_date = |at: usize| {
            let shape = "dddd-dd-dd";
            let fits = shape.chars().enumerate().all(|(i, s)| {
                chars.get(at + i).is_some_and(|&c| match s {
                    'd' => c.is_ascii_digit(),
                    _ => c == s,
                })
            });
            let joined =
                |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || "-/".contains(*c));
            fits && !joined(at.checked_sub(1).and_then(|b| chars.get(b)))
                && !joined(chars.get(at + shape.len()))
        };
        if (0..chars.len()).any(is_date) {
            return Some("a date");
        }
        if chars
            .windows(2)
            .any(|w| w[0] == '×' && w[1].is_ascii_digit())
        {
            return Some("a measured ratio");
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        let is_number = |word: &str| {
            let word = word.trim_start_matches(['+', '~', '≈', '(']);
            word.chars().any(|c| c.is_ascii_digit())
                && word
                    .chars()
                    .all(|c| c.is_ascii_digit() || ".–-%".contains(c))
        };
        const RATES: &[&str] = &[
            "tok/s",
            "tokens/s",
            "TB/s",
            "GB/s",
            "MB/s",
            "ms/token",
            "ms per token",
            "µs per token",
        ];
        let rate = (0..words.len()).any(|i| {
            let after = words[i + 1..words.len().min(i + 4)].join(" ");
            is_number(words[i]) && RATES.iter().any(|unit| after.starts_with(unit))
        });
        rate.then_some("a measured rate")
    }

    /// Source comments say what the code is and why; the history — issue numbers, dates,
    /// what was measured before and after — lives in docs/ (docs/README.md maps it). Tests'
    /// comments may do arithmetic on their own data and are not read.
    #[test]
    fn source_comments_hold_no_history() {
        let mut found = Vec::new();
        let mut still_held = BTreeSet::new();
        for (rel, text) in super::rust_sources() {
            let rel = rel.to_string_lossy().replace('\\', "/");
            if rel.ends_with("/tests.rs") {
                continue;
            }
            let mut lines = text.lines().enumerate().peekable();
            while let Some((number, line)) = lines.next() {
                let is_tests = line.starts_with("#[cfg(")
                    && line.contains("test")
                    && lines
                        .peek()
                        .is_some_and(|(_, l)| l.starts_with("mod tests"));
                if is_tests {
                    lines.by_ref().find(|(_, l)| *l == "}");
                    continue;
                }
                let comment = |l: &str| {
                    l.trim_start()
                        .strip_prefix("//")
                        .map(|c| c.trim_start_matches(['/', '!']).to_owned())
                };
                let Some(this) = comment(line) else { continue };
                let next = lines
                    .peek()
                    .and_then(|(_, l)| comment(l))
                    .map(|c| c.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default();
                if let Some(what) = history_in(&this, &next) {
                    if HISTORY_LEFT.iter().any(|(file, _)| *file == rel) {
                        still_held.insert(rel.clone());
                    } else {
                        found.push(format!("src/{rel}:{}: {what}: {}", number + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "history in source comments (move it to its docs/ folder):\n{}",
            found.join("\n")
        );
        let clean: Vec<&str> = HISTORY_LEFT
            .iter()
            .map(|(file, _)| *file)
            .filter(|file| !still_held.contains(*file))
            .collect();
        assert!(
            clean.is_empty(),
            "no history left in {clean:?}: take it off HISTORY_LEFT"
        );
    }

    #[test]
    fn history_is_read_in_comments() {
        let refused = [
            ("fixed in issue #12", ""),
            ("measured 2026-12-01", ""),
            ("×1.04–1.54 MLX's ops", ""),
            ("1.67 TB/s against MLX's", ""),
            ("2 threads decoded at 2–3", "tok/s, 1 thread"),
            ("+1.3 ms per token per 1000 positions", ""),
        ];
        for (line, next) in refused {
            assert!(history_in(line, next).is_some(), "{line} {next}");
        }
        let kept = [
            "a figure such as `13.6 tok/s` or `×1.59`",
            "measured in docs/gpu/2026-12-01-attend/",
            "the line's value at context 0, ms per token",
            "4096 × 4096 in groups of 64",
            "decode tok/s on quest's clock",
        ];
        for line in kept {
            assert_eq!(history_in(line, ""), None, "{line}");
        }
    }
}
