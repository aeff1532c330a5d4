// your-server: your scheduler behind OpenAI's chat API, on 127.0.0.1.
// Your task (see the lesson): paste your `join`, `keep` and `serve` from
// continuous-batching, then write `parse` and `event`. quest checks them alone first,
// then its clients talk to your server.
//
//   parse(body): the body is a JSON object. `messages`: a non-empty array of
//     {"role": "system" | "user" | "assistant", "content": <string>}. `max_tokens`: absent
//     or null (then MAX_TOKENS), else a whole number from 1 to MAX_TOKENS. `stream`: absent
//     or null (false), else true or false. Anything else: an ApiError naming the field
//     (`param`: "messages", "max_tokens", "stream"; none for a body that is not a JSON
//     object).
//
//   event(chunk): "data: " + one line of JSON + "\n\n", the JSON being
//     {"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
//      "choices": [{"index": 0, "delta": {"content": delta}, "finish_reason": null}]}
//     and in the last chunk "delta": {} and "finish_reason": the chunk's.

use anyhow::Result;
use mlx_rs::ops::indexing::{take_axis, IndexOp};
use mlx_rs::ops::{concatenate, pad};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::batching::{Batch, Engine, Requests, Scheduler};
use quest::lm::serving::{Api, ApiError, ChatRequest, Chunk, MAX_TOKENS};
use quest::lm::{self, Message};
use serde_json::{json, Value};

struct Continuous;

/// `x` (`[rows, heads, positions, dim]`) with `n` zero positions in front.
fn pad_left(x: &Array, n: i32) -> Result<Array> {
    if n == 0 {
        return Ok(x.clone());
    }
    Ok(pad(x, &[(0, 0), (0, 0), (n, 0), (0, 0)], None, None)?)
}

impl Scheduler for Continuous {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        if batch.is_empty() {
            return Ok(row);
        }
        let (a, b) = (batch.positions(), row.positions());
        let width = a.max(b);
        let mut layers = Vec::new();
        for ((ka, va), (kb, vb)) in batch.layers().iter().zip(row.layers()) {
            let k = concatenate(&[pad_left(ka, width - a)?, pad_left(&kb, width - b)?], 0)?;
            let v = concatenate(&[pad_left(va, width - a)?, pad_left(&vb, width - b)?], 0)?;
            layers.push((k, v));
        }
        let mut padding: Vec<i32> = batch.padding.iter().map(|p| p + width - a).collect();
        padding.extend(row.padding.iter().map(|p| p + width - b));
        let ids = [batch.ids, row.ids].concat();
        let last = [batch.last, row.last].concat();
        Batch::from_layers(layers, padding, ids, last)
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        if rows.is_empty() {
            return Ok(Batch::empty());
        }
        let index: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
        let index = Array::from_slice(&index, &[index.len() as i32]);
        let drop = rows.iter().map(|&r| batch.padding[r]).min().unwrap_or(0);
        let mut layers = Vec::new();
        for (k, v) in batch.layers() {
            let k = take_axis(&k, &index, 0)?.index((.., .., drop.., ..));
            let v = take_axis(&v, &index, 0)?.index((.., .., drop.., ..));
            layers.push((k, v));
        }
        let padding = rows.iter().map(|&r| batch.padding[r] - drop).collect();
        let ids = rows.iter().map(|&r| batch.ids[r]).collect();
        let last = rows.iter().map(|&r| batch.last[r]).collect();
        Batch::from_layers(layers, padding, ids, last)
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        let mut batch = Batch::empty();
        while requests.unfinished() > 0 {
            // Admit: each arrived request prefilled alone, then a row of the batch.
            for request in requests.arrived() {
                let row = engine.prefill(&request)?;
                if !requests.emit(request.id, row.last[0])? {
                    batch = self.join(batch, row)?;
                }
            }
            if batch.is_empty() {
                requests.wait();
                continue;
            }
            // Step: one token for every row; finished rows leave.
            let next = engine.step(&mut batch)?;
            let mut going = Vec::new();
            for (row, (&id, &token)) in batch.ids.iter().zip(&next).enumerate() {
                if !requests.emit(id, token)? {
                    going.push(row);
                }
            }
            batch = self.keep(batch, &going)?;
        }
        Ok(())
    }
}

struct MyApi;

/// An error about `param` (none: the body as a whole).
fn invalid(message: &str, param: Option<&str>) -> ApiError {
    ApiError {
        message: message.to_owned(),
        param: param.map(str::to_owned),
    }
}

impl Api for MyApi {
    fn parse(&self, body: &str) -> Result<ChatRequest, ApiError> {
        let value: Value = serde_json::from_str(body)
            .map_err(|e| invalid(&format!("the body is not JSON: {e}"), None))?;
        let Some(object) = value.as_object() else {
            return Err(invalid("the body must be a JSON object", None));
        };
        let messages = match object.get("messages").and_then(Value::as_array) {
            Some(list) if !list.is_empty() => list,
            _ => return Err(invalid("`messages` must be a non-empty array", Some("messages"))),
        };
        let mut read = Vec::new();
        for message in messages {
            let role = message.get("role").and_then(Value::as_str);
            let content = message.get("content").and_then(Value::as_str);
            match (role, content) {
                (Some(role @ ("system" | "user" | "assistant")), Some(content)) => {
                    read.push(Message {
                        role: role.to_owned(),
                        content: content.to_owned(),
                    })
                }
                _ => {
                    return Err(invalid(
                        "each message has a role (system, user, assistant) and a string content",
                        Some("messages"),
                    ))
                }
            }
        }
        let max_tokens = match object.get("max_tokens") {
            None | Some(Value::Null) => MAX_TOKENS,
            Some(n) => match n.as_u64() {
                Some(n) if n >= 1 && n <= MAX_TOKENS as u64 => n as usize,
                _ => {
                    return Err(invalid(
                        &format!("`max_tokens` is a whole number from 1 to {MAX_TOKENS}"),
                        Some("max_tokens"),
                    ))
                }
            },
        };
        let stream = match object.get("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(stream)) => *stream,
            Some(_) => return Err(invalid("`stream` is true or false", Some("stream"))),
        };
        Ok(ChatRequest {
            messages: read,
            max_tokens,
            stream,
        })
    }

    fn event(&self, chunk: &Chunk) -> String {
        let delta = match chunk.finish_reason {
            Some(_) => json!({}),
            None => json!({ "content": chunk.delta }),
        };
        let data = json!({
            "id": chunk.id,
            "object": "chat.completion.chunk",
            "created": chunk.created,
            "model": chunk.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": chunk.finish_reason }],
        });
        format!("data: {data}\n\n")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.serve_http(&model, &tokenizer, &MyApi, &mut Continuous)
}
