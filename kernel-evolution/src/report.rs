//! `report`, `best` and `status`: what the database says, as JSON or for people. Every figure is
//! computed from recorded rows; where the GPU stage was skipped the report says so and ranks by
//! the prediction, labelled as such.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::db::{CandidateRow, Db, EvaluationRow};
use crate::error::Result;

pub struct Data {
    pub candidates: Vec<CandidateRow>,
    pub evaluations: HashMap<i64, EvaluationRow>,
}

impl Data {
    pub fn load(db: &Db) -> Result<Data> {
        Ok(Data { candidates: db.candidates()?, evaluations: db.evaluations()?.into_iter().map(|e| (e.seq, e)).collect() })
    }

    fn by_seq(&self, seq: i64) -> Option<&CandidateRow> {
        self.candidates.iter().find(|c| c.seq == seq)
    }

    fn measured(&self, seq: i64) -> Option<f64> {
        self.evaluations.get(&seq).filter(|e| e.status == "passed").and_then(|e| e.headline_ms)
    }

    /// The best candidate: fastest measured, else (no GPU result) fastest predicted among those
    /// that passed the gates. (seq, ms, measured).
    pub fn best(&self) -> Option<(i64, f64, bool)> {
        let measured = self.candidates.iter().filter_map(|c| self.measured(c.seq).map(|m| (c.seq, m))).min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        if let Some((s, m)) = measured {
            return Some((s, m, true));
        }
        let failed = |s: i64| self.evaluations.get(&s).is_some_and(|e| e.status == "failed" || e.status == "error");
        self.candidates
            .iter()
            .filter(|c| c.gate == "passed" && !failed(c.seq))
            .filter_map(|c| c.predicted_ms.map(|p| (c.seq, p)))
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
            .map(|(s, p)| (s, p, false))
    }

