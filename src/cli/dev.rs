//! `quest dev`: for course authors (like rustlings' `dev check`). `check` proves the
//! course holds together — every lesson loads in every language, translations are
//! current and keep the glossary's terms, every starting exercise fails its own rules
//! and every solution keeps them, and both build;
//! `update` writes what derives from the course (the exercises' Cargo manifest);
//! `kernels` writes quest's CUDA kernels as MLX would compile them, to compile off the GPU.
//! English only: authors read it, learners never do.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use quest::course::figures::{self, Evidence};
use quest::course::glossary;
use quest::course::{first_line_difference, Course, Lang, Lesson, TranslationStatus};
use quest::judge::rules;
use quest::judge::{Check, Judge, Outcome, Passed, Refused, Subject};
use quest::progress::{load_achievements, CodeKind, CodeRef, LevelCurve};

#[derive(Subcommand)]
pub enum DevCommand {
    /// Check every lesson: loads in every language, translations current, starting
    /// code fails its rules, solutions keep them, both build, the exercises' manifest
    /// current. Named lessons: only those lessons' own checks (the course-wide ones
    /// still run: levels, achievements, the course file's glossary, the manifest).
    Check {
        /// The lessons (ids) to check; none: every lesson.
        lessons: Vec<String>,
    },
    /// Only the part of `check` that reads the lessons' figures: every measured figure
    /// found, with its unit, in a result file the lesson names (or listed as derived,
    /// quoted or given in its `figures:`). Fast: builds and runs nothing.
    Figures,
    /// How long each lesson is to read and how much of the answer its hint holds: the
    /// words `quest run` shows by default, the mean and longest sentence, the learner's
    /// lines each hint level holds, against the course's targets (fails past them).
    /// Fast: builds and runs nothing.
    Words {
        /// The lessons (ids); none: every lesson.
        lessons: Vec<String>,
    },
    /// Write `exercises/Cargo.toml` (one binary per exercise) from the course, and the
    /// README's table of settings from src/settings.rs.
    Update,
    /// Build each lesson's exercise binaries (the exercise as it is now, the starting
    /// code, the solution) into a folder, for `QUEST_PREBUILT` on a machine without cargo.
    Prebuild {
        /// The lessons (ids).
        #[arg(required = true)]
        lessons: Vec<String>,
        /// The folder to put them in (named by their sources' hashes).
        #[arg(long)]
        out: std::path::PathBuf,
        /// Build them in the release profile (as a `--release` quest builds them).
        #[arg(long)]
        release: bool,
    },
    /// Judge exercise sources by a lesson's `draws:` check and print how far each one's
    /// draws land from the distribution: how an author measures a sampler lesson's
    /// tolerance (the solution, honest variants, wrong ones).
    Draws {
        /// The lesson (id).
        lesson: String,
        /// The exercise sources to build and judge.
        #[arg(required = true)]
        sources: Vec<std::path::PathBuf>,
    },
    /// Write every CUDA kernel of quest's, as MLX's CUDA backend would compile it, into a
    /// folder (one `.cu` per variant and example shape), for docs/gpu/nvrtc_check.py to
    /// compile with NVRTC on a machine without a GPU; and each as quest compiles it itself
    /// (`.precompiled.cu`), which `--nvrtc` compiles here, through quest's own code.
    Kernels {
        /// The folder to write them to.
        #[arg(long)]
        out: std::path::PathBuf,
        /// NVRTC (`libnvrtc.so.13`, e.g. from the CUDA build's wheels: nvidia/cu13/lib) to
        /// compile the `.precompiled.cu` sources with; the CUDA headers are taken from
        /// `../include` beside it.
        #[arg(long)]
        nvrtc: Option<std::path::PathBuf>,
        /// The architecture to compile for with `--nvrtc`.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
    },
}

