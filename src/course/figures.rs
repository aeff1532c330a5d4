//! Every measured figure a lesson states is traced: found, with its unit, in a result
//! file the lesson names, or listed in `lesson.yaml` as derived (with the arithmetic
//! that gives it from numbers of those files) or as the source page's own figure.
//!
//! A *figure* is a number with a unit of measure in the lesson's prose or in a ```text
//! block: `73.4 ms`, `113 µs`, `13.6 tok/s`, `3.94 GB/s`, `538 MB`, `1.2 s`, `21 %`,
//! `×1.59`, and ranges of them (`63–67 tok/s`). Code, inline code and URLs are not read.
//! A result file *holds* a figure when it has a number of the same kind of unit that
//! rounds to the figure at the figure's precision (`73.41` holds `73.4 ms`, `113.38
//! tok/s` does not hold `113 µs`). The unit of a number in a result file is the one
//! written after it, else the JSON key or `name=` before it on its line, else the
//! heading of its column in an aligned table.

use std::collections::BTreeMap;

/// The kinds of unit a figure can have; sizes and times compare across their scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Milliseconds (seconds and microseconds are scaled to them).
    Time,
    TokensPerSecond,
    /// GB/s (TB/s scaled).
    Bandwidth,
    /// MB (GB, KB scaled).
    Size,
    Percent,
    Ratio,
}

/// A unit as written, its kind and its scale to the kind's base unit.
const UNITS: &[(&str, Kind, f64)] = &[
    ("tok/s", Kind::TokensPerSecond, 1.0),
    ("GB/s", Kind::Bandwidth, 1.0),
    ("TB/s", Kind::Bandwidth, 1000.0),
    ("MB", Kind::Size, 1.0),
    ("GB", Kind::Size, 1000.0),
    ("KB", Kind::Size, 1e-3),
    ("ms", Kind::Time, 1.0),
    ("µs", Kind::Time, 1e-3),
    ("us", Kind::Time, 1e-3),
    ("s", Kind::Time, 1000.0),
    ("%", Kind::Percent, 1.0),
];

/// One figure of a lesson: where, as written, its numbers (a range has two) in the
/// kind's base unit, and the precision each was written with (half its last digit).
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub line: usize,
    pub text: String,
    pub kind: Kind,
    pub values: Vec<(f64, f64)>,
}

/// The numbers of a set of result files, by kind, in base units.
#[derive(Debug, Default)]
pub struct Evidence {
    by_kind: BTreeMap<Kind, Vec<f64>>,
    /// Every number, whatever its unit: what a derived figure's arithmetic may use.
    any: Vec<f64>,
}

/// The figures of a lesson file (Markdown, front matter included), skipping code.
pub fn figures_in(markdown: &str) -> Vec<Figure> {
    let mut figures = Vec::new();
    let mut fence: Option<bool> = None; // Some(read?) inside a fenced block
    for (at, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(matches!(info.trim(), "" | "text")),
            };
            continue;
        }
        if fence == Some(false) {
            continue;
        }
        figures.extend(figures_in_line(&without_code_spans(line)).into_iter().map(
            |(text, kind, values)| Figure {
                line: at + 1,
                text,
                kind,
                values,
            },
        ));
    }
    figures
}

/// `line` with its inline code spans and link targets blanked out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    let mut in_target = false;
    let mut previous = ' ';
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if !in_code && previous == ']' && c == '(' {
            in_target = true;
            out.push(' ');
        } else if in_target {
            in_target = c != ')';
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
        previous = c;
    }
    out
}

/// A number as written: its value, and half of its last written digit.
fn number_at(chars: &[char], start: usize) -> Option<(f64, f64, usize)> {
    number_written(chars, start, false)
}

