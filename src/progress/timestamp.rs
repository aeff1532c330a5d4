//! A point in time, written as RFC 3339 UTC (`2026-03-01T12:00:00Z`) so
//! that the progress file stays readable.

use anyhow::{Context, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(SystemTime);

impl Timestamp {
    /// Now, to the whole second: finer precision would only add noise to the file.
    pub fn now() -> Self {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let time = humantime::parse_rfc3339(text)
            .with_context(|| format!("`{text}` is not a UTC time like 2026-03-01T12:00:00Z"))?;
        Ok(Timestamp(time))
    }

    pub fn as_system_time(self) -> SystemTime {
        self.0
    }

    /// A form safe in file names on every OS (no colons): `20260301T120000Z`.
    pub fn compact(self) -> String {
        self.to_string().replace(['-', ':'], "")
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_rfc3339(self.0).fmt(f)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(|error| serde::de::Error::custom(format!("{error:#}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_rfc3339_and_read_back() {
        let at = Timestamp::parse("2026-03-01T12:34:56Z").unwrap();
        assert_eq!(at.to_string(), "2026-03-01T12:34:56Z");
        assert_eq!(at.compact(), "20260301T123456Z");
        let json = serde_json::to_string(&at).unwrap();
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), at);
    }

    #[test]
    fn now_has_no_fraction_of_a_second() {
        assert!(!Timestamp::now().to_string().contains('.'));
    }

    #[test]
    fn rejects_local_times() {
        assert!(Timestamp::parse("2026-03-01 12:34:56").is_err());
    }
}