pub fn run(root: &Path, command: &DevCommand) -> Result<()> {
    let course = Course::load(&root.join("lessons"))?;
    match command {
        DevCommand::Words { lessons } => words(&course, lessons),
        DevCommand::Prebuild {
            lessons,
            out,
            release,
        } => {
            for id in lessons {
                course.ensure_known_lesson(id, Lang::En)?;
                let lesson = course.lesson(id, Lang::En)?;
                let sources = [
                    super::learner::exercise_path(&lesson)?,
                    super::learner::starting_code_file(&lesson)?.0,
                    super::learner::solution_path(&lesson)?,
                ];
                for source in &sources {
                    let binary = quest::lab::runner::prebuild(
                        &quest::lab::runner::workspace_root(),
                        source,
                        out,
                        *release,
                    )?;
                    println!("{id}: {} → {}", source.display(), binary.display());
                }
            }
            Ok(())
        }
        DevCommand::Draws { lesson, sources } => {
            course.ensure_known_lesson(lesson, Lang::En)?;
            let lesson = course.lesson(lesson, Lang::En)?;
            let Some(check) = lesson.spec.draws else {
                bail!("{}: the lesson has no `draws:` check", lesson.meta.id);
            };
            let request = super::run::request(&lesson, &super::RunArgs::default());
            let sampling = quest::lm::Sampling::from_env()?;
            for source in sources {
                let binary =
                    quest::lab::runner::build(&quest::lab::runner::workspace_root(), source, true)?;
                let verdict = quest::judge::judge_draws(&binary, &request, &sampling, check)?;
                println!("{}: {sampling}: {}", source.display(), draws_line(&verdict));
            }
            Ok(())
        }
        DevCommand::Kernels { out, nvrtc, arch } => {
            std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
            let sources = quest::kernels::sources()?;
            for source in &sources {
                let path = out.join(&source.file);
                std::fs::write(&path, &source.text)
                    .with_context(|| format!("writing {}", path.display()))?;
                let path = path.with_extension("precompiled.cu");
                std::fs::write(&path, &source.precompiled)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            println!(
                "wrote {} kernel sources to {} (each also as quest compiles it: .precompiled.cu)",
                sources.len(),
                out.display()
            );
            if let Some(nvrtc) = nvrtc {
                let compiler = quest::kernels::precompiled::Compiler::beside(
                    nvrtc,
                    arch.clone(),
                    out.join("cache"),
                )?;
                for source in &sources {
                    let cubin = compiler
                        .compile(&source.precompiled)
                        .with_context(|| format!("{} (precompiled)", source.file))?;
                    println!(
                        "{}: compiles for {arch} ({} bytes)",
                        source.file,
                        cubin.len()
                    );
                }
            }
            Ok(())
        }
        DevCommand::Update => {
            let path = root.join(MANIFEST);
            std::fs::write(&path, exercises_manifest(&course)?)
                .with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
            let readme = root.join(quest::settings::TABLE_FILE);
            if readme.is_file() {
                let text = std::fs::read_to_string(&readme)?;
                std::fs::write(&readme, with_settings_table(&text)?)
                    .with_context(|| format!("writing {}", readme.display()))?;
                println!("wrote the settings table of {}", readme.display());
            }
            Ok(())
        }
        DevCommand::Figures => {
            let mut problems = Vec::new();
            for id in course.lesson_ids() {
                let lessons: Vec<Lesson> = Lang::ALL
                    .iter()
                    .filter_map(|lang| course.lesson(id, *lang).ok())
                    .collect();
                problems.extend(untraced_figures(root, &lessons));
            }
            for problem in &problems {
                println!("✗ {problem}");
            }
            if problems.is_empty() {
                println!("✓ every figure of every lesson is traced");
                Ok(())
            } else {
                bail!("{} untraced figures", problems.len())
            }
        }
        DevCommand::Check { lessons } => {
            let known: Vec<&str> = course.lesson_ids().collect();
            if let Some(unknown) = lessons.iter().find(|id| !known.contains(&id.as_str())) {
                bail!(
                    "no lesson `{unknown}` in {}: the lessons are {}",
                    course.dir.display(),
                    known.join(", ")
                );
            }
            let chosen: Vec<&str> = if lessons.is_empty() {
                known
            } else {
                lessons.iter().map(String::as_str).collect()
            };
            let (problems, notes) = check(root, &course, &chosen);
            for note in &notes {
                println!("note: {note}");
            }
            for problem in &problems {
                println!("✗ {problem}");
            }
            if problems.is_empty() {
                println!(
                    "✓ {} lessons, {} languages: the course holds together",
                    chosen.len(),
                    Lang::ALL.len()
                );
                Ok(())
            } else {
                bail!("{} problems in the course", problems.len())
            }
        }
    }
}

/// Where the exercises' package manifest lives, from the project root.
const MANIFEST: &str = "exercises/Cargo.toml";

/// The README with its settings table (between the `settings` markers) written from
/// [`quest::settings::ALL`].
fn with_settings_table(readme: &str) -> Result<String> {
    const START: &str = "<!-- settings: written by `quest dev update` from src/settings.rs -->\n";
    const END: &str = "<!-- /settings -->";
    let (Some(a), Some(b)) = (readme.find(START), readme.find(END)) else {
        anyhow::bail!(
            "{} has no settings markers ({START:?} … {END:?})",
            quest::settings::TABLE_FILE
        );
    };
    Ok(format!(
        "{}{START}{}{}",
        &readme[..a],
        quest::settings::readme_table(),
        &readme[b..]
    ))
}

/// `exercises/Cargo.toml` as the course makes it.
/// `quest dev words`: a line a lesson, then every target missed; an error if any is.
fn words(course: &Course, only: &[String]) -> Result<()> {
    use quest::course::readability::{self, TARGETS};
    let ids: Vec<String> = if only.is_empty() {
        course.lesson_ids().map(str::to_owned).collect()
    } else {
        only.to_vec()
    };
    println!(
        "{:<18} {:>6} {:>6} {:>8} {:>12} {:>8}",
        "lesson", "words", "mean", "longest", "hint lines", "learner"
    );
    let mut missed = Vec::new();
    for id in &ids {
        course.ensure_known_lesson(id, Lang::En)?;
        let lesson = course.lesson(id, Lang::En)?;
        let code = readability::lesson_code(&lesson)?;
        let found = readability::measure(
            &lesson,
            code.as_ref().map(|(s, e)| (s.as_str(), e.as_str())),
            &TARGETS,
        );
        println!(
            "{:<18} {:>6} {:>6.1} {:>8} {:>12} {:>8}",
            id,
            found.words,
            found.mean_sentence,
            found.longest_words(),
            found.most_lines_in_a_level(),
            found
                .learner_lines
                .map_or("-".to_owned(), |n| n.to_string())
        );
        missed.extend(found.problems.iter().map(|p| format!("{id}: {p}")));
    }
    if missed.is_empty() {
        println!("every lesson within the targets");
        return Ok(());
    }
    for problem in &missed {
        println!("{problem}");
    }
    bail!("{} targets missed", missed.len())
}

pub fn exercises_manifest(course: &Course) -> Result<String> {
    let mut text = String::from(
        "# Written by `quest dev update` from lessons/*/lesson.yaml; `quest dev check` keeps it current.\n\
         # One binary per exercise, so that your editor knows the files and\n\
         # `cargo run -p quest-exercises --bin <lesson>` runs one by hand. quest itself builds\n\
         # exercises through the `quest-lab` package. `cargo test` never builds these\n\
         # (test = false): the tests pass whatever you did to your exercise.\n\
         [package]\n\
         name = \"quest-exercises\"\n\
         version = \"0.1.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\
         build = \"../build.rs\"\n\
         autobins = false\n\n\
         # What a learner needs (the lab, the model, mlx-rs, JSON for a server), nothing that\n\
         # judges: no mlx-sys (MLX's C API; the build script finds MLX through quest), and no\n\
         # `unsafe`.\n\
         [dependencies]\n\
         quest = { path = \"..\" }\n\
         anyhow.workspace = true\n\
         serde_json = \"1\"\n\n\
         [target.'cfg(target_os = \"macos\")'.dependencies]\n\
         mlx-rs = \"0.33.0\"\n\n\
         [target.'cfg(not(target_os = \"macos\"))'.dependencies]\n\
         mlx-rs = { version = \"0.33.0\", default-features = false }\n\n\
         [lints.rust]\n\
         unsafe_code = \"forbid\"\n",
    );
    for id in course.lesson_ids() {
        let lesson = course.lesson(id, Lang::SOURCE)?;
        let Some(exercise) = &lesson.spec.exercise else {
            continue;
        };
        let path = exercise.strip_prefix("exercises").with_context(|| {
            format!(
                "{id}: the exercise {} is not under exercises/",
                exercise.display()
            )
        })?;
        write!(
            text,
            "\n[[bin]]\nname = \"{id}\"\npath = \"{}\"\ntest = false\nbench = false\n",
            path.display()
        )?;
    }
    Ok(text)
}

/// Problems (the course is broken) and notes (worth knowing, not wrong).
fn check(root: &Path, course: &Course, chosen: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    if let Err(e) = LevelCurve::from_course(&course.levels) {
        problems.push(format!("levels: {e:#}"));
    }
    if let Err(e) = load_achievements(&course.achievements, &course.tracks) {
        problems.push(format!("achievements: {e:#}"));
    }
    for &id in chosen {
        let mut lessons = Vec::new();
        for lang in Lang::ALL {
            match course.lesson(id, lang) {
                Ok(lesson) => lessons.push(lesson),
                Err(e) => problems.push(format!("{id} ({lang}): {e:#}")),
            }
        }
        problems.extend(untraced_figures(root, &lessons));
        for lesson in &lessons {
            if let Err(e) = lesson.check_exercise_blocks() {
                problems.push(format!("{e:#}"));
            }
            if let Ok(TranslationStatus::Stale { .. }) = lesson.translation_status() {
                problems.push(format!(
                    "{}: stale: the English lesson changed since this translation \
                     (update it, then set source_hash to `sha256sum lessons/{id}/en.md`)",
                    lesson.path.display()
                ));
            }
        }
        if let [source, translations @ ..] = lessons.as_slice() {
            for translation in translations {
                if let Some(problem) = same_code(source, translation) {
                    problems.push(problem);
                }
                let found = glossary::lesson(&course.glossary, translation, Some(source));
                problems.extend(found.iter().map(ToString::to_string));
            }
            check_code(root, source, &mut problems, &mut notes);
        }
    }
    let course_file = course.dir.join(quest::course::COURSE_FILE);
    match std::fs::read_to_string(&course_file) {
        Ok(text) => problems.extend(
            glossary::course_file(&course.glossary, &course_file, &text)
                .iter()
                .map(ToString::to_string),
        ),
        Err(e) => problems.push(format!("{}: {e}", course_file.display())),
    }
    match exercises_manifest(course) {
        Ok(expected) => {
            let path = root.join(MANIFEST);
            if std::fs::read_to_string(&path).ok().as_deref() != Some(expected.as_str()) {
                problems.push(format!(
                    "{} is not what the course makes: run `quest dev update`",
                    path.display()
                ));
            }
        }
        Err(e) => problems.push(format!("{e:#}")),
    }
    (problems, notes)
}

/// The lesson's figures, in every language, that no result file it names holds
/// (`course::figures`): its `sources:` and the `docs/` paths either language names.
fn untraced_figures(root: &Path, lessons: &[Lesson]) -> Vec<String> {
    let Some(spec) = lessons.first().map(|l| &l.spec) else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    // The lesson's own result folder, where its measured claims are kept with their commands.
    let mut paths: Vec<std::path::PathBuf> = spec.sources.clone();
    let results = Path::new("docs/lessons").join(&lessons[0].meta.id);
    if root.join(&results).is_dir() {
        paths.push(results);
    }
    for lesson in lessons {
        for path in docs_paths(&lesson.source) {
            if !paths.iter().any(|p| p.as_os_str() == path.as_str()) {
                paths.push(path.into());
            }
        }
    }
    let mut texts = Vec::new();
    for path in &paths {
        let full = root.join(path);
        if !full.exists() {
            problems.push(format!(
                "{}: names the result file {}, which does not exist",
                lessons[0].path.display(),
                path.display()
            ));
        }
        texts.extend(result_texts(&full));
    }
    let evidence = Evidence::from_texts(texts.iter().map(String::as_str));
    let derived = spec
        .figures
        .derived
        .iter()
        .map(|(figure, formulas)| (figure.clone(), formulas.to_vec()))
        .collect();
    let accepted = [&spec.figures.quoted[..], &spec.figures.given[..]].concat();
    for lesson in lessons {
        let figures = figures::figures_in(&lesson.source);
        for (figure, why) in figures::untraced(&figures, &evidence, &derived, &accepted) {
            problems.push(format!(
                "{}:{}: `{}` is {why}: name the result file it comes from (`sources:` in \
                 lesson.yaml, or its docs/ path in the text), or list it under `figures:` \
                 (`derived:` with its arithmetic, `quoted:` from the source page, `given:` \
                 set by the lesson itself)",
                lesson.path.display(),
                figure.line,
                figure.text
            ));
        }
    }
    problems
}

/// The `docs/…` paths a lesson's text names.
fn docs_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("docs/") {
        let starts_word =
            at == 0 || !rest[..at].ends_with(|c: char| c.is_alphanumeric() || c == '/');
        let path: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'))
            .collect();
        let path = path.trim_end_matches('.').to_owned();
        if starts_word && !paths.contains(&path) {
            paths.push(path.clone());
        }
        rest = &rest[at + path.len().max(5)..];
    }
    paths
}