/// [`number_at`], reading thousands separators too (`27,707`) where `grouped`: prose
/// writes them, result files (JSON lists) do not.
fn number_written(chars: &[char], start: usize, grouped: bool) -> Option<(f64, f64, usize)> {
    let mut end = start;
    let mut decimals: Option<u32> = None;
    let mut text = String::new();
    while end < chars.len() {
        let c = chars[end];
        let group = grouped
            && c == ','
            && decimals.is_none()
            && end > start
            && chars
                .get(end + 1..end + 4)
                .is_some_and(|d| d.iter().all(char::is_ascii_digit))
            && !chars.get(end + 4).is_some_and(char::is_ascii_digit);
        if group {
            end += 1;
            continue;
        }
        if c.is_ascii_digit() {
            if let Some(d) = decimals.as_mut() {
                *d += 1;
            }
        } else if c == '.'
            && decimals.is_none()
            && chars.get(end + 1).is_some_and(char::is_ascii_digit)
            && end > start
        {
            decimals = Some(0);
        } else {
            break;
        }
        text.push(c);
        end += 1;
    }
    if end == start {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    Some((
        value,
        0.5 * 10f64.powi(-(decimals.unwrap_or(0) as i32)),
        end,
    ))
}

/// The unit written at `at` (after optional spaces): its kind, scale and end.
fn unit_at(chars: &[char], at: usize) -> Option<(Kind, f64, usize)> {
    let mut i = at;
    while chars.get(i) == Some(&' ') || chars.get(i) == Some(&'\u{a0}') {
        i += 1;
    }
    for (unit, kind, scale) in UNITS {
        let unit: Vec<char> = unit.chars().collect();
        let end = i + unit.len();
        if chars.get(i..end) == Some(&unit[..]) {
            // A unit ends a word: `ms` but not `msg`, `s` but not `steps` or `s_`; a
            // Korean particle may follow (`GB/s의`).
            let next = chars.get(end).copied().unwrap_or(' ');
            if next.is_ascii_alphanumeric() || next == '_' {
                continue;
            }
            // `s` alone only right after the number or one space, and not `'s`.
            if *kind == Kind::Time && *scale == 1000.0 && i > at + 1 {
                continue;
            }
            return Some((*kind, *scale, end));
        }
    }
    None
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '.' || c == '/'
}

/// A figure found on a line: as written, its kind, its values in base units.
type Found = (String, Kind, Vec<(f64, f64)>);

/// Figures on one line of prose.
fn figures_in_line(line: &str) -> Vec<Found> {
    let chars: Vec<char> = line.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let glued = i > 0 && is_word_char(chars[i - 1]) && chars[i - 1] != '/';
        // `×1.59` is a ratio; `576 × 30`, with spaces, a product.
        if c == '×' {
            if let Some((value, half, end)) = number_at(&chars, i + 1) {
                found.push((
                    chars[i..end].iter().collect(),
                    Kind::Ratio,
                    vec![(value, half)],
                ));
                i = end;
                continue;
            }
        }
        if !c.is_ascii_digit() || glued {
            i += 1;
            continue;
        }
        let Some((first, first_half, mut end)) = number_written(&chars, i, true) else {
            i += 1;
            continue;
        };
        let mut values = vec![(first, first_half)];
        // A range: `63–67 tok/s`.
        if chars.get(end) == Some(&'–') {
            if let Some((second, half, after)) = number_written(&chars, end + 1, true) {
                values.push((second, half));
                end = after;
            }
        }
        // Not a figure when glued to a word after it (`4b`, `0.6B`, `v2`).
        match unit_at(&chars, end) {
            Some((kind, scale, unit_end)) => {
                let values = values
                    .into_iter()
                    .map(|(v, h)| (v * scale, h * scale))
                    .collect();
                found.push((chars[i..unit_end].iter().collect(), kind, values));
                i = unit_end;
            }
            None => {
                // `1.59×` writes a ratio too.
                if chars.get(end) == Some(&'×') && values.len() == 1 {
                    found.push((chars[i..=end].iter().collect(), Kind::Ratio, values));
                    i = end + 1;
                } else {
                    i = end;
                    while i < chars.len() && is_word_char(chars[i]) {
                        i += 1;
                    }
                }
            }
        }
    }
    found
}

impl Evidence {
    /// The numbers of result files (their texts), each with the unit it was written with.
    pub fn from_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Evidence {
        let mut evidence = Evidence::default();
        for text in texts {
            evidence.read(text);
        }
        for numbers in evidence.by_kind.values_mut() {
            numbers.sort_unstable_by(f64::total_cmp);
        }
        evidence.any.sort_unstable_by(f64::total_cmp);
        evidence
    }

