//! The pages of `quest serve`, as pure functions of the course, the learner's progress
//! (or why it cannot be read) and a language: testable without a server. Every string
//! from a lesson or the progress file is escaped; a lesson's raw HTML is shown as text.

use std::fmt::Write;

use pulldown_cmark::{html, CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};

use super::markup::escape;
use super::svg::{self, Labels, Series};
use super::Site;
use crate::course::{
    fill_placeholders, markdown_options, parse_info, Course, Lang, Lesson, Metric,
    TranslationStatus, EXERCISE_ATTR,
};
use crate::progress::{Card, CodeKind, Header, LessonRecord, LessonStatus, State};

/// The learner's progress as a page sees it: the file's state, or what `quest status`
/// says of a file it cannot use.
pub type Progress = Result<State, String>;

/// A UI string, escaped, with its `{name}` placeholders filled with HTML.
fn ui_html(course: &Course, key: &str, lang: Lang, args: &[(&str, &str)]) -> String {
    fill_placeholders(&escape(course.ui(key, lang)), args)
}

fn ui(course: &Course, key: &str, lang: Lang) -> String {
    escape(course.ui(key, lang))
}

/// An address inside the site in the page's language.
fn href(path: &str, lang: Lang) -> String {
    format!("{path}?lang={}", lang.code())
}

/// The frame every page shares: navigation, the language switch, the stylesheet and
/// quest's one script (no inline script: the CSP forbids it).
fn page(site: &Site, lang: Lang, path: &str, title: &str, body: &str) -> String {
    let course = &site.course;
    let switch: String = Lang::ALL
        .iter()
        .map(|&other| {
            let name = match other {
                Lang::En => "English",
                Lang::Ko => "한국어",
            };
            let current = if other == lang {
                r#" aria-current="true""#
            } else {
                ""
            };
            format!(
                r#"<a href="{}" hreflang="{}" lang="{}"{current}>{name}</a>"#,
                escape(&href(path, other)),
                other.code(),
                other.code()
            )
        })
        .collect::<Vec<_>>()
        .join(" · ");
    format!(
        r#"<!doctype html>
<html lang="{code}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · quest</title>
<link rel="stylesheet" href="/assets/quest.css">
<script src="/assets/quest.js" defer></script>
</head>
<body data-events="/events">
<nav class="top"><a class="brand" href="{home}">quest</a> <a href="{home}">{course_word}</a> <a href="{achievements}">{achievements_word}</a> <span class="langs">{switch}</span></nav>
{body}
</body>
</html>
"#,
        code = lang.code(),
        title = escape(title),
        home = escape(&href("/", lang)),
        achievements = escape(&href("/achievements", lang)),
        course_word = ui(course, "web_course", lang),
        achievements_word = ui(course, "achievements", lang),
    )
}

/// A number the header shows, marked so that tests and the page's script can find it.
fn n(field: &str, value: impl std::fmt::Display) -> String {
    format!(
        r#"<span data-n="{field}">{}</span>"#,
        escape(&value.to_string())
    )
}

