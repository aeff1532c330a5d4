//! The cache's check: the learner's KV cache against quest's own ([`KvCache`]) on a few
//! sequences of calls — a prompt, decode steps, a trim, a prompt past the 256-position
//! step — in the exercise's process, before any decode. One row is one sequence, right
//! when after every call the learner's cache returned quest's keys and values (shape and
//! values) and said quest's offset, and quest's own cache never ran inside it. It answers
//! as the piece check does ([`crate::lm::piece_check::Verdict`], `checked <json>`).

use anyhow::Result;
use mlx_rs::{Array, Dtype};

use crate::course::spec::Piece;
use crate::lm::cache::{KvCache, KvStore, MakeStore};
use crate::lm::piece_check::{
    answer, compare, dtype_name, quietly, random, tolerance, Found, Row, Verdict,
};
use crate::lm::pieces::quest_runs;

/// One call the model or a decoding loop makes.
#[derive(Clone, Copy, Debug)]
enum Call {
    /// `update_and_fetch` with this many new positions.
    Update(i32),
    /// `trim(n)`.
    Trim(i32),
}

use Call::{Trim, Update};

/// The sequences: (what they show, the calls, the dtype).
fn cases() -> Vec<(&'static str, Vec<Call>, Dtype)> {
    let steps = |n| vec![Update(1); n];
    let mut cases = Vec::new();
    for dtype in [Dtype::Float32, Dtype::Float16] {
        cases.push((
            "a prompt of 7, then 3 steps",
            [vec![Update(7)], steps(3)].concat(),
            dtype,
        ));
    }
    cases.push((
        "a prompt of 5, 2 steps, trim 2, 2 steps",
        [vec![Update(5)], steps(2), vec![Trim(2)], steps(2)].concat(),
        Dtype::Float32,
    ));
    cases.push((
        "a prompt of 250, 10 steps (past 256)",
        [vec![Update(250)], steps(10)].concat(),
        Dtype::Float32,
    ));
    cases.push((
        "a prompt of 300, trim 100, a chunk of 4, a step",
        vec![Update(300), Trim(100), Update(4), Update(1)],
        Dtype::Float16,
    ));
    cases.push((
        "a prompt of 4, trim 9 (more than held), a prompt of 3",
        vec![Update(4), Trim(9), Update(3)],
        Dtype::Float32,
    ));
    cases
}

/// quest asked for the cache's check on its line: run it on caches from `make`, send the
/// verdict, and end the process when quest asked for the check alone.
pub fn when_asked(make: &MakeStore) {
    if let Some((Piece::KvCache, alone)) = crate::line::piece_check() {
        answer(check(make), alone);
    }
}

/// Every sequence on a fresh cache from `make` against quest's own.
pub fn check(make: &MakeStore) -> Verdict {
    let rows = cases()
        .into_iter()
        .enumerate()
        .map(|(i, (what, calls, dtype))| {
            let shape = format!("{what} · [1, 3, L, 64] · {}", dtype_name(dtype));
            let found = match run(make, &calls, dtype, 9000 + 100 * i as u64) {
                Ok(found) => found,
                Err(e) => Found::Failed {
                    message: format!("quest's own cache failed here: {e:#}"),
                },
            };
            Row { shape, found }
        })
        .collect();
    Verdict {
        piece: Piece::KvCache,
        rows,
        peaks: None,
    }
}

/// One sequence: the first call whose answer is not quest's, or the largest difference.
fn run(make: &MakeStore, calls: &[Call], dtype: Dtype, seed: u64) -> Result<Found> {
    let mut quests = KvCache::new();
    let mut yours = match quietly(|| Ok(make())) {
        Ok(store) => store,
        Err(found) => return Ok(found),
    };
    let mut largest = 0f32;
    for (n, &call) in calls.iter().enumerate() {
        let seed = seed + n as u64;
        let found = match call {
            Update(len) => {
                let keys = random(&[1, 3, len, 64], seed, dtype)?;
                let values = random(&[1, 3, len, 64], seed + 50, dtype)?;
                let (want_k, want_v) = KvStore::update_and_fetch(&mut quests, &keys, &values)?;
                let before = quest_runs(Piece::KvCache);
                let got = quietly(|| yours.update_and_fetch(&keys, &values));
                if quest_runs(Piece::KvCache) != before {
                    return Ok(Found::QuestRan);
                }
                let (got_k, got_v) = match got {
                    Ok(got) => got,
                    Err(found) => return Ok(found),
                };
                let mut worst = Found::Right { difference: 0.0 };
                for (got, want) in [(&got_k, &want_k), (&got_v, &want_v)] {
                    let found = same(got, want, dtype)?;
                    if !found.is_right() {
                        worst = found;
                        break;
                    }
                    if let Found::Right { difference } = found {
                        largest = largest.max(difference);
                    }
                }
                worst
            }
            Trim(k) => {
                let want = quests.trim(k);
                match quietly(|| Ok(yours.trim(k))) {
                    Ok(got) if got == want => Found::Right { difference: 0.0 },
                    Ok(got) => Found::Failed {
                        message: format!(
                            "call {}: trim({k}) returned {got}; quest's cache trimmed {want}",
                            n + 1
                        ),
                    },
                    Err(found) => return Ok(found),
                }
            }
        };
        if !found.is_right() {
            return Ok(say_call(found, n, call));
        }
        let offset = match quietly(|| Ok(yours.offset())) {
            Ok(offset) => offset,
            Err(found) => return Ok(found),
        };
        if offset != quests.offset {
            return Ok(Found::Failed {
                message: format!(
                    "after call {} ({}), offset() said {offset}; the cache holds {}",
                    n + 1,
                    name(call),
                    quests.offset
                ),
            });
        }
    }
    Ok(Found::Right {
        difference: largest,
    })
}

