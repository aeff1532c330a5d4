//! Achievements are course data: an id, xp, texts, and a predicate over the
//! recorded history, chosen from the small set in [`Predicate`]. In YAML:
//! `{id: first-token, xp: 10, name: {..}, description: {..}, when: {first_run: {}}}`.

use super::{CodeKind, LessonRecord, Run, State, Timestamp};
use crate::course::{Lang, Localized};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Achievement {
    pub id: String,
    pub xp: u32,
    pub name: Localized,
    pub description: Localized,
    // Written `{kind: {..}}`; serde_yaml on its own would want a `!kind` tag.
    #[serde(with = "serde_yaml::with::singleton_map")]
    pub when: Predicate,
}

/// What an achievement asks for. Each reads only what was recorded, so
/// earned achievements can be recomputed from the file at any time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Predicate {
    /// Any run, in any lesson.
    FirstRun {},
    /// At least `n` runs, in `lesson` or, without it, in all lessons.
    RunsAtLeast {
        n: usize,
        #[serde(default)]
        lesson: Option<String>,
    },
    /// The median decode rate of the learner's edited exercise is at least `ratio`
    /// times the median of the original hand loop, both measured on this machine.
    SpeedupAtLeast { lesson: String, ratio: f64 },
    /// Both numbers on the lesson's card match some measured run, within
    /// `tolerance` (relative; 5% unless given).
    CardHonest {
        lesson: String,
        #[serde(default = "default_tolerance")]
        tolerance: f64,
    },
    /// A run of the learner's code (not the solution) decoded faster than
    /// the library did, as recorded with that run.
    BeatLibrary { lesson: String },
    /// A passing submission for the lesson.
    LessonDone { lesson: String },
    /// A passing submission, in any lesson, made while quest spoke `lang`.
    LessonDoneIn { lang: Lang },
    /// Passing submissions in at least `n` different lessons.
    LessonsDoneAtLeast { n: usize },
}

fn default_tolerance() -> f64 {
    0.05
}

impl Achievement {
    /// Its key in the award ledger.
    pub fn award_key(&self) -> String {
        format!("achievement:{}", self.id)
    }
}

/// The course file's `achievements:` list, checked: ids are award keys, so
/// they must be unique, and a lesson that does not exist would make an
/// achievement that can never be earned.
pub fn load_achievements<'a>(
    achievements: &serde_yaml::Value,
    lesson_ids: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Achievement>> {
    let achievements: Vec<Achievement> = serde_yaml::from_value(achievements.clone())
        .context("reading `achievements` from the course file")?;
    let lesson_ids: BTreeSet<&str> = lesson_ids.into_iter().collect();
    let mut seen = BTreeSet::new();
    for achievement in &achievements {
        if !seen.insert(achievement.id.as_str()) {
            bail!("achievement `{}` is listed twice", achievement.id);
        }
        if let Some(lesson) = achievement.when.lesson() {
            if !lesson_ids.contains(lesson) {
                bail!(
                    "achievement `{}` names lesson `{lesson}`, which the course does not have",
                    achievement.id
                );
            }
        }
    }
    Ok(achievements)
}

impl Predicate {
    /// The lesson it looks at, if just one.
    pub fn lesson(&self) -> Option<&str> {
        match self {
            Predicate::RunsAtLeast { lesson, .. } => lesson.as_deref(),
            Predicate::SpeedupAtLeast { lesson, .. }
            | Predicate::CardHonest { lesson, .. }
            | Predicate::BeatLibrary { lesson }
            | Predicate::LessonDone { lesson } => Some(lesson),
            Predicate::FirstRun {}
            | Predicate::LessonDoneIn { .. }
            | Predicate::LessonsDoneAtLeast { .. } => None,
        }
    }

    pub fn holds(&self, state: &State) -> bool {
        match self {
            Predicate::FirstRun {} => state.runs().next().is_some(),
            Predicate::RunsAtLeast { n, lesson: None } => state.runs().count() >= *n,
            Predicate::RunsAtLeast {
                n,
                lesson: Some(lesson),
            } => runs_of(state, lesson).len() >= *n,
            Predicate::SpeedupAtLeast { lesson, ratio } => {
                let median_of = |kind: CodeKind| {
                    let rates: Vec<f64> = runs_of(state, lesson)
                        .iter()
                        .filter(|run| run.code.kind == kind)
                        .map(|run| run.decode_tok_s)
                        .collect();
                    (!rates.is_empty()).then(|| crate::check::card::median(&rates))
                };
                match (median_of(CodeKind::Original), median_of(CodeKind::Exercise)) {
                    (Some(before), Some(after)) => before > 0.0 && after >= ratio * before,
                    _ => false,
                }
            }
            Predicate::CardHonest { lesson, tolerance } => {
                let Some(card) = state.lesson(lesson).and_then(|record| record.card.as_ref())
                else {
                    return false;
                };
                let measured = |claimed: f64| {
                    runs_of(state, lesson).iter().any(|run| {
                        (run.decode_tok_s - claimed).abs() <= tolerance * run.decode_tok_s.abs()
                    })
                };
                measured(card.before_tok_s) && measured(card.after_tok_s)
            }
            Predicate::BeatLibrary { lesson } => runs_of(state, lesson).iter().any(|run| {
                run.code.kind != CodeKind::Solution
                    && run
                        .library_tok_s
                        .is_some_and(|library| run.decode_tok_s > library)
            }),
            Predicate::LessonDone { lesson } => {
                state.lesson(lesson).is_some_and(LessonRecord::is_done)
            }
            Predicate::LessonDoneIn { lang } => {
                state.submissions().any(|s| s.passed && s.lang == *lang)
            }
            Predicate::LessonsDoneAtLeast { n } => {
                let done = state.lessons.values().filter(|record| record.is_done());
                done.count() >= *n
            }
        }
    }
}

