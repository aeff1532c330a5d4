//! Achievements are course data: an id, xp, texts, and a predicate over the
//! recorded history, chosen from the small set in [`Predicate`]. In YAML:
//! `{id: first-token, xp: 10, name: {..}, description: {..}, when: {first_run: {}}}`.

use super::{LessonRecord, Run, State, Timestamp, LIBRARY_DECODE_TOK_S, SAME_KERNELS_DECODE_TOK_S};
use crate::course::{Lang, Localized, Metric};
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
    /// A submission whose checks passed measured the learner's code at least `ratio`
    /// times better than the lesson's starting code, medians of one interleaved
    /// measurement on this machine (never two separate runs).
    SpeedupAtLeast { lesson: String, ratio: f64 },
    /// Every number on the lesson's card matches some measured run of its metric,
    /// within `tolerance` (relative; 5% unless given).
    CardHonest {
        lesson: String,
        #[serde(default = "default_tolerance")]
        tolerance: f64,
    },
    /// A run of the learner's code (not the solution), which passed the lesson's
    /// checks, decoded faster than the library in the same benchmark run, both on the
    /// same kernels (MLX's: quest's own CUDA kernels off for the learner's loop), so that
    /// the loop is what is compared.
    BeatLibrary { lesson: String },
    /// A passing submission for the lesson.
    LessonDone { lesson: String },
    /// A passing submission, in any lesson, made while quest spoke `lang`.
    LessonDoneIn { lang: Lang },
    /// Passing submissions in at least `n` different lessons.
    LessonsDoneAtLeast { n: usize },
    /// Every lesson of the course's track `track` done. Its lessons are read from the
    /// course when the achievements are loaded ([`load_achievements`]).
    TrackDone {
        track: String,
        #[serde(skip)]
        lessons: Vec<String>,
    },
    /// Every lesson of every track done, as the course lists them when loaded.
    CourseDone {
        #[serde(skip)]
        lessons: Vec<String>,
    },
    /// At least `n` lessons done with every quiz question right on its first answer (a
    /// measured one predicted before the measurement: see
    /// [`LessonRecord::right_first_time`]).
    RightFirstTimeAtLeast { n: usize },
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
/// they must be unique, and a lesson or track that does not exist would make an
/// achievement that can never be earned. A track's or the course's lessons are
/// filled in from `tracks`, so that an achievement for finishing them grows with them.
pub fn load_achievements(
    achievements: &serde_yaml::Value,
    tracks: &[crate::course::Track],
) -> Result<Vec<Achievement>> {
    let mut achievements: Vec<Achievement> = serde_yaml::from_value(achievements.clone())
        .context("reading `achievements` from the course file")?;
    let lesson_ids: BTreeSet<&str> = tracks
        .iter()
        .flat_map(|track| track.lessons.iter().map(String::as_str))
        .collect();
    let mut seen = BTreeSet::new();
    for achievement in &mut achievements {
        if !seen.insert(achievement.id.clone()) {
            bail!("achievement `{}` is listed twice", achievement.id);
        }
        match &mut achievement.when {
            Predicate::TrackDone { track, lessons } => {
                let Some(found) = tracks.iter().find(|t| t.id == *track) else {
                    bail!(
                        "achievement `{}` names track `{track}`, which the course does not have",
                        achievement.id
                    );
                };
                *lessons = found.lessons.clone();
            }
            Predicate::CourseDone { lessons } => {
                *lessons = lesson_ids.iter().map(|id| (*id).to_owned()).collect();
            }
            _ => {}
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
            | Predicate::LessonsDoneAtLeast { .. }
            | Predicate::TrackDone { .. }
            | Predicate::CourseDone { .. }
            | Predicate::RightFirstTimeAtLeast { .. } => None,
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
            Predicate::SpeedupAtLeast { lesson, ratio } => state
                .lesson(lesson)
                .and_then(LessonRecord::best_improvement)
                .is_some_and(|improvement| improvement >= *ratio),
            Predicate::CardHonest { lesson, tolerance } => {
                let Some(card) = state.lesson(lesson).and_then(|record| record.card.as_ref())
                else {
                    return false;
                };
                let Some(metric) = card.metric.as_deref().and_then(Metric::from_key) else {
                    return false;
                };
                let measured = |claimed: f64| {
                    runs_of(state, lesson).iter().any(|run| {
                        run.metric(metric)
                            .is_some_and(|value| (value - claimed).abs() <= tolerance * value.abs())
                    })
                };
                !card.numbers.is_empty() && card.numbers.values().all(|&n| measured(n))
            }
            Predicate::BeatLibrary { lesson } => {
                let Some(record) = state.lesson(lesson) else {
                    return false;
                };
                record.runs.iter().any(|run| {
                    record.passed_checks(&run.code)
                        && match (
                            run.metrics.get(SAME_KERNELS_DECODE_TOK_S),
                            run.metrics.get(LIBRARY_DECODE_TOK_S),
                        ) {
                            (Some(yours), Some(library)) => yours > library,
                            _ => false,
                        }
                })
            }
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
            // Unloaded (no lessons filled in) holds for no one: never vacuously true.
            Predicate::TrackDone { lessons, .. } | Predicate::CourseDone { lessons } => {
                !lessons.is_empty()
                    && lessons
                        .iter()
                        .all(|lesson| state.lesson(lesson).is_some_and(LessonRecord::is_done))
            }
            Predicate::RightFirstTimeAtLeast { n } => {
                let right = state
                    .lessons
                    .values()
                    .filter(|record| record.is_done() && record.right_first_time());
                right.count() >= *n
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
    use crate::progress::{Card, CodeKind, CodeRef, Measurement, Submission};

    fn when(yaml: &str) -> Predicate {
        let achievement = format!(
            "{{id: a, xp: 5, name: {{en: A, ko: 가}}, description: {{en: A, ko: 가}}, when: {yaml}}}"
        );
        serde_yaml::from_str::<Achievement>(&achievement)
            .unwrap()
            .when
    }

    fn run(decode_tok_s: f64, kind: CodeKind, library_tok_s: Option<f64>) -> Run {
        let mut metrics = std::collections::BTreeMap::from([
            ("ttft_ms".to_owned(), 120.0),
            ("decode_tok_s".to_owned(), decode_tok_s),
        ]);
        if let Some(library) = library_tok_s {
            metrics.insert(LIBRARY_DECODE_TOK_S.into(), library);
            // Off CUDA the learner's loop runs the library's kernels anyway.
            metrics.insert(SAME_KERNELS_DECODE_TOK_S.into(), decode_tok_s);
        }
        Run {
            at: Timestamp::now(),
            code: CodeRef::of(kind, b"fn main() {}"),
            backend: "mlx-cpu".into(),
            tokens_generated: 64,
            prompt_tokens: 12,
            lang: Lang::En,
            metrics,
            weights: None,
        }
    }

    fn submission(passed: bool, lang: Lang, measurement: Option<Measurement>) -> Submission {
        Submission {
            at: Timestamp::now(),
            code: Some(CodeRef::of(CodeKind::Exercise, b"fn main() {}")),
            passed,
            checks_passed: passed,
            lang,
            measurement,
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
    fn speedup_rests_on_one_interleaved_measurement_that_passed() {
        let speedup = when("{speedup_at_least: {lesson: mlx-path, ratio: 1.1}}");
        let measured = |before: Vec<f64>, after: Vec<f64>| Measurement {
            metric: "decode_tok_s".into(),
            before,
            after,
        };
        let mut state = State::default();
        // Separate runs, however fast, are not a measurement.
        state.lesson_mut("mlx-path").runs = vec![
            run(10.0, CodeKind::Original, None),
            run(20.0, CodeKind::Exercise, None),
        ];
        assert!(!speedup.holds(&state));
        let barely = measured(vec![10.0, 9.0, 10.0], vec![10.5, 10.0, 10.6]);
        state.lesson_mut("mlx-path").submissions = vec![submission(true, Lang::En, Some(barely))];
        assert!(!speedup.holds(&state));
        let faster = measured(vec![10.0, 9.0, 10.0], vec![11.5, 11.0, 20.0]);
        // A submission whose checks failed does not count.
        state.lesson_mut("mlx-path").submissions =
            vec![submission(false, Lang::En, Some(faster.clone()))];
        assert!(!speedup.holds(&state));
        state.lesson_mut("mlx-path").submissions = vec![submission(true, Lang::En, Some(faster))];
        assert!(speedup.holds(&state));
        // Times improve downwards.
        let ttft = when("{speedup_at_least: {lesson: mlx-path, ratio: 1.2}}");
        let quicker = Measurement {
            metric: "ttft_ms".into(),
            before: vec![300.0],
            after: vec![240.0],
        };
        state.lesson_mut("mlx-path").submissions = vec![submission(true, Lang::En, Some(quicker))];
        assert!(ttft.holds(&state));
    }

    #[test]
    fn honest_card_matches_measured_runs() {
        let mut state = state_with_runs(vec![
            run(10.0, CodeKind::Exercise, None),
            run(20.0, CodeKind::Exercise, None),
        ]);
        let card = |before: f64, after: f64| Card {
            at: Timestamp::now(),
            metric: Some("decode_tok_s".into()),
            numbers: [("before".to_owned(), before), ("after".to_owned(), after)].into(),
            answers: Default::default(),
        };
        let honest = when("{card_honest: {lesson: mlx-path}}");
        assert!(!honest.holds(&state));
        state.lesson_mut("mlx-path").card = Some(card(10.2, 19.5));
        assert!(honest.holds(&state));
        state.lesson_mut("mlx-path").card = Some(card(10.0, 40.0));
        assert!(!honest.holds(&state));
    }

    #[test]
    fn beating_the_library_needs_your_code_that_passed() {
        let beat = when("{beat_library: {lesson: mlx-path}}");
        let with_submission = |runs: Vec<Run>| {
            let mut state = state_with_runs(runs);
            state.lesson_mut("mlx-path").submissions = vec![submission(true, Lang::En, None)];
            state
        };
        assert!(beat.holds(&with_submission(vec![run(
            21.0,
            CodeKind::Exercise,
            Some(20.0)
        )])));
        assert!(
            !beat.holds(&state_with_runs(vec![run(
                21.0,
                CodeKind::Exercise,
                Some(20.0)
            )])),
            "code that never passed its checks"
        );
        assert!(!beat.holds(&with_submission(vec![run(
            19.0,
            CodeKind::Exercise,
            Some(20.0)
        )])));
        assert!(!beat.holds(&with_submission(vec![run(99.0, CodeKind::Exercise, None)])));
        // On a GPU quest's kernels made the loop faster than the library, but on the
        // library's kernels the learner's loop is slower: that is not beating it.
        let mut kernels_won = run(150.0, CodeKind::Exercise, Some(120.0));
        kernels_won
            .metrics
            .insert(SAME_KERNELS_DECODE_TOK_S.into(), 110.0);
        assert!(!beat.holds(&with_submission(vec![kernels_won.clone()])));
        kernels_won
            .metrics
            .insert(SAME_KERNELS_DECODE_TOK_S.into(), 125.0);
        assert!(beat.holds(&with_submission(vec![kernels_won.clone()])));
        // A run that measured no same-kernel rate (schema 2 on CUDA) proves nothing.
        kernels_won.metrics.remove(SAME_KERNELS_DECODE_TOK_S);
        assert!(!beat.holds(&with_submission(vec![kernels_won])));
    }

    #[test]
    fn lessons_done_count_passing_submissions() {
        let mut state = State::default();
        let submit = |passed, lang| submission(passed, lang, None);
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
    fn right_first_time_counts_lessons_done_with_every_first_answer_right() {
        use crate::progress::Attempt;
        let first_try = when("{right_first_time_at_least: {n: 1}}");
        let answer = |choice: &str, right: bool| Attempt {
            at: Timestamp::now(),
            question: "term".into(),
            choice: choice.into(),
            predicted: false,
            measured: false,
            right: Some(right),
        };
        let mut state = State::default();
        let record = state.lesson_mut("mlx-path");
        record.submissions = vec![submission(true, Lang::En, None)];
        record.card = Some(Card {
            at: Timestamp::now(),
            metric: None,
            numbers: Default::default(),
            answers: [("term".to_owned(), "fixed".to_owned())].into(),
        });
        // Guessed: wrong, then right.
        record.attempts = vec![answer("bytes", false), answer("fixed", true)];
        assert!(!first_try.holds(&state));
        state.lesson_mut("mlx-path").attempts = vec![answer("fixed", true)];
        assert!(first_try.holds(&state));
        assert!(!when("{right_first_time_at_least: {n: 2}}").holds(&state));
        // Not done: not counted.
        state.lesson_mut("mlx-path").submissions = vec![submission(false, Lang::En, None)];
        assert!(!first_try.holds(&state));
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

    fn tracks(of: &[(&str, &[&str])]) -> Vec<crate::course::Track> {
        of.iter()
            .map(|(id, lessons)| crate::course::Track {
                id: (*id).into(),
                title: serde_yaml::from_str("{en: T, ko: T}").unwrap(),
                lessons: lessons.iter().map(|l| (*l).into()).collect(),
            })
            .collect()
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
        let journey = tracks(&[("journey", &["mlx-path"])]);
        assert_eq!(load_achievements(&ok, &journey).unwrap().len(), 2);
        let other = tracks(&[("journey", &["other"])]);
        let error = load_achievements(&ok, &other).unwrap_err().to_string();
        assert!(error.contains("lesson `mlx-path`"), "{error}");
        let twice = list(&format!("[{first}, {first}]"));
        let error = load_achievements(&twice, &journey).unwrap_err().to_string();
        assert!(error.contains("`a` is listed twice"), "{error}");
        let physics = list(&format!(
            "[{}]",
            entry("c", "{track_done: {track: physics}}")
        ));
        let error = load_achievements(&physics, &journey)
            .unwrap_err()
            .to_string();
        assert!(error.contains("track `physics`"), "{error}");
    }

    /// A track's achievement asks for every lesson the course lists in it when loaded, so
    /// a lesson added to the track is asked for too; the course's, every track's lessons.
    #[test]
    fn track_and_course_done_read_the_course() {
        let list = serde_yaml::from_str::<serde_yaml::Value>(
            "[{id: t, xp: 1, name: {en: A, ko: A}, description: {en: A, ko: A}, when: {track_done: {track: inside}}},
              {id: c, xp: 1, name: {en: A, ko: A}, description: {en: A, ko: A}, when: {course_done: {}}}]",
        )
        .unwrap();
        let course = tracks(&[
            ("journey", &["mlx-path"]),
            ("inside", &["rms-norm", "rope"]),
        ]);
        let loaded = load_achievements(&list, &course).unwrap();
        let (track, whole) = (&loaded[0].when, &loaded[1].when);
        let mut state = State::default();
        let pass = |state: &mut State, lesson: &str| {
            state.lesson_mut(lesson).submissions = vec![submission(true, Lang::En, None)];
        };
        pass(&mut state, "rms-norm");
        assert!(!track.holds(&state), "one of the track's two lessons");
        pass(&mut state, "rope");
        assert!(track.holds(&state));
        assert!(!whole.holds(&state), "the journey's lesson is not done");
        pass(&mut state, "mlx-path");
        assert!(whole.holds(&state));
        // Read without the course (no lessons filled in), it holds for no one.
        let unloaded: Vec<Achievement> = serde_yaml::from_value(list).unwrap();
        assert!(!unloaded[0].when.holds(&state) && !unloaded[1].when.holds(&state));
    }
}
