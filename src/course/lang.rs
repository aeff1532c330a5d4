//! The languages a lesson can be read in, and text given in each of them.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// A language the course is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    En,
    Ko,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Ko];

    /// Lessons are written in English first; every other language translates it.
    pub const SOURCE: Lang = Lang::En;

    /// The short code used in file names (`en.md`) and on the command line.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ko => "ko",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl FromStr for Lang {
    type Err = anyhow::Error;

    fn from_str(code: &str) -> anyhow::Result<Lang> {
        match Lang::ALL.into_iter().find(|lang| lang.code() == code) {
            Some(lang) => Ok(lang),
            None => {
                let known: Vec<&str> = Lang::ALL.iter().map(|lang| lang.code()).collect();
                bail!("unknown language `{code}`; known: {}", known.join(", "))
            }
        }
    }
}

/// One piece of text in every language of the course, e.g. `{en: "Hint", ko: "힌트"}`.
///
/// Both fields are required so that a missing translation fails at load time,
/// not in front of a learner.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Localized {
    pub en: String,
    pub ko: String,
}

impl Localized {
    pub fn get(&self, lang: Lang) -> &str {
        match lang {
            Lang::En => &self.en,
            Lang::Ko => &self.ko,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for lang in Lang::ALL {
            assert_eq!(lang.code().parse::<Lang>().unwrap(), lang);
        }
    }

    #[test]
    fn unknown_code_lists_the_known_ones() {
        let error = "fr".parse::<Lang>().unwrap_err().to_string();
        assert!(error.contains("en, ko"), "{error}");
    }
}
