//! quest's clients for a learner's server (`lm::serving`): plain HTTP/1.1 over a socket
//! to 127.0.0.1, in quest's process, each token's event timestamped on quest's clock as it
//! arrives. [`refusals`] sends requests that do not read and wants OpenAI's error back;
//! [`drive`] runs the load: at each level, that many clients at once, each sending its
//! requests one after another (the next as the last one ends), streamed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

/// One streamed request as its client saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// Which request of the plan (level, client, turn), in the plan's order.
    pub index: usize,
    pub text: String,
    /// From sending the request to the first event with text.
    pub ttft_ms: f64,
    /// Between consecutive events with text.
    pub gaps_ms: Vec<f64>,
    /// From sending the request to `[DONE]`.
    pub latency_ms: f64,
}

/// Every request of one level of the load.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    pub clients: usize,
    pub replies: Vec<Reply>,
}

/// What quest's clients send.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Clients at once, a level each (1, 4, 16).
    pub levels: Vec<usize>,
    /// Requests each client sends, one after another.
    pub turns: usize,
    /// The questions, taken in turn.
    pub questions: Vec<String>,
    /// Tokens each request asks for, taken in turn.
    pub max_tokens: Vec<usize>,
}

impl Plan {
    /// The request of `index`: its question and its tokens.
    pub fn request(&self, index: usize) -> (String, usize) {
        (
            self.questions[index % self.questions.len()].clone(),
            self.max_tokens[index % self.max_tokens.len()],
        )
    }
}

fn connect(port: u16) -> Result<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .with_context(|| format!("could not reach the server on 127.0.0.1:{port}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(600)))?;
    Ok(stream)
}

fn send(stream: &mut TcpStream, port: u16, body: &str) -> Result<()> {
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    Ok(stream.flush()?)
}

/// The status code and headers of a response, read off `reader`.
fn head(reader: &mut impl BufRead) -> Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| {
            format!("the server's answer does not start with a status line: {line:?}")
        })?;
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    Ok((status, headers))
}

/// One request not streamed: its status and its body as JSON.
pub fn request(port: u16, body: &str) -> Result<(u16, Value)> {
    let mut stream = connect(port)?;
    send(&mut stream, port, body)?;
    let mut reader = BufReader::new(stream);
    let (status, headers) = head(&mut reader)?;
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, v)| v.parse().ok());
    let mut text = String::new();
    match length {
        Some(n) => {
            let mut bytes = vec![0; n];
            reader.read_exact(&mut bytes)?;
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        None => {
            reader.read_to_string(&mut text)?;
        }
    }
    let value = serde_json::from_str(&text)
        .with_context(|| format!("the answer's body is not JSON: {text:?}"))?;
    Ok((status, value))
}

/// One request streamed, each event with text timestamped as it arrives.
pub fn stream(port: u16, body: &str, index: usize) -> Result<Reply> {
    let mut stream = connect(port)?;
    let sent = Instant::now();
    send(&mut stream, port, body)?;
    let mut reader = BufReader::new(stream);
    let (status, headers) = head(&mut reader)?;
    if status != 200 {
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        bail!("a good request got status {status}: {rest}");
    }
    let event_stream = headers
        .iter()
        .any(|(name, v)| name == "content-type" && v.starts_with("text/event-stream"));
    if !event_stream {
        bail!("a streamed answer is `content-type: text/event-stream`");
    }
    let ms = |at: Instant| at.duration_since(sent).as_secs_f64() * 1e3;
    let mut text = String::new();
    let mut arrivals = Vec::new();
    let mut finished = false;
    let mut done = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let at = Instant::now();
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            continue;
        }
        let Some(data) = line.strip_prefix("data: ") else {
            bail!("an event's line is `data: …`, not {line:?}");
        };
        if data == "[DONE]" {
            done = Some(at);
            break;
        }
        let chunk: Value = serde_json::from_str(data)
            .with_context(|| format!("an event's data is not JSON: {data:?}"))?;
        if chunk["object"] != "chat.completion.chunk" {
            bail!(
                "an event's object is `chat.completion.chunk`, not {}",
                chunk["object"]
            );
        }
        let choice = &chunk["choices"][0];
        if let Some(delta) = choice["delta"]["content"].as_str() {
            if !delta.is_empty() {
                text.push_str(delta);
                arrivals.push(ms(at));
            }
        }
        if choice["finish_reason"].is_string() {
            finished = true;
        }
    }
    let Some(done) = done else {
        bail!("the stream ended without `data: [DONE]`");
    };
    if !finished {
        bail!("no chunk of the stream had a `finish_reason`");
    }
    Ok(Reply {
        index,
        text,
        ttft_ms: arrivals.first().copied().unwrap_or_else(|| ms(done)),
        gaps_ms: arrivals.windows(2).map(|p| p[1] - p[0]).collect(),
        latency_ms: ms(done),
    })
}

/// A chat request's body.
pub fn body(question: &str, max_tokens: usize, stream: bool) -> String {
    json!({
        "model": "quest",
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "stream": stream,
    })
    .to_string()
}

/// Requests that do not read, each of which must get status 400 and OpenAI's error
/// body; then a good one, which must still be served. `Err` says what went wrong.
pub fn refusals(port: u16) -> Result<()> {
    let bad = [
        ("a body that is not JSON", "{\"messages\": [".to_owned()),
        ("no messages", r#"{"max_tokens": 4}"#.to_owned()),
        (
            "max_tokens 0",
            r#"{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 0}"#.to_owned(),
        ),
    ];
    for (what, body) in bad {
        let (status, answer) = request(port, &body)?;
        let error = &answer["error"];
        if status != 400
            || !error["message"].is_string()
            || error["type"] != "invalid_request_error"
        {
            bail!(
                "{what} got status {status} and {answer}: a request that does not read gets status 400 and {{\"error\": {{\"message\": …, \"type\": \"invalid_request_error\", …}}}}"
            );
        }
    }
    let (status, answer) = request(port, &body("Say hi.", 4, false))?;
    if status != 200 || !answer["choices"][0]["message"]["content"].is_string() {
        bail!("after the bad requests, a good one got status {status} and {answer}: the server must keep serving");
    }
    Ok(())
}

/// The load: each level's clients at once, each sending `plan.turns` streamed requests
/// one after another. Every reply, in the plan's order within its level.
pub fn drive(port: u16, plan: &Plan) -> Result<Vec<Level>> {
    let mut levels = Vec::new();
    let mut next = 0;
    for &clients in &plan.levels {
        let first = next;
        next += clients * plan.turns;
        let replies: Vec<Result<Vec<Reply>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|client| {
                    scope.spawn(move || {
                        (0..plan.turns)
                            .map(|turn| {
                                let index = first + client * plan.turns + turn;
                                let (question, max_tokens) = plan.request(index);
                                stream(port, &body(&question, max_tokens, true), index)
                            })
                            .collect::<Result<Vec<_>>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| bail!("a client thread panicked"))
                })
                .collect()
        });
        let mut all = Vec::new();
        for r in replies {
            all.extend(r?);
        }
        all.sort_by_key(|r| r.index);
        levels.push(Level {
            clients,
            replies: all,
        });
    }
    Ok(levels)
}
