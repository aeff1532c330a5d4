//! `quest serve`: binds 127.0.0.1, says where, optionally opens a browser, then hands the
//! listener to `quest::serve`, which serves until Ctrl-C.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::{Command, Stdio};

use anyhow::{anyhow, Result};

use quest::course::Lang;

use super::Ctx;

/// The port `quest serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 8717;

pub fn serve(mut ctx: Ctx, chosen: Option<Lang>, port: u16, open: bool) -> Result<()> {
    let progress_path = quest::progress::default_path()?;
    let progress = quest::progress::peek(&progress_path);
    let remembered = progress.as_ref().ok().and_then(|state| state.lang);
    ctx.lang = chosen.or(remembered).unwrap_or(Lang::En);
    let site = quest::serve::Site::new(ctx.course.clone(), quest::device::Backend::detect())?;
    // Loopback only: the pages show the learner's progress to whoever can reach them.
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let listener = TcpListener::bind(address).map_err(|error| {
        let port = port.to_string();
        match error.kind() {
            ErrorKind::AddrInUse => anyhow!(ctx.ui_with("serve_port_in_use", &[("port", &port)])),
            _ => anyhow!(ctx.ui_with(
                "serve_bind_failed",
                &[
                    ("address", &address.to_string()),
                    ("error", &error.to_string())
                ]
            )),
        }
    })?;
    let url = quest::serve::url(listener.local_addr()?);
    println!("{}", ctx.ui_with("serve_listening", &[("url", &url)]));
    if let Err(message) = &progress {
        // The page says it too; the terminal that started the server should not be silent.
        eprintln!("! {message}");
    }
    if open {
        open_browser(&ctx, &url);
    }
    quest::serve::serve(site, progress_path, listener, chosen)
}

/// Asks the system to open `url`; where it cannot, says so and leaves the URL to the learner.
fn open_browser(ctx: &Ctx, url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let failed = |error: String| {
        eprintln!(
            "{}",
            ctx.ui_with("serve_open_failed", &[("error", &error), ("url", url)])
        );
    };
    match Command::new(opener)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            // Waited for aside: some openers return only once the browser exits.
            let message = ctx.ui_with(
                "serve_open_failed",
                &[("error", &format!("{opener} failed")), ("url", url)],
            );
            std::thread::spawn(move || {
                if !child.wait().is_ok_and(|status| status.success()) {
                    eprintln!("{message}");
                }
            });
        }
        Err(error) => failed(format!("{opener}: {error}")),
    }
}