    fn lineage(&self, seq: i64) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cur = Some(seq);
        while let Some(s) = cur {
            let Some(c) = self.by_seq(s) else { break };
            out.push(json!({
                "seq": c.seq, "tactic": c.tactic, "params": c.params,
                "predicted_ms": c.predicted_ms, "measured_ms": self.measured(c.seq), "bottleneck": c.bottleneck,
            }));
            cur = c.parents.first().copied();
            if out.len() > self.candidates.len() {
                break;
            }
        }
        out.reverse();
        out
    }

    pub fn report(&self) -> Value {
        let n = self.candidates.len();
        let mut gates: BTreeMap<String, usize> = BTreeMap::new();
        for c in &self.candidates {
            *gates.entry(c.gate.clone()).or_default() += 1;
        }
        let passed_gates: Vec<&CandidateRow> = self.candidates.iter().filter(|c| c.gate == "passed").collect();
        let evaluated = passed_gates.iter().filter(|c| self.evaluations.contains_key(&c.seq)).count();
        let cost_filtered = passed_gates.len() - evaluated;
        let mut gpu: BTreeMap<String, usize> = BTreeMap::new();
        for e in self.evaluations.values() {
            *gpu.entry(e.status.clone()).or_default() += 1;
        }
        let before_gpu = n - evaluated;
        // GPU time saved: what the filtered candidates would have cost at the mean cost of the
        // evaluations that ran on a GPU (skipped ones cost nothing and say nothing).
        let ran: Vec<f64> = self.evaluations.values().filter(|e| matches!(e.status.as_str(), "passed" | "timed" | "failed")).map(|e| e.gpu_seconds).collect();
        let gpu_seconds: f64 = ran.iter().fold(0.0, |a, b| a + b);
        let saved = (!ran.is_empty()).then(|| before_gpu as f64 * gpu_seconds / ran.len() as f64);

        let mut board: Vec<(i64, f64)> = self.candidates.iter().filter_map(|c| self.measured(c.seq).map(|m| (c.seq, m))).collect();
        board.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let seed_ms = self.candidates.iter().find(|c| c.tactic == "seed").and_then(|c| self.measured(c.seq));
        let leaderboard: Vec<Value> = board
            .iter()
            .take(10)
            .map(|(s, m)| {
                let c = self.by_seq(*s).expect("board rows are candidates");
                let peers = self.evaluations.get(s).map(|e| e.peers.clone()).unwrap_or(Value::Null);
                json!({ "seq": s, "measured_ms": m, "predicted_ms": c.predicted_ms, "speedup_vs_seed": seed_ms.map(|b| b / m), "tactic": c.tactic, "peers": peers, "program_hash": c.program_hash })
            })
            .collect();
        let mut predicted_board: Vec<(i64, f64)> = passed_gates.iter().filter_map(|c| c.predicted_ms.map(|p| (c.seq, p))).collect();
        predicted_board.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));

        // Which tactics gave which gains: child over parent, measured when both were timed,
        // predicted otherwise (each kind counted apart).
        let mut tactics: BTreeMap<String, (usize, usize, Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for c in &self.candidates {
            let t = tactics.entry(c.tactic.clone()).or_default();
            t.0 += 1;
            if c.gate != "passed" {
                t.1 += 1;
            }
            let Some(parent) = c.parents.first().and_then(|p| self.by_seq(*p)) else { continue };
            if let (Some(a), Some(b)) = (self.measured(parent.seq), self.measured(c.seq)) {
                t.2.push(a / b);
            }
            if let (Some(a), Some(b)) = (parent.predicted_ms, c.predicted_ms) {
                t.3.push(a / b);
            }
        }
        let tactic_gains: Vec<Value> = tactics
            .iter()
            .map(|(name, (made, rejected, m, p))| {
                let best = |v: &Vec<f64>| v.iter().copied().fold(None, |acc: Option<f64>, x| Some(acc.map_or(x, |a| a.max(x))));
                json!({ "tactic": name, "candidates": made, "rejected_by_gates": rejected,
                        "best_measured_speedup": best(m), "best_predicted_speedup": best(p), "measured_pairs": m.len() })
            })
            .collect();

        // The cost model's top-10 recall of the GPU's top 10, among timed candidates.
        let timed: Vec<(f64, f64)> = self.candidates.iter().filter_map(|c| Some((c.predicted_ms?, self.measured(c.seq)?))).collect();
        let recall = (!timed.is_empty()).then(|| {
            let (p, m): (Vec<f64>, Vec<f64>) = timed.iter().copied().unzip();
            cake::cost::accuracy::top_k_recall(&p, &m, 10)
        });
        let best = self.best();
        json!({
            "candidates": n,
            "gates": gates,
            "filtered": {
                "by_gates": n - passed_gates.len(),
                "by_cost_rank": cost_filtered,
                "evaluated_on_gpu_stage": evaluated,
                "share_rejected_before_gpu": if n == 0 { 0.0 } else { before_gpu as f64 / n as f64 },
            },
            "gpu_stage": gpu,
            "gpu_stage_skipped": !gpu.is_empty() && gpu.keys().all(|k| k == "skipped"),
            "gpu_seconds": gpu_seconds,
            "gpu_seconds_saved_estimate": saved,
            "cost_top10_recall": recall,
            "leaderboard": leaderboard,
            "predicted_leaderboard": predicted_board.iter().take(10).map(|(s, p)| json!({ "seq": s, "predicted_ms": p })).collect::<Vec<_>>(),
            "best": best.map(|(s, ms, measured)| json!({ "seq": s, "ms": ms, "measured": measured, "lineage": self.lineage(s) })),
            "tactics": tactic_gains,
        })
    }
}

fn f(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.4}"),
        None => "-".into(),
    }
}

