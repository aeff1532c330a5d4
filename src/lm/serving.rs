//! Your server: a scheduler's loop behind `POST /v1/chat/completions`, OpenAI's chat API,
//! on 127.0.0.1. Each connection gets a thread of its own that reads the request, has the
//! learner's [`Api`] read its body, hands the prompt to the model's thread
//! ([`crate::lm::batching::Requests::live`]) and streams each token back as it comes, as
//! server-sent events the learner's `event` writes. MLX's work stays on the one thread that
//! runs the scheduler; the connections only read, write and detokenize.
//!
//! What travels (OpenAI's shapes, the parts a client reads):
//! - a request: `{"model": …, "messages": [{"role": …, "content": …}, …],
//!   "max_tokens": n, "stream": true}`;
//! - each event of a stream: `data: {"id": …, "object": "chat.completion.chunk",
//!   "created": …, "model": …, "choices": [{"index": 0, "delta": {"content": …},
//!   "finish_reason": null}]}` then a blank line; the last chunk's `finish_reason` is
//!   `"stop"` or `"length"`; then `data: [DONE]`;
//! - without `stream`, one `chat.completion` object (quest writes it);
//! - a request that does not read: status 400 and
//!   `{"error": {"message": …, "type": "invalid_request_error", "param": …, "code": null}}`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Sender};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::lm::batching::Incoming;
use crate::lm::{Message, Tokenizer};

/// The most tokens a request may ask for (and what it gets when it asks for none).
pub const MAX_TOKENS: usize = 64;
/// The largest body a request may have.
const MAX_BODY: usize = 1 << 20;

/// A chat completion request, as the learner's [`Api::parse`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    /// At most [`MAX_TOKENS`].
    pub max_tokens: usize,
    /// Stream the tokens as server-sent events (else one JSON object at the end).
    pub stream: bool,
}

/// Why a request does not read: said to the client with status 400.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub message: String,
    /// The field at fault (`messages`, `max_tokens`, …), where one is.
    pub param: Option<String>,
}

/// One chunk of a stream: `delta` the text since the last chunk (empty in the last),
/// `finish_reason` only in the last (`stop` or `length`).
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub delta: &'a str,
    pub finish_reason: Option<&'a str>,
}

/// The edge of the server the learner writes.
pub trait Api: Send + Sync {
    /// The request's JSON body as a [`ChatRequest`], or why it does not read.
    fn parse(&self, body: &str) -> Result<ChatRequest, ApiError>;
    /// One server-sent event carrying `chunk`: `data: <the chunk's JSON>` and a blank line.
    fn event(&self, chunk: &Chunk) -> String;
}

/// quest's own edge: the baseline, and the reference the learner's is checked against.
pub struct QuestApi;

impl Api for QuestApi {
    fn parse(&self, body: &str) -> Result<ChatRequest, ApiError> {
        crate::lm::pieces::quest_ran(crate::course::spec::Piece::Server);
        quests_parse(body)
    }

    fn event(&self, chunk: &Chunk) -> String {
        format!("data: {}\n\n", chunk_json(chunk))
    }
}

fn bad(message: &str, param: Option<&str>) -> ApiError {
    ApiError {
        message: message.to_owned(),
        param: param.map(str::to_owned),
    }
}

/// quest's reading of a request body.
fn quests_parse(body: &str) -> Result<ChatRequest, ApiError> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| bad(&format!("the body is not JSON: {e}"), None))?;
    let object = value
        .as_object()
        .ok_or_else(|| bad("the body must be a JSON object", None))?;
    let messages = object
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("`messages` must be a non-empty array", Some("messages")))?;
    let messages = messages
        .iter()
        .map(|m| {
            let role = m.get("role").and_then(Value::as_str);
            let content = m.get("content").and_then(Value::as_str);
            match (role, content) {
                (Some(role @ ("system" | "user" | "assistant")), Some(content)) => Ok(Message {
                    role: role.to_owned(),
                    content: content.to_owned(),
                }),
                _ => Err(bad(
                    "each message needs a `role` (system, user or assistant) and a string `content`",
                    Some("messages"),
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let max_tokens = match object.get("max_tokens") {
        None | Some(Value::Null) => MAX_TOKENS,
        Some(n) => match n.as_u64() {
            Some(n) if (1..=MAX_TOKENS as u64).contains(&n) => n as usize,
            _ => {
                return Err(bad(
                    &format!("`max_tokens` must be a whole number from 1 to {MAX_TOKENS}"),
                    Some("max_tokens"),
                ))
            }
        },
    };
    let stream = match object.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("`stream` must be true or false", Some("stream"))),
    };
    Ok(ChatRequest {
        messages,
        max_tokens,
        stream,
    })
}

/// A chunk as OpenAI's `chat.completion.chunk` object.
pub fn chunk_json(chunk: &Chunk) -> Value {
    let delta = if chunk.finish_reason.is_some() && chunk.delta.is_empty() {
        json!({})
    } else {
        json!({"content": chunk.delta})
    };
    json!({
        "id": chunk.id,
        "object": "chat.completion.chunk",
        "created": chunk.created,
        "model": chunk.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": chunk.finish_reason}],
    })
}

/// OpenAI's error body.
pub fn error_json(error: &ApiError) -> Value {
    json!({"error": {
        "message": error.message,
        "type": "invalid_request_error",
        "param": error.param,
        "code": null,
    }})
}

/// A listening server: its port, and the channel its connections hand requests on.
pub struct Listening {
    pub listener: TcpListener,
    pub port: u16,
}

/// Binds 127.0.0.1 on `port` (0: any free port).
pub fn bind(port: u16) -> Result<Listening> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("could not listen on 127.0.0.1:{port}"))?;
    let port = listener.local_addr()?.port();
    Ok(Listening { listener, port })
}