fn runs_of<'a>(state: &'a State, lesson: &str) -> &'a [Run] {
    state.lesson(lesson).map_or(&[], |record| &record.runs)
}

/// Awards every achievement whose predicate holds now and that the ledger
/// does not have yet; returns those, in course order, to announce them.
pub fn award_earned<'a>(
    state: &mut State,
    achievements: &'a [Achievement],
    at: Timestamp,
) -> Vec<&'a Achievement> {
    let mut earned = Vec::new();
    for achievement in achievements {
        let key = achievement.award_key();
        if !state.has_award(&key) && achievement.when.holds(state) {
            state.award(&key, achievement.xp, at);
            earned.push(achievement);
        }
    }
    earned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::{Card, CodeRef, Submission};

    fn when(yaml: &str) -> Predicate {
        let achievement = format!(
            "{{id: a, xp: 5, name: {{en: A, ko: 가}}, description: {{en: A, ko: 가}}, when: {yaml}}}"
        );
        serde_yaml::from_str::<Achievement>(&achievement)
            .unwrap()
            .when
    }

    fn run(decode_tok_s: f64, kind: CodeKind, library_tok_s: Option<f64>) -> Run {
        Run {
            at: Timestamp::now(),
            code: CodeRef::of(kind, b"fn main() {}"),
            backend: "mlx-cpu".into(),
            ttft_ms: 120.0,
            decode_tok_s,
            tokens_generated: 64,
            prompt_tokens: 12,
            lang: Lang::En,
            library_tok_s,
        }
    }

    fn state_with_runs(runs: Vec<Run>) -> State {
        let mut state = State::default();
        state.lesson_mut("mlx-path").runs = runs;
        state
    }

    #[test]
    fn predicates_read_from_yaml() {
        assert_eq!(when("{first_run: {}}"), Predicate::FirstRun {});
        assert_eq!(
            when("{speedup_at_least: {lesson: mlx-path, ratio: 1.1}}"),
            Predicate::SpeedupAtLeast {
                lesson: "mlx-path".into(),
                ratio: 1.1
            }
        );
        assert_eq!(
            when("{card_honest: {lesson: mlx-path}}"),
            Predicate::CardHonest {
                lesson: "mlx-path".into(),
                tolerance: 0.05
            }
        );
        assert_eq!(
            when("{lesson_done_in: {lang: ko}}"),
            Predicate::LessonDoneIn { lang: Lang::Ko }
        );
        assert_eq!(
            when("{runs_at_least: {n: 5}}"),
            Predicate::RunsAtLeast { n: 5, lesson: None }
        );
        assert_eq!(
            when("{beat_library: {lesson: mlx-path}}"),
            Predicate::BeatLibrary {
                lesson: "mlx-path".into()
            }
        );
    }

    #[test]
    fn unknown_predicates_and_fields_are_refused() {
        let parse = |when: &str| {
            let yaml = format!(
                "{{id: a, xp: 1, name: {{en: A, ko: A}}, description: {{en: A, ko: A}}, when: {when}}}"
            );
            serde_yaml::from_str::<Achievement>(&yaml)
        };
        assert!(parse("{first_runn: {}}").is_err());
        assert!(parse("{runs_at_least: {n: 5, lessn: x}}").is_err());
        assert!(parse("{first_run: {}, runs_at_least: {n: 1}}").is_err());
    }

    #[test]
    fn run_counts() {
        let state = state_with_runs(vec![run(10.0, CodeKind::Exercise, None); 3]);
        assert!(Predicate::FirstRun {}.holds(&state));
        assert!(!Predicate::FirstRun {}.holds(&State::default()));
        assert!(when("{runs_at_least: {n: 3}}").holds(&state));
        assert!(!when("{runs_at_least: {n: 4}}").holds(&state));
        assert!(!when("{runs_at_least: {n: 1, lesson: other}}").holds(&state));
    }

    #[test]
    fn speedup_compares_medians_of_edited_and_original() {
        let speedup = when("{speedup_at_least: {lesson: mlx-path, ratio: 1.1}}");
        let faster = vec![
            run(10.0, CodeKind::Original, None),
            run(11.5, CodeKind::Exercise, None),
            run(9.0, CodeKind::Original, None),
            run(11.0, CodeKind::Exercise, None),
        ];
        assert!(speedup.holds(&state_with_runs(faster)));
        let barely = vec![
            run(10.0, CodeKind::Original, None),
            run(10.5, CodeKind::Exercise, None),
        ];
        assert!(!speedup.holds(&state_with_runs(barely)));
        // One fast outlier of the same code is not a speed-up.
        let only_original = vec![
            run(10.0, CodeKind::Original, None),
            run(20.0, CodeKind::Original, None),
        ];
        assert!(!speedup.holds(&state_with_runs(only_original)));
        assert!(!speedup.holds(&State::default()));
    }

    #[test]
    fn honest_card_matches_measured_runs() {
        let mut state = state_with_runs(vec![
            run(10.0, CodeKind::Exercise, None),
            run(20.0, CodeKind::Exercise, None),
        ]);
        let card = |before_tok_s, after_tok_s| Card {
            at: Timestamp::now(),
            before_tok_s,
            after_tok_s,
            which_term: "weights".into(),
        };
        let honest = when("{card_honest: {lesson: mlx-path}}");
        assert!(!honest.holds(&state));
        state.lesson_mut("mlx-path").card = Some(card(10.2, 19.5));
        assert!(honest.holds(&state));
        state.lesson_mut("mlx-path").card = Some(card(10.0, 40.0));
        assert!(!honest.holds(&state));
    }

    #[test]
    fn beating_the_library_needs_the_learners_code() {
        let beat = when("{beat_library: {lesson: mlx-path}}");
        assert!(beat.holds(&state_with_runs(vec![run(
            21.0,
            CodeKind::Learner,
            Some(20.0)
        )])));
        assert!(!beat.holds(&state_with_runs(vec![run(
            21.0,
            CodeKind::Solution,
            Some(20.0)
        )])));
        assert!(!beat.holds(&state_with_runs(vec![run(
            19.0,
            CodeKind::Exercise,
            Some(20.0)
        )])));
        assert!(!beat.holds(&state_with_runs(vec![run(99.0, CodeKind::Exercise, None)])));
    }

    #[test]
    fn lessons_done_count_passing_submissions() {
        let mut state = State::default();
        let submit = |passed, lang| Submission {
            at: Timestamp::now(),
            code: CodeRef::of(CodeKind::Exercise, b""),
            passed,
            checks_passed: passed,
            lang,
        };
        state
            .lesson_mut("mlx-path")
            .submissions
            .push(submit(false, Lang::Ko));
        assert!(!when("{lesson_done: {lesson: mlx-path}}").holds(&state));
        assert!(!when("{lesson_done_in: {lang: ko}}").holds(&state));
        state
            .lesson_mut("mlx-path")
            .submissions
            .push(submit(true, Lang::Ko));
        assert!(when("{lesson_done: {lesson: mlx-path}}").holds(&state));
        assert!(when("{lesson_done_in: {lang: ko}}").holds(&state));
        assert!(!when("{lesson_done_in: {lang: en}}").holds(&state));
        assert!(when("{lessons_done_at_least: {n: 1}}").holds(&state));
        assert!(!when("{lessons_done_at_least: {n: 2}}").holds(&state));
    }

    #[test]
    fn achievements_are_awarded_once() {
        let yaml = r#"
- id: first-token
  xp: 10
  name: {en: First token, ko: 첫 토큰}
  description: {en: Generate your first token., ko: 첫 토큰을 생성하세요.}
  when: {first_run: {}}
- id: regular
  xp: 20
  name: {en: Regular, ko: 단골}
  description: {en: Five runs., ko: 다섯 번 실행.}
  when: {runs_at_least: {n: 5}}
"#;
        let achievements: Vec<Achievement> = serde_yaml::from_str(yaml).unwrap();
        let mut state = state_with_runs(vec![run(10.0, CodeKind::Exercise, None)]);
        let earned = award_earned(&mut state, &achievements, Timestamp::now());
        assert_eq!(earned.len(), 1);
        assert_eq!(earned[0].id, "first-token");
        assert!(state.has_award("achievement:first-token"));
        assert!(award_earned(&mut state, &achievements, Timestamp::now()).is_empty());
        assert_eq!(state.total_xp(), 10);
    }

    #[test]
    fn course_lists_are_checked() {
        let list = |yaml: &str| serde_yaml::from_str::<serde_yaml::Value>(yaml).unwrap();
        let entry = |id: &str, when: &str| {
            format!("{{id: {id}, xp: 1, name: {{en: A, ko: A}}, description: {{en: A, ko: A}}, when: {when}}}")
        };
        let first = entry("a", "{first_run: {}}");
        let done = entry("b", "{lesson_done: {lesson: mlx-path}}");
        let ok = list(&format!("[{first}, {done}]"));
        assert_eq!(load_achievements(&ok, ["mlx-path"]).unwrap().len(), 2);
        let error = load_achievements(&ok, ["other"]).unwrap_err().to_string();
        assert!(error.contains("lesson `mlx-path`"), "{error}");
        let twice = list(&format!("[{first}, {first}]"));
        let error = load_achievements(&twice, ["mlx-path"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("`a` is listed twice"), "{error}");
    }
}