pub fn human(r: &Value) -> String {
    let mut o = String::new();
    let fl = &r["filtered"];
    o += &format!("candidates   {}   gates {}\n", r["candidates"], r["gates"]);
    o += &format!(
        "filtered     {} by the gates, {} by the cost rank, {} sent to the GPU stage ({:.1}% rejected before the GPU)\n",
        fl["by_gates"],
        fl["by_cost_rank"],
        fl["evaluated_on_gpu_stage"],
        fl["share_rejected_before_gpu"].as_f64().unwrap_or(0.0) * 100.0
    );
    o += &format!("GPU stage    {}{}\n", r["gpu_stage"], if r["gpu_stage_skipped"] == json!(true) { "   (SKIPPED: no GPU; nothing was timed)" } else { "" });
    o += &format!("GPU seconds  {:.1} spent, saved by the filters: {}\n", r["gpu_seconds"].as_f64().unwrap_or(0.0), r["gpu_seconds_saved_estimate"].as_f64().map(|s| format!("~{s:.1} s (estimate: filtered × mean evaluation)")).unwrap_or_else(|| "unknown (no evaluation ran on a GPU)".into()));
    o += &format!("cost top-10 recall  {}\n", r["cost_top10_recall"].as_f64().map(|x| format!("{x:.2}")).unwrap_or_else(|| "- (nothing timed)".into()));
    o += "\nleaderboard (measured at the headline)\n";
    let lb = r["leaderboard"].as_array().cloned().unwrap_or_default();
    if lb.is_empty() {
        o += "  (no candidate was timed)\n  by prediction:";
        for p in r["predicted_leaderboard"].as_array().cloned().unwrap_or_default() {
            o += &format!(" #{} {} ms;", p["seq"], f(&p["predicted_ms"]));
        }
        o += "\n";
    }
    for e in lb {
        o += &format!("  #{:<5} {} ms  predicted {} ms  ×{} vs seed  {}  peers {}\n", e["seq"], f(&e["measured_ms"]), f(&e["predicted_ms"]), f(&e["speedup_vs_seed"]), e["tactic"], e["peers"]);
    }
    if let Some(b) = r["best"].as_object() {
        o += &format!("\nbest #{} at {} ms ({}); lineage:\n", b["seq"], f(&b["ms"]), if b["measured"] == json!(true) { "measured" } else { "predicted" });
        for step in b["lineage"].as_array().cloned().unwrap_or_default() {
            o += &format!("  #{:<5} {:<22} {}  predicted {} ms  measured {} ms\n", step["seq"], step["tactic"].as_str().unwrap_or(""), step["params"], f(&step["predicted_ms"]), f(&step["measured_ms"]));
        }
    }
    o += "\ntactics (best child/parent speedup)\n";
    for t in r["tactics"].as_array().cloned().unwrap_or_default() {
        o += &format!("  {:<22} {:>4} made, {:>4} rejected by the gates, measured ×{} ({} pairs), predicted ×{}\n", t["tactic"].as_str().unwrap_or(""), t["candidates"], t["rejected_by_gates"], f(&t["best_measured_speedup"]), t["measured_pairs"], f(&t["best_predicted_speedup"]));
    }
    o
}

/// One GPU-stage evaluation in search order: (evaluations so far, GPU seconds so far, best ms so
/// far, whether that best was measured). Skipped evaluations advance the count, not the time.
pub type TrajectoryPoint = (usize, f64, f64, bool);

impl Data {
    pub fn trajectory(&self) -> Vec<TrajectoryPoint> {
        let mut seqs: Vec<i64> = self.evaluations.keys().copied().collect();
        seqs.sort();
        let mut out = Vec::new();
        let (mut gpu_s, mut best_measured, mut best_predicted) = (0.0, f64::INFINITY, f64::INFINITY);
        for (i, s) in seqs.iter().enumerate() {
            let e = &self.evaluations[s];
            if matches!(e.status.as_str(), "passed" | "timed" | "failed") {
                gpu_s += e.gpu_seconds;
            }
            if let Some(m) = self.measured(*s) {
                best_measured = best_measured.min(m);
            }
            if e.status == "skipped" {
                if let Some(p) = self.by_seq(*s).and_then(|c| c.predicted_ms) {
                    best_predicted = best_predicted.min(p);
                }
            }
            if best_measured.is_finite() {
                out.push((i + 1, gpu_s, best_measured, true));
            } else if best_predicted.is_finite() {
                out.push((i + 1, gpu_s, best_predicted, false));
            }
        }
        out
    }
}

