//! The torch peer script (`benchmarks/torch_peer.py`) runs only on the GPU machine, so CI never
//! executes it. What can be checked here: every op its command line offers has a branch of its
//! own (a lost `elif a.op == "gemv":` once made `gemv` time a row sum and `embedding` time a GEMV),
//! and every peer row of `scripts/device-family-peers.sh` names an op the script offers.

use std::path::Path;

fn repo_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn offered_ops(script: &str) -> Vec<String> {
    let line = script.lines().find(|l| l.contains("p.add_argument(\"op\", choices=[")).expect("the op argument");
    let list = line.split("choices=[").nth(1).and_then(|r| r.split(']').next()).expect("a choices list");
    list.split(',').map(|s| s.trim().trim_matches('"').to_string()).filter(|s| !s.is_empty()).collect()
}

#[test]
fn every_torch_peer_op_has_its_own_branch() {
    let script = repo_file("benchmarks/torch_peer.py");
    let ops = offered_ops(&script);
    assert!(ops.len() >= 15, "{ops:?}");
    // The default branch (`else:`) is the row sum: `rowsum` needs no branch of its own.
    let missing: Vec<&String> = ops
        .iter()
        .filter(|op| op.as_str() != "rowsum")
        .filter(|op| !script.contains(&format!("if a.op == \"{op}\":")) && !script.contains(&format!("elif a.op == \"{op}\":")))
        .collect();
    assert!(missing.is_empty(), "torch_peer.py offers {missing:?} without a branch: they would time the default row sum");
    for op in &ops {
        let branches = script.matches(&format!("a.op == \"{op}\":")).count();
        assert!(branches <= 1, "op `{op}` has {branches} branches");
    }
}

#[test]
fn every_family_peer_row_names_an_offered_op() {
    let ops = offered_ops(&repo_file("benchmarks/torch_peer.py"));
    let peers = repo_file("scripts/device-family-peers.sh");
    let table = peers.split("<<'PEERS'\n").nth(1).and_then(|t| t.split("\nPEERS").next()).expect("the PEERS table");
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows.len() >= 10, "{rows:?}");
    for row in rows {
        let fields: Vec<&str> = row.split('|').collect();
        assert_eq!(fields.len(), 3, "family|case|peer arguments: {row}");
        let op = fields[2].split_whitespace().next().unwrap_or("");
        assert!(ops.iter().any(|o| o == op), "`{row}` runs torch_peer.py `{op}`, which it does not offer");
        assert!(fields[1].starts_with(&format!("{}/", fields[0])), "the case of `{row}` is not in its family");
    }
}
