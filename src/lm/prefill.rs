//! Chunked prefill: the prompt through the cache a chunk at a time, each chunk evaluated
//! before the next, so that the most memory held at once is one chunk's and not the whole
//! prompt's. A chunk attends to the cache (every earlier chunk) and causally to itself, so
//! the last chunk's last logits are the whole prompt's.
//!
//! A [`Prefill`] does it; [`OneShot`] is the baseline, the whole prompt in one forward
//! call. [`check`] is its piece check on the lesson's model.

use anyhow::{bail, Result};
use mlx_rs::Array;

use crate::course::spec::Piece;
use crate::lm::piece_check::{Found, Row, Verdict};
use crate::lm::{Forward, LayerCache};

/// The prompt into the cache.
pub trait Prefill {
    /// Feeds `prompt` through `model` into `cache` (empty before), at most `chunk`
    /// positions a forward call, and returns the logits of the prompt's last position,
    /// `[1, vocab]`.
    fn prefill(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        prompt: &[u32],
        chunk: usize,
    ) -> Result<Array>;
}

/// The baseline: the whole prompt in one forward call, whatever the chunk.
pub struct OneShot;

impl Prefill for OneShot {
    fn prefill(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        prompt: &[u32],
        _chunk: usize,
    ) -> Result<Array> {
        crate::lm::pieces::quest_ran(Piece::Prefill);
        one_shot(model, cache, prompt)
    }
}

fn one_shot(model: &dyn Forward, cache: &mut [LayerCache], prompt: &[u32]) -> Result<Array> {
    let logits = model.forward(&crate::lm::tokens_array(prompt), cache)?;
    Ok(crate::lm::last_position(&logits))
}

/// quest asked for the piece check on its line: check `prefill` on `model` with `prompt`,
/// send the verdict, and end the process when quest asked for the check alone.
pub(crate) fn when_asked(model: &dyn Forward, prompt: &[u32], prefill: &mut dyn Prefill) {
    if let Some((Piece::Prefill, alone)) = crate::line::piece_check() {
        let verdict = crate::lm::pieces::uncounted(|| check(model, prompt, prefill));
        crate::lm::piece_check::answer(verdict, alone);
    }
}

/// `prefill` on `prompt` (its first 300 tokens at most) at three chunk sizes against the
/// one-shot prefill: chunks that divide it, chunks that do not, one chunk longer than the
/// prompt. A row is right when the last logits are within the float type's tolerance of
/// the one-shot's (relative to their largest magnitude), the calls fed at most `chunk`
/// positions each, and a greedy step on the cache it left gives the one-shot cache's token.
pub fn check(model: &dyn Forward, prompt: &[u32], prefill: &mut dyn Prefill) -> Verdict {
    let prompt = &prompt[..prompt.len().min(300)];
    let rows = [64, 100, 4096]
        .into_iter()
        .filter(|_| prompt.len() > 1)
        .map(|chunk| Row {
            shape: format!("{} prompt tokens, chunks of {chunk}", prompt.len()),
            found: chunk_case(model, prompt, chunk, prefill),
        })
        .collect();
    Verdict {
        piece: Piece::Prefill,
        rows,
        peaks: None,
    }
}

/// The greedy token after `logits` (`[1, vocab]`), and one step on `cache` after it.
fn next_two(model: &dyn Forward, cache: &mut [LayerCache], logits: &Array) -> Result<Vec<u32>> {
    let first = crate::lm::argmax_token(logits)?;
    Ok(vec![first, crate::lm::greedy_next(model, cache, first)?])
}

fn chunk_case(
    model: &dyn Forward,
    prompt: &[u32],
    chunk: usize,
    prefill: &mut dyn Prefill,
) -> Found {
    let failed = |what: &str, e: anyhow::Error| Found::Failed {
        message: format!("{what}: {e:#}"),
    };
    let mut quests_cache = model.make_cache();
    // quest's logits and cache evaluated before the learner's code builds its graphs.
    let want = match one_shot(model, &mut quests_cache, prompt).and_then(|logits| {
        let mut done: Vec<&Array> = quests_cache.iter().flat_map(|c| c.state()).collect();
        done.push(&logits);
        mlx_rs::transforms::eval(done)?;
        Ok(logits)
    }) {
        Ok(logits) => logits,
        Err(e) => return failed("quest's own prefill failed here", e),
    };
    let mut cache = model.make_cache();
    let quest_before = crate::lm::pieces::quest_runs(Piece::Prefill);
    let fed = std::cell::RefCell::new(Vec::new());
    let watched = Watched { model, fed: &fed };
    let got =
        crate::lm::piece_check::quietly(|| prefill.prefill(&watched, &mut cache, prompt, chunk));
    if crate::lm::pieces::quest_runs(Piece::Prefill) > quest_before {
        return Found::QuestRan;
    }
    let got = match got {
        Ok(got) => got,
        Err(found) => return found,
    };
    if let Some(&positions) = fed.borrow().iter().find(|&&p| p > chunk) {
        return Found::Failed {
            message: format!(
                "a forward call fed {positions} positions, more than the chunk of {chunk}"
            ),
        };
    }
    if fed.borrow().iter().sum::<usize>() != prompt.len() {
        return Found::Failed {
            message: format!(
                "the forward calls fed {} positions for a prompt of {}",
                fed.borrow().iter().sum::<usize>(),
                prompt.len()
            ),
        };
    }
    let got = match got.reshape(&[1, -1]) {
        Ok(got) => got,
        Err(e) => return failed("its logits do not reshape to [1, vocab]", e.into()),
    };
    let allowed = crate::lm::piece_check::tolerance(want.dtype());
    let compared = crate::lm::piece_check::compare(&got, &want, allowed);
    if !compared.is_right() {
        return compared;
    }
    match (
        next_two(model, &mut cache, &got),
        next_two(model, &mut quests_cache, &want),
    ) {
        (Ok(got), Ok(want)) if got != want => Found::OtherTokens { got, want },
        (Ok(_), Ok(_)) => compared,
        (Err(e), _) => failed("a step on the cache `prefill` left failed", e),
        (_, Err(e)) => failed("quest's own step failed here", e),
    }
}

