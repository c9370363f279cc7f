//! The CUDA text writer: indented lines, each remembering the program span it was lowered from,
//! rendered at the end with `// cake: line L` markers (and optionally `#line` directives) and the
//! CUDA-line → span map.

use crate::span::{line_col, Span};

use super::LowerOptions;

#[derive(Clone, Debug)]
pub(crate) struct Line {
    pub text: String,
    pub span: Option<Span>,
    /// A marker comment line (`// cake: line L: ...`): not preceded by a `#line`.
    pub marker: bool,
}

#[derive(Default)]
pub(crate) struct Writer {
    pub lines: Vec<Line>,
    indent: usize,
    span: Option<Span>,
}

impl Writer {
    pub fn line(&mut self, text: impl AsRef<str>) {
        let text = text.as_ref();
        if text.is_empty() {
            self.lines.push(Line { text: String::new(), span: None, marker: false });
            return;
        }
        let pad = "    ".repeat(self.indent);
        for l in text.lines() {
            // Preprocessor lines (`#pragma`) keep the indentation for readability.
            self.lines.push(Line { text: format!("{pad}{l}"), span: self.span, marker: false });
        }
    }

    /// A line followed by one more indentation level.
    pub fn open(&mut self, text: impl AsRef<str>) {
        self.line(text);
        self.indent += 1;
    }

    /// One less indentation level, then a line.
    pub fn close(&mut self, text: impl AsRef<str>) {
        self.indent = self.indent.saturating_sub(1);
        self.line(text);
    }

    /// One less level for this line, then back: `} else {`.
    pub fn reopen(&mut self, text: impl AsRef<str>) {
        self.indent = self.indent.saturating_sub(1);
        self.line(text);
        self.indent += 1;
    }

    pub fn blank(&mut self) {
        if self.lines.last().is_some_and(|l| !l.text.is_empty()) {
            self.lines.push(Line { text: String::new(), span: None, marker: false });
        }
    }

    pub fn set_span(&mut self, span: Option<Span>) -> Option<Span> {
        std::mem::replace(&mut self.span, span)
    }

    /// The marker comment naming the program construct at `span`.
    pub fn marker(&mut self, span: Span, opts: &LowerOptions<'_>, what: &str) {
        let text = match &opts.source {
            Some(src) => {
                let (line, _) = line_col(src.text, span.start as usize);
                let first = src.text.get(span.range()).and_then(|t| t.lines().next()).unwrap_or("").trim();
                let first = first.trim_end_matches('{').trim_end();
                if what.is_empty() {
                    format!("// cake: line {line}: {first}")
                } else {
                    format!("// cake: line {line}: {first}  ({what})")
                }
            }
            None => {
                if what.is_empty() {
                    format!("// cake: bytes {}..{}", span.start, span.end)
                } else {
                    format!("// cake: bytes {}..{} ({what})", span.start, span.end)
                }
            }
        };
        let pad = "    ".repeat(self.indent);
        self.lines.push(Line { text: format!("{pad}{text}"), span: Some(span), marker: true });
    }

    pub fn append(&mut self, other: Writer) {
        self.lines.extend(other.lines);
    }
}

/// Render lines to text: returns the CUDA and the (1-based CUDA line, span) map. With
/// `line_directives` and a source, each line lowered from a program construct is preceded by
/// `#line L "file.cake"` and the first line after such a run by `#line N "kernel.cu"`, so that
/// NVRTC/ptxas messages and `-lineinfo` point at the `.cake` line.
pub(crate) fn render(lines: &[Line], opts: &LowerOptions<'_>) -> (String, Vec<(u32, Span)>) {
    let mut out = String::new();
    let mut map = Vec::new();
    let mut phys: u32 = 0; // lines written so far
    let directives = opts.line_directives && opts.source.is_some();
    let mut in_cake = false;
    for l in lines {
        // Marker comments need no attribution of their own: they neither get a `#line` nor end a
        // run of program lines.
        if directives && !l.marker {
            if let (Some(span), Some(src)) = (l.span, &opts.source) {
                let (line, _) = line_col(src.text, span.start as usize);
                out.push_str(&format!("#line {line} \"{}\"\n", src.name));
                phys += 1;
                in_cake = true;
            } else if in_cake {
                out.push_str(&format!("#line {} \"{}\"\n", phys + 2, opts.cuda_name));
                phys += 1;
                in_cake = false;
            }
        }
        out.push_str(&l.text);
        out.push('\n');
        phys += 1;
        if let Some(span) = l.span {
            map.push((phys, span));
        }
    }
    (out, map)
}
