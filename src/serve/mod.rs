//! `quest serve`: the course in a browser, on 127.0.0.1 only. The pages are pure
//! functions (`pages`), the plots quest's own SVG (`svg`); this file is the thin HTTP
//! layer: routes, the checks every request passes (the Host it was bound to, no path
//! outside the course), the security headers, and server-sent events that fire when
//! the progress file changes. It reads the course and the progress file, never writes.

pub mod markup;
pub mod pages;
pub mod svg;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::extract::{Path as UrlPath, Query, Request, State as Shared};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::course::{Course, Lang};
use crate::device::Backend;
use crate::progress::{load_achievements, Achievement, LevelCurve};
use pages::Progress;

/// What every page is made of: the course and its levels and achievements, loaded once.
pub struct Site {
    pub course: Course,
    pub levels: LevelCurve,
    pub achievements: Vec<Achievement>,
    /// This machine's backend: the header says which lessons cannot run here.
    pub here: Backend,
}

impl Site {
    pub fn new(course: Course, here: Backend) -> Result<Site> {
        Ok(Site {
            levels: LevelCurve::from_course(&course.levels)?,
            achievements: load_achievements(&course.achievements, &course.tracks)?,
            course,
            here,
        })
    }
}

/// The stylesheet and the one script, inside the binary: the page works offline.
pub const STYLE: &str = include_str!("assets/quest.css");
pub const SCRIPT: &str = include_str!("assets/quest.js");

/// The Content-Security-Policy of every response: nothing from elsewhere, no inline script.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How often the progress file is looked at.
const POLL: Duration = Duration::from_millis(500);

struct App {
    site: Site,
    progress_path: PathBuf,
    /// The only Host headers answered (DNS rebinding): `127.0.0.1:<port>`, `localhost:<port>`.
    hosts: [String; 2],
    /// Counts the progress file's changes; `/events` tells each one.
    changes: watch::Sender<u64>,
    /// `quest --lang … serve`: the language where an address asks none.
    lang: Option<Lang>,
}

type AppRef = Arc<App>;

/// Serves `site` on `listener` (already bound to loopback) until the process ends, on a
/// runtime of its own on its own thread (nothing of MLX runs here).
/// `lang`, when given, is the pages' language where an address asks none (else the
/// learner's remembered one, else English).
pub fn serve(
    site: Site,
    progress_path: PathBuf,
    listener: std::net::TcpListener,
    lang: Option<Lang>,
) -> Result<()> {
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    let (changes, _) = watch::channel(0u64);
    let app = Arc::new(App {
        site,
        progress_path,
        hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        changes,
        lang,
    });
    let thread = std::thread::Builder::new()
        .name("quest-serve".into())
        .spawn(move || -> Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("could not start the web server's runtime")?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                tokio::spawn(watch_progress(app.clone()));
                axum::serve(listener, router(app))
                    .await
                    .context("the web server stopped")
            })
        })?;
    thread
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the web server's thread panicked")))
}

