//! The runner of a submission's checks: one [`Judge`] per lesson (its run settings,
//! quest's own reference, kept once computed), one [`Subject`] per piece of code judged
//! (what its earlier checks found, for the checks after them).

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{AgainstQuest, DrawsVerdict, LogitsVerdict};
use crate::course::spec::{DrawsCheck, TokenCheck, ValuesSpec};
use crate::course::Lesson;
use crate::device::Backend;
use crate::lab::runner::{self, RunRequest};
use crate::lab::{Greedy, Report, Values};
use crate::lm::piece_check::{Found, Verdict};
use crate::lm::Sampling;
use crate::physics::arithmetic;
use crate::progress::{CodeRef, Measurement};

use super::list::Check;
use super::measure;
use super::outcome::{
    ran, Heading, LayersApart, Outcome, Passed, PieceJudged, Progress, Refused, Stopped,
    TokensAgreed, ValuesCompared,
};
use super::sources::{build, solution_path, starting_code_file};

/// The runner of one lesson's checks.
pub struct Judge<'l> {
    lesson: &'l Lesson,
    request: RunRequest,
    backend: Backend,
    /// Interleaved rounds of the measurement; the lesson's own number when `None`.
    rounds: Option<usize>,
    /// On a refused logits check, run both models again to find the first layer apart.
    diagnose: bool,
    /// quest's own greedy run (`logits:`), computed once for every subject.
    reference: Option<Greedy>,
}

/// A piece of code being judged, and what its passed checks found.
pub struct Subject {
    pub source: PathBuf,
    pub text: Vec<u8>,
    pub code: CodeRef,
    binary: Option<PathBuf>,
    /// quest's greedy tokens and the logits check's near ties, once it passed.
    logits: Option<(Vec<u32>, Vec<usize>)>,
    /// The solution's run where tokens are compared, and this code's first run.
    solution_run: Option<Report>,
    first_run: Option<Report>,
    quest_values: Option<Values>,
    measured: Option<(Vec<(Report, CodeRef)>, Measurement)>,
}

/// What a submission that passed every check hands the record.
pub struct Judged {
    /// Every run with the code it ran (the first run alone where nothing was measured).
    pub reports: Vec<(Report, CodeRef)>,
    pub measurement: Option<Measurement>,
    /// quest's own values, recorded with the run they came from.
    pub quest_values: Option<Values>,
}

impl Subject {
    /// The code at `source` (its bytes `text`, which code it is).
    pub fn new(source: PathBuf, text: Vec<u8>, code: CodeRef) -> Self {
        Subject {
            source,
            text,
            code,
            binary: None,
            logits: None,
            solution_run: None,
            first_run: None,
            quest_values: None,
            measured: None,
        }
    }

    /// The code read from `source`.
    pub fn read(source: PathBuf, code: impl FnOnce(&[u8]) -> CodeRef) -> Result<Self> {
        let text = std::fs::read(&source)?;
        let code = code(&text);
        Ok(Subject::new(source, text, code))
    }

    /// Its binary, built once.
    fn binary(&mut self) -> Result<PathBuf> {
        if let Some(binary) = &self.binary {
            return Ok(binary.clone());
        }
        let binary = build(&self.source)?;
        self.binary = Some(binary.clone());
        Ok(binary)
    }

    /// What every check found, for the record: call once every check passed.
    pub fn judged(self) -> Judged {
        let (reports, measurement) = match self.measured {
            Some((reports, measurement)) => (reports, Some(measurement)),
            None => (
                self.first_run
                    .map(|run| vec![(run, self.code)])
                    .unwrap_or_default(),
                None,
            ),
        };
        Judged {
            reports,
            measurement,
            quest_values: self.quest_values,
        }
    }
}

impl<'l> Judge<'l> {
    /// The runner of `lesson`'s checks, its exercises run with `request` on `backend`.
    pub fn new(lesson: &'l Lesson, request: RunRequest, backend: Backend) -> Self {
        Judge {
            lesson,
            request,
            backend,
            rounds: None,
            diagnose: false,
            reference: None,
        }
    }

    /// Measures `rounds` interleaved rounds instead of the lesson's number.
    pub fn with_rounds(mut self, rounds: Option<usize>) -> Self {
        self.rounds = rounds;
        self
    }

    /// A refused logits check also finds the first layer apart (two more runs).
    pub fn diagnosing(mut self) -> Self {
        self.diagnose = true;
        self
    }

