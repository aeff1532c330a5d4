//! Speculative decoding without a draft model: guess the next tokens, let the model check
//! every guess in one forward call, keep what it agrees with.
//!
//! A [`Speculator`] does the two halves. `propose` guesses up to `k` tokens from the
//! context (prompt lookup: the tokens that followed the last n-gram where it occurred
//! before). `verify` runs one forward call of the last token and the guesses, takes the
//! model's greedy token at each position, keeps the guesses up to the first it disagrees
//! with, adds the model's own token after them, and trims the cache past what was kept
//! ([`crate::lm::trim_prompt_cache`]). What comes out is greedy decoding's tokens exactly,
//! in fewer forward calls where the guesses are right.
//!
//! [`decode`] is the loop around them; [`ProposesNothing`] the baseline, one token a
//! forward call, as plain greedy decoding.

use anyhow::{bail, Result};

use crate::course::spec::Piece;
use crate::lm::piece_check::{Found, Row, Verdict};
use crate::lm::{Forward, LayerCache};

/// The two halves of speculative decoding.
pub trait Speculator {
    /// Up to `k` tokens that may come next after `context` (the prompt's ids and every
    /// token decoded so far); none where there is no good guess.
    fn propose(&mut self, context: &[u32], k: usize) -> Vec<u32>;

    /// One forward call of `last` then `proposed` on `cache` (which holds every position
    /// before `last`); returns the tokens kept: the proposed ones the model agrees with, in
    /// order up to the first it does not, then the model's own token after them. The
    /// cache then holds `last` and the proposed tokens kept, nothing more.
    fn verify(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        last: u32,
        proposed: &[u32],
    ) -> Result<Vec<u32>>;
}

/// The baseline: proposes nothing, so each forward call decodes one token.
pub struct ProposesNothing;

impl Speculator for ProposesNothing {
    fn propose(&mut self, _context: &[u32], _k: usize) -> Vec<u32> {
        Vec::new()
    }

    fn verify(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        last: u32,
        proposed: &[u32],
    ) -> Result<Vec<u32>> {
        crate::lm::pieces::quest_ran(Piece::Speculate);
        if !proposed.is_empty() {
            bail!("quest's baseline verifies no proposals: write your own `verify`");
        }
        Ok(vec![crate::lm::greedy_next(model, cache, last)?])
    }
}

/// A speculator as quest's loop holds it: each `verify` counted on its way in, by quest's
/// code, so the report can say the learner's ran (and how often).
pub(crate) struct Counted<'a>(pub &'a mut dyn Speculator);

impl Speculator for Counted<'_> {
    fn propose(&mut self, context: &[u32], k: usize) -> Vec<u32> {
        self.0.propose(context, k)
    }

    fn verify(
        &mut self,
        model: &dyn Forward,
        cache: &mut [LayerCache],
        last: u32,
        proposed: &[u32],
    ) -> Result<Vec<u32>> {
        if !crate::line::quest_pieces() {
            crate::lm::pieces::seam_called(Piece::Speculate);
        }
        self.0.verify(model, cache, last, proposed)
    }
}

/// quest asked for the piece check on its line: check `speculator`'s `verify` on `model`
/// after `prompt`, send the verdict, and end the process when quest asked for the check
/// alone. Nothing otherwise.
pub(crate) fn when_asked(model: &dyn Forward, prompt: &[u32], speculator: &mut dyn Speculator) {
    if let Some((Piece::Speculate, alone)) = crate::line::piece_check() {
        let verdict = crate::lm::pieces::uncounted(|| check(model, prompt, speculator));
        crate::lm::piece_check::answer(verdict, alone);
    }
}

/// `verify` on four proposals after `prompt` against the model's greedy tokens: none
/// proposed, four right, the third wrong, the first wrong. A row is right when it kept
/// what greedy decoding keeps and the cache it left gives greedy's next token: the
/// positions of rejected guesses trimmed, the kept ones held.
pub fn check(model: &dyn Forward, prompt: &[u32], speculator: &mut dyn Speculator) -> Verdict {
    let rows = match greedy_after(model, prompt, 7) {
        Ok(greedy) => cases(&greedy)
            .into_iter()
            .map(|(shape, proposed)| Row {
                found: verify_case(model, prompt, &greedy, &proposed, speculator),
                shape,
            })
            .collect(),
        Err(e) => vec![Row {
            shape: "greedy decoding after the prompt".into(),
            found: Found::Failed {
                message: format!("quest's own decode failed here: {e:#}"),
            },
        }],
    };
    Verdict {
        piece: Piece::Speculate,
        rows,
        peaks: None,
    }
}

