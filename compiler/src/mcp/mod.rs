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
//! The output stream carries only protocol messages; `cake mcp` (`compiler/src/bin/cake/mcp.rs`)
//! gives it stdout and reports a failed start on stderr.

mod child;
pub mod input;
mod server;
pub mod tools;
mod transport;

pub use server::CakeServer;

/// Serve MCP on `input` / `output` in `workspace` until the client closes the connection, on a
/// current-thread runtime.
pub fn serve(workspace: input::Workspace, input: impl std::io::Read + Send + 'static, output: impl std::io::Write + Send + 'static) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| ServeError::Runtime(e.to_string()))?;
    runtime.block_on(async move {
        use rmcp::ServiceExt;
        let service = CakeServer::new(workspace)
            .serve(transport::StdioLines::new(input, output))
            .await
            .map_err(|e| ServeError::Start(e.to_string()))?;
        service.waiting().await.map(drop).map_err(|e| ServeError::Session(e.to_string()))
    })
}

/// Why the server stopped other than by the client closing the connection.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(String),
    #[error("the MCP session did not start: {0}")]
    Start(String),
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
}
