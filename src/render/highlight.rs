//! A small Rust highlighter: keywords, strings, comments, numbers, macros and
//! type names. It reads line by line and carries block comments and strings
//! across lines; it does not need to be a parser to help the eye.

use super::style::{Color, Style};
use super::wrap::Span;

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while",
];

fn keyword() -> Style {
    Style::fg(Color::Magenta)
}
fn string() -> Style {
    Style::fg(Color::Green)
}
fn comment() -> Style {
    Style::fg(Color::Grey)
}
fn number() -> Style {
    Style::fg(Color::Yellow)
}
fn macro_call() -> Style {
    Style::fg(Color::Blue)
}
fn type_name() -> Style {
    Style::fg(Color::Cyan)
}

/// The HTML class of a highlighter style (`None` for plain text).
pub fn class_of(style: Style) -> Option<&'static str> {
    [
        (keyword(), "kw"),
        (string(), "str"),
        (comment(), "com"),
        (number(), "num"),
        (macro_call(), "mac"),
        (type_name(), "ty"),
    ]
    .into_iter()
    .find(|(known, _)| *known == style)
    .map(|(_, class)| class)
}

/// What a line starts inside of, carried over from the line before.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    BlockComment {
        depth: usize,
    },
    /// `hashes` is `Some(n)` for a raw string closed by `"` and n `#`s.
    Str {
        hashes: Option<usize>,
    },
}

/// One list of styled spans per line of `code`.
pub fn rust_lines(code: &str) -> Vec<Vec<Span>> {
    let mut state = State::Code;
    code.lines()
        .map(|line| {
            let mut spans = Vec::new();
            state = highlight_line(line, state, &mut spans);
            spans
        })
        .collect()
}

fn highlight_line(line: &str, mut state: State, spans: &mut Vec<Span>) -> State {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let style = match state {
            State::BlockComment { depth } => {
                (i, state) = scan_block_comment(&chars, i, depth);
                comment()
            }
            State::Str { hashes } => {
                (i, state) = scan_string(&chars, i, hashes);
                string()
            }
            State::Code => {
                let (end, next_state, style) = scan_code(&chars, i);
                (i, state) = (end, next_state);
                style
            }
        };
        push(spans, &chars[start..i], style);
    }
    state
}

/// One token of ordinary code starting at `i`.
fn scan_code(chars: &[char], i: usize) -> (usize, State, Style) {
    let at = |k: usize| chars.get(k).copied();
    let c = chars[i];
    if c == '/' && at(i + 1) == Some('/') {
        return (chars.len(), State::Code, comment());
    }
    if c == '/' && at(i + 1) == Some('*') {
        let (end, state) = scan_block_comment(chars, i + 2, 1);
        return (end, state, comment());
    }
    if c == '"' {
        let (end, state) = scan_string(chars, i + 1, None);
        return (end, state, string());
    }
    if let Some(after_prefix) = raw_string_start(chars, i) {
        let hashes = after_prefix - i - 2 - usize::from(c == 'b');
        let (end, state) = scan_string(chars, after_prefix, Some(hashes));
        return (end, state, string());
    }
    if c == 'b' && at(i + 1) == Some('"') {
        let (end, state) = scan_string(chars, i + 2, None);
        return (end, state, string());
    }
    if c == '\'' {
        let (end, is_char) = scan_char_or_lifetime(chars, i);
        let style = if is_char { string() } else { keyword() };
        return (end, State::Code, style);
    }
    if c.is_ascii_digit() {
        let mut end = i + 1;
        while end < chars.len()
            && (chars[end].is_alphanumeric()
                || chars[end] == '_'
                || chars[end] == '.' && at(end + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            end += 1;
        }
        return (end, State::Code, number());
    }
    if c.is_alphabetic() || c == '_' {
        let mut end = i + 1;
        while end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_') {
            end += 1;
        }
        let word: String = chars[i..end].iter().collect();
        if KEYWORDS.contains(&word.as_str()) {
            return (end, State::Code, keyword());
        }
        if at(end) == Some('!') && at(end + 1) != Some('=') {
            return (end + 1, State::Code, macro_call());
        }
        if c.is_uppercase() {
            return (end, State::Code, type_name());
        }
        return (end, State::Code, Style::PLAIN);
    }
    (i + 1, State::Code, Style::PLAIN)
}

