//! `lessons/glossary.yaml`: one Korean term for each idea of the course, and the other
//! renderings refused for it. The file's own comment says how a form is matched; this
//! module reads it, finds the refused forms in one piece of text (`Glossary::hits`), and
//! holds every Korean text to it: a lesson's ko.md, its front matter and its prose (code
//! blocks and inline code only for the terms that are formulas), and every Korean string
//! of quest.yaml (`lesson`, `course_file`, which `quest dev check` runs).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use serde::Deserialize;

use super::{markdown_options, yaml_error, Lang, Lesson};

/// The glossary file inside the lessons folder (optional: a course without it has none).
pub const GLOSSARY_FILE: &str = "glossary.yaml";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Glossary {
    pub terms: Vec<Term>,
}

/// An English term, its one Korean term, and the Korean renderings refused for it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    pub en: String,
    pub ko: String,
    #[serde(default)]
    pub refused: Vec<String>,
    /// Longer words that hold a refused form and are innocent.
    #[serde(default)]
    pub except: Vec<String>,
    /// `ko` is allowed only where the English text it translates says `en`.
    #[serde(default)]
    pub paired: bool,
    /// Also checked in inline code and `text` blocks.
    #[serde(default)]
    pub in_code: bool,
    /// A refused form counts only where a word ends in it (no Hangul syllable after it):
    /// the endings of a speech register (`습니다`), not the same syllables mid-word.
    #[serde(default)]
    pub word_end: bool,
}

/// A glossary term rendered another way, at a byte offset of the text checked.
#[derive(Debug, Clone)]
pub struct Hit<'a> {
    pub at: usize,
    pub found: String,
    pub term: &'a Term,
    /// `found` is the term's own `ko`, where the English does not say `en`.
    pub unpaired: bool,
}

impl Hit<'_> {
    /// What is wrong, e.g. "`고정항`: the glossary says `고정 항` (fixed term)".
    pub fn message(&self) -> String {
        let Term { en, ko, .. } = self.term;
        if self.unpaired {
            format!(
                "`{}`: the glossary's word for `{en}`, where the English does not say `{en}`",
                self.found
            )
        } else {
            format!("`{}`: the glossary says `{ko}` ({en})", self.found)
        }
    }
}

impl Glossary {
    /// Reads `<lessons_dir>/glossary.yaml`; no file is an empty glossary.
    pub fn load(lessons_dir: &Path) -> Result<Glossary> {
        let path = lessons_dir.join(GLOSSARY_FILE);
        if !path.is_file() {
            return Ok(Glossary::default());
        }
        let text = fs::read_to_string(&path)
            .with_context(|| format!("reading the glossary {}", path.display()))?;
        serde_yaml::from_str(&text).map_err(|error| yaml_error::located(&path, 1, error))
    }

    /// The refused renderings in `text`, a piece of Korean prose (`code`: inline code or
    /// a `text` block, where only `in_code` terms are looked for). `english` is the
    /// English text it translates, for the `paired` terms (none: they are not checked).
    pub fn hits<'a>(&'a self, text: &str, english: Option<&str>, code: bool) -> Vec<Hit<'a>> {
        let lowered = text.to_ascii_lowercase();
        let english = english.map(str::to_ascii_lowercase);
        let mut hits = Vec::new();
        for term in self.terms.iter().filter(|term| term.in_code || !code) {
            for form in &term.refused {
                let ends_a_word = |at: &usize| {
                    let next = lowered[at + form.len()..].chars().next();
                    !term.word_end || !next.is_some_and(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c))
                };
                let found = occurrences(&lowered, &form.to_ascii_lowercase(), &term.except);
                for at in found.into_iter().filter(ends_a_word) {
                    hits.push(Hit {
                        at,
                        found: text[at..at + form.len()].to_owned(),
                        term,
                        unpaired: false,
                    });
                }
            }
            let Some(english) = &english else { continue };
            if term.paired && !english.contains(&term.en.to_ascii_lowercase()) {
                for at in occurrences(&lowered, &term.ko.to_ascii_lowercase(), &term.except) {
                    hits.push(Hit {
                        at,
                        found: term.ko.clone(),
                        term,
                        unpaired: true,
                    });
                }
            }
        }
        // A form inside a longer one found (`forward` in `forward 패스`, 배치 in `비트 배치`)
        // is the same finding.
        hits.sort_by_key(|hit| (hit.at, std::cmp::Reverse(hit.found.len())));
        let mut kept: Vec<Hit> = Vec::new();
        for hit in hits {
            let inside = kept
                .iter()
                .any(|k| k.at <= hit.at && hit.at + hit.found.len() <= k.at + k.found.len());
            if !inside {
                kept.push(hit);
            }
        }
        kept
    }
}