/// The source page's header: level and name, XP, lessons, achievements, the bar, XP to
/// go, percent complete; or the message about a progress file quest cannot use.
pub fn header(site: &Site, progress: &Progress, lang: Lang) -> String {
    let course = &site.course;
    let state = match progress {
        Ok(state) => state,
        Err(message) => {
            return format!(
                r#"<section id="header" class="header problem" data-live><h2>{}</h2><pre>{}</pre></section>"#,
                ui(course, "web_progress_unusable", lang),
                escape(message)
            )
        }
    };
    let h = Header::new(
        course,
        &site.levels,
        &site.achievements,
        state,
        lang,
        site.here,
    );
    let xp = ui_html(course, "xp", lang, &[("n", &n("xp", h.xp))]);
    let lessons = ui_html(
        course,
        "web_lessons_done",
        lang,
        &[
            ("done", &n("lessons_done", h.lessons_done)),
            ("total", &n("lessons_total", h.lessons_total)),
        ],
    );
    let achievements = ui_html(
        course,
        "web_achievements_earned",
        lang,
        &[
            ("earned", &n("achievements_earned", h.achievements_earned)),
            ("total", &n("achievements_total", h.achievements_total)),
        ],
    );
    let next = match (h.xp_for_next_level, h.xp_to_go) {
        (Some(span), Some(to_go)) => format!(
            "{} · {}",
            ui_html(
                course,
                "web_xp_to_next_level",
                lang,
                &[
                    ("into", &n("xp_into_level", h.xp_into_level)),
                    ("span", &n("xp_for_next_level", span)),
                ],
            ),
            ui_html(
                course,
                "web_xp_to_go",
                lang,
                &[("n", &n("xp_to_go", to_go))]
            )
        ),
        _ => ui(course, "max_level", lang),
    };
    let percent = ui_html(
        course,
        "percent_complete",
        lang,
        &[("n", &n("percent_complete", h.percent_complete))],
    );
    let elsewhere = if h.lessons_elsewhere.is_empty() {
        String::new()
    } else {
        let lessons = n("lessons_elsewhere", h.lessons_elsewhere.join(", "));
        format!(
            "\n<p class=\"facts elsewhere\">{}</p>",
            ui_html(course, "lessons_elsewhere", lang, &[("lessons", &lessons)])
        )
    };
    // The bar is drawn, not styled: the CSP allows no inline style.
    let filled = (h.bar_fraction.clamp(0.0, 1.0) * 100.0).round();
    format!(
        r##"<section id="header" class="header" data-live>
<p class="level">{level} {number} · {name}</p>
<p class="facts">{xp} · {lessons} · {achievements}</p>
<svg class="bar" viewBox="0 0 100 4" preserveAspectRatio="none" role="img"><title>{filled} %</title><rect width="100" height="4" fill="#e3e6eb"/><rect width="{filled}" height="4" fill="{color}"/></svg>
<p class="facts">{next} · {percent}</p>{elsewhere}
</section>"##,
        level = ui(course, "level", lang),
        number = n("level", h.level),
        name = n("level_name", &h.level_name),
        color = svg::AFTER,
    )
}

/// `/`: the header, then each track with its lessons.
pub fn course_page(site: &Site, progress: &Progress, lang: Lang) -> String {
    let mut body = header(site, progress, lang);
    body.push_str("\n<main>\n");
    body.push_str(&tracks(site, progress, lang));
    body.push_str("</main>");
    page(site, lang, "/", "quest", &body)
}

