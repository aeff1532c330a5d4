//! `lessons/glossary.yaml`: one Korean term for each idea of the course, and the other
//! renderings refused for it. The file's own comment says how a form is matched; this
//! module reads it and finds the refused forms in one piece of text (`check::glossary`
//! walks the lessons and quest.yaml with it).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

use super::yaml_error;

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
                for at in occurrences(&lowered, &form.to_ascii_lowercase(), &term.except) {
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
}
