//! Levels from XP. The curve is course data, e.g. in YAML:
//! `levels: [{xp: 0, name: {en: ..., ko: ...}}, {xp: 100, name: ...}]`.

use crate::course::Localized;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level {
    /// The XP at which this level starts.
    pub xp: u64,
    pub name: Localized,
}

/// Levels sorted by XP, the first starting at 0, so that every XP total has
/// exactly one level. Deserializes from the list of levels, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Level>", into = "Vec<Level>")]
pub struct LevelCurve {
    levels: Vec<Level>,
}

impl TryFrom<Vec<Level>> for LevelCurve {
    type Error = anyhow::Error;

    fn try_from(levels: Vec<Level>) -> Result<Self> {
        match levels.first() {
            None => bail!("the level list is empty"),
            Some(first) if first.xp != 0 => {
                bail!("the first level must start at xp 0, not {}", first.xp)
            }
            Some(_) => {}
        }
        if let Some(pair) = levels.windows(2).find(|pair| pair[1].xp <= pair[0].xp) {
            bail!(
                "levels must rise in xp: {} (xp {}) follows {} (xp {})",
                pair[1].name.en,
                pair[1].xp,
                pair[0].name.en,
                pair[0].xp
            );
        }
        Ok(LevelCurve { levels })
    }
}

impl From<LevelCurve> for Vec<Level> {
    fn from(curve: LevelCurve) -> Self {
        curve.levels
    }
}

impl LevelCurve {
    /// From the course file's `levels:` list.
    pub fn from_course(levels: &serde_yaml::Value) -> Result<Self> {
        serde_yaml::from_value(levels.clone()).context("reading `levels` from the course file")
    }

    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// 1 for the first level: the number shown to the learner.
    pub fn number_for(&self, xp: u64) -> usize {
        // The first level starts at 0, so at least one level always matches.
        self.levels.partition_point(|level| level.xp <= xp)
    }

    pub fn level_for(&self, xp: u64) -> &Level {
        &self.levels[self.number_for(xp) - 1]
    }

    /// `None` at the top level.
    pub fn next_level(&self, xp: u64) -> Option<&Level> {
        self.levels.get(self.number_for(xp))
    }

    /// XP still needed for the next level; `None` at the top level.
    pub fn xp_to_next(&self, xp: u64) -> Option<u64> {
        self.next_level(xp).map(|next| next.xp - xp)
    }

    /// How far through the current level, 0.0 to 1.0, for a progress bar;
    /// 1.0 at the top level.
    pub fn progress_fraction(&self, xp: u64) -> f64 {
        let Some(next) = self.next_level(xp) else {
            return 1.0;
        };
        let start = self.level_for(xp).xp;
        (xp - start) as f64 / (next.xp - start) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Course {
        levels: LevelCurve,
    }

    fn curve() -> LevelCurve {
        let yaml = r#"
levels:
  - {xp: 0, name: {en: "Spec-sheet skimmer", ko: "스펙 시트 훑는 사람"}}
  - {xp: 100, name: {en: "Token counter", ko: "토큰 세는 사람"}}
  - {xp: 300, name: {en: "Bandwidth whisperer", ko: "대역폭 조련사"}}
"#;
        serde_yaml::from_str::<Course>(yaml).unwrap().levels
    }

    #[test]
    fn level_for_xp() {
        let curve = curve();
        assert_eq!(curve.number_for(0), 1);
        assert_eq!(curve.number_for(99), 1);
        assert_eq!(curve.number_for(100), 2);
        assert_eq!(curve.number_for(10_000), 3);
        assert_eq!(curve.level_for(150).name.en, "Token counter");
    }

    #[test]
    fn xp_to_next_level() {
        let curve = curve();
        assert_eq!(curve.xp_to_next(0), Some(100));
        assert_eq!(curve.xp_to_next(250), Some(50));
        assert_eq!(curve.xp_to_next(300), None);
    }

    #[test]
    fn progress_fraction_for_the_bar() {
        let curve = curve();
        assert_eq!(curve.progress_fraction(0), 0.0);
        assert_eq!(curve.progress_fraction(50), 0.5);
        assert_eq!(curve.progress_fraction(200), 0.5);
        assert_eq!(curve.progress_fraction(300), 1.0);
        assert_eq!(curve.progress_fraction(u64::MAX), 1.0);
    }

    #[test]
    fn bad_curves_are_refused_with_a_reason() {
        let error = |yaml: &str| {
            serde_yaml::from_str::<LevelCurve>(yaml)
                .unwrap_err()
                .to_string()
        };
        assert!(error("[]").contains("empty"));
        assert!(error("[{xp: 5, name: {en: a, ko: a}}]").contains("xp 0"));
        let unsorted = "[{xp: 0, name: {en: a, ko: a}}, {xp: 0, name: {en: b, ko: b}}]";
        assert!(error(unsorted).contains("must rise"));
    }
}