    fn read(&mut self, text: &str) {
        let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
        let headings: Vec<Vec<Heading>> = lines.iter().map(|l| headings_of(l)).collect();
        for (row, chars) in lines.iter().enumerate() {
            let mut i = 0;
            while i < chars.len() {
                let glued = i > 0 && (chars[i - 1].is_alphabetic() || chars[i - 1] == '_');
                let negative = i > 0 && chars[i - 1] == '-';
                if !chars[i].is_ascii_digit() || glued {
                    i += 1;
                    continue;
                }
                let Some((value, _, end)) = number_at(chars, i) else {
                    i += 1;
                    continue;
                };
                let value = if negative { -value } else { value };
                // An exponent: `1.5e-05`.
                let (value, end) = exponent(chars, value, end);
                self.any.push(value);
                let ratio_before = i > 0 && matches!(chars[i - 1], '×' | 'x')
                    || i > 1 && chars[i - 1] == ' ' && chars[i - 2] == '×';
                let ratio_after = matches!(chars.get(end), Some('×' | 'x'))
                    && !chars.get(end + 1).is_some_and(|c| c.is_alphanumeric());
                // `layers × 8.7 µs` is a time: a unit after the number outweighs a `×` before.
                let unit = unit_at(chars, end);
                if ratio_after || ratio_before && unit.is_none() {
                    self.add(Kind::Ratio, value);
                } else if let Some((kind, scale, _)) = unit {
                    self.add(kind, value * scale);
                } else if let Some((kind, scale)) = key_before(&chars[..i]) {
                    self.add(kind, value * scale);
                } else if let Some((kind, scale)) = column_heading(&lines, &headings, row, i, end) {
                    self.add(kind, value * scale);
                }
                i = end;
            }
        }
    }

    fn add(&mut self, kind: Kind, value: f64) {
        self.by_kind.entry(kind).or_default().push(value);
    }

    /// Whether every number of `figure` is held, with its kind. A figure is read without
    /// its sign (prose writes `−40.6 ms` with a minus the scanner does not take), so a
    /// file's negative number holds it too.
    pub fn holds(&self, figure: &Figure) -> bool {
        let Some(numbers) = self.by_kind.get(&figure.kind) else {
            return false;
        };
        figure
            .values
            .iter()
            .all(|&(value, half)| within(numbers, value, half) || within(numbers, -value, half))
    }

    /// Whether `number` is one of the files' numbers (any unit), as written.
    fn has_number(&self, value: f64, half: f64) -> bool {
        within(&self.any, value, half)
    }
}

/// Whether sorted `numbers` hold one within `half` of `value`.
fn within(numbers: &[f64], value: f64, half: f64) -> bool {
    let half = half * (1.0 + 1e-9);
    let from = numbers.partition_point(|n| *n < value - half);
    numbers.get(from).is_some_and(|n| *n <= value + half)
}

fn exponent(chars: &[char], value: f64, end: usize) -> (f64, usize) {
    if !matches!(chars.get(end), Some('e' | 'E')) {
        return (value, end);
    }
    let mut j = end + 1;
    let negative = chars.get(j) == Some(&'-');
    if matches!(chars.get(j), Some('-' | '+')) {
        j += 1;
    }
    let start = j;
    while chars.get(j).is_some_and(char::is_ascii_digit) {
        j += 1;
    }
    if j == start {
        return (value, end);
    }
    let digits: String = chars[start..j].iter().collect();
    let e: i32 = digits.parse().unwrap_or(0);
    (value * 10f64.powi(if negative { -e } else { e }), j)
}

/// The unit a key names: `"host_us_per_layer": 84.1`, `decode_tok_s=13.6`, `ms_per_token`.
fn key_before(before: &[char]) -> Option<(Kind, f64)> {
    // A key sits right before its number: the last few characters are enough (and a
    // JSON file can be one long line).
    let text: String = before[before.len().saturating_sub(64)..].iter().collect();
    let text = text.trim_end().trim_end_matches([':', '=', '"', ' ']);
    let key: String = text
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '/')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<String>()
        .to_lowercase();
    if key.is_empty() {
        return None;
    }
    let parts: Vec<&str> = key.split(['_', '/']).collect();
    let has = |word: &str| parts.contains(&word);
    if key.contains("tok_s") || key.contains("tok/s") || has("tps") {
        Some((Kind::TokensPerSecond, 1.0))
    } else if key.contains("gb_s") || key.contains("gb/s") {
        Some((Kind::Bandwidth, 1.0))
    } else if has("ms") {
        Some((Kind::Time, 1.0))
    } else if has("us") || has("µs") {
        Some((Kind::Time, 1e-3))
    } else if has("seconds") || has("secs") || key.ends_with("_s") {
        Some((Kind::Time, 1000.0))
    } else if has("mb") {
        Some((Kind::Size, 1.0))
    } else if has("gb") {
        Some((Kind::Size, 1000.0))
    } else if has("ratio") || has("speedup") || has("x") || has("vs") {
        Some((Kind::Ratio, 1.0))
    } else if has("pct") || has("percent") {
        Some((Kind::Percent, 1.0))
    } else {
        None
    }
}

