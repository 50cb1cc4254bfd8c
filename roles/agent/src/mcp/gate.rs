//! The front of `hpcagent mcp`'s stdin: every message a client sends is
//! checked before rmcp sees it, so a malformed one gets the JSON-RPC error
//! the protocol names instead of silence. (rmcp drops an unparsable line,
//! and one over its length limit, without a word, and answers bad
//! `tools/call` params as an unknown method.)
//!
//! Replies from the gate and from rmcp share stdout a whole line at a time.

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The longest message a client may send (below rmcp's own limit, so none
/// is dropped there unanswered): a solution file is far smaller.
pub const MAX_MESSAGE: usize = 8 << 20;

/// JSON-RPC's error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// What becomes of one line from the client.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// A well-formed message: rmcp answers it.
    Forward,
    /// The gate answers it with this error.
    Reply(Value),
}

/// Checks one line the client sent.
pub fn check(line: &[u8]) -> Checked {
    let message: Value = match serde_json::from_slice(line) {
        Ok(message) => message,
        Err(e) => {
            return Checked::Reply(error(Value::Null, PARSE_ERROR, format!("parse error: {e}")));
        }
    };
    let Some(fields) = message.as_object() else {
        return Checked::Reply(error(
            Value::Null,
            INVALID_REQUEST,
            "a message is one JSON object".into(),
        ));
    };
    let id = fields.get("id").cloned().unwrap_or(Value::Null);
    if fields.get("method").and_then(Value::as_str) == Some("tools/call") {
        let params = fields.get("params");
        let name = params.and_then(|p| p.get("name"));
        let arguments = params.and_then(|p| p.get("arguments"));
        let fits = name.is_some_and(Value::is_string)
            && arguments.is_none_or(|a| a.is_object() || a.is_null());
        if !fits {
            return Checked::Reply(error(
                id,
                INVALID_PARAMS,
                "invalid params: tools/call takes {\"name\": string, \"arguments\": object}".into(),
            ));
        }
    }
    Checked::Forward
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// One line of input, or the news that it was too long (and skipped).
enum Line {
    Whole(Vec<u8>),
    TooLong(usize),
}

/// Reads the next line, holding at most [`MAX_MESSAGE`] bytes of it.
async fn next_line(reader: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut seen = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match seen {
                0 => None,
                n if n > MAX_MESSAGE => Some(Line::TooLong(n)),
                _ => Some(Line::Whole(line)),
            });
        }
        let (part, used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (&available[..end], end + 1, true),
            None => (available, available.len(), false),
        };
        seen += part.len();
        if seen <= MAX_MESSAGE {
            line.extend_from_slice(part);
        } else {
            line = Vec::new();
        }
        reader.consume(used);
        if done {
            return Ok(Some(if seen > MAX_MESSAGE {
                Line::TooLong(seen)
            } else {
                Line::Whole(line)
            }));
        }
    }
}

/// Passes the client's well-formed messages to rmcp and sends an error
/// reply for each other one, until the client closes its end.
pub async fn inbound(
    input: impl AsyncRead + Unpin,
    mut to_rmcp: impl AsyncWrite + Unpin,
    replies: mpsc::Sender<String>,
) -> std::io::Result<()> {
    let mut input = BufReader::new(input);
    while let Some(line) = next_line(&mut input).await? {
        let reply = match line {
            Line::TooLong(n) => error(
                Value::Null,
                INVALID_REQUEST,
                format!("a message of {n} bytes is over the limit of {MAX_MESSAGE}"),
            ),
            Line::Whole(line) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Whole(line) => match check(&line) {
                Checked::Forward => {
                    to_rmcp.write_all(&line).await?;
                    to_rmcp.write_all(b"\n").await?;
                    continue;
                }
                Checked::Reply(reply) => reply,
            },
        };
        if replies.send(reply.to_string()).await.is_err() {
            break;
        }
    }
    to_rmcp.shutdown().await
}

/// Writes rmcp's lines and the gate's replies to the client, a line at a
/// time, until both have ended.
pub async fn outbound(
    from_rmcp: impl AsyncRead + Unpin,
    mut replies: mpsc::Receiver<String>,
    mut output: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let mut lines = BufReader::new(from_rmcp).lines();
    let (mut rmcp_open, mut gate_open) = (true, true);
    while rmcp_open || gate_open {
        let line = tokio::select! {
            line = lines.next_line(), if rmcp_open => match line? {
                Some(line) => line,
                None => { rmcp_open = false; continue; }
            },
            reply = replies.recv(), if gate_open => match reply {
                Some(reply) => reply,
                None => { gate_open = false; continue; }
            },
        };
        output.write_all(line.as_bytes()).await?;
        output.write_all(b"\n").await?;
        output.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(checked: Checked) -> (Value, i64) {
        match checked {
            Checked::Reply(r) => (r["id"].clone(), r["error"]["code"].as_i64().unwrap()),
            Checked::Forward => panic!("forwarded"),
        }
    }

    #[test]
    fn each_malformed_message_gets_its_error() {
        assert_eq!(code(check(b"{not json")), (Value::Null, PARSE_ERROR));
        assert_eq!(code(check(b"[1,2]")), (Value::Null, INVALID_REQUEST));
        let bad_name = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}"#;
        assert_eq!(code(check(bad_name)), (json!(7), INVALID_PARAMS));
        let bad_args =
            br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"task","arguments":"x"}}"#;
        assert_eq!(code(check(bad_args)), (json!("a"), INVALID_PARAMS));
        let no_params = br#"{"jsonrpc":"2.0","id":8,"method":"tools/call"}"#;
        assert_eq!(code(check(no_params)), (json!(8), INVALID_PARAMS));
        let good = br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"task","arguments":{}}}"#;
        assert_eq!(check(good), Checked::Forward);
        assert_eq!(
            check(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Checked::Forward
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_and_the_next_goes_through() {
        let mut input = vec![b'x'; MAX_MESSAGE + 10];
        input.push(b'\n');
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        let (replies_tx, mut replies) = mpsc::channel(4);
        let mut forwarded = Vec::new();
        inbound(&input[..], &mut forwarded, replies_tx)
            .await
            .unwrap();
        let reply: Value = serde_json::from_str(&replies.recv().await.unwrap()).unwrap();
        assert_eq!(reply["error"]["code"], INVALID_REQUEST);
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("over the limit")
        );
        assert_eq!(
            String::from_utf8(forwarded).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
        );
    }
}
