//! The workload contract: the examples load, and every kind of malformed input gets its coded
//! error (never a panic), naming the key.

use std::path::{Path, PathBuf};

use cake_evolve_kernel::contract::{sha256_hex, Contract};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example(name: &str) -> String {
    std::fs::read_to_string(root().join("contracts").join(name)).expect("example contract")
}

/// Write `text` as a contract inside kernel-evolution/contracts' sibling temp dir, so its
/// relative seed paths (`../seeds/…`) resolve as the examples' do.
fn load_text(text: &str) -> Result<Contract, cake_evolve_kernel::error::KevoError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let contracts = dir.path().join("contracts");
    std::fs::create_dir_all(&contracts).unwrap();
    copy_dir(&root().join("seeds"), &dir.path().join("seeds"));
    let path = contracts.join("c.toml");
    std::fs::write(&path, text).unwrap();
    Contract::load(&path)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn code(text: &str) -> (String, String) {
    match load_text(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => (e.code.to_string(), e.to_string()),
    }
}

#[test]
fn the_example_contracts_load_and_hash_their_bytes() {
    for name in ["kmeans-assign.toml", "gemm-bf16.toml", "softmax.toml"] {
        let path = root().join("contracts").join(name);
        let c = Contract::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(c.hash, sha256_hex(&std::fs::read(&path).unwrap()));
        assert_eq!(c.seeds.len(), 1);
        assert!(c.tactics_dir().is_dir());
    }
}

#[test]
fn kmeans_headline_and_naive_seed_are_the_issues() {
    let c = Contract::load(&root().join("contracts/kmeans-assign.toml")).unwrap();
    let h = &c.file.workload.headline;
    assert_eq!((h["B"], h["N"], h["K"], h["D"]), (32, 65536, 1024, 128));
    let seed = &c.seeds[0].source;
    // One consumer warpgroup, one-stage centroid pipeline, non-persistent.
    assert!(seed.contains("const WG = 1"), "{seed}");
    assert!(seed.contains("pipeline cs: stages 1"), "{seed}");
    assert!(!seed.contains("persistent"));
    // The correctness shapes are not the timed one.
    assert!(!c.file.workload.shapes.contains(h));
}

#[test]
fn a_missing_file_is_k001() {
    let e = Contract::load(Path::new("/nonexistent/contract.toml")).unwrap_err();
    assert_eq!(e.code, "K001");
}

#[test]
fn bad_toml_and_unknown_keys_are_k002_with_the_key() {
    assert_eq!(code("schema = ").0, "K002");
    let (c, msg) = code(&example("softmax.toml").replace("[budget]", "[budget]\ngpu_evalutions = 3"));
    assert_eq!(c, "K002");
    assert!(msg.contains("gpu_evalutions"), "{msg}");
    let (c, msg) = code(&example("softmax.toml").replace("gpu_evaluations = 60", "gpu_evaluations = \"many\""));
    assert_eq!(c, "K002");
    assert!(msg.contains("line"), "{msg}");
}

#[test]
fn empty_or_wrong_fields_are_k003() {
    assert_eq!(code(&example("softmax.toml").replace("cake.kernel-contract/1", "cake.kernel-contract/9")).0, "K003");
    assert_eq!(code(&example("softmax.toml").replace("name = \"softmax\"", "name = \"Soft Max\"")).0, "K003");
    assert_eq!(code(&example("softmax.toml").replace("target = \"sm_90a\"", "target = \"sm_91\"")).0, "K003");
    assert_eq!(code(&example("softmax.toml").replace("gpu_per_generation = 2", "gpu_per_generation = 9")).0, "K003");
}

#[test]
fn a_zero_budget_is_k004() {
    let (c, msg) = code(&example("softmax.toml").replace("gpu_evaluations = 60", "gpu_evaluations = 0"));
    assert_eq!(c, "K004");
    assert!(msg.contains("budget.gpu_evaluations"), "{msg}");
    assert_eq!(code(&example("softmax.toml").replace("wall_seconds = 600", "wall_seconds = 0")).0, "K004");
}

#[test]
fn a_missing_seed_is_k005() {
    assert_eq!(code(&example("softmax.toml").replace("softmax_bf16_naive.cake", "nope.cake")).0, "K005");
    assert_eq!(code(&example("softmax.toml").replace("seeds = [\"../seeds/softmax_bf16_naive.cake\"]", "seeds = []")).0, "K005");
}

#[test]
fn a_seed_that_does_not_verify_is_k006_with_its_finding() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::fs::read_to_string(root().join("seeds/kmeans_assign_naive.cake")).unwrap();
    // 300 registers per consumer thread: past setmaxnreg's range, the verifier rejects it.
    std::fs::write(dir.path().join("bad.cake"), seed.replace("const MMA_REGS = 240", "const MMA_REGS = 300")).unwrap();
    let text = example("kmeans-assign.toml").replace("../seeds/kmeans_assign_naive.cake", "bad.cake");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    let e = Contract::load(&path).unwrap_err();
    assert_eq!(e.code, "K006", "{e}");
    assert!(e.message.contains("does not verify"), "{e}");
}

#[test]
fn a_shape_that_breaks_multiple_of_is_k007() {
    let (c, msg) = code(&example("softmax.toml").replace("{ R = 448 }", "{ R = 450 }"));
    assert_eq!(c, "K007");
    assert!(msg.contains("450") && msg.contains("workload"), "{msg}");
}

#[test]
fn a_missing_peer_is_k008() {
    // cuBLAS has no softmax peer.
    let with_cublas = example("softmax.toml").replace("[search]", "[[reference]]\nname = \"cublas\"\nkind = \"cublas\"\n\n[search]");
    assert_eq!(code(&with_cublas).0, "K008");
    let missing = example("softmax.toml").replace("[search]", "[[reference]]\nname = \"torch\"\nkind = \"command\"\ncommand = [\"no-such-peer-program-xyz\"]\n\n[search]");
    let (c, msg) = code(&missing);
    assert_eq!(c, "K008");
    assert!(msg.contains("no-such-peer-program-xyz"), "{msg}");
    let empty = example("softmax.toml").replace("[search]", "[[reference]]\nname = \"torch\"\nkind = \"command\"\n\n[search]");
    assert_eq!(code(&empty).0, "K008");
}

#[test]
fn a_seed_for_another_target_is_k009() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::fs::read_to_string(root().join("seeds/softmax_bf16_naive.cake")).unwrap();
    std::fs::write(dir.path().join("s.cake"), seed.replace("target sm_90a", "target sm_80")).unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, example("softmax.toml").replace("../seeds/softmax_bf16_naive.cake", "s.cake")).unwrap();
    assert_eq!(Contract::load(&path).unwrap_err().code, "K009");
}

#[test]
fn peer_placeholders_take_headline_dims_and_unknown_ones_are_k008() {
    let c = Contract::load(&root().join("contracts/softmax.toml")).unwrap();
    let peer = &c.file.references[0];
    let args: Vec<String> = peer.command.iter().map(|a| c.peer_arg(a)).collect();
    assert!(args.windows(2).any(|w| w[0] == "--rows" && w[1] == "16384"), "{args:?}");
    assert!(args.windows(2).any(|w| w[0] == "--repeats" && w[1] == "20"), "{args:?}");
    let (code, msg) = code(&example("softmax.toml").replace("\"{R}\"", "\"{Q}\""));
    assert_eq!(code, "K008");
    assert!(msg.contains("{Q}"), "{msg}");
}
