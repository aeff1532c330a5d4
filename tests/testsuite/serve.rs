//! `quest serve`: the pages as pure functions (every lesson in both languages, escaping,
//! snapshots), and a real `quest serve --port 0` process spoken to over raw HTTP (the
//! header against `quest status --json`, refused paths and hosts, a damaged progress
//! file, live events). The browser test drives it with headless Chromium through
//! WebDriver; it runs when `QUEST_BROWSER_TEST=1` (and then fails, never skips, without
//! Chromium).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quest::course::{Course, Lang};
use quest::serve::{markup, pages, Site};

use crate::common::{course_copy, home, quest, quest_command, quest_in, text};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn site_of(lessons: &Path) -> Site {
    Site::new(
        Course::load(lessons).unwrap(),
        quest::device::Backend::detect(),
    )
    .unwrap()
}

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures/progress").join(name)
}

fn parse_progress(path: &Path) -> quest::progress::State {
    quest::progress::parse(&std::fs::read(path).unwrap()).unwrap()
}

/// A running `quest serve --port 0`, ended (by its own handle) when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(root: Option<&Path>, home: &Path, args: &[&str]) -> Server {
        let mut command = quest_command();
        command
            .args(args)
            .args(["serve", "--port", "0"])
            .env("QUEST_HOME", home)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(root) = root {
            command.env("QUEST_ROOT", root);
        }
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "The course is at http://127.0.0.1:PORT/ (…)": the port it really bound.
        let Some(at) = line.find("http://127.0.0.1:") else {
            let mut said = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut said);
            panic!("quest serve printed no URL: {line:?} {said}");
        };
        let rest = &line[at + "http://127.0.0.1:".len()..];
        let port = rest[..rest.find('/').unwrap()].parse().unwrap();
        Server { child, port }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// GET `path` exactly as written (no normalising), with a right Host.
    fn get(&self, path: &str) -> Response {
        request(self.port, path, &self.host())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    head: String,
    body: String,
}

/// One raw HTTP/1.1 request: raw, so that `..` and a foreign Host reach the server as sent.
fn request(port: u16, path: &str, host: &str) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    parse_response(&bytes)
}

fn parse_response(bytes: &[u8]) -> Response {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        head: head.to_owned(),
        body,
    }
}

