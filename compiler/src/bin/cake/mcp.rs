//! `cake mcp`: serve the compiler over MCP on stdin/stdout (`cake::mcp::serve`); a failure to
//! start or a broken session is one `error:` line on stderr and exit 2.

/// Serve until the client closes standard input; 0 then, 2 when the server could not start or
/// the transport failed.
pub fn main() -> u8 {
    let workspace = match cake::mcp::input::Workspace::current() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cake mcp: cannot resolve the working directory: {e}");
            return 2;
        }
    };
    match cake::mcp::serve(workspace, std::io::stdin(), std::io::stdout()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: cake mcp: {e}");
            2
        }
    }
}