/// Where `form` occurs in `text` (both lowercased), as a whole word when it starts or
/// ends in a Latin letter or digit, and not inside one of `except`.
fn occurrences(text: &str, form: &str, except: &[String]) -> Vec<usize> {
    if form.is_empty() {
        return Vec::new();
    }
    let word_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/');
    let starts_latin = form.starts_with(|c: char| c.is_ascii_alphanumeric());
    let ends_latin = form.ends_with(|c: char| c.is_ascii_alphanumeric());
    let excepted: Vec<(usize, usize)> = except
        .iter()
        .flat_map(|word| {
            let word = word.to_ascii_lowercase();
            text.match_indices(&word)
                .map(|(at, _)| (at, at + word.len()))
                .collect::<Vec<_>>()
        })
        .collect();
    text.match_indices(form)
        .map(|(at, _)| at)
        .filter(|&at| {
            let end = at + form.len();
            let before = text[..at].chars().next_back();
            let mut after = text[end..].chars();
            let next = after.next();
            // `logits.txt` is a file name; `logits.` ends a sentence.
            let dotted =
                next == Some('.') && after.next().is_some_and(|c| c.is_ascii_alphanumeric());
            let bounded = (!starts_latin || !before.is_some_and(|c| word_char(c) || c == '.'))
                && (!ends_latin || !(next.is_some_and(word_char) || dotted));
            bounded && !excepted.iter().any(|&(a, b)| a <= at && end <= b)
        })
        .collect()
}

/// A glossary term rendered another way, at a file line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
    }
}

/// The findings in a Korean lesson; `english` is the same lesson in English, which the
/// `paired` terms are held to (front matter to front matter, a section to the section
/// with its id). Other languages have no glossary yet.
pub fn lesson(glossary: &Glossary, lesson: &Lesson, english: Option<&Lesson>) -> Vec<Finding> {
    if lesson.meta.lang != Lang::Ko {
        return Vec::new();
    }
    let mut findings = Vec::new();
    let mut found = |line: usize, hits: Vec<Hit>| {
        findings.extend(hits.into_iter().map(|hit| Finding {
            path: lesson.path.clone(),
            line,
            message: hit.message(),
        }));
    };
    // Front matter: each value, past its key.
    let english_front = english.map(|en| &en.source[..en.body_offset]);
    for (index, line) in lesson.source[..lesson.body_offset].lines().enumerate() {
        let Some(value) = front_matter_value(line) else {
            continue;
        };
        for (text, code) in split_code_spans(value) {
            found(index + 1, glossary.hits(text, english_front, code));
        }
    }
    // Prose, by block; inline code and `text` blocks for the formulas.
    let body = lesson.body();
    let line_at = |offset: usize| lesson.body_line + body[..offset].matches('\n').count();
    let english_at = |offset: usize| {
        let english = english?;
        let section = lesson.sections.iter().find(|s| s.range.contains(&offset));
        Some(
            section
                .and_then(|s| english.section(&s.id))
                .map_or(english.body(), |s| english.section_markdown(s)),
        )
    };
    let (runs, code) = prose(body);
    for run in runs {
        let text: String = run.iter().map(|piece| piece.text.as_str()).collect();
        let Some(first) = run.first() else { continue };
        for hit in glossary.hits(&text, english_at(first.at), false) {
            let offset = offset_in(&run, hit.at);
            found(line_at(offset), vec![hit]);
        }
    }
    for piece in code {
        for hit in glossary.hits(&piece.text, english_at(piece.at), true) {
            found(
                line_at(offset_in(std::slice::from_ref(&piece), hit.at)),
                vec![hit],
            );
        }
    }
    findings.sort_by_key(|finding| finding.line);
    findings
}

