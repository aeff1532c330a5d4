//! The tokenizer and chat template, shaped like Hugging Face's: `encode`, `decode`,
//! `apply_chat_template(messages, add_generation_prompt, enable_thinking)`.
//! Built from `tokenizer.json` + `tokenizer_config.json`, or from a GGUF file's metadata.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde::Serialize;
use serde_json::{json, Value};

use crate::lm::gguf::Gguf;

/// One chat message, as in `messages=[{"role": "user", "content": ...}]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user".into(),
            content: content.into(),
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system".into(),
            content: content.into(),
        }
    }
}

pub struct Tokenizer {
    inner: Vocab,
    chat_template: Option<String>,
    bos_token: String,
    eos_token: String,
    /// Ids that end generation (the EOS token, and `<|im_end|>`-style turn ends).
    pub eos_token_ids: Vec<u32>,
}

/// What turns text into ids and back.
enum Vocab {
    /// A real tokenizer (tokenizer.json, or rebuilt from GGUF metadata).
    Hf(Box<tokenizers::Tokenizer>),
    /// A random-weights model's stand-in, for `size` ids (see [`Tokenizer::stand_in`]).
    StandIn { size: u32 },
}

/// The stand-in's chat template: the roles and contents as plain text.
const STAND_IN_TEMPLATE: &str =
    "{% for m in messages %}<|{{ m.role }}|> {{ m.content }}\n{% endfor %}\
{% if add_generation_prompt %}<|assistant|>{% endif %}";

impl Tokenizer {
    /// A tokenizer for a random-weights model, which has none: each whitespace-separated
    /// word of the text becomes one id (`<tN>` is id N; any other word, a hash of it
    /// below `size`), so the same prompt always gives the same ids; ids decode as `<tN>`.
    /// No id ends generation: every run decodes all the tokens it asks for.
    pub fn stand_in(size: u32) -> Self {
        Self {
            inner: Vocab::StandIn { size: size.max(1) },
            chat_template: Some(STAND_IN_TEMPLATE.to_owned()),
            bos_token: String::new(),
            eos_token: String::new(),
            eos_token_ids: Vec::new(),
        }
    }