fn tracks(site: &Site, progress: &Progress, lang: Lang) -> String {
    let course = &site.course;
    let mut out = String::from(r#"<div id="tracks" data-live>"#);
    for track in &course.tracks {
        let _ = write!(
            out,
            r#"<section class="track"><h2>{}</h2><ol class="lessons">"#,
            escape(track.title.get(lang))
        );
        for id in &track.lessons {
            let lesson = match course.lesson(id, lang) {
                Ok(lesson) => lesson,
                Err(error) => {
                    let _ = write!(
                        out,
                        r#"<li class="lesson broken"><code>{}</code> {}</li>"#,
                        escape(id),
                        escape(&course.ui_with(
                            "lesson_broken",
                            lang,
                            &[("error", &format!("{error:#}"))]
                        ))
                    );
                    continue;
                }
            };
            let status = progress
                .as_ref()
                .ok()
                .map(|state| LessonStatus::of(state.lesson(id)));
            let status_html = status.map_or(String::new(), |status| {
                format!(
                    r#" <span class="status {}">{}</span>"#,
                    status.key(),
                    ui(course, status.key(), lang)
                )
            });
            let shows = course
                .where_it_shows(&lesson, lang)
                .map_or(String::new(), |text| {
                    format!(r#"<p class="shows">{}</p>"#, escape(&text))
                });
            let _ = write!(
                out,
                r#"<li class="lesson" data-lesson="{id}"><a href="{}">{}</a>{status_html}<p class="meta">{}</p>{shows}</li>"#,
                escape(&href(&format!("/lessons/{id}"), lang)),
                escape(&lesson.meta.title),
                escape(&byline(course, &lesson, lang)),
                id = escape(id),
            );
        }
        out.push_str("</ol></section>");
    }
    out.push_str("</div>\n");
    out
}

/// `~15 min · 100 XP · journey, mlx, …`, as the source page has it.
fn byline(course: &Course, lesson: &Lesson, lang: Lang) -> String {
    let minutes = course.ui_with("minutes", lang, &[("n", &lesson.spec.minutes.to_string())]);
    let xp = course.ui_with("xp", lang, &[("n", &lesson.spec.xp.to_string())]);
    format!("~{minutes} · {xp} · {}", lesson.spec.tags.join(", "))
}

/// A hint of several levels: its heading, then each level folded on its own under its
/// label ("Hint 2 of 3: The ops"), so that opening the hint shows no level before it is
/// asked for. `None` for a hint of one level, shown as its section reads.
fn hint_html(course: &Course, lesson: &Lesson, lang: Lang) -> Option<String> {
    let hints = lesson.hints()?;
    if hints.levels.len() < 2 {
        return None;
    }
    let mut html = markdown_html(hints.head, lesson);
    for (n, level) in (1..).zip(&hints.levels) {
        let label = crate::render::hint_label(course, lang, n, hints.levels.len(), &level.title);
        let _ = write!(
            html,
            r#"<details class="hint-level"><summary>{}</summary>{}</details>"#,
            escape(&label),
            markdown_html(level.markdown, lesson)
        );
    }
    Some(html)
}

/// `/lessons/<id>`: the lesson as its Markdown gives it, the exercise's file and
/// commands, the hint folded, then the learner's own numbers. `id` must be a lesson of
/// the course (the caller checks); a lesson that does not load is an `Err` with why.
pub fn lesson_page(
    site: &Site,
    progress: &Progress,
    id: &str,
    lang: Lang,
) -> Result<String, String> {
    let course = &site.course;
    let lesson = course
        .lesson(id, lang)
        .map_err(|error| format!("{error:#}"))?;
    let mut body = header(site, progress, lang);
    body.push_str("\n<main class=\"lesson\">\n");
    let _ = write!(
        body,
        r#"<h1>{}</h1><p class="byline">{}</p>"#,
        escape(&lesson.meta.title),
        escape(&byline(course, &lesson, lang))
    );
    if let Some(text) = course.where_it_shows(&lesson, lang) {
        let _ = write!(body, r#"<p class="shows">{}</p>"#, escape(&text));
    }
    if matches!(
        lesson.translation_status(),
        Ok(TranslationStatus::Stale { .. })
    ) {
        let _ = write!(
            body,
            r#"<p class="stale" role="note">{}</p>"#,
            ui(course, "translation_stale", lang)
        );
    }
    if let Some(quote) = &lesson.meta.quote {
        let _ = write!(
            body,
            r#"<blockquote class="epigraph"><p>{}</p><footer>— {}</footer></blockquote>"#,
            escape(quote.text.trim()),
            escape(quote.who.trim())
        );
    }
    for section in &lesson.sections {
        let html = markdown_html(lesson.section_markdown(section), &lesson);
        if section.id == "hint" {
            let _ = write!(
                body,
                r#"<details class="hint" id="hint-box"><summary>{}</summary>{}</details>"#,
                ui(course, "web_show_hint", lang),
                hint_html(course, &lesson, lang).unwrap_or(html)
            );
        } else if section.id == crate::course::APPENDIX {
            let _ = write!(
                body,
                r#"<details class="appendix" id="appendix-box"><summary>{}</summary>{html}</details>"#,
                ui(course, "web_show_appendix", lang),
            );
        } else {
            let _ = write!(
                body,
                r#"<section class="part" data-section="{}">{html}</section>"#,
                escape(&section.id)
            );
        }
        if section.id == "exercise" {
            body.push_str(&exercise_box(course, &lesson, lang));
        }
    }
    let record = progress.as_ref().ok().and_then(|state| state.lesson(id));
    body.push_str(&numbers(course, &lesson, record, progress.is_ok(), lang));
    body.push_str("</main>");
    Ok(page(
        site,
        lang,
        &format!("/lessons/{id}"),
        &lesson.meta.title,
        &body,
    ))
}

/// The exercise's file and the exact commands that run, submit and card it.
fn exercise_box(course: &Course, lesson: &Lesson, lang: Lang) -> String {
    let id = &lesson.meta.id;
    let mut commands = Vec::new();
    if lesson.spec.exercise.is_some() {
        commands.push(format!("quest run {id}"));
        commands.push(format!("quest submit {id}"));
    }
    let mut card = format!("quest card {id}");
    if lesson.spec.exercise.is_some() && lesson.spec.measure.is_some() {
        if let Some(spec) = &lesson.spec.card {
            // As the lesson's own card command writes it: `--before X --after Y`.
            for (number, placeholder) in spec.numbers.iter().zip(["X", "Y", "Z"]) {
                let _ = write!(card, " --{} {placeholder}", number.key());
            }
        }
    }
    for question in &lesson.spec.quiz {
        let _ = write!(
            card,
            " --answer {}={}",
            question.id,
            question.choices.join("|")
        );
    }
    commands.push(card);
    commands.push(format!("quest hint {id}"));
    let file = lesson.spec.exercise.as_ref().map_or(String::new(), |path| {
        format!(
            r#"<p>{}</p>"#,
            ui_html(
                course,
                "web_exercise_file",
                lang,
                &[(
                    "path",
                    &format!("<code>{}</code>", escape(&path.display().to_string()))
                )]
            )
        )
    });
    format!(
        r#"<aside class="exercise-box"><h3>{}</h3>{file}<p>{}</p><pre class="commands"><code>{}</code></pre></aside>"#,
        ui(course, "exercise", lang),
        ui(course, "web_commands", lang),
        escape(&commands.join("\n"))
    )
}

/// Lesson Markdown as HTML: pulldown-cmark's writer, with tables; code blocks highlighted
/// and captioned with their file and language; raw HTML shown as text; comments (notes
/// to translators) dropped; links only to the web, the page or the site.
pub fn markdown_html(markdown: &str, lesson: &Lesson) -> String {
    let options = markdown_options() | Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut events: Vec<Event> = Vec::new();
    let mut code: Option<(String, String)> = None;
    let mut in_comment = false;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some((info, String::new()));
            }
            Event::Text(text) if code.is_some() => {
                if let Some((_, body)) = code.as_mut() {
                    body.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((info, body)) = code.take() {
                    events.push(Event::Html(code_block(&info, &body, lesson).into()));
                }
            }
            Event::Html(text) | Event::InlineHtml(text) => {
                if in_comment || text.trim_start().starts_with("<!--") {
                    in_comment = !text.contains("-->");
                    continue;
                }
                events.push(Event::Text(text));
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => events.push(Event::Start(Tag::Link {
                link_type,
                dest_url: safe_url(dest_url),
                title,
                id,
            })),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => events.push(Event::Start(Tag::Image {
                link_type,
                dest_url: safe_url(dest_url),
                title,
                id,
            })),
            other => events.push(other),
        }
    }
    let mut out = String::new();
    html::push_html(&mut out, events.into_iter());
    out
}

/// A link target a lesson may use: the web, a place on the page, or the site itself.
fn safe_url(url: CowStr) -> CowStr {
    let lower = url.to_ascii_lowercase();
    let allowed = lower.starts_with("https://")
        || lower.starts_with("http://")
        || lower.starts_with('#')
        || (!lower.contains(':') && !lower.starts_with("//"));
    if allowed {
        url
    } else {
        CowStr::Borrowed("#")
    }
}

/// A fenced block: its file (the exercise's path for an `exercise=` block) and language
/// above it, Rust highlighted as classed spans.
fn code_block(info: &str, code: &str, lesson: &Lesson) -> String {
    let (lang, attrs) = parse_info(info);
    let file = attrs.get(EXERCISE_ATTR).map(|name| {
        lesson
            .spec
            .exercise
            .as_ref()
            .filter(|path| path.file_stem().and_then(|s| s.to_str()) == Some(name.as_str()))
            .map_or_else(|| name.clone(), |path| path.display().to_string())
    });
    let mut caption = String::new();
    if let Some(file) = &file {
        let _ = write!(caption, r#"<span class="file">{}</span>"#, escape(file));
    }
    if !lang.is_empty() {
        let _ = write!(
            caption,
            r#"<span class="code-lang">{}</span>"#,
            escape(&lang)
        );
    }
    let body = if matches!(lang.as_str(), "rust" | "rs") {
        crate::render::rust_classes(code)
            .into_iter()
            .map(|line| {
                line.into_iter()
                    .map(|(class, text)| match class {
                        Some(class) => format!(r#"<span class="{class}">{}</span>"#, escape(&text)),
                        None => escape(&text),
                    })
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        escape(code.trim_end_matches('\n'))
    };
    let caption = if caption.is_empty() {
        String::new()
    } else {
        format!("<figcaption>{caption}</figcaption>")
    };
    format!(
        "<figure class=\"code\">{caption}<pre><code class=\"language-{}\">{body}</code></pre></figure>\n",
        escape(if lang.is_empty() { "text" } else { &lang })
    )
}

/// The learner's own numbers for the lesson: every run's metric, the last measured
/// submission round by round, the per-token times, the card.
fn numbers(
    course: &Course,
    lesson: &Lesson,
    record: Option<&LessonRecord>,
    readable: bool,
    lang: Lang,
) -> String {
    let mut out = format!(
        r#"<section id="numbers" class="numbers" data-live><h2>{}</h2>"#,
        ui(course, "web_your_numbers", lang)
    );
    if !readable {
        out.push_str("</section>");
        return out;
    }
    let empty = LessonRecord::default();
    let record = record.unwrap_or(&empty);
    let metric = lesson
        .spec
        .measure
        .as_ref()
        .map_or(Metric::DecodeTokS, |m| m.metric);
    let id = &lesson.meta.id;
    runs_section(&mut out, course, id, record, metric, lang);
    submission_section(&mut out, course, id, record, metric, lang);
    per_token_section(&mut out, course, record, lang);
    card_section(&mut out, course, lesson, record, lang);
    out.push_str("</section>\n");
    out
}

/// Every recorded run's metric, the lesson's starting code and the learner's apart.
fn runs_section(
    out: &mut String,
    course: &Course,
    id: &str,
    record: &LessonRecord,
    metric: Metric,
    lang: Lang,
) {
    let key = format!("metric_{}", metric.key());
    let metric_name = course.ui(&key, lang);
    let _ = write!(
        out,
        "<h3>{}</h3>",
        ui_html(
            course,
            "web_runs",
            lang,
            &[("metric", &escape(metric_name))]
        )
    );
    let (starting, yours) = (
        course.ui("web_starting_code", lang),
        course.ui("web_your_code", lang),
    );
    let runs = run_series(record, metric.key(), starting, yours);
    if runs.is_empty() {
        let _ = write!(
            out,
            r#"<p class="empty">{}</p>"#,
            ui_html(course, "web_no_runs", lang, &[("id", &escape(id))])
        );
    } else {
        out.push_str(&figure(&svg::line_plot(
            &runs,
            &Labels {
                x: course.ui("web_run", lang),
                y: metric_name,
                title: metric_name,
            },
        )));
    }
}

/// The last submission that got as far as its interleaved measurement: its rounds,
/// medians and ratio, and where the lesson stands now.
fn submission_section(
    out: &mut String,
    course: &Course,
    id: &str,
    record: &LessonRecord,
    metric: Metric,
    lang: Lang,
) {
    let _ = write!(out, "<h3>{}</h3>", ui(course, "web_submission", lang));
    let measured = record
        .submissions
        .iter()
        .rev()
        .find_map(|s| s.measurement.as_ref().map(|m| (s, m)));
    let Some((submission, measurement)) = measured else {
        let _ = write!(
            out,
            r#"<p class="empty">{}</p>"#,
            ui_html(course, "web_no_submission", lang, &[("id", &escape(id))])
        );
        return;
    };
    let (before, after) = (course.ui("before", lang), course.ui("after", lang));
    let metric = Metric::from_key(&measurement.metric).unwrap_or(metric);
    let key = format!("metric_{}", metric.key());
    let y = course.ui(&key, lang);
    let (median_before, median_after) = (
        crate::stats::median(&measurement.before),
        crate::stats::median(&measurement.after),
    );
    let legend_before = format!("{before} ({})", svg::number(median_before));
    let legend_after = format!("{after} ({})", svg::number(median_after));
    out.push_str(&figure(&svg::rounds_plot(
        &measurement.before,
        &measurement.after,
        (&legend_before, &legend_after),
        &Labels {
            x: course.ui("round", lang),
            y,
            title: course.ui("web_submission", lang),
        },
    )));
    let ratio = measurement
        .improvement()
        .map_or("–".to_owned(), |r| format!("×{r:.2}"));
    // Where the lesson stands now: a later card may have completed it.
    let verdict = ui(course, LessonStatus::of(Some(record)).key(), lang);
    let _ = write!(
        out,
        r#"<p class="medians">{}: {} <span data-n="median_before">{}</span> · {} <span data-n="median_after">{}</span> {} · <span data-n="ratio">{}</span> {} · {}</p>"#,
        ui(course, "submit_medians", lang),
        escape(before),
        svg::number(median_before),
        escape(after),
        svg::number(median_after),
        escape(metric.unit()),
        escape(&ratio),
        escape(submission.at.to_string().as_str()),
        verdict
    );
}

/// Per-token times, where the exercise reported them (nothing otherwise).
fn per_token_section(out: &mut String, course: &Course, record: &LessonRecord, lang: Lang) {
    let per_token = run_series(
        record,
        Metric::MsPerToken.key(),
        course.ui("web_starting_code", lang),
        course.ui("web_your_code", lang),
    );
    if per_token.is_empty() {
        return;
    }
    let name = course.ui("web_per_token", lang);
    let _ = write!(out, "<h3>{}</h3>", escape(name));
    out.push_str(&figure(&svg::line_plot(
        &per_token,
        &Labels {
            x: course.ui("web_run", lang),
            y: course.ui("metric_ms_per_token", lang),
            title: name,
        },
    )));
}

/// The card: the learner's numbers as bars and their answers, each marked as judged.
fn card_section(
    out: &mut String,
    course: &Course,
    lesson: &Lesson,
    record: &LessonRecord,
    lang: Lang,
) {
    let _ = write!(out, "<h3>{}</h3>", ui(course, "card", lang));
    let Some(card) = &record.card else {
        let _ = write!(
            out,
            r#"<p class="empty">{}</p>"#,
            ui(course, "web_no_card", lang)
        );
        return;
    };
    let unit = card
        .metric
        .as_deref()
        .and_then(Metric::from_key)
        .map_or("", |m| m.unit());
    // Before first, then after, as the card command takes them.
    let mut numbers: Vec<(&String, &f64)> = card.numbers.iter().collect();
    numbers.sort_by_key(|(key, _)| match key.as_str() {
        "before" => 0,
        "after" => 1,
        _ => 2,
    });
    let rows: Vec<(String, f64, &'static str)> = numbers
        .into_iter()
        .map(|(key, value)| {
            let (label, color) = match key.as_str() {
                "before" => (course.ui("before", lang).to_owned(), svg::BEFORE),
                "after" => (course.ui("after", lang).to_owned(), svg::AFTER),
                other => (other.to_owned(), svg::OTHER),
            };
            (label, *value, color)
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&figure(&svg::value_bars(
            &rows,
            unit,
            course.ui("card", lang),
        )));
    }
    if !card.answers.is_empty() {
        card_answers(out, card, lesson, record);
    }
}

/// The card's quiz answers: each question and the chosen meaning, marked ✓ or ✗ where
/// the learner's latest attempt at that choice was judged.
fn card_answers(out: &mut String, card: &Card, lesson: &Lesson, record: &LessonRecord) {
    out.push_str(r#"<dl class="answers">"#);
    for (question, choice) in &card.answers {
        let text = lesson.meta.quiz.get(question);
        let asked = text.map_or(question.as_str(), |t| t.question.as_str());
        let chosen = text
            .and_then(|t| t.choices.get(choice))
            .map_or(choice.clone(), |meaning| format!("{choice}: {meaning}"));
        let right = record
            .attempts
            .iter()
            .rev()
            .find(|a| &a.question == question && &a.choice == choice)
            .and_then(|a| a.right);
        let mark = match right {
            Some(true) => "✓ ",
            Some(false) => "✗ ",
            None => "",
        };
        let _ = write!(
            out,
            "<dt>{}</dt><dd>{mark}{}</dd>",
            escape(asked),
            escape(&chosen)
        );
    }
    out.push_str("</dl>");
}

/// The runs that recorded `key`, numbered in the order recorded, as two lines: the
/// lesson's starting code and the learner's edits.
fn run_series(record: &LessonRecord, key: &str, before: &str, after: &str) -> Vec<Series> {
    let mut original = Vec::new();
    let mut edited = Vec::new();
    for (i, run) in record.runs.iter().enumerate() {
        let Some(&value) = run.metrics.get(key) else {
            continue;
        };
        let point = ((i + 1) as f64, value);
        match run.code.kind {
            CodeKind::Original => original.push(point),
            CodeKind::Exercise | CodeKind::Learner => edited.push(point),
        }
    }
    [(before, svg::BEFORE, original), (after, svg::AFTER, edited)]
        .into_iter()
        .filter(|(_, _, points)| !points.is_empty())
        .map(|(name, color, points)| Series {
            name: name.to_owned(),
            color,
            points,
        })
        .collect()
}

fn figure(svg: &str) -> String {
    format!("<figure class=\"plot\">{svg}</figure>")
}

/// `/achievements`: earned and not yet, with their descriptions; then the levels.
pub fn achievements_page(site: &Site, progress: &Progress, lang: Lang) -> String {
    let course = &site.course;
    let state = progress.as_ref().ok();
    let mut body = header(site, progress, lang);
    let _ = write!(
        body,
        r#"
<main><h1>{}</h1><ul id="achievement-list" class="achievements" data-live>"#,
        ui(course, "achievements", lang)
    );
    for achievement in &site.achievements {
        let award = state.and_then(|s| s.awards.get(&achievement.award_key()));
        let (class, mark, when) = match award {
            Some(award) => (
                "earned",
                "★",
                format!(
                    "{} {}",
                    ui(course, "web_earned", lang),
                    escape(&award.at.to_string())
                ),
            ),
            None => ("not-yet", "☆", ui(course, "web_not_earned", lang)),
        };
        let _ = write!(
            body,
            r#"<li class="{class}" data-achievement="{}"><span class="mark">{mark}</span> <strong>{}</strong> <span class="xp">+{}</span><p>{}</p><p class="when">{when}</p></li>"#,
            escape(&achievement.id),
            escape(achievement.name.get(lang)),
            escape(&course.ui_with("xp", lang, &[("n", &achievement.xp.to_string())])),
            escape(achievement.description.get(lang)),
        );
    }
    let _ = write!(
        body,
        r#"</ul><h2>{}</h2><ol id="levels" class="levels" data-live>"#,
        ui(course, "web_levels", lang)
    );
    let current = state.map(|s| site.levels.number_for(s.total_xp()));
    for (i, level) in site.levels.levels().iter().enumerate() {
        let class = if current == Some(i + 1) {
            r#" class="current""#
        } else {
            ""
        };
        let _ = write!(
            body,
            r#"<li{class}>{} {i} · {} <span class="xp">{}</span></li>"#,
            ui(course, "level", lang),
            escape(level.name.get(lang)),
            ui_html(
                course,
                "web_level_from",
                lang,
                &[("xp", &level.xp.to_string())]
            )
        );
    }
    body.push_str("</ol></main>");
    page(
        site,
        lang,
        "/achievements",
        course.ui("achievements", lang),
        &body,
    )
}

/// What any address outside the course and its assets gets.
pub fn not_found_page(site: &Site, lang: Lang, path: &str) -> String {
    let body = format!(
        r#"<main><h1>404</h1><p>{}</p><p><a href="{}">{}</a></p></main>"#,
        ui_html(
            &site.course,
            "web_not_found",
            lang,
            &[("path", &format!("<code>{}</code>", escape(path)))]
        ),
        escape(&href("/", lang)),
        ui(&site.course, "web_course", lang)
    );
    page(site, lang, "/", "404", &body)
}

/// A lesson of the course that does not load: the error, in a page.
pub fn broken_lesson_page(site: &Site, lang: Lang, id: &str, error: &str) -> String {
    let body = format!(
        r#"<main><h1>{}</h1><pre class="problem">{}</pre></main>"#,
        escape(id),
        escape(
            &site
                .course
                .ui_with("lesson_broken", lang, &[("error", error)])
        )
    );
    page(site, lang, &format!("/lessons/{id}"), id, &body)
}
