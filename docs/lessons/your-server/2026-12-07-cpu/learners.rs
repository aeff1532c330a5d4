// your-server: a learner's own server. The scheduler is the one this learner wrote for
// continuous-batching (zeros concatenated for the padding, keep without the trim); the
// edge checks max_tokens with a range.

use anyhow::Result;
use mlx_rs::ops::indexing::take_axis;
use mlx_rs::ops::{concatenate, zeros_dtype};
use mlx_rs::Array;
use quest::lab::Exercise;
use quest::lm::batching::{Batch, Engine, Requests, Scheduler};
use quest::lm::serving::{Api, ApiError, ChatRequest, Chunk, MAX_TOKENS};
use quest::lm::{self, Message};
use serde_json::{json, Value};

struct Continuous;

/// `n` zero positions in front of `x`, `[rows, heads, positions, dim]`.
fn widen(x: &Array, n: i32) -> Result<Array> {
    if n == 0 {
        return Ok(x.clone());
    }
    let s = x.shape();
    let zeros = zeros_dtype(&[s[0], s[1], n, s[3]], x.dtype())?;
    Ok(concatenate(&[zeros, x.clone()], 2)?)
}

impl Scheduler for Continuous {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        if batch.rows() == 0 {
            return Ok(row);
        }
        let target = batch.positions().max(row.positions());
        let grow_batch = target - batch.positions();
        let grow_row = target - row.positions();
        let layers = batch
            .layers()
            .into_iter()
            .zip(row.layers())
            .map(|((k0, v0), (k1, v1))| {
                Ok((
                    concatenate(&[widen(&k0, grow_batch)?, widen(&k1, grow_row)?], 0)?,
                    concatenate(&[widen(&v0, grow_batch)?, widen(&v1, grow_row)?], 0)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut padding = Vec::new();
        for p in &batch.padding {
            padding.push(p + grow_batch);
        }
        for p in &row.padding {
            padding.push(p + grow_row);
        }
        let mut ids = batch.ids.clone();
        ids.extend(&row.ids);
        let mut last = batch.last.clone();
        last.extend(&row.last);
        Batch::from_layers(layers, padding, ids, last)
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        if rows.is_empty() {
            return Ok(Batch::empty());
        }
        let which = Array::from_slice(
            &rows.iter().map(|&r| r as i32).collect::<Vec<i32>>(),
            &[rows.len() as i32],
        );
        let mut layers = Vec::new();
        for (k, v) in batch.layers() {
            layers.push((take_axis(&k, &which, 0)?, take_axis(&v, &which, 0)?));
        }
        Batch::from_layers(
            layers,
            rows.iter().map(|&r| batch.padding[r]).collect(),
            rows.iter().map(|&r| batch.ids[r]).collect(),
            rows.iter().map(|&r| batch.last[r]).collect(),
        )
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        let mut batch = Batch::empty();
        loop {
            for request in requests.arrived() {
                let row = engine.prefill(&request)?;
                let finished = requests.emit(request.id, row.last[0])?;
                if !finished {
                    batch = self.join(batch, row)?;
                }
            }
            if batch.rows() == 0 {
                if requests.unfinished() == 0 {
                    return Ok(());
                }
                requests.wait();
                continue;
            }
            let tokens = engine.step(&mut batch)?;
            let mut stay = Vec::new();
            for r in 0..batch.rows() {
                if !requests.emit(batch.ids[r], tokens[r])? {
                    stay.push(r);
                }
            }
            batch = self.keep(batch, &stay)?;
        }
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
                Some(n) if (1..=MAX_TOKENS as u64).contains(&n) => n as usize,
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
