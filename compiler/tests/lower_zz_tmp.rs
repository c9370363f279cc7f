#[test]
fn dump_lines() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gemm_bf16_ws.cake")).unwrap();
    let m = cake::check::check_source(&src).module.unwrap();
    let v = cake::verify::Validated::assume_verified_unsafe(m);
    let mut o = cake::lower::LowerOptions::with_source("gemm_bf16_ws.cake", &src);
    o.line_directives = true;
    let l = cake::lower::lower_with(&v, &o).unwrap();
    std::fs::write("/tmp/ops/gemm_lines.cu", l.cuda).unwrap();
}
