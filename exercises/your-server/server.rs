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
use quest::lab::Exercise;
use quest::lm;
use quest::lm::batching::{Batch, Engine, Requests, Scheduler};
use quest::lm::serving::{Api, ApiError, ChatRequest, Chunk};

struct Continuous;

impl Scheduler for Continuous {
    fn join(&mut self, batch: Batch, row: Batch) -> Result<Batch> {
        todo!("your join from continuous-batching")
    }

    fn keep(&mut self, batch: Batch, rows: &[usize]) -> Result<Batch> {
        todo!("your keep from continuous-batching")
    }

    fn serve(&mut self, engine: &Engine, requests: &mut Requests) -> Result<()> {
        todo!("your serve from continuous-batching")
    }
}

struct MyApi;

impl Api for MyApi {
    fn parse(&self, body: &str) -> Result<ChatRequest, ApiError> {
        todo!("the body read as a chat request, or an error naming the field at fault")
    }

    fn event(&self, chunk: &Chunk) -> String {
        todo!("data: <the chunk as one line of JSON>, then a blank line")
    }
}

fn main() -> Result<()> {
    let run = Exercise::from_env()?;
    let (model, tokenizer) = lm::load(&run.model)?;
    run.serve_http(&model, &tokenizer, &MyApi, &mut Continuous)
}
