//! `review` without `--html`: the pages served on 127.0.0.1, read-only. One request at a time on
//! a plain `TcpListener` (a reviewer's browser, not a public server): GET only, the path must be
//! one the site has (`/`, `/index.html`, `/proposal/<id>.html` with a valid id), and every page is
//! made from the queue as it is at that request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use super::Site;

/// The longest request head read (method, path, headers); a longer one is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serve `site` on `listener` until `max_requests` have been answered (`None`: forever).
pub fn serve(site: &Site, listener: &TcpListener, max_requests: Option<usize>) -> std::io::Result<()> {
    let mut served = 0;
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        // A client that misbehaves loses its connection, not the server.
        let _ = answer(site, stream);
        served += 1;
        if max_requests.is_some_and(|m| served >= m) {
            break;
        }
    }
    Ok(())
}

fn answer(site: &Site, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    // At most MAX_HEAD + 1 bytes are read: a line without end cannot grow without bound.
    let mut reader = BufReader::new(stream.try_clone()?.take(MAX_HEAD as u64 + 1));
    let mut head = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        head.push_str(&line);
        if head.len() > MAX_HEAD {
            respond(&mut stream, 431, "text/plain", "request head too long")?;
            // Closing with unread input would reset the connection and lose the answer: end our
            // side, then read (a bounded amount) until the client closes.
            stream.shutdown(std::net::Shutdown::Write)?;
            let _ = std::io::copy(&mut (&stream).take(1 << 20), &mut std::io::sink());
            return Ok(());
        }
    }
    let first = head.lines().next().unwrap_or("");
    let mut parts = first.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" {
        return respond(&mut stream, 405, "text/plain", "read-only: GET only (accept and reject are CLI commands)");
    }
    let (status, body) = route(site, target);
    respond(&mut stream, status, if status == 200 { "text/html; charset=utf-8" } else { "text/plain" }, &body)
}

/// The page at `target` (a request path, query ignored): (HTTP status, body).
pub fn route(site: &Site, target: &str) -> (u16, String) {
    let path = target.split('?').next().unwrap_or("");
    if path == "/" || path == "/index.html" {
        return match site.index() {
            Ok(p) => (200, p),
            Err(e) => (500, e),
        };
    }
    if let Some(id) = path.strip_prefix("/proposal/").and_then(|p| p.strip_suffix(".html")) {
        if crate::records::is_valid_id(id) {
            return match site.proposal(id) {
                Ok(Some(p)) => (200, p),
                Ok(None) => (404, format!("no proposal {id} in the queue")),
                Err(e) => (500, e),
            };
        }
    }
    (404, "not found: the pages are / and /proposal/<id>.html".to_string())
}

fn respond(stream: &mut TcpStream, status: u16, kind: &str, body: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    };
    // No script, no remote content: the pages are text, tables and inline SVG.
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nContent-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
