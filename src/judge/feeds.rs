//! What a run fed the model (`feeds:`): the positions of the prompt's forward and of each
//! decode step against the lesson's rules.

use crate::course::spec::FeedRule;

/// A feed rule the run broke, from what the model recorded of its forward calls.
#[derive(Debug, PartialEq)]
pub enum FeedProblem<'a> {
    /// The run recorded no forward call: its report was not handed the model it ran.
    NotRecorded,
    /// The first token came from a forward call of `positions` positions.
    FirstToken {
        rule: &'a FeedRule,
        positions: usize,
        limit: usize,
    },
    /// Forward call `call` of the prefill (1 is the first) fed `positions`.
    Prefill {
        rule: &'a FeedRule,
        call: usize,
        positions: usize,
        limit: usize,
    },
    /// Decode step `step` (1 is the first after the first token) fed `positions`.
    Step {
        rule: &'a FeedRule,
        step: usize,
        positions: usize,
        limit: usize,
    },
}

/// What is wrong with what the run fed the model: `prefill` are the positions (per
/// sequence) of each forward call before the first token, `steps` of each after it
/// (see `lab::Report`). One problem per rule, at the first call that breaks it.
pub fn feed_problems<'a>(
    rules: &'a [FeedRule],
    prefill: &[usize],
    steps: &[usize],
) -> Vec<FeedProblem<'a>> {
    if rules.is_empty() {
        return Vec::new();
    }
    if prefill.is_empty() {
        return vec![FeedProblem::NotRecorded];
    }
    let mut problems = Vec::new();
    for rule in rules {
        if let (Some(limit), Some(&positions)) = (rule.first_token, prefill.last()) {
            if positions > limit {
                problems.push(FeedProblem::FirstToken {
                    rule,
                    positions,
                    limit,
                });
            }
        }
        if let Some(limit) = rule.prefill {
            if let Some((i, &positions)) = prefill.iter().enumerate().find(|(_, &p)| p > limit) {
                problems.push(FeedProblem::Prefill {
                    rule,
                    call: i + 1,
                    positions,
                    limit,
                });
            }
        }
        if let Some(limit) = rule.step {
            if let Some((i, &positions)) = steps.iter().enumerate().find(|(_, &p)| p > limit) {
                problems.push(FeedProblem::Step {
                    rule,
                    step: i + 1,
                    positions,
                    limit,
                });
            }
        }
    }
    problems
}