/// The text of a result file, or of every text file under a folder.
fn result_texts(path: &Path) -> Vec<String> {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map(|dir| dir.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        return entries.iter().flat_map(|p| result_texts(p)).collect();
    }
    match std::fs::read(path) {
        // Text only: SVG plots and binaries hold no figures a lesson quotes.
        Ok(bytes) if !bytes.contains(&0) && path.extension().is_none_or(|e| e != "svg") => {
            vec![String::from_utf8_lossy(&bytes).into_owned()]
        }
        _ => Vec::new(),
    }
}

/// A translation shows the same code as the English lesson.
fn same_code(source: &Lesson, translation: &Lesson) -> Option<String> {
    let (Ok(english), Ok(translated)) = (source.starting_code(), translation.starting_code())
    else {
        return None;
    };
    let difference = first_line_difference(&translated, &english)?;
    Some(format!(
        "{}: the exercise code differs from the English lesson's at its line {}:\n  here:    {}\n  english: {}",
        translation.path.display(),
        difference.index + 1,
        difference.left,
        difference.right
    ))
}

/// The starting code breaks the lesson's rules, the solution keeps them, and both
/// can be `include!`d by the lab binary and build as it.
fn check_code(root: &Path, lesson: &Lesson, problems: &mut Vec<String>, notes: &mut Vec<String>) {
    let id = &lesson.meta.id;
    if lesson.spec.exercise.is_none() {
        return;
    }
    let Ok(starting) = lesson.starting_code() else {
        return;
    };
    let starting_breaks_rules = !rules::check(&starting, &lesson.spec.rules).is_empty();
    let solution = lesson
        .solution_path()
        .map(|path| (std::fs::read_to_string(&path), path));
    let readable = match &solution {
        Some((Ok(text), path)) => Some((path.as_path(), text.as_str())),
        _ => None,
    };
    problems.extend(quest::judge::lesson_code(lesson, &starting, readable));
    if let Some((Err(e), path)) = &solution {
        problems.push(format!("{}: {e}", path.display()));
    }
    // Rules read the syntax tree; only the compiler says the code builds (a renamed
    // function of quest's breaks a solution that keeps every rule).
    let built = [
        super::learner::starting_code_file(lesson)
            .map(|(path, _)| ("starting code".to_owned(), path)),
        super::learner::solution_path(lesson).map(|path| (path.display().to_string(), path)),
    ];
    // A lesson without a solution was said above.
    for (what, path) in built.into_iter().flatten() {
        if let Err(e) =
            quest::lab::runner::build(&quest::lab::runner::workspace_root(), &path, true)
        {
            let why = match e.downcast_ref::<quest::lab::runner::BuildFailed>() {
                Some(_) => "cargo's errors are above".to_owned(),
                None => format!("{e:#}"),
            };
            problems.push(format!("{id}: the {what} does not build ({why})"));
        }
    }
    let backend = quest::device::Backend::detect();
    if !lesson.spec.runs_on_backend(backend) {
        // Here the exercise stops after what it can check (a CUDA kernel compiles): the
        // starting code must break a rule, and the solution must stop saying it compiled.
        runs_elsewhere_check(lesson, starting_breaks_rules, problems);
        return notes_on_exercise(root, lesson, &starting, notes);
    }
    results_check(lesson, backend, starting_breaks_rules, problems, notes);
    notes_on_exercise(root, lesson, &starting, notes);
}