/// A word of a line that names a unit, as a table heading: its span, kind and scale.
type Heading = (usize, usize, Kind, f64);

/// The headings of a line that name a unit, with their spans: a heading is a phrase of
/// words one space apart (`ms per step`, `host µs/layer`); columns are two or more apart.
fn headings_of(line: &[char]) -> Vec<Heading> {
    let mut headings = Vec::new();
    let mut i = 0;
    // Markdown tables part their columns with `|`.
    let apart = |c: char| c.is_whitespace() || c == '|';
    while i < line.len() {
        if apart(line[i]) {
            i += 1;
            continue;
        }
        let from = i;
        let mut unit = None;
        loop {
            let word_from = i;
            while i < line.len() && !apart(line[i]) {
                i += 1;
            }
            let word: String = line[word_from..i].iter().collect();
            unit = unit.or_else(|| heading_unit(&word));
            // One space and another word: the same heading.
            let one_space =
                line.get(i) == Some(&' ') && line.get(i + 1).is_some_and(|c| !apart(*c));
            if !one_space {
                break;
            }
            i += 1;
        }
        if let Some((kind, scale)) = unit {
            headings.push((from, i, kind, scale));
        }
    }
    headings
}

/// The unit in the heading of the column that the number at `start..end` of line `row`
/// sits in: the nearest line above (in the same block) with a unit word over it.
fn column_heading(
    lines: &[Vec<char>],
    headings: &[Vec<Heading>],
    row: usize,
    start: usize,
    end: usize,
) -> Option<(Kind, f64)> {
    for above in (row.saturating_sub(40)..row).rev() {
        if lines[above].iter().all(|c| c.is_whitespace()) {
            return None;
        }
        let units = &headings[above];
        if units.is_empty() {
            continue;
        }
        // Right-aligned columns end together; left-aligned ones start together.
        return units
            .iter()
            .filter(|(from, to, _, _)| *from < end + 2 && start < *to + 2)
            .min_by_key(|(_, to, _, _)| to.abs_diff(end))
            .map(|&(_, _, kind, scale)| (kind, scale));
    }
    None
}

/// A table heading's unit: `ms`, `ms/token`, `tok/s`, `µs/layer`, `(GB/s)`.
fn heading_unit(word: &str) -> Option<(Kind, f64)> {
    let word = word.trim_matches(|c: char| c == '(' || c == ')' || c == '[' || c == ']');
    let chars: Vec<char> = word.chars().collect();
    if let Some((kind, scale, end)) = unit_at(&chars, 0) {
        if end == chars.len() || chars.get(end) == Some(&'/') {
            return Some((kind, scale));
        }
    }
    key_before(&chars)
}

/// A lesson's figures that no result file holds and that `derived` / `quoted` do not
/// account for. `derived` maps a figure as written to arithmetic (`+ - * / ( )` on
/// numbers the files hold, or that `quoted` figures give) whose result it rounds; `quoted`
/// lists the figures accepted as written (the source page's own, those the lesson sets).
pub fn untraced(
    figures: &[Figure],
    evidence: &Evidence,
    derived: &BTreeMap<String, Vec<String>>,
    quoted: &[String],
) -> Vec<(Figure, String)> {
    // A derived figure may also use the numbers of the quoted and given ones, as written.
    let mut written: Vec<f64> = Vec::new();
    for text in quoted {
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match number_at(&chars, i) {
                Some((value, _, end)) if i == 0 || !chars[i - 1].is_ascii_digit() => {
                    written.push(value);
                    i = end;
                }
                _ => i += 1,
            }
        }
    }
    let mut missing = Vec::new();
    for figure in figures {
        if evidence.holds(figure) || quoted.iter().any(|q| same_text(q, &figure.text)) {
            continue;
        }
        let why = match derived.iter().find(|(k, _)| same_text(k, &figure.text)) {
            None => "found in no result file the lesson names".to_owned(),
            Some((_, formulas)) => match check_derived(figure, formulas, evidence, &written) {
                Ok(()) => continue,
                Err(why) => why,
            },
        };
        missing.push((figure.clone(), why));
    }
    missing
}

/// Figures compare as written, spaces aside (`×1.5` and `× 1.5`).
fn same_text(a: &str, b: &str) -> bool {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    squeeze(a) == squeeze(b)
}