    /// From a Hugging Face / MLX model directory.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let file = dir.join("tokenizer.json");
        let inner = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| anyhow!("could not read {}: {e}", file.display()))?;
        let config: Value = match std::fs::read_to_string(dir.join("tokenizer_config.json")) {
            Ok(text) => serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is not valid JSON",
                    dir.join("tokenizer_config.json").display()
                )
            })?,
            Err(_) => json!({}),
        };
        let chat_template = std::fs::read_to_string(dir.join("chat_template.jinja"))
            .ok()
            .or_else(|| config["chat_template"].as_str().map(str::to_owned));
        let token_text = |key: &str| match &config[key] {
            Value::String(s) => s.clone(),
            Value::Object(o) => o
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            _ => String::new(),
        };
        let (bos_token, eos_token) = (token_text("bos_token"), token_text("eos_token"));
        let mut eos_token_ids: Vec<u32> = inner.token_to_id(&eos_token).into_iter().collect();
        // generation_config.json may list more stop ids (Qwen's <|im_end|> and <|endoftext|>).
        if let Ok(text) = std::fs::read_to_string(dir.join("generation_config.json")) {
            if let Ok(gen) = serde_json::from_str::<Value>(&text) {
                match &gen["eos_token_id"] {
                    Value::Number(n) => eos_token_ids.extend(n.as_u64().map(|n| n as u32)),
                    Value::Array(ids) => eos_token_ids
                        .extend(ids.iter().filter_map(|v| v.as_u64()).map(|n| n as u32)),
                    _ => {}
                }
            }
        }
        eos_token_ids.sort_unstable();
        eos_token_ids.dedup();
        Ok(Self {
            inner: Vocab::Hf(Box::new(inner)),
            chat_template,
            bos_token,
            eos_token,
            eos_token_ids,
        })
    }

    /// From GGUF metadata (`tokenizer.ggml.*`): a byte-level BPE rebuilt as a tokenizer.json.
    pub fn from_gguf(gguf: &Gguf, path: &Path) -> Result<Self> {
        let missing = |key: &str| {
            format!(
                "{} has no `{key}`; quest cannot build its tokenizer",
                path.display()
            )
        };
        let model = gguf
            .string("tokenizer.ggml.model")?
            .with_context(|| missing("tokenizer.ggml.model"))?;
        if model != "gpt2" {
            bail!(
                "{} uses a `{model}` tokenizer; quest builds only byte-level BPE (gpt2) tokenizers from GGUF. \
                 Put the model's tokenizer.json next to it or use an MLX model directory",
                path.display()
            );
        }
        let tokens = gguf
            .strings("tokenizer.ggml.tokens")?
            .with_context(|| missing("tokenizer.ggml.tokens"))?;
        let merges = gguf
            .strings("tokenizer.ggml.merges")?
            .with_context(|| missing("tokenizer.ggml.merges"))?;
        let types: Vec<i32> = match gguf.array("tokenizer.ggml.token_type")? {
            Some(a) => a.as_dtype(mlx_rs::Dtype::Int32)?.as_slice::<i32>().to_vec(),
            None => vec![1; tokens.len()],
        };
        let pre = gguf
            .string("tokenizer.ggml.pre")?
            .unwrap_or_else(|| "default".into());
        let id = |key: &str| -> Result<Option<u32>> { Ok(gguf.number(key)?.map(|v| v as u32)) };
        let (bos, eos) = (
            id("tokenizer.ggml.bos_token_id")?,
            id("tokenizer.ggml.eos_token_id")?,
        );

        // token_type 3 = control, 4 = user-defined: matched whole, never split by BPE.
        let added: Vec<Value> = tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| matches!(types.get(*i), Some(3) | Some(4)))
            .map(|(i, t)| {
                json!({"id": i, "content": t, "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": false, "special": types[i] == 3})
            })
            .collect();
        let vocab: serde_json::Map<String, Value> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), json!(i)))
            .collect();
        let spec = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer(&pre),
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                      "ignore_merges": false, "vocab": vocab, "merges": merges},
        });
        let inner = tokenizers::Tokenizer::from_bytes(serde_json::to_vec(&spec)?)
            .map_err(|e| anyhow!("could not build the tokenizer from {}: {e}", path.display()))?;
        let name = |id: Option<u32>| {
            id.and_then(|i| tokens.get(i as usize).cloned())
                .unwrap_or_default()
        };
        let mut eos_token_ids: Vec<u32> = eos.into_iter().collect();
        eos_token_ids.extend(id("tokenizer.ggml.eot_token_id")?);
        eos_token_ids.extend(inner.token_to_id("<|im_end|>"));
        eos_token_ids.sort_unstable();
        eos_token_ids.dedup();
        Ok(Self {
            chat_template: gguf.string("tokenizer.chat_template")?,
            bos_token: name(bos),
            eos_token: name(eos),
            eos_token_ids,
            inner: Vocab::Hf(Box::new(inner)),
        })
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match &self.inner {
            Vocab::Hf(inner) => {
                let encoding = inner
                    .encode(text, false)
                    .map_err(|e| anyhow!("tokenizing failed: {e}"))?;
                Ok(encoding.get_ids().to_vec())
            }
            Vocab::StandIn { size } => Ok(text
                .split_whitespace()
                .map(|word| stand_in_id(word, *size))
                .collect()),
        }
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match &self.inner {
            Vocab::Hf(inner) => inner
                .decode(ids, true)
                .map_err(|e| anyhow!("detokenizing failed: {e}")),
            Vocab::StandIn { .. } => Ok(ids.iter().map(|id| format!("<t{id}>")).collect()),
        }
    }

    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Vocab::Hf(inner) => inner.get_vocab_size(true),
            Vocab::StandIn { size } => *size as usize,
        }
    }

    /// `prompt` as the user's one message in the chat template, with the generation
    /// prompt after it, as ids: what a decode loop prefills.
    pub fn encode_user_prompt(&self, prompt: &str) -> Result<Vec<u32>> {
        self.encode(&self.apply_chat_template(&[Message::user(prompt)], true, false)?)
    }

    /// Renders the model's chat template with a real Jinja engine, as `transformers` does.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        enable_thinking: bool,
    ) -> Result<String> {
        let template = self
            .chat_template
            .as_deref()
            .context("this model has no chat template; give it a plain prompt instead")?;
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, JinjaError> {
                Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
            },
        );
        env.add_template("chat", template)
            .context("the model's chat template does not parse")?;
        let rendered = env
            .get_template("chat")?
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                enable_thinking => enable_thinking,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .context("rendering the model's chat template failed")?;
        Ok(rendered)
    }
}

/// The stand-in's id for one word: `<tN>` is N (below `size`), any other word its FNV-1a
/// hash modulo `size` (stable across runs and machines, unlike std's hasher).
fn stand_in_id(word: &str, size: u32) -> u32 {
    if let Some(id) = word
        .strip_prefix("<t")
        .and_then(|w| w.strip_suffix('>'))
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|&id| id < size)
    {
        return id;
    }
    let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % u64::from(size)) as u32
}

/// The pre-tokenizer a GGUF `tokenizer.ggml.pre` name stands for (llama.cpp's names).
fn pre_tokenizer(pre: &str) -> Value {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split = |pattern: &str| json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false});
    match pre {
        // SmolLM2: digits one by one, then GPT-2's byte-level split.
        "smollm" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
        "qwen2" => json!({"type": "Sequence", "pretokenizers": [
            split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
            byte_level(false)]}),
        "llama-bpe" | "llama3" => json!({"type": "Sequence", "pretokenizers": [
            split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
            byte_level(false)]}),
        _ => byte_level(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stand_in_gives_the_same_ids_for_the_same_text_and_decodes_them_as_tags() {
        let tokenizer = Tokenizer::stand_in(1000);
        let prompt = tokenizer
            .apply_chat_template(
                &[Message::user("What is the capital of France?")],
                true,
                false,
            )
            .unwrap();
        assert_eq!(
            prompt,
            "<|user|> What is the capital of France?\n<|assistant|>"
        );
        let ids = tokenizer.encode(&prompt).unwrap();
        assert_eq!(ids, tokenizer.encode(&prompt).unwrap());
        assert_eq!(ids.len(), 8);
        assert!(ids.iter().all(|&id| id < 1000));
        assert_ne!(ids[1], ids[2]);
        assert_eq!(
            tokenizer.encode("<t7> <t999> <t1000>").unwrap()[..2],
            [7, 999]
        );
        assert_eq!(tokenizer.decode(&[7, 42]).unwrap(), "<t7><t42>");
        assert!(tokenizer.eos_token_ids.is_empty());
        assert_eq!(tokenizer.vocab_size(), 1000);
    }
}