/// Whether the learner's exercise file is the lesson's starting code, said as a note.
fn notes_on_exercise(root: &Path, lesson: &Lesson, starting: &str, notes: &mut Vec<String>) {
    let id = &lesson.meta.id;
    let Some(exercise) = &lesson.spec.exercise else {
        return;
    };
    let path = root.join(exercise);
    match std::fs::read_to_string(&path) {
        Ok(now) if now != starting => notes.push(format!(
            "{} is not the lesson's starting code (a learner's edit? `quest reset {id}` puts it back)",
            path.display()
        )),
        Ok(_) => {}
        Err(_) => notes.push(format!(
            "{} does not exist yet (`quest reset {id}` writes it)",
            path.display()
        )),
    }
}

/// A lesson whose exercise does not run on this backend (`runs_on`), proven as far as it
/// goes here: its starting code breaks a rule (nothing else refuses it here), and the
/// solution's run stops saying its kernel compiled (`YourKernel::compile_or_stop`).
fn runs_elsewhere_check(lesson: &Lesson, starting_breaks_rules: bool, problems: &mut Vec<String>) {
    let id = &lesson.meta.id;
    if !starting_breaks_rules {
        problems.push(format!(
            "{id}: the exercise does not run here, and its starting code keeps every rule: nothing refuses it here"
        ));
    }
    // A lesson without a solution is said by check_code.
    let Ok(solution) = super::learner::solution_path(lesson) else {
        return;
    };
    let request = super::run::request(lesson, &super::RunArgs::default());
    let ran = quest::lab::runner::build(&quest::lab::runner::workspace_root(), &solution, true)
        .and_then(|binary| quest::lab::runner::run(&binary, &request));
    match ran {
        Err(e) if quest::kernels::YourKernel::stopped_compiled(&format!("{e:#}")) => {}
        Err(e) => problems.push(format!(
            "{id}: the solution did not compile its kernel here: {e:#}"
        )),
        Ok(_) => problems.push(format!(
            "{id}: the solution ran here, where the lesson says it does not run (`runs_on`)"
        )),
    }
}