    /// Runs `check` on `subject`, saying its progress through `say`.
    pub fn run(
        &mut self,
        check: Check,
        subject: &mut Subject,
        say: &mut dyn FnMut(Progress),
    ) -> Result<Outcome<'l>> {
        match check {
            Check::Rules => {
                say(Progress::Checking(Heading::Rules));
                let text = String::from_utf8_lossy(&subject.text);
                let findings = super::rules::check(&text, &self.lesson.spec.rules);
                Ok(refused_if(!findings.is_empty(), Passed::Rules, || {
                    Refused::Rules(findings)
                }))
            }
            Check::Copied => Ok(self.copied(subject)),
            Check::Build => self.build(subject),
            Check::Piece => self.piece(subject, say),
            Check::Logits => self.logits(subject, say),
            Check::Draws => self.draws(subject, say),
            Check::Behaviour => self.behaviour(subject),
            Check::Feeds => Ok(self.feeds(subject, say)),
            Check::Repeat => self.repeat(subject, say),
            Check::Tokens => Ok(self.tokens(subject, say)),
            Check::Values => self.values(subject, say),
            Check::Measure => self.measure(subject, say),
        }
    }

    /// The solution copied over the exercise teaches nothing and measures nothing of
    /// the learner's.
    fn copied(&self, subject: &Subject) -> Outcome<'l> {
        let solution = solution_path(self.lesson).and_then(|p| Ok(std::fs::read_to_string(p)?));
        let copied = solution.is_ok_and(|solution| {
            super::same_as_solution(&String::from_utf8_lossy(&subject.text), &solution)
        });
        refused_if(copied, Passed::Copied, || Refused::Copied)
    }

    /// The code built; where the exercise does not run (`runs_on`), its run stops after
    /// what it checks here (a CUDA kernel compiles), and nothing more is judged.
    fn build(&self, subject: &mut Subject) -> Result<Outcome<'l>> {
        // The starting code's file first (the measurement's baseline): one that cannot
        // be written stops the submission before any build.
        starting_code_file(self.lesson)?;
        let binary = subject.binary()?;
        if !self.lesson.spec.runs_on_backend(self.backend) {
            ran(runner::run(&binary, &self.request))?;
            return Err(Stopped::RunsElsewhere(self.backend).into());
        }
        Ok(Outcome::Passed(Passed::Build))
    }

    /// The piece alone against quest's own, on random tensors of the shapes that matter.
    fn piece(&self, subject: &mut Subject, say: &mut dyn FnMut(Progress)) -> Result<Outcome<'l>> {
        let Some(piece) = self.lesson.spec.piece else {
            return Ok(Outcome::Passed(Passed::NotAsked));
        };
        say(Progress::Checking(Heading::Piece(piece)));
        let binary = subject.binary()?;
        let verdict = ran(runner::check_piece(&binary, &self.request, piece))?;
        Ok(match (judge_piece(verdict.as_ref()), verdict) {
            (PieceJudged::Passed, Some(verdict)) => Outcome::Passed(Passed::Piece(verdict)),
            (judged, verdict) => Outcome::Refused(Refused::Piece { judged, verdict }),
        })
    }

    /// The learner's model against quest's own: quest's greedy tokens and logits in this
    /// process, the learner's binary teacher-forced on those tokens, every step compared
    /// within the tolerance of the float type this backend computes in.
    fn logits(
        &mut self,
        subject: &mut Subject,
        say: &mut dyn FnMut(Progress),
    ) -> Result<Outcome<'l>> {
        let Some(check) = self.lesson.spec.logits else {
            return Ok(Outcome::Passed(Passed::NotAsked));
        };
        let half = matches!(
            self.backend.float_dtype(),
            mlx_rs::Dtype::Float16 | mlx_rs::Dtype::Bfloat16
        );
        let tolerance = check.tolerance_in(half);
        say(Progress::Checking(Heading::Logits {
            tolerance,
            measured: check.measured_in(half),
        }));
        if self.reference.is_none() {
            self.reference = Some(runner::reference(&self.request)?);
        }
        let reference = self.reference.as_ref().expect("computed above");
        let binary = subject.binary()?;
        let (report, yours) = ran(runner::run_forced(
            &binary,
            &self.request,
            &reference.tokens,
        ))?;
        // These logits are the learner's only if the model called the learner's piece.
        if let Some(problem) = self.calls_problem(&report) {
            return Ok(Outcome::Refused(Refused::Calls(problem)));
        }
        let prompt = reference.prompt_ids.len();
        Ok(
            match super::logits_compared(&reference.logits, &yours, tolerance, prompt) {
                LogitsVerdict::Within {
                    steps,
                    largest,
                    at_step,
                    near_ties,
                } => {
                    subject.logits = Some((reference.tokens.clone(), near_ties.clone()));
                    Outcome::Passed(Passed::Logits {
                        steps,
                        largest,
                        at_step,
                        near_ties,
                        tolerance,
                    })
                }
                LogitsVerdict::Beyond(gap) => {
                    let apart = if self.diagnose {
                        self.first_layer_apart(&binary, gap.step, tolerance)?
                    } else {
                        LayersApart::Unknown
                    };
                    Outcome::Refused(Refused::LogitsBeyond {
                        gap,
                        tolerance,
                        apart,
                    })
                }
                LogitsVerdict::Missing { steps, expected } => {
                    Outcome::Refused(Refused::LogitsMissing { steps, expected })
                }
            },
        )
    }

    /// Both models again, teacher-forced as before, now reading back every layer's
    /// output: which layer of the refused `step` first differs.
    fn first_layer_apart(&self, binary: &Path, step: usize, tolerance: f32) -> Result<LayersApart> {
        let tokens = &self
            .reference
            .as_ref()
            .expect("the logits' reference")
            .tokens;
        let (run, reference) = runner::reference_run(&self.request, true)?;
        let (_, _, yours) = ran(runner::run_forced_with(binary, &self.request, tokens, true))?;
        let (Some(reference), Some(logits), Some(yours)) =
            (reference.get(step), run.logits.get(step), yours)
        else {
            return Ok(LayersApart::Unknown);
        };
        // The lesson's tolerance is on logits; as a share of their largest value it
        // carries over to hidden states of any scale.
        let largest_logit = logits.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let relative = tolerance / largest_logit.max(f32::MIN_POSITIVE);
        let yours = yours.get(step).map_or(&[][..], Vec::as_slice);
        Ok(LayersApart::Compared {
            step,
            layers: reference.len(),
            verdict: super::layers_compared(reference, yours, relative),
        })
    }

    /// A sampler's draws against the distribution it was asked for ([`judge_draws`]).
    fn draws(&self, subject: &mut Subject, say: &mut dyn FnMut(Progress)) -> Result<Outcome<'l>> {
        let Some(check) = self.lesson.spec.draws else {
            return Ok(Outcome::Passed(Passed::NotAsked));
        };
        let sampling = Sampling::from_env()?;
        say(Progress::Checking(Heading::Draws {
            per_step: check.per_step,
            sampling,
        }));
        let binary = subject.binary()?;
        let verdict = ran(judge_draws(&binary, &self.request, &sampling, check))?;
        Ok(match verdict {
            DrawsVerdict::Within {
                distance,
                honest,
                spread,
            } => Outcome::Passed(Passed::Draws {
                distance,
                honest,
                spread,
            }),
            DrawsVerdict::Beyond {
                distance,
                honest,
                spread,
                worst,
            } => Outcome::Refused(Refused::DrawsBeyond {
                distance,
                honest,
                spread,
                worst,
            }),
            DrawsVerdict::Missing { steps, expected } => {
                Outcome::Refused(Refused::DrawsMissing { steps, expected })
            }
        })
    }

    /// The solution's greedy tokens (where they are compared) and the first run, refused
    /// where the model did not call the learner's piece, where a figure timed inside is
    /// over quest's clock or the two disagree, or where it ran another batch.
    fn behaviour(&self, subject: &mut Subject) -> Result<Outcome<'l>> {
        let spec = &self.lesson.spec;
        if matches!(spec.tokens, TokenCheck::Exact | TokenCheck::First(_)) {
            let solution = build(&solution_path(self.lesson)?)?;
            subject.solution_run = Some(ran(runner::run(&solution, &self.request))?);
        }
        let binary = subject.binary()?;
        let first_run = ran(runner::run(&binary, &self.request))?;
        let refused = self.behaviour_refused(&first_run);
        let held_back = first_run.held_back.clone();
        subject.first_run = Some(first_run);
        Ok(match refused {
            Some(refused) => Outcome::Refused(refused),
            None => Outcome::Passed(Passed::Behaviour { held_back }),
        })
    }

    /// What refuses a first run: the piece not called, a figure timed inside over quest's
    /// clock, the exercise's own timer against the clock, another batch.
    fn behaviour_refused(&self, first_run: &Report) -> Option<Refused<'l>> {
        if let Some(problem) = self.calls_problem(first_run) {
            return Some(Refused::Calls(problem));
        }
        if let Some((build, step)) = inside_over_clock(first_run) {
            return Some(Refused::InsideOverClock { build, step });
        }
        if let Some(disagreement) = &first_run.disagreement {
            return Some(Refused::ClockDisagrees(disagreement.clone()));
        }
        match self.lesson.spec.batch {
            Some(batch) if first_run.batch != batch => Some(Refused::Batch {
                got: first_run.batch,
                batch,
            }),
            _ => None,
        }
    }

    /// Where `report`'s counts do not show the model called the lesson's piece.
    fn calls_problem(&self, report: &Report) -> Option<super::CallsProblem> {
        let piece = self.lesson.spec.piece?;
        super::piece_calls_problem(piece, report.calls.as_ref(), report.layers)
    }

    /// What the run fed the model, call by call, as the model recorded it.
    fn feeds(&self, subject: &Subject, say: &mut dyn FnMut(Progress)) -> Outcome<'l> {
        say(Progress::Checking(Heading::Feeds));
        let first_run = first_run(subject);
        let feeds = &self.lesson.spec.feeds;
        let problems = super::feed_problems(feeds, &first_run.prefill_fed, &first_run.steps_fed);
        refused_if(!problems.is_empty(), Passed::Feeds, || {
            Refused::Feeds(problems)
        })
    }

    /// A sampler's tokens: the same seed, run again, the same tokens.
    fn repeat(&self, subject: &mut Subject, say: &mut dyn FnMut(Progress)) -> Result<Outcome<'l>> {
        say(Progress::Checking(Heading::Repeat));
        let binary = subject.binary()?;
        let again = ran(runner::run(&binary, &self.request))?;
        let first = first_run(subject);
        let n = first.tokens.len().max(again.tokens.len());
        Ok(
            match super::first_difference(&first.tokens, &again.tokens, n) {
                Some(at) => Outcome::Refused(Refused::Repeat {
                    at,
                    first: first.text.trim().to_owned(),
                    again: again.text.trim().to_owned(),
                }),
                None => Outcome::Passed(Passed::Repeat { n }),
            },
        )
    }

    /// The first run's tokens against the solution's (as `tokens:` asks); where the
    /// logits check passed, a run that leaves them only at its near ties is still
    /// quest's computation.
    fn tokens(&self, subject: &Subject, say: &mut dyn FnMut(Progress)) -> Outcome<'l> {
        let first = first_run(subject);
        let compared = subject.solution_run.as_ref().and_then(|solution| {
            let n = super::tokens_compared(
                self.lesson.spec.tokens,
                solution.tokens.len(),
                first.tokens.len(),
            )?;
            Some((n, solution))
        });
        let Some((n, solution)) = compared else {
            return Outcome::Passed(Passed::Tokens(TokensAgreed::NotCompared));
        };
        say(Progress::Checking(Heading::Tokens));
        let Some(at) = super::first_difference(&solution.tokens, &first.tokens, n) else {
            let n = n.min(first.tokens.len());
            return Outcome::Passed(Passed::Tokens(TokensAgreed::Same { n }));
        };
        // Where the logits check saw near ties, a run may leave the solution's tokens at
        // one and still be quest's computation.
        let against_quest = subject.logits.as_ref().map(|(quest_tokens, near_ties)| {
            super::tokens_against_quest(quest_tokens, &first.tokens, near_ties)
        });
        match against_quest {
            Some(AgainstQuest::NearTie(at)) => {
                Outcome::Passed(Passed::Tokens(TokensAgreed::NearTie(at)))
            }
            Some(AgainstQuest::Same) => Outcome::Passed(Passed::Tokens(TokensAgreed::Quests)),
            _ => Outcome::Refused(Refused::Tokens {
                at,
                expected: solution.text.trim().to_owned(),
                got: first.text.trim().to_owned(),
            }),
        }
    }

    /// The values the first run computed, against quest's own computation from the
    /// inputs it reported (run here where no check ran it yet).
    fn values(&self, subject: &mut Subject, say: &mut dyn FnMut(Progress)) -> Result<Outcome<'l>> {
        let Some(spec) = &self.lesson.spec.values else {
            return Ok(Outcome::Passed(Passed::NotAsked));
        };
        if subject.first_run.is_none() {
            let binary = subject.binary()?;
            subject.first_run = Some(ran(runner::run(&binary, &self.request))?);
        }
        let compared = compare_values(spec, first_run(subject))?;
        say(Progress::Checking(Heading::Values));
        if !compared.agree() {
            let run = Box::new(first_run(subject).clone());
            return Ok(Outcome::Refused(Refused::Values { compared, run }));
        }
        subject.quest_values = Some(compared.quest.clone());
        Ok(Outcome::Passed(Passed::Values(compared)))
    }

    /// The measurement ([`measure::measure`]), its rounds kept for the record.
    fn measure(&self, subject: &mut Subject, say: &mut dyn FnMut(Progress)) -> Result<Outcome<'l>> {
        let binary = subject.binary()?;
        let backend = subject
            .first_run
            .as_ref()
            // The first run's backend; a lesson without one is measured where quest runs.
            .map_or_else(crate::device::Backend::detect, |run| run.backend);
        let (lesson, request) = (self.lesson, &self.request);
        let yours = (binary.as_path(), &subject.code);
        let outcome = measure::measure(lesson, request, self.rounds, yours, backend, say)?;
        if let Outcome::Passed(Passed::Measure { rounds, .. }) = &outcome {
            subject.measured = Some((rounds.reports.clone(), rounds.taken.clone()));
        }
        Ok(outcome)
    }
}

