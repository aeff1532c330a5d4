//! How far into a lesson's hint the learner has read (`LessonRecord::hint_level`), and
//! what the next `quest hint` shows: one level more each time, the last close to the
//! answer.

use std::ops::RangeInclusive;

/// What one `quest hint` shows and what it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintStep {
    /// The levels shown, 1-based, in order.
    pub shown: RangeInclusive<u32>,
    /// The level to record: the furthest ever shown, never lower than before.
    pub reached: u32,
    /// What is left after it.
    pub then: HintThen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintThen {
    /// Levels are left: `quest hint` again shows level `next`.
    More { next: u32 },
    /// This call showed the last level for the first time.
    Last,
    /// The last level had been shown before: there is nothing more to show.
    NoneLeft,
}

/// The step for a hint of `levels` levels (a lesson has at least one), the learner having
/// reached `reached` (0: none yet), `asked` the level named with `--level`; `None` when
/// that level is not one of the hint's.
///
/// Without `--level` every level up to the new one is shown, not just the new one: each
/// level builds on the one before (the ops name the shapes the idea spoke of, the sketch
/// puts those ops in order), and a learner who comes back to the exercise a day later
/// gets the whole thread in one place instead of scrolling back for it. `--level N` shows
/// level N alone: to read one again, or to go straight to it.
pub fn hint_step(levels: u32, reached: u32, asked: Option<u32>) -> Option<HintStep> {
    let levels = levels.max(1);
    let (shown, new_reached) = match asked {
        Some(level) if !(1..=levels).contains(&level) => return None,
        Some(level) => (level..=level, reached.max(level)),
        // The lesson may have lost levels since the learner read them.
        None if reached >= levels => (1..=levels, reached),
        None => (1..=reached + 1, reached + 1),
    };
    let then = if new_reached < levels {
        HintThen::More {
            next: new_reached + 1,
        }
    } else if reached < levels {
        HintThen::Last
    } else {
        HintThen::NoneLeft
    };
    Some(HintStep {
        shown,
        reached: new_reached,
        then,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(shown: RangeInclusive<u32>, reached: u32, then: HintThen) -> Option<HintStep> {
        Some(HintStep {
            shown,
            reached,
            then,
        })
    }

    #[test]
    fn each_call_shows_one_level_more_and_every_one_before_it() {
        use HintThen::*;
        assert_eq!(hint_step(3, 0, None), step(1..=1, 1, More { next: 2 }));
        assert_eq!(hint_step(3, 1, None), step(1..=2, 2, More { next: 3 }));
        assert_eq!(hint_step(3, 2, None), step(1..=3, 3, Last));
        // After the last: all of them again, and nothing more.
        assert_eq!(hint_step(3, 3, None), step(1..=3, 3, NoneLeft));
        assert_eq!(hint_step(3, 3, None), hint_step(3, 3, None));
    }

    #[test]
    fn a_hint_of_one_level_is_the_last_at_once() {
        assert_eq!(hint_step(1, 0, None), step(1..=1, 1, HintThen::Last));
        assert_eq!(hint_step(1, 1, None), step(1..=1, 1, HintThen::NoneLeft));
        // No lesson has no hint, but a count of 0 is read as one level.
        assert_eq!(hint_step(0, 0, None), step(1..=1, 1, HintThen::Last));
    }

    #[test]
    fn a_level_asked_for_is_shown_alone_and_never_lowers_the_level_reached() {
        use HintThen::*;
        assert_eq!(hint_step(3, 0, Some(2)), step(2..=2, 2, More { next: 3 }));
        assert_eq!(hint_step(3, 2, Some(1)), step(1..=1, 2, More { next: 3 }));
        assert_eq!(hint_step(3, 0, Some(3)), step(3..=3, 3, Last));
        assert_eq!(hint_step(3, 3, Some(1)), step(1..=1, 3, NoneLeft));
        assert_eq!(hint_step(3, 1, Some(0)), None);
        assert_eq!(hint_step(3, 1, Some(4)), None);
    }

    #[test]
    fn a_lesson_that_lost_levels_shows_what_it_has() {
        assert_eq!(hint_step(2, 3, None), step(1..=2, 3, HintThen::NoneLeft));
        assert_eq!(hint_step(1, 3, None), step(1..=1, 3, HintThen::NoneLeft));
    }
}