/// The checks of `quest submit` that judge what the code computes (`piece:`, `logits:`,
/// `draws:`, `values:`: [`Check::judges_results`]), run by the same runner on the
/// starting code, which each must refuse (a starting code that stops, `todo!()`, is
/// refused by stopping), and on the solution, which each must pass. Where the starting
/// code breaks its rules, they refuse it already: its logits and draws may keep quest's
/// (a lesson about the host's work computes the right numbers slowly), and a values
/// lesson's values are not run. The solution's largest differences in the piece check
/// go in a note (what the tolerance is measured against).
fn results_check(
    lesson: &Lesson,
    backend: quest::device::Backend,
    starting_breaks_rules: bool,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let id = &lesson.meta.id;
    let proving: Vec<Check> = quest::judge::checks(&lesson.spec)
        .into_iter()
        .filter(|check| check.judges_results())
        .filter(|check| !(*check == Check::Values && starting_breaks_rules))
        .collect();
    if proving.is_empty() {
        return;
    }
    // The lesson's own settings, as `quest run` takes them with no options.
    let request = super::run::request(lesson, &super::RunArgs::default());
    let mut judge = Judge::new(lesson, request, backend);
    for (what, path, passes) in starting_and_solution(lesson) {
        let read = Subject::read(path, |text| CodeRef::of(CodeKind::Exercise, text));
        let mut subject = match read {
            Ok(subject) => subject,
            Err(e) => return problems.push(format!("{id}: the {what}: {e:#}")),
        };
        for &check in &proving {
            let refused = match judge.run(check, &mut subject, &mut |_| {}) {
                Ok(Outcome::Passed(passed)) => {
                    if let (true, Passed::Piece(verdict)) = (passes, &passed) {
                        notes.push(piece_differences(lesson, verdict));
                    }
                    None
                }
                Ok(Outcome::Refused(refused)) => Some(refusal_text(&refused)),
                Err(_) if !passes => Some("it stopped".to_owned()),
                Err(e) => return problems.push(format!("{id}: the {what} did not run: {e:#}")),
            };
            let proven_by_rules = starting_breaks_rules && check != Check::Piece;
            match refused {
                Some(why) if passes => problems.push(format!(
                    "{id}: the {what} is refused by the {} check ({why})",
                    check.name()
                )),
                None if !passes && !proven_by_rules => problems.push(format!(
                    "{id}: the {what} already passes the {} check",
                    check.name()
                )),
                _ => {}
            }
        }
    }
}