fn check_derived(
    figure: &Figure,
    formulas: &[String],
    evidence: &Evidence,
    written: &[f64],
) -> Result<(), String> {
    if formulas.len() != figure.values.len() {
        return Err(format!(
            "derived with {} formula(s) for {} number(s)",
            formulas.len(),
            figure.values.len()
        ));
    }
    for (formula, &(value, half)) in formulas.iter().zip(&figure.values) {
        let (result, numbers) = evaluate(formula).map_err(|e| format!("`{formula}`: {e}"))?;
        if let Some(n) = numbers.iter().find(|(n, h)| {
            !is_constant(*n, *h) && !evidence.has_number(*n, *h) && !written.contains(n)
        }) {
            return Err(format!(
                "`{formula}` uses {}, which no result file the lesson names holds",
                n.0
            ));
        }
        // The figure's values are in base units; the formula gives the written unit.
        let scale = written_scale(&figure.text);
        if (result * scale - value).abs() > half * (1.0 + 1e-9) {
            return Err(format!(
                "`{formula}` gives {result}, which does not round to {}",
                figure.text
            ));
        }
    }
    Ok(())
}

/// A number a formula may use without a file: a whole count up to 12, or a power of ten
/// (percent, units).
fn is_constant(value: f64, half: f64) -> bool {
    let whole = half == 0.5 && value.fract() == 0.0;
    whole && (value <= 12.0 || (value.log10().fract() == 0.0))
}

/// The scale of the unit `text` (a figure as written) is in: 1000 for `s`, 1 for `ms`.
fn written_scale(text: &str) -> f64 {
    let chars: Vec<char> = text.chars().collect();
    let Some(start) = chars.iter().position(char::is_ascii_digit) else {
        return 1.0;
    };
    let mut end = start;
    while end < chars.len() && (chars[end].is_ascii_digit() || matches!(chars[end], '.' | '–')) {
        end += 1;
    }
    unit_at(&chars, end).map_or(1.0, |(_, scale, _)| scale)
}

/// Evaluates `+ - * / ( )` over decimal numbers; also returns each number (with half its
/// last digit) for tracing.
fn evaluate(formula: &str) -> Result<(f64, Vec<(f64, f64)>), String> {
    let chars: Vec<char> = formula.chars().filter(|c| !c.is_whitespace()).collect();
    let mut parser = Parser {
        chars,
        at: 0,
        numbers: Vec::new(),
    };
    let value = parser.sum()?;
    if parser.at != parser.chars.len() {
        return Err(format!("cannot read from `{}`", parser.rest()));
    }
    Ok((value, parser.numbers))
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    numbers: Vec<(f64, f64)>,
}