/// Accepts connections until the listener fails, each on a thread of `scope`, handing
/// requests to `requests`.
pub fn accept<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    listening: Listening,
    api: &'env dyn Api,
    tokenizer: &'env Tokenizer,
    model_name: &'env str,
    requests: Sender<Incoming>,
) {
    scope.spawn(move || {
        for (n, stream) in listening.listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            let requests = requests.clone();
            scope.spawn(move || {
                let _ = connection(stream, n, api, tokenizer, model_name, &requests);
            });
        }
    });
}

/// One HTTP request read off `stream`: its method, path and body.
fn read_request(stream: &TcpStream) -> Result<(String, String, String)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    anyhow::ensure!(length <= MAX_BODY, "a body of {length} bytes is too large");
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((method, path, String::from_utf8_lossy(&body).into_owned()))
}

fn respond(stream: &mut TcpStream, status: &str, body: &Value) -> Result<()> {
    let body = body.to_string();
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    Ok(stream.flush()?)
}

/// One client's request, answered: an error, a stream of events, or one object.
fn connection(
    mut stream: TcpStream,
    n: usize,
    api: &dyn Api,
    tokenizer: &Tokenizer,
    model_name: &str,
    requests: &Sender<Incoming>,
) -> Result<()> {
    let (method, path, body) = match read_request(&stream) {
        Ok(request) => request,
        Err(e) => {
            let error = bad(&format!("the request does not read: {e:#}"), None);
            return respond(&mut stream, "400 Bad Request", &error_json(&error));
        }
    };
    if path != "/v1/chat/completions" {
        let error = bad(&format!("no route {path}: POST /v1/chat/completions"), None);
        return respond(&mut stream, "404 Not Found", &error_json(&error));
    }
    if method != "POST" {
        let error = bad("use POST", None);
        return respond(&mut stream, "405 Method Not Allowed", &error_json(&error));
    }
    let chat = match api.parse(&body) {
        Ok(chat) => chat,
        Err(error) => return respond(&mut stream, "400 Bad Request", &error_json(&error)),
    };
    let prompt = tokenizer
        .apply_chat_template(&chat.messages, true, false)
        .and_then(|text| tokenizer.encode(&text));
    let prompt = match prompt {
        Ok(prompt) if !prompt.is_empty() => prompt,
        _ => {
            let error = bad("the messages make no prompt", Some("messages"));
            return respond(&mut stream, "400 Bad Request", &error_json(&error));
        }
    };
    let (sink, tokens) = channel();
    requests
        .send(Incoming {
            prompt,
            max_tokens: chat.max_tokens.clamp(1, MAX_TOKENS),
            sink,
        })
        .context("the server stopped")?;
    let id = format!("chatcmpl-quest-{n}");
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut ids: Vec<u32> = Vec::new();
    let mut said = String::new();
    if chat.stream {
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
        )?;
        stream.flush()?;
    }
    for token in tokens {
        ids.push(token);
        // The text so far, less what was said: a token that ends inside a character
        // waits for the next.
        let text = tokenizer.decode(&ids).unwrap_or_default();
        if text.ends_with('\u{FFFD}') || !text.starts_with(&said) {
            continue;
        }
        let delta = text[said.len()..].to_owned();
        said = text;
        if chat.stream && !delta.is_empty() {
            let chunk = Chunk {
                id: &id,
                created,
                model: model_name,
                delta: &delta,
                finish_reason: None,
            };
            stream.write_all(api.event(&chunk).as_bytes())?;
            stream.flush()?;
        }
    }
    let finish = if ids.len() >= chat.max_tokens {
        "length"
    } else {
        "stop"
    };
    if chat.stream {
        let chunk = Chunk {
            id: &id,
            created,
            model: model_name,
            delta: "",
            finish_reason: Some(finish),
        };
        stream.write_all(api.event(&chunk).as_bytes())?;
        stream.write_all(b"data: [DONE]\n\n")?;
        return Ok(stream.flush()?);
    }
    let completion = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model_name,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": said},
            "finish_reason": finish,
        }],
        "usage": {"completion_tokens": ids.len()},
    });
    respond(&mut stream, "200 OK", &completion)
}