/// The findings in the course file's Korean strings (`ko: "…"`: the `ui:` strings,
/// tracks, levels, achievements), each held to the English string beside it.
pub fn course_file(glossary: &Glossary, path: &Path, text: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut english = None;
    for (index, line) in text.lines().enumerate() {
        if let Some(en) = quoted_value(line, "en") {
            english = Some(en);
        }
        let Some(ko) = quoted_value(line, "ko") else {
            continue;
        };
        for (part, code) in split_code_spans(&ko) {
            for hit in glossary.hits(part, english.as_deref(), code) {
                findings.push(Finding {
                    path: path.to_path_buf(),
                    line: index + 1,
                    message: hit.message(),
                });
            }
        }
    }
    findings
}

/// The value of a front matter line (`  key: "value"`), but not of the keys that are
/// not text (`id`, `lang`, `source_hash`) or of comments.
fn front_matter_value(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("---") {
        return None;
    }
    let key_end = if let Some(quoted) = trimmed.strip_prefix('"') {
        1 + quoted.find('"')? + 1
    } else {
        trimmed.find(':')?
    };
    let key = trimmed[..key_end].trim_matches('"');
    if ["id", "lang", "source_hash"].contains(&key) {
        return None;
    }
    let value = trimmed[key_end..].strip_prefix(':')?.trim();
    (!value.is_empty()).then_some(value)
}

/// The double-quoted string after `key: ` on a YAML line (`ko: "…"` alone or inside
/// `{en: "…", ko: "…"}`), unescaped.
fn quoted_value(line: &str, key: &str) -> Option<String> {
    let marker = format!("{key}: \"");
    let start = line.match_indices(&marker).map(|(at, _)| at).find(|&at| {
        line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c == ' ' || c == '{')
    })? + marker.len()
        - 1;
    let mut escaped = false;
    for (at, c) in line[start + 1..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return serde_yaml::from_str(&line[start..start + 1 + at + 1]).ok(),
            _ => {}
        }
    }
    None
}

/// `text` cut at its backticks: (prose, false) and (inline code, true) in turn.
fn split_code_spans(text: &str) -> impl Iterator<Item = (&str, bool)> {
    text.split('`')
        .enumerate()
        .map(|(index, part)| (part, index % 2 == 1))
}

/// A piece of a block's text and where it starts in the body; `exact` when the text is
/// the source there, byte for byte (not an escape, an entity or a stand-in).
struct Piece {
    text: String,
    at: usize,
    exact: bool,
}