impl Parser {
    fn rest(&self) -> String {
        self.chars[self.at..].iter().collect()
    }
    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(&op) = self.chars.get(self.at) {
            if op != '+' && op != '-' {
                break;
            }
            self.at += 1;
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }
    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.atom()?;
        while let Some(&op) = self.chars.get(self.at) {
            if op != '*' && op != '/' && op != '×' {
                break;
            }
            self.at += 1;
            let rhs = self.atom()?;
            value = if op == '/' { value / rhs } else { value * rhs };
        }
        Ok(value)
    }
    fn atom(&mut self) -> Result<f64, String> {
        match self.chars.get(self.at) {
            Some('(') => {
                self.at += 1;
                let value = self.sum()?;
                if self.chars.get(self.at) != Some(&')') {
                    return Err("a `(` is not closed".into());
                }
                self.at += 1;
                Ok(value)
            }
            Some('-') => {
                self.at += 1;
                Ok(-self.atom()?)
            }
            _ => {
                let (value, half, end) = number_at(&self.chars, self.at)
                    .ok_or_else(|| format!("a number expected at `{}`", self.rest()))?;
                self.at = end;
                self.numbers.push((value, half));
                Ok(value)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(figures: &[Figure]) -> Vec<&str> {
        figures.iter().map(|f| f.text.as_str()).collect()
    }

    #[test]
    fn figures_are_numbers_with_units_outside_code() {
        let md = "A step took 73.4 ms (13.6 tok/s), ×1.59 faster; 63–67 tok/s; 3.94 GB/s.\n\
                  `3.8 ms` is code, 4 bits are not a unit, Qwen3-0.6B neither, 1.2 s is.\n\
                  ```rust\nlet x = 5.0 ms;\n```\n```text\nSmolLM2  539.0 MB\n```\n\
                  [a link](docs/gpu/2026-12-01-attend/run7/peer.txt) and 21 % and 1.5× too.";
        assert_eq!(
            texts(&figures_in(md)),
            [
                "73.4 ms",
                "13.6 tok/s",
                "×1.59",
                "63–67 tok/s",
                "3.94 GB/s",
                "1.2 s",
                "539.0 MB",
                "21 %",
                "1.5×"
            ]
        );
        let range = &figures_in("63–67 tok/s")[0];
        assert_eq!(range.values, [(63.0, 0.5), (67.0, 0.5)]);
        // A Korean particle after the unit.
        assert_eq!(figures_in("3.94 GB/s의 대역폭")[0].text, "3.94 GB/s");
        // Thousands written with commas are one number.
        assert_eq!(figures_in("+27,707 ms per 100")[0].values, [(27707.0, 0.5)]);
        // Scaled to the kind's base unit: seconds to milliseconds.
        assert_eq!(figures_in("1.2 s")[0].values, [(1200.0, 50.0)]);
    }

    /// "113 µs per layer" stood in mlx-path with nothing to trace it to: its result
    /// files hold 113.38, but in tok/s.
    #[test]
    fn a_number_held_in_another_unit_does_not_trace_a_figure() {
        let evidence =
            Evidence::from_texts(["MLX ops 113.38 tok/s, kept 160.37 tok/s, layers × 8.7 µs"]);
        assert!(
            evidence.holds(&figures_in("8.7 µs a layer")[0]),
            "a unit after `×` is a time"
        );
        let figures = figures_in("about 113 µs per layer of host time");
        let missing = untraced(&figures, &evidence, &BTreeMap::new(), &[]);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert_eq!(missing[0].0.text, "113 µs");
        let evidence = Evidence::from_texts([r#"{"host_us_per_layer": 113.2}"#]);
        assert!(untraced(&figures, &evidence, &BTreeMap::new(), &[]).is_empty());
    }

    #[test]
    fn a_figure_rounds_what_the_file_holds_at_its_own_precision() {
        let evidence = Evidence::from_texts(["decode 73.41 ms per token, 5312 ms in all"]);
        let held = |s: &str| evidence.holds(&figures_in(s)[0]);
        assert!(held("73.4 ms"));
        assert!(held("73 ms"));
        assert!(!held("73.5 ms"));
        assert!(!held("73.40 ms") || held("73.41 ms"));
        // Another scale of the same unit kind.
        assert!(held("5.312 s"));
        assert!(!held("5.4 s"));
    }

    #[test]
    fn units_come_from_keys_and_table_columns() {
        let table = "\
shape            build ms    eval ms  host µs/layer
Qwen3.5-0.8B         3.15     444.78        18663.6
";
        let markdown = "| loop | TTFT ms | tok/s |\n|---|---|---|\n| hand | 262.1 | 16.42 |";
        let evidence =
            Evidence::from_texts([table, markdown, "decode_tok_s=13.62\n\"copy_gb_s\": 3546.1"]);
        let held = |s: &str| evidence.holds(&figures_in(s)[0]);
        assert!(held("444.8 ms"));
        assert!(held("3.15 ms"));
        assert!(held("18.66 ms"));
        assert!(held("13.6 tok/s"));
        assert!(held("3.546 TB/s"));
        assert!(!held("3.15 tok/s"));
        assert!(held("16.4 tok/s") && held("262 ms"));
    }

    #[test]
    fn a_derived_figure_is_the_arithmetic_of_held_numbers() {
        let evidence = Evidence::from_texts(["loop 271.6 tok/s, mlx-lm 156.1 tok/s"]);
        let figures = figures_in("×1.74 the library's");
        let derived = |f: &str| BTreeMap::from([("×1.74".to_owned(), vec![f.to_owned()])]);
        assert!(untraced(&figures, &evidence, &derived("271.6 / 156.1"), &[]).is_empty());
        let wrong = untraced(&figures, &evidence, &derived("271.6 / 150"), &[]);
        assert!(wrong[0].1.contains("uses 150"), "{wrong:?}");
        let off = untraced(
            &figures,
            &evidence,
            &derived("271.6 / 156.1 + 10 / 100"),
            &[],
        );
        assert!(off[0].1.contains("does not round"), "{off:?}");
        // Quoted from the source page.
        assert!(untraced(&figures, &evidence, &BTreeMap::new(), &["×1.74".into()]).is_empty());
        // A product is not a figure.
        assert!(figures_in("2 × 30 layers × 3 heads").is_empty());
    }
}
