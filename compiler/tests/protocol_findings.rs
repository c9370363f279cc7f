//! Protocol findings at their cause: for each bug class of the barrier protocol, a program with
//! exactly one mistake (derived from an example kernel, under `fixtures/protocol/`) makes
//! `cake check` print exactly one error, whose primary span is the cause (the loop bound, the
//! count, the parity, the bytes, the role list, the release, the accumulator read). Findings
//! that follow from it are hidden unless `--all`; binding notes appear only with `--verbose`.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protocol").join(format!("{name}.cake"))
}

/// `cake check --color never ARGS fixtures/protocol/NAME.cake`, run in the fixture directory so
/// the file name in the output is the bare `NAME.cake`.
fn check(name: &str, args: &[&str]) -> Output {
    let path = fixture(name);
    Command::new(env!("CARGO_BIN_EXE_cake"))
        .current_dir(path.parent().expect("fixture directory"))
        .args(["check", "--color", "never"])
        .args(args)
        .arg(path.file_name().expect("fixture file"))
        .output()
        .expect("run cake")
}

/// Human output without the first line, which names the rule directory of this checkout.
fn human(o: &Output) -> String {
    let text = String::from_utf8_lossy(&o.stderr);
    text.lines().filter(|l| !l.starts_with("note: rules:")).map(|l| format!("{l}\n")).collect()
}

fn errors(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("error[")).collect()
}

/// (class, fixture, code, the text the primary caret must sit under on its line)
const CLASSES: &[(&str, &str, &str)] = &[
    ("trip_count", "V104", "K / 32"),
    ("arrival_count", "V102", "count 2"),
    ("initial_parity", "V103", "(kb / 2) % 2"),
    ("tx_bytes", "V101", "32768"),
    ("role_mismatch", "V108", "producer mma consumer load"),
    ("release_before_read", "V453", "release(xp)"),
    ("acc_before_wait", "V457", "acc"),
];

#[test]
fn each_class_has_one_error_at_its_cause() {
    for (name, code, cause) in CLASSES {
        let o = check(name, &[]);
        assert_eq!(o.status.code(), Some(1), "{name}: exit status");
        let text = human(&o);
        let errs = errors(&text);
        assert_eq!(errs.len(), 1, "{name}: exactly one error\n{text}");
        assert!(errs[0].starts_with(&format!("error[{code}]")), "{name}: code {code}\n{text}");
        assert!(text.contains("= help: "), "{name}: a help line\n{text}");
        assert!(!text.contains("binding:"), "{name}: no binding notes without --verbose\n{text}");
        // The primary caret (`^^^`) sits under the cause on the line above it.
        let lines: Vec<&str> = text.lines().collect();
        let caret = lines.iter().position(|l| l.contains('^')).unwrap_or_else(|| panic!("{name}: no caret\n{text}"));
        let (code_line, marks) = (lines[caret - 1], lines[caret]);
        let at = marks.find('^').expect("caret");
        let len = marks[at..].chars().take_while(|c| *c == '^').count();
        assert_eq!(&code_line[at..at + len], *cause, "{name}: primary span\n{text}");
        insta::assert_snapshot!(format!("protocol_{name}"), text);
    }
}

#[test]
fn all_brings_the_follow_on_findings_back() {
    for (name, hidden) in [("trip_count", 2), ("role_mismatch", 4)] {
        let default = human(&check(name, &[]));
        let note = format!("note: {hidden} follow-on findings hidden; --all shows them");
        assert!(default.contains(&note), "{name}: {note}\n{default}");
        let all = human(&check(name, &["--all"]));
        assert_eq!(errors(&all).len(), 1 + hidden, "{name} --all\n{all}");
        assert!(!all.contains("follow-on findings hidden"), "{all}");
        assert_eq!(all.matches("this follows from [").count(), hidden, "{name}: each follow-on names its cause\n{all}");
        assert!(all.contains(&errors(&default)[0].to_string()), "the cause is still shown first among them\n{all}");
    }
}

#[test]
fn json_marks_follow_ons_and_counts_the_hidden_ones() {
    let parse = |o: &Output| -> Vec<serde_json::Value> {
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
    };
    let default = parse(&check("trip_count", &["--message-format", "json"]));
    assert_eq!(default.len(), 1, "{default:?}");
    assert_eq!(default[0]["code"], "V104");
    assert_eq!(default[0]["suppressed"], 2);
    assert!(default[0].get("follows").is_none());
    let all = parse(&check("trip_count", &["--message-format", "json", "--all"]));
    assert_eq!(all.len(), 3, "{all:?}");
    let cause = all.iter().find(|d| d.get("follows").is_none()).expect("the cause");
    assert!(cause.get("suppressed").is_none(), "nothing is hidden with --all");
    for d in all.iter().filter(|d| d.get("follows").is_some()) {
        assert_eq!(d["follows"]["code"], cause["code"]);
        assert_eq!(d["follows"]["line"], cause["primary"]["line"]);
        assert_eq!(d["follows"]["column"], cause["primary"]["column"]);
    }
}

#[test]
fn verbose_shows_the_binding_notes() {
    let quiet = human(&check("trip_count", &[]));
    assert!(!quiet.contains("binding:"), "{quiet}");
    let verbose = human(&check("trip_count", &["--verbose"]));
    assert!(verbose.contains("= note: binding: M = "), "{verbose}");
    assert_eq!(errors(&verbose).len(), 1, "--verbose alone does not bring follow-ons back\n{verbose}");
}