/// The model a checked prefill gets: every call's positions recorded on the way in.
struct Watched<'a> {
    model: &'a dyn Forward,
    fed: &'a std::cell::RefCell<Vec<usize>>,
}

impl Forward for Watched<'_> {
    fn forward(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array> {
        let shape = tokens.shape();
        if shape.len() != 2 {
            bail!("forward takes [B, L] token ids, not {shape:?}");
        }
        self.fed.borrow_mut().push(shape[1] as usize);
        self.model.forward(tokens, cache)
    }
    fn make_cache(&self) -> Vec<LayerCache> {
        self.model.make_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::random;

    /// A prefill made of a closure: the check's subject.
    struct By<F>(F);

    impl<F> Prefill for By<F>
    where
        F: FnMut(&dyn Forward, &mut [LayerCache], &[u32], usize) -> Result<Array>,
    {
        fn prefill(
            &mut self,
            model: &dyn Forward,
            cache: &mut [LayerCache],
            prompt: &[u32],
            chunk: usize,
        ) -> Result<Array> {
            (self.0)(model, cache, prompt, chunk)
        }
    }

    /// Chunks written from the math, each evaluated before the next; with `forget`, each
    /// into a fresh cache (the earlier chunks lost).
    fn chunks(
        model: &dyn Forward,
        cache: &mut [LayerCache],
        prompt: &[u32],
        chunk: usize,
        forget: bool,
    ) -> Result<Array> {
        let mut last = None;
        for part in prompt.chunks(chunk) {
            let mut fresh = model.make_cache();
            let into: &mut [LayerCache] = if forget { &mut fresh } else { cache };
            let logits = model.forward(&crate::lm::tokens_array(part), into)?;
            mlx_rs::transforms::eval(into.iter().flat_map(|c| c.state()))?;
            last = Some(crate::lm::last_position(&logits));
            if forget {
                cache.clone_from_slice(&fresh);
            }
        }
        last.ok_or_else(|| anyhow::anyhow!("an empty prompt"))
    }

    fn prompt() -> Vec<u32> {
        (0..150u32).map(|i| (i * 37 + 11) % 256).collect()
    }

    /// Chunks from the math right at every size; the whole prompt in one call right only
    /// where the chunk is longer than the prompt; quest's one-shot inside not the learner's.
    #[test]
    fn chunks_from_the_math_pass_and_one_call_does_not() {
        let model = random::model(&random::tiny_llama(), 5).unwrap();
        let by_math =
            |m: &dyn Forward, c: &mut [LayerCache], p: &[u32], n: usize| chunks(m, c, p, n, false);
        let verdict = check(&model, &prompt(), &mut By(by_math));
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(verdict.rows.len(), 3);

        let whole = |m: &dyn Forward, c: &mut [LayerCache], p: &[u32], _: usize| one_shot(m, c, p);
        let whole = check(&model, &prompt(), &mut By(whole));
        assert_eq!(whole.right(), 1, "{whole:?}");

        let quests = |m: &dyn Forward, c: &mut [LayerCache], p: &[u32], n: usize| {
            OneShot.prefill(m, c, p, n)
        };
        let quests = check(&model, &prompt(), &mut By(quests));
        assert!(quests.rows.iter().all(|r| r.found == Found::QuestRan));
    }

    /// Chunks that skip the cache (each chunk alone): the last logits are not the prompt's.
    #[test]
    fn chunks_without_the_cache_are_wrong() {
        let model = random::model(&random::tiny_llama(), 5).unwrap();
        let forgets =
            |m: &dyn Forward, c: &mut [LayerCache], p: &[u32], n: usize| chunks(m, c, p, n, true);
        let verdict = check(&model, &prompt(), &mut By(forgets));
        assert!(!verdict.rows[0].found.is_right(), "{verdict:?}");
        assert!(
            verdict.rows[2].found.is_right(),
            "one chunk is the whole prompt"
        );
    }
}
