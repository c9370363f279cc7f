//! Mutations of a program's text at three levels, each a pure function of the text, the seed
//! corpus (for splicing) and a deterministic random stream, so a campaign's inputs depend on its
//! seed alone:
//! * **bytes**: flip a bit, insert or delete bytes, duplicate a range, insert a byte that means
//!   something to a lexer (quotes, braces, NUL, a lone UTF-8 continuation byte);
//! * **tokens**: replace a number by a boundary value (0, −1, 2^31, 2^40, i64::MAX, a literal past
//!   u64), an identifier by one from the seeds' vocabulary, delete, duplicate or swap tokens;
//! * **syntax**: delete, duplicate or nest a `{ … }` block, swap lines, splice a block or a line
//!   from another seed program.

/// splitmix64: small, fast, and the same on every machine (no `rand` version to pin).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Numbers at the edges of what the front end, the layout, the lowering's 32-bit parameters and
/// the cost model's arithmetic hold.
const BOUNDARY_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "255",
    "256",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "1099511627776",
    "4611686018427387904",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "99999999999999999999999",
    "0.0",
    "-0.5",
    "1e308",
    "1e999",
    "-inf",
    "nan",
];

/// Bytes that open, close or break a lexer's state.
const INTERESTING_BYTES: &[u8] = b"{}[]()<>:;,.=+-*/%#\"'\\\n\t \0\x7f\x80\xbf\xc3\xe2\xff_0aZ";

/// One token of a text, by a rough split that works on broken programs too.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Word,
    Number,
    Space,
    Punct,
}

fn tokens(text: &[u8]) -> Vec<(Kind, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        let start = i;
        let kind = if c.is_ascii_digit() {
            while i < text.len() && (text[i].is_ascii_alphanumeric() || text[i] == b'.' || text[i] == b'_') {
                i += 1;
            }
            Kind::Number
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < text.len() && (text[i].is_ascii_alphanumeric() || text[i] == b'_' || text[i] >= 0x80) {
                i += 1;
            }
            Kind::Word
        } else if c.is_ascii_whitespace() {
            while i < text.len() && text[i].is_ascii_whitespace() {
                i += 1;
            }
            Kind::Space
        } else {
            i += 1;
            Kind::Punct
        };
        out.push((kind, start..i));
    }
    out
}

/// The identifiers of the seed programs (keywords, op names, attribute names): the token-level
/// mutations replace words with these, so most mutants stay close to the grammar.
pub fn vocabulary(seeds: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut words = std::collections::BTreeSet::new();
    for s in seeds {
        for (k, r) in tokens(s) {
            if k == Kind::Word && r.len() <= 24 {
                words.insert(s[r].to_vec());
            }
        }
    }
    words.into_iter().collect()
}

/// Applies 1 to 4 stacked mutations to `text`, mostly one: each byte-level change usually stops
/// a program at the parser, so they are the rarest, and the token level (numbers above all),
/// which keeps most mutants parsing, is the commonest.
pub fn mutate(text: &[u8], seeds: &[Vec<u8>], vocab: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    let mut out = text.to_vec();
    let n = match rng.below(20) {
        0..=11 => 1,
        12..=16 => 2,
        17..=18 => 3,
        _ => 4,
    };
    for _ in 0..n {
        out = match rng.below(20) {
            0..=2 => bytes(&out, rng),
            3..=13 => token(&out, vocab, rng),
            _ => syntax(&out, seeds, rng),
        };
        // Keep inputs bounded: a mutant grows by duplication, and the campaign's cost per input
        // should stay in milliseconds.
        out.truncate(256 * 1024);
    }
    out
}

fn range(len: usize, rng: &mut Rng) -> std::ops::Range<usize> {
    if len == 0 {
        return 0..0;
    }
    let a = rng.below(len);
    let b = (a + 1 + rng.below(64.min(len - a))).min(len);
    a..b
}

fn bytes(text: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = text.to_vec();
    let at = rng.below(out.len() + 1);
    match rng.below(5) {
        0 if !out.is_empty() => {
            let i = at.min(out.len() - 1);
            out[i] ^= 1 << rng.below(8);
        }
        1 => {
            let b = *rng.pick(INTERESTING_BYTES);
            out.insert(at, b);
        }
        2 => {
            let r = range(out.len(), rng);
            out.drain(r);
        }
        3 => {
            let r = range(out.len(), rng);
            let chunk = out[r.clone()].to_vec();
            let to = rng.below(out.len() + 1);
            out.splice(to..to, chunk);
        }
        _ => {
            let b = rng.next() as u8;
            out.insert(at, b);
        }
    }
    out
}