/// The solution's largest differences in the piece check, per dtype, as a note.
fn piece_differences(lesson: &Lesson, verdict: &quest::lm::piece_check::Verdict) -> String {
    use quest::lm::piece_check::Found;
    let largest = |dtype: &str| {
        verdict
            .rows
            .iter()
            .filter(|row| row.shape.ends_with(dtype))
            .filter_map(|row| match row.found {
                Found::Right { difference } => Some(difference),
                _ => None,
            })
            .fold(0.0f32, f32::max)
    };
    let piece = lesson.spec.piece.map_or("piece", |piece| piece.method());
    // A speculator is right in tokens, not within a difference of a dtype.
    if lesson.spec.piece == Some(quest::course::spec::Piece::Speculate) {
        return format!(
            "{}: the solution's {piece}: {} of {} proposals right",
            lesson.meta.id,
            verdict.right(),
            verdict.rows.len()
        );
    }
    format!(
        "{}: the solution's {piece}: largest difference {:.1e} in float32, {:.1e} in float16 (relative to the largest value)",
        lesson.meta.id,
        largest("float32"),
        largest("float16")
    )
}

/// Why a check refused the code, in one line for the author.
fn refusal_text(refused: &Refused) -> String {
    match refused {
        Refused::Piece { verdict: None, .. } => "never handed to the model".to_owned(),
        Refused::Piece {
            verdict: Some(verdict),
            ..
        } => match verdict.first_wrong() {
            Some(row) => format!(
                "{} of {} shapes right; first wrong: {} ({:?})",
                verdict.right(),
                verdict.rows.len(),
                row.shape,
                row.found
            ),
            None => format!("all {} shapes right", verdict.rows.len()),
        },
        Refused::Calls(problem) => format!("its run does not show its piece ran: {problem:?}"),
        Refused::LogitsBeyond { gap, tolerance, .. } => {
            format!("logits beyond {tolerance:e}: {gap:?}")
        }
        Refused::LogitsMissing { steps, expected } => {
            format!("logits for {steps} steps of {expected}")
        }
        Refused::DrawsBeyond {
            distance,
            honest,
            spread,
            worst,
        } => draws_line(&quest::judge::DrawsVerdict::Beyond {
            distance: *distance,
            honest: *honest,
            spread: *spread,
            worst: worst.clone(),
        }),
        Refused::DrawsMissing { steps, expected } => {
            format!("draws for {steps} steps of {expected}")
        }
        Refused::Values { .. } => "its values are not quest's".to_owned(),
        _ => "refused".to_owned(),
    }
}