/// The first run, which the checks after [`Check::Behaviour`] read.
fn first_run(subject: &Subject) -> &Report {
    subject
        .first_run
        .as_ref()
        .expect("the behaviour check runs before the checks that read its run")
}

/// Refused (`refused()`) when `refuse`, else passed.
fn refused_if<'l>(
    refuse: bool,
    passed: Passed,
    refused: impl FnOnce() -> Refused<'l>,
) -> Outcome<'l> {
    if refuse {
        Outcome::Refused(refused())
    } else {
        Outcome::Passed(passed)
    }
}

/// `report`'s values against quest's own computation from the inputs it reported
/// (`values:`); [`Stopped::NoInputs`] where quest cannot compute from them.
pub fn compare_values(spec: &ValuesSpec, report: &Report) -> Result<ValuesCompared> {
    let quest = arithmetic::compute(spec.computed_by, &report.inputs).map_err(Stopped::NoInputs)?;
    let yours = Values(report.values.clone());
    let checked = arithmetic::compare(&spec.check, &yours, &quest, spec.tolerance);
    Ok(ValuesCompared { checked, quest })
}

/// Where a figure timed inside the exercise (a step's graph building) is more than
/// quest's clock allows (the whole step, timed from outside): the build's and the step's
/// ms; `None` where it fits.
pub fn inside_over_clock(report: &Report) -> Option<(f64, f64)> {
    // 5 %: the clock's arrivals and the process's marks differ by the channel's µs, and
    // medians of different steps by their spread.
    super::inside_figure_over_clock(&report.steps_build_ms, &report.token_ms, 0.05)
}

