//! Word wrapping by display width: a Hangul syllable or CJK ideograph takes
//! two terminal columns, so counting chars or bytes would overflow the line.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::style::Style;

/// A run of text in one style.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub style: Style,
    /// Spaces inside do not break the line (inline code, a command).
    pub keep_together: bool,
}

impl Span {
    pub fn new(text: impl Into<String>, style: Style) -> Span {
        Span {
            text: text.into(),
            style,
            keep_together: false,
        }
    }
}

pub type Line = Vec<Span>;

/// A word is what sits between breakable spaces; it may mix styles
/// (`**bold**,` is one word of two spans).
enum Piece {
    Word(Line),
    /// A forced line break (Markdown hard break, sent as a "\n" span).
    Break,
}

pub fn text_width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

pub fn line_width(line: &[Span]) -> usize {
    line.iter().map(|span| text_width(&span.text)).sum()
}

/// Lays `spans` out in lines of at most `width` columns, breaking at spaces
/// (Korean separates words with spaces too); a word wider than a whole line
/// is cut wherever it has to be.
pub fn wrap(spans: &[Span], width: usize) -> Vec<Line> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line: Line = Vec::new();
    let mut used = 0;
    for piece in pieces(spans) {
        let word = match piece {
            Piece::Break => {
                lines.push(std::mem::take(&mut line));
                used = 0;
                continue;
            }
            Piece::Word(word) => word,
        };
        let word_width = line_width(&word);
        if used > 0 && used + 1 + word_width <= width {
            let space = space_between(&line, &word);
            push_span(&mut line, space);
            used += 1;
        } else if used > 0 {
            lines.push(std::mem::take(&mut line));
            used = 0;
        }
        if word_width <= width - used {
            used += word_width;
            word.into_iter().for_each(|span| push_span(&mut line, span));
            continue;
        }
        // Too long for any line: fill lines column by column.
        for span in word {
            for ch in span.text.chars() {
                let ch_width = ch.width().unwrap_or(0);
                if used + ch_width > width && used > 0 {
                    lines.push(std::mem::take(&mut line));
                    used = 0;
                }
                push_span(&mut line, Span::new(ch, span.style));
                used += ch_width;
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn pieces(spans: &[Span]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut word: Line = Vec::new();
    for span in spans {
        for ch in span.text.chars() {
            let breaks_here = ch == '\n' || (ch.is_whitespace() && !span.keep_together);
            if !breaks_here {
                push_span(&mut word, Span::new(ch, span.style));
                continue;
            }
            if !word.is_empty() {
                pieces.push(Piece::Word(std::mem::take(&mut word)));
            }
            if ch == '\n' {
                pieces.push(Piece::Break);
            }
        }
    }
    if !word.is_empty() {
        pieces.push(Piece::Word(word));
    }
    glue_unbreakable_spaces(pieces)
}

/// Some spaces should not break a line: a number stays with its unit
/// (`7.6 tok/s`, `74 %`), and a dash stays with the word before it.
fn glue_unbreakable_spaces(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut glued: Vec<Piece> = Vec::new();
    for piece in pieces {
        if let (Some(Piece::Word(previous)), Piece::Word(word)) = (glued.last_mut(), &piece) {
            let previous_text: String = previous.iter().map(|span| span.text.as_str()).collect();
            let last_word = previous_text.rsplit(' ').next().unwrap_or_default();
            let word_text: String = word.iter().map(|span| span.text.as_str()).collect();
            if is_number(last_word) || word_text == "—" {
                let space = space_between(previous, word);
                push_span(previous, space);
                word.iter()
                    .cloned()
                    .for_each(|span| push_span(previous, span));
                continue;
            }
        }
        glued.push(piece);
    }
    glued
}

fn is_number(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit())
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || ".,–-".contains(c))
}

/// Appends `span`, joining it to the last span when the style is the same.
fn push_span(line: &mut Line, span: Span) {
    match line.last_mut() {
        Some(last) if last.style == span.style => last.text.push_str(&span.text),
        _ => line.push(Span {
            keep_together: false,
            ..span
        }),
    }
}

/// The space between two words keeps their style when they share it, so an
/// underlined link stays underlined across its spaces.
fn space_between(line: &[Span], next: &[Span]) -> Span {
    let before = line.last().map(|span| span.style);
    let after = next.first().map(|span| span.style);
    let style = match (before, after) {
        (Some(a), Some(b)) if a == b => a,
        _ => Style::PLAIN,
    };
    Span::new(" ", style)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::style::Color;

    fn plain(text: &str) -> Vec<Span> {
        vec![Span::new(text, Style::PLAIN)]
    }

    fn texts(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|line| line.iter().map(|span| span.text.as_str()).collect())
            .collect()
    }

    #[test]
    fn english_wraps_at_spaces() {
        let lines = wrap(&plain("one token in, one token out"), 12);
        assert_eq!(texts(&lines), ["one token", "in, one", "token out"]);
    }

    #[test]
    fn korean_counts_two_columns_per_syllable() {
        // Each word is 2 syllables = 4 columns; 3 words and 2 spaces = 14.
        let lines = wrap(&plain("토큰 하나 넣고 토큰 하나 받기"), 14);
        assert_eq!(texts(&lines), ["토큰 하나 넣고", "토큰 하나 받기"]);
        for line in &lines {
            assert!(line_width(line) <= 14);
        }
    }

    #[test]
    fn a_word_longer_than_the_line_is_cut() {
        let lines = wrap(&plain("ab 가나다라마바"), 5);
        assert_eq!(texts(&lines), ["ab", "가나", "다라", "마바"]);
        let lines = wrap(&plain("abcdefgh"), 3);
        assert_eq!(texts(&lines), ["abc", "def", "gh"]);
    }

    #[test]
    fn kept_together_spans_do_not_break_at_their_spaces() {
        let mut spans = plain("run ");
        spans.push(Span {
            keep_together: true,
            ..Span::new("quest run mlx-path", Style::PLAIN)
        });
        assert_eq!(texts(&wrap(&spans, 20)), ["run", "quest run mlx-path"]);
    }

    #[test]
    fn numbers_stay_with_their_unit_and_dashes_with_their_word() {
        let lines = wrap(&plain("decoded at 7.6 tok/s and 74 % here"), 13);
        assert_eq!(texts(&lines), ["decoded at", "7.6 tok/s and", "74 % here"]);
        let lines = wrap(&plain("load, decode — and then"), 13);
        assert_eq!(texts(&lines), ["load,", "decode — and", "then"]);
    }

    #[test]
    fn styles_survive_wrapping_and_hard_breaks_break() {
        let bold = Style::fg(Color::Cyan).bold();
        let spans = vec![
            Span::new("a ", Style::PLAIN),
            Span::new("b c", bold),
            Span::new("\nd", Style::PLAIN),
        ];
        let lines = wrap(&spans, 80);
        assert_eq!(texts(&lines), ["a b c", "d"]);
        assert_eq!(lines[0][1], Span::new("b c", bold));
    }
}