/// A response read by its Content-Length: chromedriver keeps the connection open.
fn read_sized_response(stream: &mut TcpStream) -> Response {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let n = stream.read(&mut buffer).unwrap();
        bytes.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&bytes);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if bytes.len() >= end + 4 + length || n == 0 {
                return parse_response(&bytes);
            }
        }
        if n == 0 {
            return parse_response(&bytes);
        }
    }
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The numbers the header shows (`data-n="…"`), by name.
fn header_numbers(html: &str) -> BTreeMap<String, String> {
    let header = &html[html.find(r#"id="header""#).unwrap()..];
    let header = &header[..header.find("</section>").unwrap()];
    header
        .split(r#"data-n=""#)
        .skip(1)
        .map(|part| {
            let (name, rest) = part.split_once("\">").unwrap();
            (name.to_owned(), rest[..rest.find('<').unwrap()].to_owned())
        })
        .collect()
}

/// `quest status --json`, as the strings a page shows.
fn status_json(root: Option<&Path>, home: &Path) -> BTreeMap<String, String> {
    let out = match root {
        Some(root) => quest_in(root, home, &["status", "--json"]),
        None => quest(home, &["status", "--json"]),
    };
    assert!(out.status.success(), "{}", text(&out).1);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json.as_object()
        .unwrap()
        .iter()
        .filter(|(key, value)| !value.is_null() && *key != "bar_fraction")
        .filter(|(key, _)| *key != "next_level_name")
        // A list the page shows only when it holds something, as its items joined.
        .filter(|(_, value)| value.as_array().is_none_or(|items| !items.is_empty()))
        .map(|(key, value)| {
            let shown = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => {
                    let items: Vec<&str> = items.iter().map(|i| i.as_str().unwrap()).collect();
                    items.join(", ")
                }
                other => other.to_string(),
            };
            (key.clone(), markup::escape(&shown))
        })
        .collect()
}

#[test]
fn the_page_header_is_status_json() {
    for (name, progress) in [
        ("fresh", None),
        ("halfway", Some("halfway.json")),
        ("recorded", Some("serve-mlx-path.json")),
    ] {
        let h = home(&format!("serve-header-{name}"));
        if let Some(file) = progress {
            std::fs::copy(fixture(file), h.join("progress.json")).unwrap();
        }
        let expected = status_json(None, &h);
        let server = Server::start(None, &h, &[]);
        let page = server.get("/");
        assert_eq!(page.status, 200, "{name}");
        assert_eq!(header_numbers(&page.body), expected, "{name}");
        if name == "recorded" {
            // The lesson done, on the course page too.
            let mlx = &page.body[page.body.find(r#"data-lesson="mlx-path""#).unwrap()..];
            assert!(mlx[..mlx.find("</li>").unwrap()].contains(r#"class="status done""#));
        }
        if name == "fresh" {
            assert_eq!(expected["level"], "0");
            assert_eq!(expected["xp"], "0");
            assert_eq!(expected["lessons_done"], "0");
            assert_eq!(expected["percent_complete"], "0");
            // On a CPU the course's GPU-only exercises are named as needing another computer.
            if quest::device::Backend::detect() == quest::device::Backend::Cpu {
                assert_eq!(
                    expected["lessons_elsewhere"],
                    "custom-kernel, matvec-kernel"
                );
            }
            assert_eq!(expected["level_name"], "Spec-sheet skimmer");
        }
    }
}

#[test]
fn a_port_in_use_is_said_and_ends_the_command() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let h = home("serve-port-in-use");
    let out = quest(&h, &["serve", "--port", &port]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out).1;
    assert!(
        said.contains(&format!("Port {port} on 127.0.0.1 is already in use"))
            && said.contains("--port 0"),
        "{said}"
    );
}

#[test]
fn list_json_has_every_lesson_with_its_status() {
    let h = home("serve-list-json");
    std::fs::copy(fixture("serve-mlx-path.json"), h.join("progress.json")).unwrap();
    let out = quest(&h, &["list", "--json"]);
    assert!(out.status.success(), "{}", text(&out).1);
    let lessons: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let course = Course::load(&repo().join("lessons")).unwrap();
    let ids: Vec<&str> = lessons.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, course.lesson_ids().collect::<Vec<_>>());
    let mlx = lessons.iter().find(|l| l["id"] == "mlx-path").unwrap();
    assert_eq!(mlx["status"], "done");
    assert_eq!(mlx["track"], "journey");
    for key in ["title", "minutes", "tags"] {
        assert!(!mlx[key].is_null(), "{key}");
    }
}

/// Each lesson, in each language: its title, its code captioned and highlighted, the
/// hint and the appendix folded, the exercise's commands, the learner's numbers.
#[test]
fn every_lesson_renders_in_both_languages() {
    let site = site_of(&repo().join("lessons"));
    let recorded = Ok(parse_progress(&fixture("serve-mlx-path.json")));
    for id in site.course.lesson_ids() {
        for lang in Lang::ALL {
            let lesson = site.course.lesson(id, lang).unwrap();
            let page = pages::lesson_page(&site, &recorded, id, lang).unwrap();
            let at = format!("{id} ({lang})");
            assert!(page.contains(&format!("<html lang=\"{lang}\">")), "{at}");
            assert!(
                page.contains(&markup::escape(&lesson.meta.title)),
                "{at}: title"
            );
            assert!(page.contains(r#"<details class="hint""#), "{at}: hint");
            // A hint in levels: each folded on its own inside the hint, none open.
            let levels = lesson.hints().unwrap().levels.len();
            let folded = page.matches(r#"<details class="hint-level">"#).count();
            assert_eq!(folded, if levels > 1 { levels } else { 0 }, "{at}");
            // What the figures rest on, folded: there when the lesson has it, never open.
            let appendix = page.contains(r#"<details class="appendix""#);
            assert_eq!(appendix, lesson.appendix().is_some(), "{at}: appendix");
            assert!(!page.contains(r#"<details class="appendix" open"#), "{at}");
            assert!(
                page.contains(&format!("quest card {id}")),
                "{at}: the card command"
            );
            if let Some(exercise) = &lesson.spec.exercise {
                let caption = format!(
                    r#"<span class="file">{}</span><span class="code-lang">rust</span>"#,
                    exercise.display()
                );
                assert!(page.contains(&caption), "{at}: the exercise's caption");
                assert!(page.contains(r#"<span class="kw">fn</span>"#), "{at}");
            }
            assert!(page.contains(r#"id="numbers""#), "{at}: numbers");
            // The tables of the lesson come out as tables.
            if lesson.body().contains("\n|") {
                assert!(page.contains("<table>"), "{at}: tables");
            }
            assert!(!page.contains("<script>"), "{at}: no inline script");
        }
    }
    // The recorded fixture's numbers: every run, the rounds, the per-token times, the card.
    let page = pages::lesson_page(&site, &recorded, "mlx-path", Lang::En).unwrap();
    assert_eq!(page.matches(r#"<figure class="plot">"#).count(), 4, "plots");
    assert!(
        page.contains(r#"<span data-n="ratio">×1.12</span>"#),
        "ratio"
    );
}

#[test]
fn hostile_lessons_and_progress_are_escaped() {
    let root = course_copy("serve-hostile");
    let en = root.join("lessons/mlx-path/en.md");
    let text = std::fs::read_to_string(&en).unwrap();
    let title_line = text.lines().find(|l| l.starts_with("title:")).unwrap();
    let hostile = text.replace(
        title_line,
        r#"title: "<script>alert('title')</script> & friends""#,
    ) + "\n<script>alert('body')</script>\n\n<img src=x onerror=alert(3)>\n\n[click](javascript:alert(4)) and <b onclick=\"alert(5)\">inline</b>\n";
    std::fs::write(&en, hostile).unwrap();
    let site = site_of(&root.join("lessons"));
    let mut state = parse_progress(&fixture("serve-mlx-path.json"));
    let record = state.lessons.get_mut("mlx-path").unwrap();
    let card = record.card.as_mut().unwrap();
    card.answers
        .insert("term".into(), "<script>alert('card')</script>".into());
    record.runs[0].backend = "<img src=x onerror=alert(6)>".into();
    let progress = Ok(state);
    for lang in Lang::ALL {
        let page = pages::lesson_page(&site, &progress, "mlx-path", lang).unwrap();
        for raw in [
            "<script>alert",
            "<img",
            "onerror=alert(3)>",
            "<b onclick",
            "javascript:",
        ] {
            assert!(!page.contains(raw), "{lang}: {raw} reached the page");
        }
        if lang == Lang::En {
            assert!(
                page.contains("&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt; &amp; friends")
            );
            // Shown as text: the title, the body's raw HTML, the card's answer.
            assert!(page.contains("&lt;script&gt;alert('body')&lt;/script&gt;"));
            assert!(page.contains("&lt;script&gt;alert(&#39;card&#39;)&lt;/script&gt;"));
        } else {
            // The English changed, so the Korean is older: the page says so.
            let stale = site.course.ui("translation_stale", Lang::Ko);
            assert!(page.contains(&markup::escape(stale)), "the stale note");
        }
    }
    let course = pages::course_page(&site, &progress, Lang::En);
    assert!(!course.contains("<script>alert") && course.contains("&lt;script&gt;"));
    // Served too: the same escaping over HTTP, under the CSP.
    let h = home("serve-hostile");
    let server = Server::start(Some(&root), &h, &[]);
    let page = server.get("/lessons/mlx-path");
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("<script>alert"));
    assert!(page
        .head
        .to_ascii_lowercase()
        .contains("content-security-policy: default-src 'self'; script-src 'self'"));
}

#[test]
fn paths_outside_the_course_and_foreign_hosts_are_refused() {
    let h = home("serve-refusals");
    let server = Server::start(None, &h, &[]);
    let port = server.port;
    let ok = server.host();
    let local = format!("localhost:{port}");
    let evil = format!("evil.example:{port}");
    let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
    let cases: &[(&str, &str, &[u16])] = &[
        ("/", &ok, &[200]),
        ("/", &local, &[200]),
        ("/lessons/mlx-path?lang=ko", &ok, &[200]),
        ("/achievements", &ok, &[200]),
        ("/assets/quest.css", &ok, &[200]),
        ("/assets/quest.js", &ok, &[200]),
        ("/", &evil, &[421]),
        ("/lessons/mlx-path", &evil, &[421]),
        ("/", &other_port, &[421]),
        ("/", "", &[421, 400]),
        ("/lessons/../Cargo.toml", &ok, &[400, 404]),
        ("/lessons/%2e%2e%2fCargo.toml", &ok, &[400, 404]),
        ("/lessons/%2E%2E%2FCargo.toml", &ok, &[400, 404]),
        ("/assets/../../x", &ok, &[400, 404]),
        ("/assets/..%2f..%2fCargo.toml", &ok, &[400, 404]),
        ("/assets/quest.css/../../../Cargo.toml", &ok, &[400, 404]),
        ("//etc/passwd", &ok, &[400, 404]),
        ("/lessons/nope", &ok, &[404]),
        ("/lessons/MLX-PATH", &ok, &[404]),
        ("/lessons/mlx-path/en.md", &ok, &[404]),
        ("/Cargo.toml", &ok, &[404]),
        ("/assets/../Cargo.toml", &ok, &[400, 404]),
    ];
    for (path, host, statuses) in cases {
        let response = request(port, path, host);
        assert!(
            statuses.contains(&response.status),
            "{path} (Host {host}): {} {}",
            response.status,
            response.body
        );
        assert!(
            !response.body.contains("[package]"),
            "{path}: a file leaked"
        );
        assert!(
            response
                .head
                .to_ascii_lowercase()
                .contains("content-security-policy"),
            "{path}: no CSP"
        );
    }
    let script = server.get("/assets/quest.js");
    assert!(script.body.contains("EventSource"));
    assert!(server
        .get("/")
        .body
        .contains(r#"<script src="/assets/quest.js""#));
}

/// A damaged or newer progress file: the page says what `quest status` says, the course
/// still renders, and the server changes nothing (no backup, no repair).
#[test]
fn an_unusable_progress_file_is_explained_and_left_alone() {
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "damaged",
            b"{\"schema\": 3, \"lessons\": {",
            "ends too early",
        ),
        ("newer", b"{\"schema\": 99}\n", "written by a newer quest"),
    ];
    for (name, bytes, problem) in cases {
        let h = home(&format!("serve-unusable-{name}"));
        let file = h.join("progress.json");
        std::fs::write(&file, bytes).unwrap();
        let server = Server::start(None, &h, &[]);
        let page = server.get("/");
        assert_eq!(page.status, 200, "{name}");
        assert!(page.body.contains(problem), "{name}: {}", page.body);
        assert!(page.body.contains("quest status --repair"), "{name}");
        assert!(
            page.body.contains("The MLX path"),
            "{name}: the course renders"
        );
        assert_eq!(server.get("/lessons/mlx-path").status, 200, "{name}");
        drop(server);
        assert_eq!(std::fs::read(&file).unwrap(), *bytes, "{name}: rewritten");
        assert!(
            crate::common::backups_of(&file).is_empty(),
            "{name}: a backup"
        );
        // `quest status` says the same first line.
        let out = quest(&h, &["status"]);
        assert_eq!(out.status.code(), Some(1));
        let said = text(&out).1;
        let first = said.lines().next().unwrap().trim_start_matches("quest: ");
        assert!(
            page.body.contains(&markup::escape(first)),
            "{name}: {first} not on the page"
        );
    }
}

/// A course copy whose mlx-path exercise is edited, and a progress file in which that
/// edit passed its checks and was measured (interleaved) beside the starting code: a card
/// then completes the lesson, without running a model.
fn submitted_but_not_carded(name: &str) -> (PathBuf, PathBuf) {
    let root = course_copy(name);
    let home = home(name);
    let exercise = root.join("exercises/mlx-path/decode_loop.rs");
    let mut edited = std::fs::read(&exercise).unwrap();
    edited.extend_from_slice(b"// edited\n");
    std::fs::write(&exercise, &edited).unwrap();
    let code = quest::progress::CodeRef::of(quest::progress::CodeKind::Exercise, &edited);
    let mut state = parse_progress(&fixture("serve-mlx-path.json"));
    let record = state.lessons.get_mut("mlx-path").unwrap();
    record.card = None;
    record.attempts.clear();
    for run in &mut record.runs {
        if run.code.kind == quest::progress::CodeKind::Exercise {
            run.code = code.clone();
        }
    }
    for submission in &mut record.submissions {
        submission.code = Some(code.clone());
        submission.passed = false;
    }
    state
        .awards
        .retain(|key, _| !key.contains("mlx-path") && !key.contains("honest-card"));
    std::fs::write(
        home.join("progress.json"),
        quest::progress::serialize(&state).unwrap(),
    )
    .unwrap();
    (root, home)
}

const CARD: &[&str] = &[
    "card",
    "mlx-path",
    "--before",
    "6.6",
    "--after",
    "7.41",
    "--answer",
    "term=fixed",
    "--answer",
    "shows-here=yes",
];

#[test]
fn events_fire_when_the_progress_file_changes() {
    let (root, h) = submitted_but_not_carded("serve-live");
    let server = Server::start(Some(&root), &h, &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        server.host()
    )
    .unwrap();
    let mut seen = String::new();
    let mut read_until = |stream: &mut TcpStream, want: &str, limit: Duration| -> bool {
        let start = Instant::now();
        let mut buffer = [0u8; 4096];
        while start.elapsed() < limit {
            if seen.contains(want) {
                return true;
            }
            if let Ok(n) = stream.read(&mut buffer) {
                seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        }
        seen.contains(want)
    };
    assert!(read_until(
        &mut stream,
        "event: ready",
        Duration::from_secs(10)
    ));
    let out = quest_in(&root, &h, CARD);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("Lesson mlx-path complete"), "{stdout}");
    assert!(
        read_until(&mut stream, "event: progress", Duration::from_secs(2)),
        "no event within 2 s: {seen}"
    );
    let page = server.get("/");
    assert_eq!(header_numbers(&page.body), status_json(Some(&root), &h));
}

/// Headless Chromium drives a running server: the header, the switch to 한국어, mlx-path
/// with its hint unfolded, then a card completed in the terminal shows on the open page
/// without a reload. Screenshots go to target/quest-browser/.
#[test]
fn browser_follows_the_course_live() {
    match std::env::var("QUEST_BROWSER_TEST").as_deref() {
        Ok("1") => {}
        _ => {
            eprintln!(
                "browser test not run: set QUEST_BROWSER_TEST=1 (needs chromium and chromedriver)"
            );
            return;
        }
    }
    let (chromium, chromedriver) = match (
        find_program(&["chromium", "chromium-browser", "google-chrome"]),
        find_program(&["chromedriver"]),
    ) {
        (Some(chromium), Some(driver)) => (chromium, driver),
        _ => panic!(
            "QUEST_BROWSER_TEST=1 asks for the browser test, but Chromium or chromedriver is \
             missing; install them with: apt-get install -y chromium chromium-driver"
        ),
    };
    let shots = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo().join("target"), PathBuf::from)
        .join("quest-browser");
    std::fs::create_dir_all(&shots).unwrap();
    let (root, h) = submitted_but_not_carded("serve-browser");
    let server = Server::start(Some(&root), &h, &[]);
    let driver = Driver::start(&chromedriver, &chromium);
    let base = format!("http://{}", server.host());

    driver.go(&format!("{base}/"));
    let header = driver.text("#header");
    let numbers = status_json(Some(&root), &h);
    let level = format!("Level {} · {}", numbers["level"], numbers["level_name"]);
    assert!(header.contains(&level), "{header}");
    assert!(
        header.contains(&format!("{} XP", numbers["xp"])),
        "{header}"
    );
    driver.screenshot(&shots.join("course-en.png"));

    driver.click("nav .langs a[hreflang=ko]");
    driver.wait_for(|d| d.text("#header").contains("레벨"), "the Korean header");
    driver.screenshot(&shots.join("course-ko.png"));

    driver.click("li[data-lesson=mlx-path] a");
    driver.wait_for(
        |d| d.execute("return location.pathname") == "/lessons/mlx-path",
        "mlx-path",
    );
    assert_eq!(driver.execute("return document.documentElement.lang"), "ko");
    driver.screenshot(&shots.join("mlx-path-ko.png"));
    assert_eq!(
        driver.execute("return String(document.querySelector('details.hint').open)"),
        "false"
    );
    driver.click("details.hint summary");
    assert_eq!(
        driver.execute("return String(document.querySelector('details.hint').open)"),
        "true"
    );
    // Set before the change: a reload would lose it.
    driver.execute("window.questMarker = 'kept'; return ''");
    let before = driver.text("#header");

    let out = quest_in(&root, &h, CARD);
    assert!(out.status.success(), "{}{}", text(&out).0, text(&out).1);
    // The card writes the progress file more than once (card, pass, XP); the page may show
    // a state between them, so the wait is for the last one, which is on disk by now.
    let changed = Instant::now();
    let expected = status_json(Some(&root), &h);
    let xp = format!("{} XP", expected["xp"]);
    driver.wait_for(
        |d| {
            let header = d.text("#header");
            header != before && header.contains(&xp)
        },
        "the header to show the card's XP",
    );
    assert!(
        changed.elapsed() < Duration::from_secs(2),
        "the page took {:?}",
        changed.elapsed()
    );
    assert_eq!(driver.execute("return String(window.questMarker)"), "kept");
    assert_eq!(
        driver.execute("return String(document.querySelector('details.hint').open)"),
        "true",
        "the unfolded hint stays"
    );
    // Tall enough for the whole section: an element's screenshot is cut at the window.
    driver.call(
        "POST",
        &driver.session_path("/window/rect"),
        Some(serde_json::json!({"width": 1000, "height": 2400})),
    );
    driver.element_screenshot("#numbers", &shots.join("mlx-path-ko-numbers.png"));
    driver.call(
        "POST",
        &driver.session_path("/window/rect"),
        Some(serde_json::json!({"width": 1000, "height": 900})),
    );
    driver.screenshot(&shots.join("mlx-path-ko-after.png"));
    driver.go(&format!("{base}/achievements?lang=en"));
    driver.screenshot(&shots.join("achievements-en.png"));
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// chromedriver spoken to in the W3C WebDriver protocol, JSON over the same raw HTTP
/// (no client crate: a dozen requests).
struct Driver {
    child: Child,
    port: u16,
    session: String,
}

impl Driver {
    fn start(chromedriver: &Path, chromium: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut driver = Driver {
            child,
            port,
            session: String::new(),
        };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(20), "no chromedriver");
            std::thread::sleep(Duration::from_millis(100));
        }
        let capabilities = serde_json::json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1000,900", "--hide-scrollbars"]
            }
        }}});
        let answer = driver.call("POST", "/session", Some(capabilities));
        driver.session = answer["sessionId"].as_str().unwrap().to_owned();
        driver
    }

    fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        match self.try_call(method, path, body) {
            Ok(value) => value,
            Err(refused) => panic!("{refused}"),
        }
    }

    /// The call, or WebDriver's refusal as text (its `error` code first).
    fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, String> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .unwrap();
        let response = read_sized_response(&mut stream);
        let json: serde_json::Value = serde_json::from_str(&response.body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", response.body));
        if response.status != 200 {
            return Err(format!(
                "{}: {method} {path}: {} {json}",
                json["value"]["error"].as_str().unwrap_or("error"),
                response.status
            ));
        }
        Ok(json["value"].clone())
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    fn go(&self, url: &str) {
        self.call(
            "POST",
            &self.session_path("/url"),
            Some(serde_json::json!({ "url": url })),
        );
    }

    fn element(&self, css: &str) -> String {
        let found = self.call(
            "POST",
            &self.session_path("/element"),
            Some(serde_json::json!({"using": "css selector", "value": css})),
        );
        found["element-6066-11e4-a52e-4f735466cecf"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `act` on the element `css` finds. The live page replaces its parts when progress
    /// changes, so an element found a moment ago can be gone when it is acted on ("stale
    /// element reference"): then it is found again.
    fn on_element<T>(&self, css: &str, act: impl Fn(&str) -> Result<T, String>) -> T {
        let mut last = String::new();
        for _ in 0..20 {
            match act(&self.element(css)) {
                Ok(done) => return done,
                Err(refused) if refused.starts_with("stale element reference") => last = refused,
                Err(refused) => panic!("{refused}"),
            }
        }
        panic!("{css} kept going stale: {last}")
    }

    fn text(&self, css: &str) -> String {
        self.on_element(css, |element| {
            let path = self.session_path(&format!("/element/{element}/text"));
            let value = self.try_call("GET", &path, None)?;
            Ok(value.as_str().unwrap_or_default().to_owned())
        })
    }

    fn click(&self, css: &str) {
        self.on_element(css, |element| {
            let path = self.session_path(&format!("/element/{element}/click"));
            self.try_call("POST", &path, Some(serde_json::json!({})))
        });
    }

    /// Runs `script` in the page (WebDriver's own channel, not the page's CSP).
    fn execute(&self, script: &str) -> String {
        let value = self.call(
            "POST",
            &self.session_path("/execute/sync"),
            Some(serde_json::json!({"script": script, "args": []})),
        );
        value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned)
    }

    fn wait_for(&self, ready: impl Fn(&Driver) -> bool, what: &str) {
        let start = Instant::now();
        while !ready(self) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "waited 10 s for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn screenshot(&self, path: &Path) {
        let png = self.call("GET", &self.session_path("/screenshot"), None);
        std::fs::write(path, base64_decode(png.as_str().unwrap())).unwrap();
    }

    fn element_screenshot(&self, css: &str, path: &Path) {
        let png = self.on_element(css, |element| {
            let path = self.session_path(&format!("/element/{element}/screenshot"));
            self.try_call("GET", &path, None)
        });
        std::fs::write(path, base64_decode(png.as_str().unwrap())).unwrap();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = self.session_path("");
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.call("DELETE", &path, None)
            }));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (what WebDriver's screenshots are), padding and all.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | d << (18 - 6 * i));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}

/// Each page's HTML, its header's numbers masked (they follow the course's lessons and
/// achievements): the course for a fresh learner, achievements in Korean for a recorded
/// one, and a fixture lesson with the recorded numbers.
#[test]
fn page_snapshots() {
    let real = site_of(&repo().join("lessons"));
    let fresh = Ok(quest::progress::State::default());
    let mut recorded_state = parse_progress(&fixture("serve-mlx-path.json"));
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r#"(data-n="[a-z_]+">)[^<]*"#, "$1[n]");
    settings.add_filter(r"<title>\d+ %</title>", "<title>[n] %</title>");
    settings.add_filter(
        r#"<rect width="\d+" height="4""#,
        r#"<rect width="[n]" height="4""#,
    );
    settings.bind(|| {
        insta::assert_snapshot!(
            "serve_course_en",
            pages::course_page(&real, &fresh, Lang::En)
        );
        insta::assert_snapshot!(
            "serve_achievements_ko",
            pages::achievements_page(&real, &Ok(recorded_state.clone()), Lang::Ko)
        );
        // A small lesson that only the tests change, with mlx-path's recorded numbers.
        let mut course =
            Course::load(&repo().join("tests/fixtures/broken-lessons/lessons")).unwrap();
        course.ui = real.course.ui.clone();
        let site = Site {
            course,
            levels: real.levels.clone(),
            achievements: Vec::new(),
            here: real.here,
        };
        let record = recorded_state.lessons.remove("mlx-path").unwrap();
        recorded_state.lessons.insert("good".into(), record);
        insta::assert_snapshot!(
            "serve_lesson_good_en",
            pages::lesson_page(&site, &Ok(recorded_state), "good", Lang::En).unwrap()
        );
    });
}