/// The site's routes, behind the request checks.
fn router(app: AppRef) -> Router {
    Router::new()
        .route("/", get(course_page))
        .route("/lessons/{id}", get(lesson_page))
        .route("/achievements", get(achievements_page))
        .route("/events", get(events))
        .route(
            "/assets/quest.css",
            get(|| async { asset(STYLE, "text/css") }),
        )
        .route(
            "/assets/quest.js",
            get(|| async { asset(SCRIPT, "text/javascript") }),
        )
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Every request: the Host must be the one bound (421 otherwise), the path plain (400
/// for `..`, encoded dots or slashes, backslashes); every response gets the CSP.
async fn guard(Shared(app): Shared<AppRef>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let mut response = if !app.hosts.iter().any(|known| known == host) {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "421: not this server's host\n",
        )
            .into_response()
    } else if !plain_path(request.uri().path()) {
        (StatusCode::BAD_REQUEST, "400: not a path of this site\n").into_response()
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// A path with nothing that could climb out of the site: no `..` segment, no encoded
/// dot, slash or backslash, no backslash, no empty segment.
pub fn plain_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.starts_with('/')
        && !path.contains('\\')
        && !path.contains("//")
        && !["%2e", "%2f", "%5c", "%00"]
            .iter()
            .any(|encoded| lower.contains(encoded))
        && !path
            .split('/')
            .any(|segment| segment == ".." || segment == ".")
}

#[derive(Deserialize)]
struct LangQuery {
    lang: Option<String>,
}

/// The progress file as it is now (read, never written), and the page's language:
/// `?lang=`, else `quest --lang … serve`, else the learner's remembered choice, else English.
fn progress_and_lang(app: &App, query: &LangQuery) -> (Progress, Lang) {
    let progress = crate::progress::peek(&app.progress_path);
    let asked = query.lang.as_deref().and_then(|code| code.parse().ok());
    let remembered = progress.as_ref().ok().and_then(|state| state.lang);
    (
        progress,
        asked.or(app.lang).or(remembered).unwrap_or(Lang::En),
    )
}

async fn course_page(Shared(app): Shared<AppRef>, Query(query): Query<LangQuery>) -> Response {
    let (progress, lang) = progress_and_lang(&app, &query);
    html(pages::course_page(&app.site, &progress, lang))
}

async fn achievements_page(
    Shared(app): Shared<AppRef>,
    Query(query): Query<LangQuery>,
) -> Response {
    let (progress, lang) = progress_and_lang(&app, &query);
    html(pages::achievements_page(&app.site, &progress, lang))
}

async fn lesson_page(
    Shared(app): Shared<AppRef>,
    UrlPath(id): UrlPath<String>,
    Query(query): Query<LangQuery>,
) -> Response {
    let (progress, lang) = progress_and_lang(&app, &query);
    // Only a lesson the course lists reaches the file system.
    if app.site.course.ensure_known_lesson(&id, lang).is_err() {
        let page = pages::not_found_page(&app.site, lang, &format!("/lessons/{id}"));
        return (StatusCode::NOT_FOUND, Html(page)).into_response();
    }
    match pages::lesson_page(&app.site, &progress, &id, lang) {
        Ok(page) => html(page),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Html(pages::broken_lesson_page(&app.site, lang, &id, &error)),
        )
            .into_response(),
    }
}

async fn not_found(
    Shared(app): Shared<AppRef>,
    Query(query): Query<LangQuery>,
    request: Request,
) -> Response {
    let (_, lang) = progress_and_lang(&app, &query);
    let page = pages::not_found_page(&app.site, lang, request.uri().path());
    (StatusCode::NOT_FOUND, Html(page)).into_response()
}

/// `/events`: a `ready` event at once, then a `progress` event each time the progress
/// file changes (its number counts the changes).
async fn events(Shared(app): Shared<AppRef>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = app.changes.subscribe();
    let ready = stream::once(async { Ok(Event::default().event("ready").data("0")) });
    let changes = stream::unfold(receiver, |mut receiver| async move {
        receiver.changed().await.ok()?;
        let count = *receiver.borrow_and_update();
        let event = Event::default().event("progress").data(count.to_string());
        Some((Ok(event), receiver))
    });
    Sse::new(ready.chain(changes)).keep_alive(KeepAlive::default())
}

/// Looks at the progress file every [`POLL`]; a change of its bytes (or of whether it
/// exists) is told to every open `/events`.
async fn watch_progress(app: AppRef) {
    let fingerprint = |app: &App| {
        std::fs::read(&app.progress_path)
            .ok()
            .map(|bytes| Sha256::digest(&bytes))
    };
    let mut last = fingerprint(&app);
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let now = fingerprint(&app);
        if now != last {
            last = now;
            app.changes.send_modify(|count| *count += 1);
        }
    }
}

fn html(page: String) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(page)).into_response()
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The address quest serve prints: what the Host header of its requests will say.
pub fn url(address: SocketAddr) -> String {
    format!("http://{}:{}/", address.ip(), address.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_climb_are_not_plain() {
        for path in ["/", "/lessons/mlx-path", "/assets/quest.css", "/events"] {
            assert!(plain_path(path), "{path}");
        }
        for path in [
            "/lessons/../Cargo.toml",
            "/lessons/%2e%2e%2fCargo.toml",
            "/lessons/%2E%2E/x",
            "/assets/../../x",
            "/assets/..%5cx",
            "//etc/passwd",
            "/a\\b",
            "/./x",
        ] {
            assert!(!plain_path(path), "{path}");
        }
    }
}