/// The best-so-far trajectory as an SVG (`cake-plot`): over GPU evaluations and over GPU
/// seconds. When nothing was timed the curve is the cost model's prediction of the skipped
/// evaluations, and the title says so.
pub fn write_svg(path: &std::path::Path, points: &[TrajectoryPoint]) -> Result<()> {
    use cake_plot::{Chart, Line, Series};
    let fail = |e: String| crate::error::KevoError::new("K204", path.display().to_string(), format!("cannot draw the trajectory: {e}"), "give a writable `--svg` path");
    let measured = points.iter().any(|p| p.3);
    let pts: Vec<&TrajectoryPoint> = points.iter().filter(|p| p.3 == measured).collect();
    let what = if measured { "measured" } else { "predicted (GPU stage skipped: nothing timed)" };
    type Axis = fn(&TrajectoryPoint) -> f64;
    let panels: [(&str, Axis); 2] = [("GPU evaluations", |p| p.0 as f64), ("GPU seconds", |p| p.1)];
    let charts: Vec<Chart> = panels
        .iter()
        .map(|(xdesc, x)| {
            Chart::Line(Line {
                title: format!("best so far, {what}"),
                x_label: xdesc.to_string(),
                y_label: "ms at the headline shape".into(),
                series: vec![Series::new("best so far", pts.iter().map(|p| (x(p), p.2)).collect())],
                step: true,
            })
        })
        .collect();
    let svg = cake_plot::svg(&charts, 1100, 420).map_err(|e| fail(e.to_string()))?;
    std::fs::write(path, svg).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(seq: i64, parent: Option<i64>, tactic: &str, gate: &str, predicted: Option<f64>) -> CandidateRow {
        CandidateRow {
            seq,
            generation: i64::from(parent.is_some()),
            program_hash: format!("{seq:064}"),
            program_text: String::new(),
            parents: parent.into_iter().collect(),
            tactic: tactic.into(),
            params: Value::Null,
            gate: gate.into(),
            findings: Value::Null,
            predicted_ms: predicted,
            bottleneck: None,
            cell: None,
            contract_hash: "c".into(),
            compiler_commit: "cake".into(),
            created_unix_ms: 0,
        }
    }

    fn eval(seq: i64, status: &str, ms: Option<f64>, gpu_seconds: f64) -> EvaluationRow {
        EvaluationRow {
            seq,
            status: status.into(),
            verdicts: Value::Null,
            measured: Value::Null,
            headline_ms: ms,
            peers: json!({ "cublas": { "median_ms": 2.2 } }),
            gpu_seconds,
            records: Vec::new(),
            contract_hash: "c".into(),
            compiler_commit: "cake".into(),
            finished_unix_ms: 0,
        }
    }

    /// A seed timed at 3 ms; a child 1.5× faster; a child that failed on the GPU; one the verifier
    /// rejected; one the cost rank kept off the GPU.
    fn data() -> Data {
        let candidates = vec![
            cand(0, None, "seed", "passed", Some(3.2)),
            cand(1, Some(0), "pipeline-stages", "passed", Some(2.1)),
            cand(2, Some(0), "persistence", "passed", Some(2.4)),
            cand(3, Some(1), "swizzle", "verify", None),
            cand(4, Some(1), "unroll", "passed", Some(2.6)),
        ];
        let evaluations = [eval(0, "passed", Some(3.0), 10.0), eval(1, "passed", Some(2.0), 8.0), eval(2, "failed", None, 6.0)].into_iter().map(|e| (e.seq, e)).collect();
        Data { candidates, evaluations }
    }

    #[test]
    fn leaderboard_lineage_gains_and_filters_come_from_the_rows() {
        let r = data().report();
        assert_eq!(r["leaderboard"][0]["seq"], 1);
        assert_eq!(r["leaderboard"][0]["speedup_vs_seed"], 1.5);
        assert_eq!(r["leaderboard"].as_array().unwrap().len(), 2, "the failed candidate is not on the board");
        assert_eq!(r["best"]["lineage"].as_array().unwrap().iter().map(|s| s["seq"].as_i64().unwrap()).collect::<Vec<_>>(), vec![0, 1]);
        let t = r["tactics"].as_array().unwrap().iter().find(|t| t["tactic"] == "pipeline-stages").unwrap().clone();
        assert_eq!(t["best_measured_speedup"], 1.5);
        assert_eq!(r["filtered"]["by_gates"], 1);
        assert_eq!(r["filtered"]["by_cost_rank"], 1);
        assert_eq!(r["filtered"]["evaluated_on_gpu_stage"], 3);
        assert_eq!(r["filtered"]["share_rejected_before_gpu"], 0.4);
        // Two candidates never reached the GPU, at the mean 8 s of the three that ran.
        assert_eq!(r["gpu_seconds"], 24.0);
        assert_eq!(r["gpu_seconds_saved_estimate"], 16.0);
        // The two timed candidates: the model ranks them as the GPU does.
        assert_eq!(r["cost_top10_recall"], 1.0);
        assert_eq!(r["gpu_stage_skipped"], false);
    }

    #[test]
    fn the_trajectory_is_the_best_so_far_in_search_order() {
        let t = data().trajectory();
        assert_eq!(t, vec![(1, 10.0, 3.0, true), (2, 18.0, 2.0, true), (3, 24.0, 2.0, true)]);
        let path = std::env::temp_dir().join(format!("kevo-trajectory-{}.svg", std::process::id()));
        write_svg(&path, &t).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.starts_with("<svg") && svg.contains("best so far, measured") && svg.contains("GPU seconds"));
    }
}
