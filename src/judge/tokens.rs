//! Tokens against tokens: how many of the learner's must be the solution's, where they
//! first differ, and where a free-running run leaves quest's own.

use crate::course::spec::TokenCheck;

/// How many leading tokens of the learner's run must be the solution's, when any:
/// `exact` all of either, `first: n` the first `n`.
pub fn tokens_compared(check: TokenCheck, solution: usize, learner: usize) -> Option<usize> {
    match check {
        TokenCheck::Exact => Some(solution.max(learner)),
        TokenCheck::First(n) => Some(n),
        TokenCheck::Repeatable | TokenCheck::None => None,
    }
}

/// The first position among the first `n` where the learner's tokens are not the
/// solution's (a missing token differs), or `None` when they agree.
pub fn first_difference(solution: &[u32], learner: &[u32], n: usize) -> Option<usize> {
    let (expected, got) = (
        &solution[..n.min(solution.len())],
        &learner[..n.min(learner.len())],
    );
    (0..expected.len().max(got.len())).find(|&i| expected.get(i) != got.get(i))
}

/// A learner's free-running tokens against quest's own (the tokens its logits were
/// checked on), given the near ties of that check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgainstQuest {
    /// The same tokens as quest's.
    Same,
    /// The same up to this token, where the logits check found a near tie: the rest
    /// follows from another pick there, not from another computation.
    NearTie(usize),
    /// Apart from this token on, where the check found no tie: the free-running loop
    /// computes something the teacher-forced one did not.
    Apart(usize),
}

/// Where `learner`'s tokens first leave quest's `reference` (over the longer of the two),
/// and whether a near tie of the logits check explains it. Token `k` is what step `k`
/// picked: until the first difference both runs were fed the same tokens, so the learner's
/// free-running pick there is its teacher-forced argmax.
pub fn tokens_against_quest(
    reference: &[u32],
    learner: &[u32],
    near_ties: &[usize],
) -> AgainstQuest {
    match first_difference(reference, learner, reference.len().max(learner.len())) {
        None => AgainstQuest::Same,
        Some(at) if near_ties.contains(&at) => AgainstQuest::NearTie(at),
        Some(at) => AgainstQuest::Apart(at),
    }
}
