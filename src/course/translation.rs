//! Is a translation up to date? Each translation records `source_hash:`, the
//! sha256 of the English file it was made from; when the English file
//! changes, the hash no longer matches and the translation is stale.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::{Lang, Lesson};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranslationStatus {
    /// This is the source text itself.
    Source,
    UpToDate,
    /// The source changed since the translation was made.
    Stale {
        recorded: String,
        current: String,
    },
}

/// Lowercase hex sha256, the same as `sha256sum` prints.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The hash a translation of lesson `id` should record: sha256 of `<id>/en.md`.
pub fn source_hash(lessons_dir: &Path, id: &str) -> Result<String> {
    let path = lessons_dir.join(id).join(format!("{}.md", Lang::SOURCE));
    let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(sha256_hex(&bytes))
}

impl Lesson {
    pub fn translation_status(&self) -> Result<TranslationStatus> {
        if self.meta.lang == Lang::SOURCE {
            return Ok(TranslationStatus::Source);
        }
        let current = source_hash(&self.lessons_dir(), &self.meta.id)?;
        // Lesson::parse guarantees a translation has a source_hash.
        let recorded = self.meta.source_hash.clone().unwrap_or_default();
        Ok(if recorded == current {
            TranslationStatus::UpToDate
        } else {
            TranslationStatus::Stale { recorded, current }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::tests::fixture_lessons;

    #[test]
    fn hashes_match_sha256sum() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_source_is_never_stale() {
        let lesson = Lesson::load(&fixture_lessons(), "good", Lang::En).unwrap();
        assert_eq!(
            lesson.translation_status().unwrap(),
            TranslationStatus::Source
        );
    }

    #[test]
    fn a_matching_hash_is_up_to_date() {
        let lesson = Lesson::load(&fixture_lessons(), "good", Lang::Ko).unwrap();
        assert_eq!(
            lesson.translation_status().unwrap(),
            TranslationStatus::UpToDate
        );
    }

    #[test]
    fn a_changed_source_makes_the_translation_stale() {
        let lessons = fixture_lessons();
        let lesson = Lesson::load(&lessons, "stale", Lang::Ko).unwrap();
        let current = source_hash(&lessons, "stale").unwrap();
        match lesson.translation_status().unwrap() {
            TranslationStatus::Stale {
                recorded,
                current: now,
            } => {
                assert_eq!(now, current);
                assert_ne!(recorded, current);
            }
            other => panic!("expected stale, got {other:?}"),
        }
    }
}