/// The prompt's first token and the `n` greedy tokens after it.
fn greedy_after(model: &dyn Forward, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
    let mut cache = model.make_cache();
    let logits = model.forward(&crate::lm::tokens_array(prompt), &mut cache)?;
    let mut tokens = vec![crate::lm::argmax_token(&crate::lm::last_position(&logits))?];
    for _ in 0..n {
        let next = crate::lm::greedy_next(model, &mut cache, *tokens.last().expect("one token"))?;
        tokens.push(next);
    }
    Ok(tokens)
}

/// What each row proposes after greedy's first token `g[0]`: `g[1..]` guessed, with
/// wrong guesses where the row says (another token than greedy's there).
fn cases(g: &[u32]) -> Vec<(String, Vec<u32>)> {
    let wrong = |t: u32| t ^ 1;
    vec![
        ("nothing proposed".into(), Vec::new()),
        ("4 proposed, all right".into(), g[1..5].to_vec()),
        (
            "4 proposed, the third wrong".into(),
            vec![g[1], g[2], wrong(g[3]), g[4]],
        ),
        (
            "4 proposed, the first wrong".into(),
            vec![wrong(g[1]), g[2], g[3], g[4]],
        ),
    ]
}

/// One row: the prompt and `g[0]` through quest's forward, `verify(g[0], proposed)`, then
/// one greedy step on the cache it left.
fn verify_case(
    model: &dyn Forward,
    prompt: &[u32],
    g: &[u32],
    proposed: &[u32],
    speculator: &mut dyn Speculator,
) -> Found {
    let agreed = proposed
        .iter()
        .zip(&g[1..])
        .take_while(|(p, g)| p == g)
        .count();
    // Greedy keeps the agreed guesses and its own token after them, then goes on.
    let want: Vec<u32> = g[1..agreed + 3].to_vec();
    let mut cache = model.make_cache();
    if let Err(e) = model.forward(&crate::lm::tokens_array(prompt), &mut cache) {
        return Found::Failed {
            message: format!("quest's own prefill failed here: {e:#}"),
        };
    }
    let quest_before = crate::lm::pieces::quest_runs(Piece::Speculate);
    let kept =
        crate::lm::piece_check::quietly(|| speculator.verify(model, &mut cache, g[0], proposed));
    if crate::lm::pieces::quest_runs(Piece::Speculate) > quest_before {
        return Found::QuestRan;
    }
    let mut got = match kept {
        Ok(kept) => kept,
        Err(found) => return found,
    };
    if let Some(problem) = kept_problem(proposed, &got) {
        return Found::Failed { message: problem };
    }
    let last = *got.last().expect("kept_problem refuses an empty answer");
    match crate::lm::greedy_next(model, &mut cache, last) {
        Ok(next) => got.push(next),
        Err(e) => {
            return Found::Failed {
                message: format!("a step on the cache `verify` left failed: {e:#}"),
            }
        }
    }
    if got == want {
        Found::Right { difference: 0.0 }
    } else {
        Found::OtherTokens { got, want }
    }
}

/// What a speculative decode did: every token, and how many forward calls verified them.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub tokens: Vec<u32>,
    /// `verify` calls after the prompt's forward call.
    pub verify_calls: usize,
    /// Tokens proposed, and of them kept.
    pub proposed: usize,
    pub accepted: usize,
}

/// Why `verify`'s answer cannot be right whatever the model says: nothing kept, more than
/// one token past the proposals, or a kept proposal that was not proposed.
pub fn kept_problem(proposed: &[u32], kept: &[u32]) -> Option<String> {
    if kept.is_empty() {
        return Some("`verify` kept no token: it must return at least the model's own".into());
    }
    if kept.len() > proposed.len() + 1 {
        return Some(format!(
            "`verify` kept {} tokens from {} proposed: at most one more than proposed",
            kept.len(),
            proposed.len()
        ));
    }
    let guesses = &kept[..kept.len() - 1];
    if guesses != &proposed[..guesses.len()] {
        return Some(format!(
            "`verify` kept {guesses:?}, which is not the start of what was proposed, {proposed:?}"
        ));
    }
    None
}

