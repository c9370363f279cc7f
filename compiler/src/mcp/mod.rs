//! `cake mcp`: a Model Context Protocol server over stdio (newline-delimited JSON-RPC), so that
//! external agents can drive the compiler. Its tools are the CLI's subcommands and answer with
//! the CLI's JSON:
//!
//! - `input`: what a client may send (size limits, control characters, paths confined to the
//!   working directory), refused with coded diagnostics;
//! - `tools`: check, explain, cost, lower, build, corpus_show, in this process;
//! - `child`: run and bench, as `cake run` / `cake bench` child processes with a time limit;
//! - `server`: the protocol side (rmcp), the tool list and argument schemas;
//! - `transport`: stdio lines, where a malformed line gets an error and the session goes on.
//!
//! Stdout carries only protocol messages; anything else the server says goes to stderr.

mod child;
pub mod input;
mod server;
pub mod tools;
mod transport;

pub use server::CakeServer;

/// Serve MCP on stdin/stdout until the client closes the connection; returns the exit status
/// (0 when the client closed it, 2 when the server could not start or the transport failed).
pub fn main() -> u8 {
    let workspace = match input::Workspace::current() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cake mcp: cannot resolve the working directory: {e}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cake mcp: cannot start the async runtime: {e}");
            return 2;
        }
    };
    runtime.block_on(async move {
        use rmcp::ServiceExt;
        let service = match CakeServer::new(workspace).serve(transport::StdioLines::new()).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: cake mcp: the MCP session did not start: {e}");
                return 2;
            }
        };
        match service.waiting().await {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("error: cake mcp: the MCP session ended with an error: {e}");
                2
            }
        }
    })
}