fn token(text: &[u8], vocab: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    let toks = tokens(text);
    if toks.is_empty() {
        return text.to_vec();
    }
    let replace = |r: std::ops::Range<usize>, with: &[u8]| {
        let mut out = text[..r.start].to_vec();
        out.extend_from_slice(with);
        out.extend_from_slice(&text[r.end..]);
        out
    };
    // Numbers are where the interesting arithmetic is: aim at one half the time.
    let numbers: Vec<_> = toks.iter().filter(|(k, _)| *k == Kind::Number).map(|(_, r)| r.clone()).collect();
    if !numbers.is_empty() && rng.chance(50) {
        let r = rng.pick(&numbers).clone();
        let with = if rng.chance(75) {
            rng.pick(BOUNDARY_NUMBERS).as_bytes().to_vec()
        } else {
            // A nearby power of two or a random width of digits.
            let v = 1u64 << rng.below(64);
            let v = match rng.below(3) {
                0 => v,
                1 => v.wrapping_sub(1),
                _ => v.wrapping_add(1),
            };
            v.to_string().into_bytes()
        };
        return replace(r, &with);
    }
    let (kind, r) = rng.pick(&toks).clone();
    match rng.below(5) {
        0 | 1 if kind == Kind::Word && !vocab.is_empty() => replace(r, rng.pick(vocab).as_slice()),
        2 => replace(r, b""),
        3 => {
            let dup = [&text[r.clone()], &text[r.clone()]].concat();
            replace(r, &dup)
        }
        _ => {
            let (_, r2) = rng.pick(&toks).clone();
            if r2.start >= r.end {
                let mut out = text[..r.start].to_vec();
                out.extend_from_slice(&text[r2.clone()]);
                out.extend_from_slice(&text[r.end..r2.start]);
                out.extend_from_slice(&text[r.clone()]);
                out.extend_from_slice(&text[r2.end..]);
                out
            } else {
                replace(r, b"")
            }
        }
    }
}

/// The `{ … }` blocks of a text (byte ranges from the brace to its match), nesting ignored past
/// the first unmatched brace.
fn blocks(text: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut open = Vec::new();
    let mut out = Vec::new();
    for (i, &c) in text.iter().enumerate() {
        match c {
            b'{' => open.push(i),
            b'}' => {
                if let Some(s) = open.pop() {
                    out.push(s..i + 1);
                }
            }
            _ => {}
        }
    }
    out
}

fn lines(text: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in text.iter().enumerate() {
        if c == b'\n' {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(start..text.len());
    }
    out
}

fn syntax(text: &[u8], seeds: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    let bl = blocks(text);
    let ls = lines(text);
    let splice = |at: usize, chunk: &[u8]| {
        let mut out = text[..at].to_vec();
        out.extend_from_slice(chunk);
        out.extend_from_slice(&text[at..]);
        out
    };
    match rng.below(6) {
        0 if !bl.is_empty() => {
            let r = rng.pick(&bl).clone();
            [&text[..r.start], b"{ }".as_slice(), &text[r.end..]].concat()
        }
        1 if !bl.is_empty() => {
            let r = rng.pick(&bl).clone();
            splice(r.end, &[b"\n".as_slice(), &text[r.clone()]].concat())
        }
        2 if !bl.is_empty() => {
            // Nest a block inside itself, just after its opening brace.
            let r = rng.pick(&bl).clone();
            splice(r.start + 1, &[b"\n".as_slice(), &text[r.clone()], b"\n"].concat())
        }
        3 if ls.len() >= 2 => {
            let a = rng.pick(&ls).clone();
            let b = rng.pick(&ls).clone();
            let (a, b) = if a.start <= b.start { (a, b) } else { (b, a) };
            if a.end > b.start {
                return text.to_vec();
            }
            [&text[..a.start], &text[b.clone()], &text[a.end..b.start], &text[a.clone()], &text[b.end..]].concat()
        }
        _ if !seeds.is_empty() => {
            // Splice a block or a line of another program in at a line start.
            let other = rng.pick(seeds);
            let obl = blocks(other);
            let chunk = if !obl.is_empty() && rng.chance(50) {
                &other[rng.pick(&obl).clone()]
            } else {
                let ol = lines(other);
                if ol.is_empty() {
                    return text.to_vec();
                }
                &other[rng.pick(&ol).clone()]
            };
            let at = if ls.is_empty() { 0 } else { rng.pick(&ls).start };
            splice(at, &[chunk, b"\n"].concat())
        }
        _ => text.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_mutants() {
        let seeds = vec![b"kernel k target sm_90a\ndim M multiple_of 64\non r { for i in 0..4 { } }\n".to_vec()];
        let vocab = vocabulary(&seeds);
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50).map(|_| mutate(&seeds[0], &seeds, &vocab, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
