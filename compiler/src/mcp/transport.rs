//! The line transport of `cake mcp`: one JSON-RPC message per line, read from the input stream and
//! written to the output stream it is given (the CLI passes stdin and stdout).
//!
//! rmcp's own stdio transport ends the session at the first line it cannot parse. This one
//! answers such a line with a JSON-RPC error (`-32700` not JSON, `-32600` not a message this
//! server knows, `-32600` a line over [`MAX_MESSAGE_BYTES`]), carrying the code `M008` and a help
//! line, and reads on: one bad line from a client costs one error, not the session.

use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The longest message line read: room for the largest program ([`super::input::MAX_PROGRAM_BYTES`])
/// and workload with JSON escaping; anything longer is refused unread.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The output side, shared by the session and the reader thread's error replies.
type Output = Arc<Mutex<Box<dyn Write + Send>>>;

/// Lines from `input` (parsed on a reader thread), messages to `output` (one line each, flushed).
pub struct StdioLines {
    incoming: mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
    out: Output,
}

impl StdioLines {
    pub fn new(input: impl io::Read + Send + 'static, output: impl Write + Send + 'static) -> StdioLines {
        let (tx, incoming) = mpsc::unbounded_channel();
        let out: Output = Arc::new(Mutex::new(Box::new(output)));
        let errors = out.clone();
        std::thread::spawn(move || {
            let mut input = io::BufReader::new(input);
            // Ends at end of input (the client closed the session) or when the session is gone.
            while let Ok(Some(line)) = read_line(&mut input, MAX_MESSAGE_BYTES) {
                match line {
                    Line::TooLong(len) => drop(write_line(
                        &errors,
                        &error_response(
                            Value::Null,
                            -32600,
                            format!("M008: a message line of more than {len} bytes; the server reads at most {MAX_MESSAGE_BYTES}"),
                            "send smaller messages: pass a program's text (at most 256 KiB), not generated or concatenated text",
                        ),
                    )),
                    Line::Text(bytes) => match parse(&bytes) {
                        Ok(Some(message)) => {
                            if tx.send(message).is_err() {
                                break;
                            }
                        }
                        Ok(None) => {}
                        Err(reply) => drop(write_line(&errors, &reply)),
                    },
                }
            }
        });
        StdioLines { incoming, out }
    }
}

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Text(Vec<u8>),
    /// A line longer than the limit (its length so far); it was read to its end and dropped.
    TooLong(usize),
}

/// Read a line of at most `max` bytes without holding more than that in memory. `None` at the
/// end of input.
fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut len = 0usize;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(match (len, len > max) {
                (0, _) => None,
                (_, true) => Some(Line::TooLong(len)),
                (_, false) => Some(Line::Text(line)),
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        len += chunk.len();
        if len <= max {
            line.extend_from_slice(chunk);
        } else {
            line = Vec::new();
        }
        let consumed = done.unwrap_or(buf.len());
        r.consume(consumed);
        if done.is_some() {
            return Ok(Some(if len > max { Line::TooLong(len) } else { Line::Text(line) }));
        }
    }
}

/// A message, `None` for a blank line or a notification this server does not know (JSON-RPC
/// answers no notification), or the error response to write back.
fn parse(bytes: &[u8]) -> Result<Option<ClientJsonRpcMessage>, Value> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        error_response(
            Value::Null,
            -32700,
            format!("M008: the line is not JSON: {e}"),
            "send one JSON-RPC 2.0 message per line, e.g. {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
        )
    })?;
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(m) => Ok(Some(m)),
        Err(e) => match value.get("id").filter(|id| id.is_string() || id.is_number()) {
            Some(id) => Err(error_response(
                id.clone(),
                -32600,
                format!("M008: not a request this server knows: {e}"),
                "send JSON-RPC 2.0 (`\"jsonrpc\":\"2.0\"`) with an MCP method (`initialize`, `tools/list`, `tools/call`) and its params",
            )),
            None if value.get("method").is_some() => Ok(None),
            None => Err(error_response(
                Value::Null,
                -32600,
                format!("M008: not a JSON-RPC message: {e}"),
                "send JSON-RPC 2.0 (`\"jsonrpc\":\"2.0\"`) with an MCP method (`initialize`, `tools/list`, `tools/call`) and its params",
            )),
        },
    }
}

fn error_response(id: Value, code: i64, message: String, help: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message, "data": { "code": "M008", "help": help } },
    })
}

/// Write one message line; a closed output (the client left) is not worth a panic.
fn write_line(out: &Mutex<Box<dyn Write + Send>>, value: &impl serde::Serialize) -> io::Result<()> {
    let mut text = serde_json::to_string(value).map_err(io::Error::other)?;
    text.push('\n');
    let mut out = out.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    out.write_all(text.as_bytes())?;
    out.flush()
}

impl Transport<RoleServer> for StdioLines {
    type Error = io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl std::future::Future<Output = Result<(), io::Error>> + Send + 'static {
        let out = self.out.clone();
        async move { write_line(&out, &item) }
    }

    fn receive(&mut self) -> impl std::future::Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded() {
        let mut r = io::Cursor::new(b"ab\n\ntoolongline\nxy".to_vec());
        assert_eq!(read_line(&mut r, 4).unwrap(), Some(Line::Text(b"ab".to_vec())));
        assert_eq!(read_line(&mut r, 4).unwrap(), Some(Line::Text(Vec::new())));
        assert_eq!(read_line(&mut r, 4).unwrap(), Some(Line::TooLong(11)));
        assert_eq!(read_line(&mut r, 4).unwrap(), Some(Line::Text(b"xy".to_vec())));
        assert_eq!(read_line(&mut r, 4).unwrap(), None);
    }

    #[test]
    fn bad_lines_get_coded_errors() {
        let e = parse(b"not json").unwrap_err();
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["error"]["data"]["code"], "M008");
        let e = parse(br#"{"jsonrpc":"2.0","id":7,"method":"no/such"}"#).unwrap_err();
        assert_eq!(e["id"], 7);
        assert_eq!(e["error"]["code"], -32600);
        assert!(parse(br#"{"jsonrpc":"2.0","method":"notifications/no-such"}"#).unwrap().is_none());
        assert!(parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap().is_some());
    }
}