/// The body's prose, one run of pieces a block (paragraph, heading, list item: the
/// unit a phrase cannot cross), with inline code as a stand-in; and, apart, each
/// inline code span and each line of a `text` block.
fn prose(body: &str) -> (Vec<Vec<Piece>>, Vec<Piece>) {
    let mut runs = vec![Vec::new()];
    let mut code = Vec::new();
    let mut block: Option<String> = None;
    for (event, range) in Parser::new_ext(body, markdown_options()).into_offset_iter() {
        let piece = |text: &str| Piece {
            exact: body.get(range.clone()) == Some(text),
            text: text.to_owned(),
            at: range.start,
        };
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                block = Some(match kind {
                    pulldown_cmark::CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                });
            }
            Event::End(TagEnd::CodeBlock) => block = None,
            Event::Text(text) => match &block {
                Some(lang) if lang == "text" => code.push(piece(&text)),
                Some(_) => {}
                None => runs.last_mut().expect("one run").push(piece(&text)),
            },
            Event::Code(text) => {
                code.push(Piece {
                    text: text.to_string(),
                    at: range.start,
                    exact: false,
                });
                runs.last_mut().expect("one run").push(Piece {
                    text: "\u{FFFC}".into(),
                    at: range.start,
                    exact: false,
                });
            }
            Event::SoftBreak | Event::HardBreak => {
                runs.last_mut().expect("one run").push(Piece {
                    text: " ".into(),
                    at: range.start,
                    exact: false,
                });
            }
            Event::Start(Tag::Emphasis | Tag::Strong | Tag::Strikethrough | Tag::Link { .. })
            | Event::End(
                TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link,
            ) => {}
            Event::Start(_) | Event::End(_) => runs.push(Vec::new()),
            _ => {}
        }
    }
    (runs, code)
}

