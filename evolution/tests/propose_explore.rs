// Scratch exploration (deleted before delivery).
use std::collections::BTreeMap;

#[test]
#[ignore]
fn explore() {
    let corpus = cake::corpus::Corpus::load("../corpus").unwrap();
    let mut stats: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut n = 0;
    for case in corpus.cases.iter().filter(|c| c.manifest.expect.verdict == cake::corpus::Verdict::Accept && c.manifest.target == "sm_90a") {
        let src = &case.source;
        // every integer literal position
        let bytes = src.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_digit() && (i == 0 || !(bytes[i-1].is_ascii_alphanumeric() || bytes[i-1] == b'_')) {
                let mut j = i;
                while j < bytes.len() && bytes[j].is_ascii_digit() { j += 1; }
                if j < bytes.len() && (bytes[j].is_ascii_alphabetic() && bytes[j] != b'B' || bytes[j] == b'_') { i = j; continue; }
                let v: i64 = src[i..j].parse().unwrap_or(0);
                for nv in [v * 2, v / 2, v + 8, v + 1, 3 * v / 2] {
                    if nv == v || nv <= 0 { continue; }
                    let m = format!("{}{}{}", &src[..i], nv, &src[j..]);
                    let out = cake::check::check_source(&m);
                    if let Some(val) = out.validated {
                        n += 1;
                        match cake::lower::lower(&val) {
                            Ok(_) => {}
                            Err(e) => {
                                let line = src[..i].lines().count();
                                let l = src.lines().nth(line.saturating_sub(1)).unwrap_or("").trim().to_string();
                                stats.entry(format!("{} {}", e.code, e.message.chars().take(70).collect::<String>())).or_default().push(format!("{} :: {} -> {}", case.id, l, nv));
                            }
                        }
                    }
                }
                i = j;
            } else { i += 1; }
        }
    }
    println!("validated mutants: {n}");
    for (k, v) in &stats {
        println!("{} x{}\n   {}\n   {}", k, v.len(), v[0], v.last().unwrap());
    }
}
