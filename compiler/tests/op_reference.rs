//! The op reference: `compiler/OPS.md` is what `cake explain --ops --markdown` generates from the
//! catalog (regenerate with that command after a catalog change), and `cake explain --ops` lists
//! every op.

use std::path::Path;

use cake::catalog::Catalog;
use cake::target::TargetTable;

#[test]
fn ops_md_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("OPS.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = cake::op_reference::markdown(Catalog::builtin(), TargetTable::builtin());
    assert!(
        committed == generated,
        "compiler/OPS.md is stale: run `cargo run -p cake -- explain --ops --markdown > compiler/OPS.md`"
    );
}

#[test]
fn explain_ops_lists_every_op_and_each_entry_has_its_parts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cake")).args(["explain", "--ops"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let names: Vec<&str> = Catalog::builtin().ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(listed, names);
    for op in &Catalog::builtin().ops {
        let e = cake::op_reference::explain(op, TargetTable::builtin());
        let signature = format!("{}(", op.name);
        for part in [signature.as_str(), "Targets: ", "Issued by: ", "Hardware:"] {
            assert!(e.contains(part), "`{}` lacks {part:?}:\n{e}", op.name);
        }
        assert!(e.contains("Effects") || op.effects.is_empty(), "`{}` lacks its effects:\n{e}", op.name);
    }
}
