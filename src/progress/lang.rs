//! The languages quest speaks, and user-facing text given in each of them.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Ko,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Ko];

    /// The code used in files and on the command line: `en` or `ko`.
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

    fn from_str(code: &str) -> Result<Self> {
        match code {
            "en" => Ok(Lang::En),
            "ko" => Ok(Lang::Ko),
            other => bail!("unknown language `{other}`: quest speaks `en` and `ko`"),
        }
    }
}

/// A text shown to the learner, in every language; it comes from course
/// data so that translators never have to touch Rust code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Text {
    pub en: String,
    pub ko: String,
}

impl Text {
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
        assert!("fr".parse::<Lang>().is_err());
    }

    #[test]
    fn text_picks_the_language() {
        let text: Text = serde_yaml::from_str("{en: Hello, ko: 안녕}").unwrap();
        assert_eq!(text.get(Lang::Ko), "안녕");
        assert_eq!(text.get(Lang::En), "Hello");
    }
}