/// If a raw string (`r"`, `r#"`, `br"`) starts at `i`, where its text begins.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let mut k = i;
    if chars.get(k) == Some(&'b') {
        k += 1;
    }
    if chars.get(k) != Some(&'r') {
        return None;
    }
    k += 1;
    while chars.get(k) == Some(&'#') {
        k += 1;
    }
    (chars.get(k) == Some(&'"')).then_some(k + 1)
}

fn scan_string(chars: &[char], mut i: usize, hashes: Option<usize>) -> (usize, State) {
    while i < chars.len() {
        match (chars[i], hashes) {
            ('\\', None) => i += 2,
            ('"', None) => return (i + 1, State::Code),
            ('"', Some(n)) if chars[i + 1..].iter().take(n).filter(|&&c| c == '#').count() == n => {
                return (i + 1 + n, State::Code)
            }
            _ => i += 1,
        }
    }
    (chars.len(), State::Str { hashes })
}

fn scan_block_comment(chars: &[char], mut i: usize, mut depth: usize) -> (usize, State) {
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return (i, State::Code);
                }
            }
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            _ => i += 1,
        }
    }
    (chars.len(), State::BlockComment { depth })
}

/// `'a'` and `'\n'` are chars; `'a` (no closing quote) is a lifetime.
/// Returns where the token ends and whether it is a char.
fn scan_char_or_lifetime(chars: &[char], i: usize) -> (usize, bool) {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => {
            let close = chars[i + 2..].iter().position(|&c| c == '\'');
            (close.map_or(chars.len(), |p| i + 2 + p + 1), true)
        }
        (Some(_), Some('\'')) => (i + 3, true),
        _ => {
            let mut end = i + 1;
            while end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_') {
                end += 1;
            }
            (end, false)
        }
    }
}

fn push(spans: &mut Vec<Span>, chars: &[char], style: Style) {
    let text: String = chars.iter().collect();
    match spans.last_mut() {
        Some(last) if last.style == style => last.text.push_str(&text),
        _ => spans.push(Span::new(text, style)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of every span with a given style, on all lines.
    fn styled(code: &str, style: Style) -> Vec<String> {
        rust_lines(code)
            .into_iter()
            .flatten()
            .filter(|span| span.style == style)
            .map(|span| span.text)
            .collect()
    }

    #[test]
    fn lines_keep_their_text() {
        let code = "let x = \"a // b\"; // note\nfn f<'a>(c: char) -> u8 { b'x' }";
        let lines: Vec<String> = rust_lines(code)
            .iter()
            .map(|line| line.iter().map(|span| span.text.as_str()).collect())
            .collect();
        assert_eq!(lines, code.lines().collect::<Vec<_>>());
    }

    #[test]
    fn keywords_strings_comments_and_friends() {
        let code = "let n = 42; // count\nprintln!(\"{n} \\\" ok\"); let t: Vec<u32> = Vec::new();";
        assert_eq!(styled(code, keyword()), ["let", "let"]);
        assert_eq!(styled(code, comment()), ["// count"]);
        assert_eq!(styled(code, string()), ["\"{n} \\\" ok\""]);
        assert_eq!(styled(code, number()), ["42"]);
        assert_eq!(styled(code, macro_call()), ["println!"]);
        assert_eq!(styled(code, type_name()), ["Vec", "Vec"]);
    }

    #[test]
    fn block_comments_and_raw_strings_span_lines() {
        let code = "/* one\ntwo */ let s = r#\"a\n\"b\"#; x";
        assert_eq!(styled(code, comment()), ["/* one", "two */"]);
        assert_eq!(styled(code, string()), ["r#\"a", "\"b\"#"]);
        assert!(styled(code, Style::PLAIN).concat().contains('x'));
    }

    #[test]
    fn lifetimes_are_not_chars() {
        let code = "fn f<'a>(x: &'a str) -> char { 'z' }";
        assert_eq!(styled(code, string()), ["'z'"]);
        assert_eq!(styled(code, keyword()), ["fn", "'a", "'a"]);
    }
}
