//! Logits against quest's own model, step by step (`logits:`), and, on a refusal, the
//! hidden states layer by layer: the first step and layer apart, near ties listed.

/// How a model's logits compare with quest's own, step by step (`logits:`).
#[derive(Debug, Clone, PartialEq)]
pub enum LogitsVerdict {
    /// Every step within the tolerance: the largest difference, the step it was at, and
    /// the steps whose argmax differs all the same ([`near_ties`]).
    Within {
        steps: usize,
        largest: f32,
        at_step: usize,
        near_ties: Vec<usize>,
    },
    /// The first step beyond the tolerance.
    Beyond(LogitsGap),
    /// The run reported another number of steps (or another vocabulary) than quest's.
    Missing { steps: usize, expected: usize },
}

/// Where a model's logits first left quest's: the step (0 is the prompt's last position,
/// step `n` the `n`-th token fed after it), the sequence position it predicts from, the
/// vocabulary id where the difference is largest, by how much, and both argmaxes.
#[derive(Debug, Clone, PartialEq)]
pub struct LogitsGap {
    pub step: usize,
    pub position: usize,
    pub id: usize,
    pub by: f32,
    pub reference_argmax: usize,
    pub argmax: usize,
}

/// The first largest entry's index (NaN never wins).
pub(super) fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] || row[best].is_nan() {
            best = i;
        }
    }
    best
}

/// Judges `yours` (one row of logits per step, teacher-forced on the reference's tokens)
/// against `reference` (quest's own pieces on the same tokens): the first step whose max
/// abs difference is over `tolerance` is refused; a NaN counts as an infinite difference.
/// `prompt_tokens` turns a step into the position it predicts from.
///
/// A step within the tolerance whose argmax differs is a near tie, not a refusal: with
/// every logit within `t` of quest's, another pick means quest's own logits for the two
/// tokens lie within `2t` of each other, a tie that rounding alone may break either way
/// (float16 on a random-weights model, whose logits are flat, breaks several in 32 steps).
/// Those steps are listed ([`LogitsVerdict::Within`]'s `near_ties`), for the token check
/// ([`tokens_against_quest`]).
pub fn logits_compared(
    reference: &[Vec<f32>],
    yours: &[Vec<f32>],
    tolerance: f32,
    prompt_tokens: usize,
) -> LogitsVerdict {
    let same_shape = reference.len() == yours.len()
        && reference.iter().zip(yours).all(|(r, y)| r.len() == y.len());
    if !same_shape || reference.is_empty() {
        return LogitsVerdict::Missing {
            steps: yours.len(),
            expected: reference.len(),
        };
    }
    let (mut largest, mut at_step, mut near_ties) = (0.0f32, 0, Vec::new());
    for (step, (r, y)) in reference.iter().zip(yours).enumerate() {
        let (mut id, mut by) = (0, 0.0f32);
        for (i, (a, b)) in r.iter().zip(y).enumerate() {
            let d = (a - b).abs();
            let d = if d.is_nan() { f32::INFINITY } else { d };
            if d > by {
                (id, by) = (i, d);
            }
        }
        let (reference_argmax, argmax) = (argmax(r), argmax(y));
        if by > tolerance {
            return LogitsVerdict::Beyond(LogitsGap {
                step,
                // Step 0 predicts from the prompt's last position.
                position: (prompt_tokens + step).saturating_sub(1),
                id,
                by,
                reference_argmax,
                argmax,
            });
        }
        if reference_argmax != argmax {
            near_ties.push(step);
        }
        if by > largest {
            (largest, at_step) = (by, step);
        }
    }
    LogitsVerdict::Within {
        steps: reference.len(),
        largest,
        at_step,
        near_ties,
    }
}

/// Where a step's hidden states, layer by layer, first left quest's: what a refused logits
/// check adds when both models report their layers.
#[derive(Debug, Clone, PartialEq)]
pub enum LayersVerdict {
    /// The first layer whose output differs from quest's by more than the relative
    /// tolerance times the largest value quest's has there (hidden states are not scaled
    /// like logits).
    First { layer: usize, by: f32, largest: f32 },
    /// Every layer's output within: the difference begins after the last layer (the final
    /// norm or the head), or in what the step was fed.
    AfterLast { layers: usize },
    /// The two report other layer counts or widths: nothing to compare layer by layer.
    Unlike,
}

/// Compares one step's hidden states after each layer, `yours` against `reference`
/// (step 0: the prompt's last position): a layer is apart where the difference is over
/// `relative` × quest's largest value there; a NaN counts as infinitely far.
pub fn layers_compared(reference: &[Vec<f32>], yours: &[Vec<f32>], relative: f32) -> LayersVerdict {
    let alike = !reference.is_empty()
        && reference.len() == yours.len()
        && reference.iter().zip(yours).all(|(r, y)| r.len() == y.len());
    if !alike {
        return LayersVerdict::Unlike;
    }
    for (layer, (r, y)) in reference.iter().zip(yours).enumerate() {
        let largest = r.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let by = r.iter().zip(y).fold(0.0f32, |m, (a, b)| {
            let d = (a - b).abs();
            m.max(if d.is_nan() { f32::INFINITY } else { d })
        });
        if by > relative * largest.max(f32::MIN_POSITIVE) {
            return LayersVerdict::First { layer, by, largest };
        }
    }
    LayersVerdict::AfterLast {
        layers: reference.len(),
    }
}
