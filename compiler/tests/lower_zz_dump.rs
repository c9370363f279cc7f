#[test]
fn dump() {
    for f in ["gemm_bf16_ws", "kmeans_assign", "gemm_bf16_sm80"] {
        let src = std::fs::read_to_string(format!("{}/../examples/{f}.cake", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let out = cake::check::check_source(&src);
        let m = out.module.unwrap();
        std::fs::write(format!("/tmp/dump/{f}.txt"), format!("{:#?}", m)).unwrap();
        let mut s = String::new();
        for (h, e) in m.exprs.iter() { s += &format!("{:?} {:?} :: {:?}  `{}`\n", h, e.kind, e.ty, &src[m.exprs.span(h).range()]); }
        for (h, e) in m.stmts.iter() { s += &format!("S{:?} {:?}\n", h, e); }
        std::fs::write(format!("/tmp/dump/{f}.exprs"), s).unwrap();
    }
}