/// The learner's keys or values against quest's: the same shape, the same values.
fn same(got: &Array, want: &Array, dtype: Dtype) -> Result<Found> {
    if got.shape() != want.shape() {
        return Ok(Found::WrongShape {
            got: got.shape().to_vec(),
            want: want.shape().to_vec(),
        });
    }
    let want = want.as_dtype(Dtype::Float32)?;
    Ok(compare(got, &want, tolerance(dtype)))
}

fn name(call: Call) -> String {
    match call {
        Update(len) => format!("update_and_fetch of {len} positions"),
        Trim(k) => format!("trim({k})"),
    }
}

/// A wrong answer said with the call it came from (a wrong shape names both shapes).
fn say_call(found: Found, n: usize, call: Call) -> Found {
    match found {
        Found::Failed { message } if !message.starts_with("call ") => Found::Failed {
            message: format!("call {} ({}): {message}", n + 1, name(call)),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx_rs::ops::concatenate;
    use mlx_rs::ops::indexing::IndexOp;

    /// A cache that concatenates every step: slower, and right.
    #[derive(Clone, Default)]
    struct Concatenating {
        keys: Option<Array>,
        values: Option<Array>,
        offset: i32,
    }

    impl KvStore for Concatenating {
        fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> Result<(Array, Array)> {
            let join = |held: &Option<Array>, new: &Array, offset: i32| -> Result<Array> {
                Ok(match held {
                    Some(held) => {
                        concatenate(&[held.index((.., .., ..offset, ..)), new.clone()], 2)?
                    }
                    None => new.clone(),
                })
            };
            let k = join(&self.keys, keys, self.offset)?;
            let v = join(&self.values, values, self.offset)?;
            self.offset = k.shape()[2];
            self.keys = Some(k.clone());
            self.values = Some(v.clone());
            Ok((k, v))
        }
        fn offset(&self) -> i32 {
            self.offset
        }
        fn trim(&mut self, n: i32) -> i32 {
            let n = n.clamp(0, self.offset);
            self.offset -= n;
            n
        }
    }

    /// The same, whose trim forgets the offset: the stale positions come back.
    #[derive(Clone, Default)]
    struct StaleTrim(Concatenating);

    impl KvStore for StaleTrim {
        fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> Result<(Array, Array)> {
            self.0.update_and_fetch(keys, values)
        }
        fn offset(&self) -> i32 {
            self.0.offset
        }
        fn trim(&mut self, n: i32) -> i32 {
            n.clamp(0, self.0.offset)
        }
    }

    fn maker<S: KvStore + Default + 'static>() -> MakeStore {
        std::rc::Rc::new(|| Box::new(S::default()))
    }

    #[test]
    fn quests_cache_and_a_concatenating_one_pass() {
        for make in [maker::<KvCache>(), maker::<Concatenating>()] {
            let verdict = check(&make);
            assert!(verdict.passed(), "{verdict:?}");
            assert_eq!(verdict.rows.len(), 6);
        }
    }

    #[test]
    fn a_trim_that_leaves_stale_positions_is_wrong_where_it_trims() {
        let verdict = check(&maker::<StaleTrim>());
        let wrong: Vec<_> = verdict
            .rows
            .iter()
            .filter(|r| !r.found.is_right())
            .map(|r| r.shape.as_str())
            .collect();
        assert_eq!(wrong.len(), 3, "{verdict:?}");
        assert!(wrong.iter().all(|shape| shape.contains("trim")));
    }
}