/// How the piece check's verdict judges the piece (`None`: never handed to the model).
pub fn judge_piece(verdict: Option<&Verdict>) -> PieceJudged {
    let Some(verdict) = verdict else {
        return PieceJudged::NotHanded;
    };
    if verdict.not_written() {
        PieceJudged::NotWritten
    } else if verdict
        .rows
        .iter()
        .any(|row| matches!(row.found, Found::Fused { .. } | Found::Evaluated))
    {
        PieceJudged::Fused
    } else if verdict.rows.iter().all(|row| row.found == Found::QuestRan) {
        PieceJudged::QuestRan
    } else if verdict.passed() {
        PieceJudged::Passed
    } else {
        PieceJudged::Wrong
    }
}

/// A sampler's run with `check.per_step` draws a step, its draws judged against the exact
/// distribution of each step's logits under the sampling quest asks for
/// ([`super::draws_compared`]).
pub fn judge_draws(
    binary: &Path,
    request: &RunRequest,
    sampling: &Sampling,
    check: DrawsCheck,
) -> Result<DrawsVerdict> {
    let drawn = runner::run_drawn(binary, request, sampling, check.per_step)?;
    let expected: Vec<Vec<f64>> = drawn
        .logits
        .iter()
        .map(|row| crate::lm::sample::distribution(row, sampling))
        .collect();
    // quest's honest draws from their own seed, not the learner's key's.
    let honest_seed = sampling.seed ^ 0x5eed;
    Ok(super::draws_compared(
        &expected,
        &drawn.draws,
        check.tolerance,
        honest_seed,
    ))
}