/// quest asked for the piece check on its line: check `api` against quest's edge, then
/// `scheduler`'s `join` and `keep` on `engine` (rows of `prompts`), send the verdict, and
/// end the process when quest asked for the check alone.
pub(crate) fn when_asked(
    api: &dyn Api,
    engine: &crate::lm::batching::Engine,
    prompts: &[Vec<u32>],
    scheduler: &mut dyn crate::lm::batching::Scheduler,
) {
    if let Some((crate::course::spec::Piece::Server, alone)) = crate::line::piece_check() {
        let verdict = crate::lm::pieces::uncounted(|| {
            let mut verdict = check(api);
            if verdict.passed() {
                let rows = crate::lm::batching::check(engine, prompts, scheduler).rows;
                verdict.rows.extend(rows);
            }
            verdict
        });
        crate::lm::piece_check::answer(verdict, alone);
    }
}

/// Bodies a client may send, good and bad, each with what `parse` must make of it.
pub fn cases() -> Vec<(&'static str, String)> {
    let user = r#"[{"role": "user", "content": "Hi"}]"#;
    vec![
        ("a user message, streamed", format!(r#"{{"model": "m", "messages": {user}, "max_tokens": 8, "stream": true}}"#)),
        ("a system and a user message, not streamed", r#"{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 3}"#.to_owned()),
        ("no max_tokens: the most", format!(r#"{{"messages": {user}, "stream": true}}"#)),
        ("not JSON", "{\"messages\": [".to_owned()),
        ("a JSON array, not an object", "[1, 2]".to_owned()),
        ("no messages", r#"{"max_tokens": 8}"#.to_owned()),
        ("messages empty", r#"{"messages": []}"#.to_owned()),
        ("a message without content", r#"{"messages": [{"role": "user"}]}"#.to_owned()),
        ("a message with another role", r#"{"messages": [{"role": "robot", "content": "Hi"}]}"#.to_owned()),
        ("max_tokens 0", format!(r#"{{"messages": {user}, "max_tokens": 0}}"#)),
        ("max_tokens over the most", format!(r#"{{"messages": {user}, "max_tokens": 100000}}"#)),
        ("max_tokens a string", format!(r#"{{"messages": {user}, "max_tokens": "8"}}"#)),
        ("stream a string", format!(r#"{{"messages": {user}, "stream": "yes"}}"#)),
    ]
}

/// `parse` on every case against quest's: the same request where quest reads one, an
/// error naming the same field where quest refuses; `event` read back as the chunk.
pub fn check(api: &dyn Api) -> crate::lm::piece_check::Verdict {
    use crate::lm::piece_check::{quietly, Found, Row, Verdict};
    let mut rows = Vec::new();
    for (shape, body) in cases() {
        let want = quests_parse(&body);
        let got = quietly(|| Ok(api.parse(&body)));
        let found = match (got, want) {
            (Err(found), _) => found,
            (Ok(Ok(got)), Ok(want)) if got == want => Found::Right { difference: 0.0 },
            (Ok(Err(got)), Err(want)) if got.param == want.param && !got.message.is_empty() => {
                Found::Right { difference: 0.0 }
            }
            (Ok(got), want) => Found::Failed {
                message: format!("read as {}, where quest reads {}", said(&got), said(&want)),
            },
        };
        rows.push(Row {
            shape: shape.to_owned(),
            found,
        });
    }
    for (shape, finish) in [
        ("a chunk of text", None),
        ("the last chunk", Some("length")),
    ] {
        let chunk = Chunk {
            id: "chatcmpl-check",
            created: 1,
            model: "m",
            delta: if finish.is_some() {
                ""
            } else {
                "Hello \"there\"\n"
            },
            finish_reason: finish,
        };
        let found = match quietly(|| Ok(api.event(&chunk))) {
            Err(found) => found,
            Ok(event) => match event_problem(&event, &chunk) {
                None => Found::Right { difference: 0.0 },
                Some(message) => Found::Failed { message },
            },
        };
        rows.push(Row {
            shape: shape.to_owned(),
            found,
        });
    }
    Verdict {
        piece: crate::course::spec::Piece::Server,
        rows,
        peaks: None,
    }
}

fn said(parsed: &Result<ChatRequest, ApiError>) -> String {
    match parsed {
        Ok(chat) => format!(
            "{} messages, max_tokens {}, stream {}",
            chat.messages.len(),
            chat.max_tokens,
            chat.stream
        ),
        Err(error) => match &error.param {
            Some(param) => format!("an error about `{param}`"),
            None => "an error about the body".to_owned(),
        },
    }
}

/// What is wrong with `event` as the server-sent event of `chunk`, if anything.
pub fn event_problem(event: &str, chunk: &Chunk) -> Option<String> {
    let Some(data) = event.strip_prefix("data: ") else {
        return Some("an event starts with `data: `".into());
    };
    let Some(data) = data.strip_suffix("\n\n") else {
        return Some("an event ends with a blank line: `\\n\\n`".into());
    };
    if data.contains('\n') {
        return Some("an event's data is one line: the JSON without newlines".into());
    }
    let got: Value = match serde_json::from_str(data) {
        Ok(value) => value,
        Err(e) => return Some(format!("the event's data is not JSON: {e}")),
    };
    let want = chunk_json(chunk);
    let field = |v: &Value, path: &[&str]| {
        path.iter()
            .try_fold(v, |v, key| match key.parse::<usize>() {
                Ok(i) => v.get(i),
                Err(_) => v.get(key),
            })
            .cloned()
    };
    for path in [
        &["id"][..],
        &["object"],
        &["created"],
        &["model"],
        &["choices", "0", "index"],
        &["choices", "0", "finish_reason"],
    ] {
        if field(&got, path) != field(&want, path) {
            return Some(format!(
                "`{}` is {}, not {}",
                path.join("."),
                field(&got, path).unwrap_or(Value::Null),
                field(&want, path).unwrap_or(Value::Null)
            ));
        }
    }
    let content = field(&got, &["choices", "0", "delta", "content"]);
    let want_content = field(&want, &["choices", "0", "delta", "content"]);
    let empty = |c: &Option<Value>| c.as_ref().is_none_or(|c| c.as_str() == Some(""));
    if content != want_content && !(empty(&content) && empty(&want_content)) {
        return Some(format!(
            "`choices.0.delta.content` is {}, not {}",
            content.unwrap_or(Value::Null),
            want_content.unwrap_or(Value::Null)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quests_edge_passes_its_own_check() {
        let verdict = check(&QuestApi);
        assert!(verdict.passed(), "{:?}", verdict.rows);
        assert_eq!(verdict.rows.len(), cases().len() + 2);
    }

    #[test]
    fn an_event_is_one_data_line_and_a_blank_line_of_the_chunk() {
        let chunk = Chunk {
            id: "c",
            created: 1,
            model: "m",
            delta: "Hi",
            finish_reason: None,
        };
        let good = QuestApi.event(&chunk);
        assert_eq!(event_problem(&good, &chunk), None);
        let no_blank = good.trim_end().to_owned() + "\n";
        assert!(event_problem(&no_blank, &chunk)
            .unwrap()
            .contains("blank line"));
        let pretty = format!(
            "data: {}\n\n",
            serde_json::to_string_pretty(&chunk_json(&chunk)).unwrap()
        );
        assert!(event_problem(&pretty, &chunk).unwrap().contains("one line"));
        let other = good.replace("\"Hi\"", "\"Ho\"");
        assert!(event_problem(&other, &chunk).unwrap().contains("content"));
    }

    #[test]
    fn a_live_server_hands_requests_out_and_tokens_back() {
        use crate::lm::batching::Requests;
        let (handed, incoming) = channel();
        let mut requests = Requests::live(incoming, vec![99]);
        assert_eq!(requests.unfinished(), 1, "listening: more may come");
        let (sink, tokens) = channel();
        handed
            .send(Incoming {
                prompt: vec![1, 2],
                max_tokens: 2,
                sink,
            })
            .unwrap();
        let arrived = requests.arrived();
        assert_eq!(arrived.len(), 1);
        assert!(!requests.emit(arrived[0].id, 5).unwrap());
        assert!(requests.emit(arrived[0].id, 6).unwrap());
        assert_eq!(
            tokens.iter().collect::<Vec<_>>(),
            [5, 6],
            "the sink closes at the end"
        );
        drop(handed);
        assert!(!requests.wait(), "no sender left: nothing more comes");
        assert_eq!(requests.unfinished(), 0);
    }
}
