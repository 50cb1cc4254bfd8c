//! Reading an answer's token usage as it passes, in the three shapes a
//! model server answers in: OpenAI chat and completions (`usage`; in a
//! stream, its last chunk's), the Responses API (`response.completed` and
//! its kin carry `response.usage`) and Anthropic Messages (`message_start`
//! carries the input, `message_delta` the output so far).
//!
//! Counts in an answer are running totals (a stream may repeat them), so an
//! answer's tally keeps the largest input and output it saw, never a sum.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde_json::Value;

/// The most of a plain (not streamed) answer kept to be read at its end.
const JSON_KEPT: usize = 16 << 20;

/// One answer's tokens.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Tally {
    pub input: u64,
    pub output: u64,
}

impl Tally {
    /// Takes in what one event (or a whole answer) says it cost.
    pub fn see(&mut self, event: &Value) {
        let usage = match event["type"].as_str() {
            Some("message_start") => &event["message"]["usage"],
            Some(kind) if kind.starts_with("response.") => &event["response"]["usage"],
            _ => &event["usage"],
        };
        if !usage.is_object() {
            return;
        }
        let n = |key: &str| usage[key].as_u64().unwrap_or(0);
        // Anthropic counts the cache's reads and writes apart from its input.
        let input = n("prompt_tokens")
            + n("input_tokens")
            + n("cache_creation_input_tokens")
            + n("cache_read_input_tokens");
        let output = n("completion_tokens") + n("output_tokens");
        self.input = self.input.max(input);
        self.output = self.output.max(output);
    }

    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

/// Whether an answer is a stream of server-sent events or one document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    Events,
    Document,
}

/// An answer on its way to the client: read as it passes, and added to
/// the attempt's count when it is dropped (ended, or cut off by the
/// client), so an answer never counts twice nor a cut one never.
pub struct Tap {
    shape: Shape,
    /// Take out the usage chunk the meter asked for on the client's behalf.
    strip: bool,
    /// Events: the line not yet ended; a document: what was kept of it.
    pending: Vec<u8>,
    /// The blank line that ends a taken-out event goes with it.
    skip_blank: bool,
    tally: Tally,
    count: Arc<AtomicU64>,
}

impl Tap {
    pub fn new(shape: Shape, strip: bool, count: Arc<AtomicU64>) -> Tap {
        Tap {
            shape,
            strip,
            pending: Vec::new(),
            skip_blank: false,
            tally: Tally::default(),
            count,
        }
    }

    /// What of `chunk` goes on to the client.
    pub fn pass(&mut self, chunk: &[u8]) -> Bytes {
        match self.shape {
            Shape::Document => {
                if self.pending.len() + chunk.len() <= JSON_KEPT {
                    self.pending.extend_from_slice(chunk);
                }
                Bytes::copy_from_slice(chunk)
            }
            Shape::Events => {
                self.pending.extend_from_slice(chunk);
                let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') else {
                    return Bytes::new();
                };
                let rest = self.pending.split_off(end + 1);
                let lines = std::mem::replace(&mut self.pending, rest);
                let mut out = Vec::with_capacity(lines.len());
                for line in lines.split_inclusive(|&b| b == b'\n') {
                    if self.keep(line) {
                        out.extend_from_slice(line);
                    }
                }
                Bytes::from(out)
            }
        }
    }

    /// What is left when the answer ends: a last line without its newline.
    pub fn finish(&mut self) -> Bytes {
        match self.shape {
            Shape::Document => Bytes::new(),
            Shape::Events => {
                let line = std::mem::take(&mut self.pending);
                if self.keep(&line) {
                    Bytes::from(line)
                } else {
                    Bytes::new()
                }
            }
        }
    }

    /// Reads one line of events; whether it goes on to the client.
    fn keep(&mut self, line: &[u8]) -> bool {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            return !std::mem::take(&mut self.skip_blank);
        }
        self.skip_blank = false;
        let Some(data) = text.strip_prefix("data:") else {
            return true;
        };
        let Ok(event) = serde_json::from_str::<Value>(data.trim_start()) else {
            return true;
        };
        self.tally.see(&event);
        let added = self.strip
            && event["choices"].as_array().is_some_and(Vec::is_empty)
            && event["usage"].is_object();
        self.skip_blank = added;
        !added
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        if self.shape == Shape::Document
            && let Ok(answer) = serde_json::from_slice::<Value>(&self.pending)
        {
            self.tally.see(&answer);
        }
        self.count.fetch_add(self.tally.total(), Ordering::Relaxed);
    }
}