/// The body offset of byte `at` of the run's text.
fn offset_in(run: &[Piece], at: usize) -> usize {
    let mut start = 0;
    for piece in run {
        let end = start + piece.text.len();
        if at < end {
            return if piece.exact {
                piece.at + (at - start)
            } else {
                piece.at
            };
        }
        start = end;
    }
    run.last().map_or(0, |piece| piece.at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glossary() -> Glossary {
        Glossary::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons")).unwrap()
    }

    fn found(text: &str, english: &str) -> Vec<String> {
        glossary()
            .hits(text, Some(english), false)
            .iter()
            .map(|hit| format!("{} → {}", hit.found, hit.term.ko))
            .collect()
    }

    /// The register is the glossary's too: polite and formal endings are refused where a
    /// word ends in them, the same syllables inside a word are not.
    #[test]
    fn the_register_is_plain_speech() {
        assert_eq!(
            found("이건 레슨입니다.", ""),
            ["입니다 → 반말 (-해, -야, -지)"]
        );
        assert_eq!(
            found("한 번 더 해 보세요", ""),
            ["세요 → 반말 (-해, -야, -지)"]
        );
        assert!(found("이건 레슨이야. 해 봐.", "").is_empty());
        assert!(found("세요소", "").is_empty());
    }

    /// The renderings the course once mixed, each refused with the glossary's term.
    #[test]
    fn the_mixed_renderings_are_refused() {
        let cases = [
            (
                "4비트 배치를 그대로 써서",
                "4-bit layout",
                "비트 배치 → 레이아웃",
            ),
            ("다른 배치로 바꿔", "another layout", "배치 → 배치"),
            (
                "배치마다 quest가 출력하는 숫자",
                "for each layout",
                "배치 → 배치",
            ),
            (
                "dense float16이나 8비트 배치",
                "batch … layouts",
                "비트 배치 → 레이아웃",
            ),
            ("상한과 고정항", "ceiling", "고정항 → 고정 항"),
            ("원래 레슨의 핸드 루프", "hand loop", "핸드 루프 → 손 루프"),
            ("logits 차이 1.7e-2", "logits", "logits → 로짓"),
            ("같은 greedy 토큰", "greedy", "greedy → 그리디"),
            ("게으른 프리필", "lazy prefill", "게으른 → 지연"),
            (
                "첫 forward 패스가",
                "first forward pass",
                "forward 패스 → 순전파",
            ),
            ("마지막 노름", "the final norm", "노름 → 정규화"),
            ("디코드 한계 레슨", "decode ceiling", "디코드 한계 → 상한"),
            (
                "이전과 이후는 그대로야",
                "before and after",
                "이전과 이후 → 변경 전",
            ),
            ("Linux 머신에서", "machine", "머신 → 컴퓨터"),
            ("레퍼런스 BLAS", "reference BLAS", "레퍼런스 → 참조"),
            (
                "−40.6 ms + 바이트 / 5.37 GB/s",
                "+ bytes /",
                "+ 바이트 / → 토큰당 시간 = 고정 항 + 토큰당 바이트 / 대역폭",
            ),
        ];
        for (text, english, expected) in cases {
            let hits = found(text, english);
            assert!(
                hits.iter().any(|hit| hit == expected),
                "{text:?}: expected {expected:?}, found {hits:?}"
            );
        }
        // A formula is code-set prose: inline code and text blocks are read for it.
        let glossary = glossary();
        for formula in [
            "time per token = fixed + bytes per token / bandwidth",
            "고정 + 바이트 / 대역폭",
        ] {
            assert!(!glossary.hits(formula, None, true).is_empty(), "{formula}");
        }
    }

    /// What must not be refused: the terms themselves, batch where the English says
    /// batch, words that hold a refused form, and code.
    #[test]
    fn innocent_text_passes() {
        let cases = [
            ("배치 4의 전체 속도를 배치 1의 속도로 나눈 값", "batch of 4"),
            ("프롬프트를 네 행짜리 배치로 만들어", "a batch of four rows"),
            ("피드포워드와 RMSNorm, bandwidth-bound", "feed-forward"),
            ("docs/bench/logits.txt와 고정 항", "fixed term"),
            ("머신러닝의 순전파", "forward pass"),
            ("이전 측정에서", "an earlier measurement"),
        ];
        for (text, english) in cases {
            assert_eq!(found(text, english), Vec::<String>::new(), "{text:?}");
        }
        assert!(glossary().hits("`logits`는 그대로", None, true).is_empty());
        let formula = "토큰당 시간 = 고정 항 + 토큰당 바이트 / 대역폭";
        assert!(glossary().hits(formula, None, true).is_empty());
        assert!(glossary()
            .hits("tok/s 상한 = 대역폭 / 토큰당 바이트", None, true)
            .is_empty());
    }

    /// The course's own strings (`ui:`, tracks, levels, achievements) keep the glossary's
    /// terms: checked here in a second, as `quest dev check` checks them with the rest.
    #[test]
    fn the_course_file_keeps_the_glossary() {
        let lessons = Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons");
        let glossary = Glossary::load(&lessons).unwrap();
        let path = lessons.join(crate::course::COURSE_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let found: Vec<String> = course_file(&glossary, &path, &text)
            .into_iter()
            .map(|f| format!("{}: {}", f.line, f.message))
            .collect();
        assert!(found.is_empty(), "{found:#?}");
    }

    /// The spellings the Korean lessons once mixed for one idea are refused with the
    /// glossary's own (teacher forcing, the roofline's operations term against an op,
    /// graph building), and the glossary's own pass.
    #[test]
    fn one_spelling_for_each_idea() {
        let lessons = Path::new(env!("CARGO_MANIFEST_DIR")).join("lessons");
        let glossary = Glossary::load(&lessons).unwrap();
        let refused = [
            ("quest의 토큰으로 교사 강제했어", "티처 포싱"),
            ("같은 토큰으로 돌려(교사 강요)", "티처 포싱"),
            ("teacher forcing으로", "티처 포싱"),
            ("연산 항: 워드를 푸는 산술", "연산량 항"),
            (
                "max(토큰당 바이트 / 대역폭, 토큰당 연산 / 연산 속도)",
                "연산량",
            ),
            ("호스트의 그래프 생성", "그래프 빌드"),
            ("게이티드 델타 레이어", "gated delta"),
        ];
        for (text, term) in refused {
            let hits = glossary.hits(text, None, false);
            assert!(
                hits.iter().any(|hit| hit.term.ko.contains(term)),
                "{text:?}: expected the glossary's {term:?}, found {:?}",
                hits.iter().map(|hit| hit.message()).collect::<Vec<_>>()
            );
        }
        for text in [
            "quest의 토큰으로 티처 포싱했어",
            "연산량 항: 워드를 푸는 산술",
            "연산 하나에 드는 호스트의 비용, 연산당 µs",
            "레이어당 그래프 빌드",
            "gated delta 레이어",
        ] {
            let hits = glossary.hits(text, None, false);
            assert!(
                hits.is_empty(),
                "{text:?}: {:?}",
                hits.iter().map(|hit| hit.message()).collect::<Vec<_>>()
            );
        }
        let formula = "시간 ≈ 고정 항 + max(토큰당 바이트 / 대역폭, 토큰당 연산량 / 연산 속도)";
        assert!(glossary.hits(formula, None, true).is_empty(), "{formula}");
    }

    #[test]
    fn front_matter_values_leave_out_keys_and_ids() {
        assert_eq!(
            front_matter_value("  lazy-load: \"`lm::x` 로드\""),
            Some("\"`lm::x` 로드\"")
        );
        assert_eq!(front_matter_value("    \"yes\": \"응\""), Some("\"응\""));
        assert_eq!(front_matter_value("id: mapped-lazy"), None);
        assert_eq!(front_matter_value("quiz:"), None);
        assert_eq!(front_matter_value("# The English text"), None);
    }

    #[test]
    fn quoted_values_are_found_alone_and_inline() {
        assert_eq!(
            quoted_value("    ko: \"레슨\"", "ko").as_deref(),
            Some("레슨")
        );
        let line = r#"name: {en: "Both \"terms\"", ko: "두 항"}"#;
        assert_eq!(quoted_value(line, "en").as_deref(), Some("Both \"terms\""));
        assert_eq!(quoted_value(line, "ko").as_deref(), Some("두 항"));
        assert_eq!(quoted_value("    token: \"x\"", "en"), None);
    }

    /// A lesson's prose is read by block, with the line of each word found; code is not
    /// read, but a formula in a `text` block is.
    #[test]
    fn a_korean_lesson_is_read_by_line() {
        let lessons =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broken-lessons/lessons");
        let path = lessons.join("good/ko.md");
        let source = std::fs::read_to_string(&path)
            .unwrap()
            .replace("title: 좋은 레슨", "title: \"핸드 루프\"")
            .replace(
                "Intro paragraph.",
                "첫 줄.\n*고정항*과\n배치 4.\n\n`logits` 그대로, 피드포워드.\n\n\
                 ```rust\nlet logits = greedy();\n```\n\n\
                 ```text\ntime per token = fixed + bytes / bandwidth\n```",
            );
        let spec = crate::course::LessonSpec::load(&lessons, "good").unwrap();
        let lesson = Lesson::parse(&path, source.clone(), spec).unwrap();
        let glossary =
            Glossary::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/lessons"))).unwrap();
        let line_of = |word: &str| 1 + source.lines().position(|l| l.contains(word)).unwrap();
        let found: Vec<(usize, String)> = super::lesson(&glossary, &lesson, None)
            .into_iter()
            .map(|f| (f.line, f.message))
            .collect();
        let expected = [
            (
                line_of("핸드 루프"),
                "`핸드 루프`: the glossary says `손 루프` (hand loop)",
            ),
            (
                line_of("고정항"),
                "`고정항`: the glossary says `고정 항` (fixed term)",
            ),
        ];
        for (line, message) in expected {
            assert!(
                found.iter().any(|(l, m)| *l == line && m == message),
                "{line}: {message} in {found:?}"
            );
        }
        let formula = line_of("time per token");
        assert!(found.iter().any(|(l, _)| *l == formula), "{found:?}");
        // No English here, so 배치 is not held to it; code is never read for `logits`.
        assert!(
            found
                .iter()
                .all(|(_, m)| !m.contains("logits") && !m.contains("greedy")),
            "{found:?}"
        );
    }
}
