use cake::span::line_col;
fn show(src: &str) {
    println!("────── {:?}", src);
    match cake::syntax::parse(src) {
        Ok(_) => println!("   OK"),
        Err(es) => for e in es {
            let (l, c) = line_col(src, e.primary.span.start as usize);
            println!("   {l}:{c} {} {} [{}: {:?}]", e.code, e.message, e.primary.message, &src[e.primary.span.range()]);
            for s in &e.secondary { let (l, c) = line_col(src, s.span.start as usize); println!("      also {l}:{c} {} {:?}", s.message, &src[s.span.range()]); }
            if let Some(h) = &e.help { println!("      help: {h}"); }
            for n in &e.notes { println!("      note: {n}"); }
        }
    }
}
#[test] fn show_all() {
    let h = "kernel k target sm_90a\n";
    for body in [
        "on mma {\n    wgmma(acc, a_s[ab.stage], b_s[ab.stage]\n    wgmma_commit()\n}\n",
        "on mma {\n    wgmma(acc,\n          a_s[ab.stage]\n          b_s)\n}\n",
        "on mma {\n    for kb in 0..K / 64\n        wait(ab)\n    }\n}\n",
        "on mma {\n    for kb in 0..K / 64 {\n        wait(ab)\n}\n",
        "on mma {\n    for kb in 0..K / 64 {\n        wait(ab)\n    }\n\non load {\n    f()\n}\n",
        "smem a_s: bf16[128, 64] stages\n",
        "smem a_s bf16[128, 64]\n",
        "role mma warpgroup 1..3\n",
        "pipeline ab stages 4\n",
        "tensor A: bf16[M, K]\n",
        "in A: bf16[M, K] tma [128, 64 swizzle 128B\n",
        "dim M multiple_of 128;\n",
        "const X = 3 +\n",
        "on mma {\n    let x = a[1:4]\n}\n",
        "on mma {\n    acc == 3\n}\n",
        "on mma {\n    zero\n}\n",
        "on mma {\n    t.m(3)\n}\n",
        "on mma {\n    if x {\n    }\n    else {\n    }\n}\n",
        "on mma {\n    let for = 3\n}\n",
        "on mma {\n    x = 1 }\n}\n",
        "on mma {\n    f(a b)\n}\n",
        "on mma {\n    f(a))\n}\n",
        "}\n",
        "grid tiles m = M\n",
        "const X = 0x\nconst Y = 5KB\n",
        "on mma {\n    let x = \"hi\"\n}\n",
        "on mma {\n    let x = a & b\n}\n",
        "on mma { f() g() }\n",
    ] { show(&format!("{h}{body}")); }
    show("dim M\n");
    show("kernal k target sm_90a\ndim M\n");
    show("kernel k sm_90a\n");
    show("");
}
#[test] fn show_more() {
    let h = "kernel k target sm_90a\n";
    for body in [
        "on mma {\n    for kb in 0..K / 64\n        wait(ab)\n    }\n}\n",
        "on mma {\n    for kb in 0..K / 64  # loop\n    {\n        wait(ab)\n    }\n}\n",
        "on mma\n{\n    f()\n}\n",
        "on mma {\n    if x f() \n}\n",
    ] { show(&format!("{h}{body}")); }
}