/// A request's body with a streamed chat or text completion asking for its
/// usage (`stream_options.include_usage`) where the client did not: (the
/// body to send, whether the meter asked).
pub fn ask_for_usage(path: &str, body: Bytes) -> (Bytes, bool) {
    if !(path.ends_with("/chat/completions") || path.ends_with("/completions")) {
        return (body, false);
    }
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(&body) else {
        return (body, false);
    };
    if request.get("stream") != Some(&Value::Bool(true))
        || request
            .get("stream_options")
            .is_some_and(|o| o["include_usage"] == Value::Bool(true))
    {
        return (body, false);
    }
    let options = request
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    if !options.is_object() {
        *options = Value::Object(Default::default());
    }
    options["include_usage"] = Value::Bool(true);
    match serde_json::to_vec(&request) {
        Ok(asked) => (Bytes::from(asked), true),
        Err(_) => (body, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(shape: Shape, strip: bool, chunks: &[&str]) -> (String, u64) {
        let count = Arc::new(AtomicU64::new(0));
        let mut out = Vec::new();
        {
            let mut tap = Tap::new(shape, strip, count.clone());
            for chunk in chunks {
                out.extend_from_slice(&tap.pass(chunk.as_bytes()));
            }
            out.extend_from_slice(&tap.finish());
        }
        (
            String::from_utf8(out).unwrap(),
            count.load(Ordering::Relaxed),
        )
    }

    #[test]
    fn a_plain_chat_answer_counts_its_usage_and_passes_unchanged() {
        let answer = r#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107}}"#;
        let (out, n) = through(Shape::Document, false, &[&answer[..30], &answer[30..]]);
        assert_eq!((out.as_str(), n), (answer, 107));
    }

    #[test]
    fn a_chat_stream_counts_its_last_chunk_and_loses_the_chunk_the_meter_asked_for() {
        let events = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":5}}\n\n\
                      data: [DONE]\n\n";
        // Split mid-line: the tap holds a line until it ends.
        let (out, n) = through(
            Shape::Events,
            true,
            &[&events[..20], &events[20..90], &events[90..]],
        );
        assert_eq!(n, 55);
        assert_eq!(
            out,
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\ndata: [DONE]\n\n"
        );
        // A client that asked for the chunk keeps it.
        let (kept, _) = through(Shape::Events, false, &[events]);
        assert_eq!(kept, events);
    }

    #[test]
    fn an_anthropic_stream_counts_the_start_s_input_and_the_last_output() {
        let events = "event: message_start\n\
            data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":4,\"output_tokens\":1}}}\n\n\
            event: message_delta\n\
            data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":6}}\n\n\
            event: message_delta\n\
            data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":10}}";
        let (out, n) = through(Shape::Events, true, &[events]);
        assert_eq!((out.as_str(), n), (events, 24));
    }

    #[test]
    fn a_responses_stream_counts_its_completed_event() {
        let events = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
            event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":30,\"output_tokens\":3,\"total_tokens\":33}}}\n\n";
        assert_eq!(through(Shape::Events, false, &[events]).1, 33);
    }

    #[test]
    fn an_answer_cut_off_counts_what_it_had_said() {
        let count = Arc::new(AtomicU64::new(0));
        let mut tap = Tap::new(Shape::Events, false, count.clone());
        tap.pass(
            b"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9}}}\n",
        );
        drop(tap);
        assert_eq!(count.load(Ordering::Relaxed), 9);
    }

    #[test]
    fn only_a_streamed_completion_without_usage_is_asked_for_it() {
        let asked = |path: &str, body: &str| {
            let (body, asked) = ask_for_usage(path, Bytes::from(body.to_string()));
            (serde_json::from_slice::<Value>(&body).unwrap(), asked)
        };
        let (body, yes) = asked(
            "/v1/chat/completions",
            r#"{"stream":true,"stream_options":{"continuous_usage_stats":false}}"#,
        );
        assert!(yes);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["stream_options"]["continuous_usage_stats"], false);
        assert!(!asked("/v1/chat/completions", r#"{"stream":false}"#).1);
        assert!(
            !asked(
                "/v1/chat/completions",
                r#"{"stream":true,"stream_options":{"include_usage":true}}"#
            )
            .1
        );
        assert!(!asked("/v1/messages", r#"{"stream":true}"#).1);
        assert!(!asked("/v1/responses", r#"{"stream":true}"#).1);
    }
}
