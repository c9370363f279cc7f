//! What a rule proposal commits, written out: the rule file (TOML, with its doc), the negative
//! corpus cases made of the failing programs, the rewritten expectations of existing negative
//! cases, and the changelog line.

use cake::corpus::tiers::Frontend;
use cake::diag::Severity;
use cake::verify::ConstructKind;

use super::search::Candidate;
use super::{parse_construct, primary_span_key, short, toml_escape, BucketInfo, Program};

/// Rewrite the single-line `findings = [...]` of a manifest's `[expect]` (`None` when there is
/// no such line).
pub fn set_findings(manifest: &str, findings: &[cake::corpus::FindingSpec]) -> Option<String> {
    let list = findings.iter().map(|f| format!("{{ code = \"{}\", line = {}, column = {} }}", f.code, f.line, f.column)).collect::<Vec<_>>().join(", ");
    let mut done = false;
    let mut out = Vec::new();
    let mut in_expect = false;
    // Inside a `findings = [` array written over several lines: its brackets still open.
    let mut open: i64 = 0;
    for line in manifest.lines() {
        let t = line.trim_start();
        if open > 0 {
            open += t.matches('[').count() as i64 - t.matches(']').count() as i64;
            continue;
        }
        if t.starts_with('[') {
            in_expect = t.starts_with("[expect]");
        }
        if in_expect && !done && t.starts_with("findings") && t.contains('[') {
            out.push(format!("findings = [{list}]"));
            done = true;
            open = t.matches('[').count() as i64 - t.matches(']').count() as i64;
        } else {
            out.push(line.to_string());
        }
    }
    (done && open == 0).then(|| out.join("\n") + "\n")
}

#[cfg(test)]
mod set_findings_tests {
    #[test]
    fn a_findings_array_over_several_lines_is_replaced_whole() {
        let m = "program = \"a.cake\"\n\n[expect]\nverdict = \"reject\"\nfindings = [\n  { code = \"V219\", line = 4, column = 2 },\n  { code = \"V226\", line = 4, column = 2 },\n]\n";
        let f = vec![cake::corpus::FindingSpec { code: "V600".into(), line: 4, column: 2 }];
        let out = super::set_findings(m, &f).unwrap();
        assert_eq!(out, "program = \"a.cake\"\n\n[expect]\nverdict = \"reject\"\nfindings = [{ code = \"V600\", line = 4, column = 2 }]\n");
    }
}