/// The loop: the prompt's forward call gives the first token (`hand(token, true)`); then,
/// until `max_tokens`, `propose` up to `k` (fewer near the end), `verify` them, and hand
/// over every kept token (`hand(token, false)`) as it is known.
pub fn decode(
    model: &dyn Forward,
    prompt_ids: &[u32],
    max_tokens: usize,
    k: usize,
    speculator: &mut dyn Speculator,
    hand: &mut dyn FnMut(u32, bool),
) -> Result<Decoded> {
    let mut cache = model.make_cache();
    let logits = model.forward(&crate::lm::tokens_array(prompt_ids), &mut cache)?;
    let first = crate::lm::argmax_token(&crate::lm::last_position(&logits))?;
    hand(first, true);
    let mut context = prompt_ids.to_vec();
    context.push(first);
    let mut decoded = Decoded {
        tokens: vec![first],
        verify_calls: 0,
        proposed: 0,
        accepted: 0,
    };
    while decoded.tokens.len() < max_tokens.max(1) {
        let room = max_tokens - decoded.tokens.len();
        let mut proposed = speculator.propose(&context, k.min(room - 1));
        proposed.truncate(k.min(room - 1));
        let last = *context.last().expect("the context holds the first token");
        let kept = speculator.verify(model, &mut cache, last, &proposed)?;
        if let Some(problem) = kept_problem(&proposed, &kept) {
            bail!(problem);
        }
        decoded.verify_calls += 1;
        decoded.proposed += proposed.len();
        decoded.accepted += kept.len() - 1;
        for &token in kept.iter().take(room) {
            hand(token, false);
            decoded.tokens.push(token);
            context.push(token);
        }
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::random;

    /// Prompt lookup and verification written from the math, as a learner would.
    struct Lookup;

    impl Speculator for Lookup {
        fn propose(&mut self, context: &[u32], k: usize) -> Vec<u32> {
            for n in (1..=3).rev() {
                if context.len() <= n {
                    continue;
                }
                let tail = &context[context.len() - n..];
                // The latest earlier occurrence of the last n tokens.
                for start in (0..context.len() - n).rev() {
                    if &context[start..start + n] == tail {
                        let after = &context[start + n..];
                        return after.iter().take(k).copied().collect();
                    }
                }
            }
            Vec::new()
        }

        fn verify(
            &mut self,
            model: &dyn Forward,
            cache: &mut [LayerCache],
            last: u32,
            proposed: &[u32],
        ) -> Result<Vec<u32>> {
            let picks = picks(model, cache, last, proposed)?;
            let agreed = proposed
                .iter()
                .zip(&picks)
                .take_while(|(guess, pick)| guess == pick)
                .count();
            crate::lm::trim_prompt_cache(cache, (proposed.len() - agreed) as i32);
            let mut kept = proposed[..agreed].to_vec();
            kept.push(picks[agreed]);
            Ok(kept)
        }
    }

    /// One forward call of `last` then `proposed`: the model's greedy token after each.
    fn picks(
        model: &dyn Forward,
        cache: &mut [LayerCache],
        last: u32,
        proposed: &[u32],
    ) -> Result<Vec<u32>> {
        let mut input = vec![last];
        input.extend_from_slice(proposed);
        let logits = model.forward(&crate::lm::tokens_array(&input), cache)?;
        let picks = mlx_rs::ops::indexing::argmax_axis(&logits, -1, None)?;
        Ok(picks.as_slice::<u32>().to_vec())
    }

    /// A speculator that proposes nothing and verifies with `verify`: the check's subject.
    struct Verifies<F>(F);

    impl<F> Speculator for Verifies<F>
    where
        F: FnMut(&dyn Forward, &mut [LayerCache], u32, &[u32]) -> Result<Vec<u32>>,
    {
        fn propose(&mut self, _: &[u32], _: usize) -> Vec<u32> {
            Vec::new()
        }
        fn verify(
            &mut self,
            model: &dyn Forward,
            cache: &mut [LayerCache],
            last: u32,
            proposed: &[u32],
        ) -> Result<Vec<u32>> {
            (self.0)(model, cache, last, proposed)
        }
    }

    fn greedy(model: &dyn Forward, prompt: &[u32], n: usize) -> Vec<u32> {
        decode(model, prompt, n, 4, &mut ProposesNothing, &mut |_, _| {})
            .unwrap()
            .tokens
    }

    /// Guesses that agree and guesses that do not, in one run: the tokens are greedy
    /// decoding's, in fewer verify calls than tokens.
    #[test]
    fn speculation_decodes_greedy_tokens_in_fewer_calls() {
        let model = random::model(&random::tiny_llama(), 11).unwrap();
        let prompt: Vec<u32> = [5u32, 9, 17, 3, 5, 9, 17, 3, 5, 9].to_vec();
        let want = greedy(&model, &prompt, 24);
        let mut handed = Vec::new();
        let got = decode(&model, &prompt, 24, 4, &mut Lookup, &mut |t, first| {
            handed.push((t, first))
        })
        .unwrap();
        assert_eq!(got.tokens, want);
        assert_eq!(handed.len(), 24);
        assert!(handed[0].1 && handed[1..].iter().all(|(_, first)| !first));
        assert!(got.proposed > 0, "{got:?}");
        assert!(got.verify_calls + got.accepted == 23, "{got:?}");
        // The baseline: one call a token after the first.
        let plain = decode(&model, &prompt, 24, 4, &mut ProposesNothing, &mut |_, _| {}).unwrap();
        assert_eq!((plain.verify_calls, plain.proposed), (23, 0));
    }

    /// `verify` written from the math leaves the prompt, the last token and the kept
    /// guesses in the cache: the rejected guesses' positions trimmed.
    #[test]
    fn verify_leaves_the_cache_holding_what_it_kept() {
        let model = random::model(&random::tiny_llama(), 11).unwrap();
        let prompt: Vec<u32> = [5u32, 9, 17, 3, 5, 9, 17, 3].to_vec();
        let offset = |c: &[LayerCache]| match &c[0] {
            LayerCache::Kv(kv) => crate::lm::KvStore::offset(kv),
            LayerCache::Recurrent(_) => -1,
        };
        for proposed in [
            vec![],
            vec![3u32, 3, 3, 3],
            vec![3, 2, 3, 3],
            vec![2, 3, 3, 3],
        ] {
            let mut cache = model.make_cache();
            model
                .forward(&crate::lm::tokens_array(&prompt), &mut cache)
                .unwrap();
            let kept = Lookup.verify(&model, &mut cache, 3, &proposed).unwrap();
            assert_eq!(
                offset(&cache) as usize,
                prompt.len() + kept.len(),
                "{proposed:?} kept {kept:?}"
            );
        }
    }

    /// The piece check: `verify` from the math right on every row; one still `todo!()`
    /// not written; quest's baseline inside it not the learner's; every guess kept wrong.
    #[test]
    fn the_check_judges_verify_on_the_model() {
        let model = random::model(&random::tiny_llama(), 11).unwrap();
        let prompt: Vec<u32> = [5u32, 9, 17, 3, 5, 9, 17, 3].to_vec();
        let verdict = check(&model, &prompt, &mut Lookup);
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(verdict.rows.len(), 4);

        let mut not_yet =
            Verifies(|_: &dyn Forward, _: &mut [LayerCache], _: u32, _: &[u32]| todo!("write it"));
        assert!(check(&model, &prompt, &mut not_yet).not_written());

        let mut quests = Verifies(
            |model: &dyn Forward, cache: &mut [LayerCache], last: u32, _: &[u32]| {
                ProposesNothing.verify(model, cache, last, &[])
            },
        );
        let quests = check(&model, &prompt, &mut quests);
        assert!(
            quests.rows.iter().all(|r| r.found == Found::QuestRan),
            "{quests:?}"
        );

        let mut keeps_all = Verifies(
            |model: &dyn Forward, cache: &mut [LayerCache], last: u32, proposed: &[u32]| {
                let mut kept = proposed.to_vec();
                kept.push(picks(model, cache, last, proposed)?[proposed.len()]);
                Ok(kept)
            },
        );
        let keeps_all = check(&model, &prompt, &mut keeps_all);
        assert_eq!(keeps_all.right(), 2, "{keeps_all:?}");
        assert!(matches!(
            keeps_all.first_wrong().unwrap().found,
            Found::OtherTokens { .. }
        ));
    }

    #[test]
    fn a_verify_answer_that_cannot_be_right_is_named() {
        assert_eq!(kept_problem(&[1, 2], &[1, 2, 3]), None);
        assert_eq!(kept_problem(&[], &[7]), None);
        assert!(kept_problem(&[1, 2], &[]).is_some());
        assert!(kept_problem(&[1, 2], &[1, 2, 3, 4]).is_some());
        assert!(kept_problem(&[1, 2], &[2, 3]).is_some());
    }
}