/// A draws verdict in one line: the mean distance, honest draws' and the excess; where
/// refused, the furthest step.
fn draws_line(verdict: &quest::judge::DrawsVerdict) -> String {
    use quest::judge::DrawsVerdict;
    let numbers = |distance: f64, honest: f64, spread: f64| {
        format!(
            "distance {distance:.4}, honest {honest:.4} ± {spread:.4}, excess {:+.4}",
            distance - honest
        )
    };
    match verdict {
        DrawsVerdict::Within {
            distance,
            honest,
            spread,
        } => format!("within: {}", numbers(*distance, *honest, *spread)),
        DrawsVerdict::Beyond {
            distance,
            honest,
            spread,
            worst,
        } => format!(
            "beyond: {}; furthest at step {}: {:.4} (honest {:.4}), token {} drawn {:.1} % \
             for {:.1} %, {:.1} % outside the filters",
            numbers(*distance, *honest, *spread),
            worst.step,
            worst.distance,
            worst.honest,
            worst.token,
            100.0 * worst.share,
            100.0 * worst.probability,
            100.0 * worst.outside
        ),
        DrawsVerdict::Missing { steps, expected } => {
            format!("missing: draws for {steps} steps of {expected}")
        }
    }
}

/// A lesson's starting code (which its checks must refuse: `false`) and its solution
/// (which they must pass: `true`), each as a file to build; a missing one is left out
/// (said elsewhere).
fn starting_and_solution(lesson: &Lesson) -> Vec<(&'static str, std::path::PathBuf, bool)> {
    let sources = [
        super::learner::starting_code_file(lesson).map(|(path, _)| ("starting code", path, false)),
        super::learner::solution_path(lesson).map(|path| ("solution", path, true)),
    ];
    sources.into_iter().flatten().collect()
}