/// `wgmma-b-dim-0-multiple-of-16`.
pub fn rule_name(construct: &str, c: &Candidate) -> String {
    let head = construct.split(':').next_back().unwrap_or(construct).replace('*', "call");
    let mut words: Vec<String> = vec![head];
    let describe = |atom: &str| -> String {
        let t = atom.trim();
        let word = |s: &str| s.replace(" + ", " plus ").replace(['(', ')'], " ").replace('-', "minus ").split([' ', '_']).filter(|w| !w.is_empty()).collect::<Vec<_>>().join("-");
        if let Some(rest) = t.strip_prefix('!') {
            return format!("not-{}", word(rest));
        }
        for (op, w) in [(" % ", "multiple-of"), (" <= ", "at-most"), (" >= ", "at-least"), (" == ", "equals"), (" != ", "not")] {
            if let Some((l, r)) = t.split_once(op) {
                let r = r.trim_end_matches(" == 0");
                return format!("{}-{w}-{}", word(l), word(r));
            }
        }
        word(t)
    };
    if let Some(w) = &c.when {
        words.push(format!("if-{}", describe(w)));
    }
    for atom in c.require.split(" && ") {
        words.push(describe(atom));
    }
    let mut s = words.join("-").to_ascii_lowercase();
    s.retain(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let mut s = s.trim_matches('-').to_string();
    if s.len() > 60 {
        s.truncate(60);
        s = s.trim_end_matches('-').to_string();
    }
    s
}

/// Braces are placeholders in rule messages: double them.
fn brace_escape(s: &str) -> String {
    s.replace('{', "{{").replace('}', "}}")
}

fn one_line(s: &str, max: usize) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rule_toml(
    code: &str,
    name: &str,
    category: &str,
    construct: &str,
    c: &Candidate,
    bucket: &BucketInfo,
    failing: usize,
    unexplained: &[(String, String)],
    accepted_programs: usize,
    accepted_instances: usize,
    example: &str,
) -> String {
    let sig = one_line(&bucket.signature, 200);
    let evidence = bucket.evidence_ids.iter().take(8).map(|e| short(e).to_string()).collect::<Vec<_>>().join(", ");
    let more = if bucket.evidence_ids.len() > 8 { format!(" and {} more", bucket.evidence_ids.len() - 8) } else { String::new() };
    let when = c.when.as_ref().map(|w| format!("when = \"{}\"\n", toml_escape(w))).unwrap_or_default();
    let mut s = String::new();
    s.push_str(&format!("# Evolved by cake-evolve-compiler from evidence bucket {} — review before trusting it.\n", bucket.id));
    s.push_str(&format!("code = \"{code}\"\nname = \"{name}\"\ncategory = \"{category}\"\nseverity = \"error\"\napplies_to = \"{construct}\"\n{when}require = \"{}\"\n", toml_escape(&c.require)));
    let which = if unexplained.is_empty() { "every program".to_string() } else { format!("{failing} of the {} programs", failing + unexplained.len()) };
    s.push_str(&format!(
        "message = \"`{{name}}` violates `{}`, which {which} of evidence bucket {} that failed after compilation violated\"\n",
        toml_escape(&brace_escape(&c.require)),
        toml_escape(&bucket.id)
    ));
    s.push_str("label = \"fails the evolved rule\"\n");
    s.push_str(&format!("primary = \"{}\"\n", primary_span_key(parse_construct(construct).map(|(k, _)| k).unwrap_or(ConstructKind::Kernel))));
    s.push_str(&format!(
        "help = \"{}\"\n",
        toml_escape(&brace_escape(&format!("change the program so that `{}` holds: in the evidence, programs where it did not failed with: {}", c.require, one_line(&sig, 120))))
    ));
    s.push_str(&format!("notes = [\"{}\"]\n", toml_escape(&brace_escape(&format!("synthesized ({} form, level {}) from bucket {}; evidence {evidence}{more}", c.form, c.level, bucket.id)))));
    s.push_str("\n[doc]\n");
    let scope = c.when.as_ref().map(|w| format!(" where `{w}`")).unwrap_or_default();
    s.push_str(&format!(
        "what = \"{}\"\n",
        toml_escape(&format!("Evolved rule: every `{construct}`{scope} satisfies `{}`.", c.require))
    ));
    s.push_str(&format!(
        "why = \"\"\"{}\"\"\"\n",
        format!(
            "Mined from run evidence: {failing} failing program(s) of bucket {} failed with `{}`. Every one of them violates `{}` on a `{construct}`, while all {accepted_instances} instance(s) of `{construct}` in the {accepted_programs} corpus program(s) that have one satisfy it. The predicate is the simplest of the rule language that separates the two ({} form); the hardware reason behind it is for the reviewer to confirm.{}{}",
            bucket.id,
            sig.replace("\"\"\"", "'''"),
            c.require,
            c.form,
            constants_text(c),
            unexplained_text(failing, unexplained)
        )
        .replace('\\', "\\\\")
    ));
    s.push_str(&format!("example = \"\"\"{}\"\"\"\n", example.replace('\\', "\\\\").replace("\"\"\"", "'''")));
    s.push_str(&format!(
        "source = \"{}\"\n",
        toml_escape(&format!(
            "cake-evolve-compiler evidence bucket {} (evidence {evidence}{more}); negative cases corpus/verifier-negative/{code}-{name}*.cake{}",
            bucket.id,
            c.constants.iter().map(|k| format!("; constant {}: {}", k.value, k.describe())).collect::<String>()
        ))
    ));
    s
}

/// What a rule's doc says of where its constants come from ("" when it has none).
fn constants_text(c: &Candidate) -> String {
    if c.constants.is_empty() {
        return String::new();
    }
    format!(" Its constants: {}.", c.constants.iter().map(|k| format!("{} is {}", k.value, k.describe())).collect::<Vec<_>>().join("; "))
}

/// What a rule's doc says of the failing programs it leaves unexplained ("" when none).
fn unexplained_text(explained: usize, unexplained: &[(String, String)]) -> String {
    if unexplained.is_empty() {
        return String::new();
    }
    let list = unexplained.iter().map(|(h, k)| format!("{} (kernel `{k}`)", short(h))).collect::<Vec<_>>().join(", ");
    format!(
        " No predicate separates every failing program of the bucket: this one explains {explained} of its {} failing programs and leaves unexplained {list}, which satisfy it: their wrong result has a cause no fact of the verifier shows (a wrong data mapping, say), and they are not among the rule's negative cases.",
        explained + unexplained.len()
    )
}


/// The `n`-th negative corpus case (from 1) of rule `code`: failing program `p` with a header
/// naming its bucket, and its manifest expecting the findings the new verifier (`fe`) reports.
pub(super) fn negative_case(code: &str, name: &str, n: usize, p: &Program, bucket: &BucketInfo, fe: &Frontend) -> [(String, String); 2] {
    let stem = if n == 1 { format!("{code}-{name}") } else { format!("{code}-{name}-{n}") };
    let header = format!(
        "# {code} ({name}): evolved negative case — failing program {} of evidence bucket {}.\n# {}\n",
        short(&p.hash),
        bucket.id,
        one_line(&bucket.signature, 150)
    );
    let program = format!("{header}{}", p.source);
    let out = fe.check(&program);
    let mut findings = cake::corpus::tiers::findings_at(&program, &out.diagnostics, Severity::Error);
    findings.sort();
    let target = out.module.as_ref().map(|m| m.target.clone()).unwrap_or_else(|| "sm_90a".into());
    let list = findings.iter().map(|f| format!("{{ code = \"{}\", line = {}, column = {} }}", f.code, f.line, f.column)).collect::<Vec<_>>().join(", ");
    let manifest = format!(
        "program = \"{stem}.cake\"\ntarget = \"{target}\"\ntiers = [\"static\"]\nnote = \"evolved by cake-evolve-compiler: failing program {} of bucket {} (evidence {})\"\n\n[expect]\nverdict = \"reject\"\nfindings = [{list}]\n",
        p.hash,
        bucket.id,
        toml_escape(&bucket.evidence_ids.iter().take(6).cloned().collect::<Vec<_>>().join(", "))
    );
    [(format!("corpus/verifier-negative/{stem}.cake"), program), (format!("corpus/verifier-negative/{stem}.toml"), manifest)]
}

/// The changelog line of a rule proposal that explains `explained` failing programs and leaves
/// `unexplained` (hash, kernel) ones.
#[allow(clippy::too_many_arguments)]
pub(super) fn changelog_line(code: &str, name: &str, category: &str, construct: &str, cand: &Candidate, bucket: &BucketInfo, explained: usize, unexplained: &[(String, String)]) -> String {
    format!(
        "- Evolved verifier rule {code} `{name}` ({category}): on every `{construct}`{} require `{}`; from evidence bucket {} ({}).",
        cand.when.as_ref().map(|w| format!(" where `{w}`")).unwrap_or_default(),
        cand.require,
        bucket.id,
        if unexplained.is_empty() {
            format!("{explained} failing programs")
        } else {
            format!(
                "explains {explained} of its {} failing programs, not {}",
                explained + unexplained.len(),
                unexplained.iter().map(|(_, k)| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            )
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_kebab_case() {
        let c = Candidate { when: None, require: "b_dim(0) % 16 == 0".into(), level: 1, form: String::new(), facts: vec![], constants: vec![] };
        assert_eq!(rule_name("call:wgmma", &c), "wgmma-b-dim-0-multiple-of-16");
        let g = Candidate { when: Some("swizzle != 0".into()), require: "align % swizzle_atom == 0".into(), level: 2, form: String::new(), facts: vec![], constants: vec![] };
        assert_eq!(rule_name("smem", &g), "smem-if-swizzle-not-0-align-multiple-of-swizzle-atom");
    }
}
