//! Rendering an [`Estimate`]: a short report for people, one JSON object for machines.

use std::fmt::Write as _;

use super::Estimate;
use crate::render;

fn bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b * 1e-9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b * 1e-6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b * 1e-3)
    } else {
        format!("{b:.0} B")
    }
}

fn pct(x: f64, of: f64) -> String {
    if of > 0.0 {
        format!("{:5.1}%", 100.0 * x / of)
    } else {
        "    -".into()
    }
}

/// The report for people; the hints follow, rendered like diagnostics (`file_name` and
/// `source` locate them).
pub fn human(est: &Estimate, file_name: &str, source: &str, color: bool) -> String {
    let mut s = String::new();
    let dims: Vec<String> = est.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(s, "cost of `{}` on {} at {}", est.kernel, est.target, if dims.is_empty() { "no dims".into() } else { dims.join(", ") });
    let rate = est.tflops.map_or(String::new(), |t| format!("   ({t:.0} TFLOP/s of tensor-core work)"));
    let _ = writeln!(s, "  predicted    {:.4} ms{rate}", est.predicted_ms);
    let _ = writeln!(s, "  bottleneck   {} ({:.0}% of the predicted time)", est.bottleneck, 100.0 * est.bottleneck_share);
    let c = &est.components;
    let p = est.predicted_ms;
    let _ = writeln!(s, "\n  component          ms     share");
    for (name, v) in [
        ("tensor-core", c.tensor_core_ms),
        ("memory", c.memory_ms),
        ("epilogue", c.epilogue_ms),
        ("sync/latency", c.sync_latency_ms),
        ("fill/bubble", c.fill_bubble_ms),
        ("launch", c.launch_ms),
    ] {
        let _ = writeln!(s, "  {name:<14} {v:8.4}   {}", pct(v, p));
    }
    let r = &est.resources;
    let _ = writeln!(s, "\n  busy on the busiest SM      ms     of predicted");
    for (name, v) in [
        ("tensor cores", r.tensor_core_ms),
        ("memory", r.memory_ms),
        ("  L2 -> SM", r.l2_ms),
        ("  DRAM", r.dram_ms),
        ("issue (ALU/SFU/shfl/ld-st)", r.issue_ms),
    ] {
        let _ = writeln!(s, "  {name:<26} {v:8.4}   {}", pct(v, p));
    }
    let _ = writeln!(s, "\n  role      warps             busy ms   path ms   util   main-loop iters/tile");
    for role in &est.roles {
        let _ = writeln!(
            s,
            "  {:<9} {:<16} {:8.4}  {:8.4}  {:4.0}%   {}",
            role.role,
            role.warps,
            role.busy_ms,
            role.path_ms,
            100.0 * role.utilization,
            role.main_loop_iters_per_tile
        );
    }
    if !est.pipelines.is_empty() {
        let _ = writeln!(s, "\n  pipeline  stages  bytes/stage  hand-offs/tile  interval µs  round trip µs  stages needed  bubble µs");
        for f in &est.pipelines {
            let _ = writeln!(
                s,
                "  {:<9} {:>6}  {:>11}  {:>14}  {:>11.3}  {:>13.3}  {:>13}  {:>9.3}",
                f.pipeline,
                f.stages,
                bytes(f.bytes_per_stage),
                f.handoffs_per_tile,
                f.interval_ns * 1e-3,
                f.round_trip_ns * 1e-3,
                f.stages_needed,
                f.bubble_ns_per_handoff * 1e-3
            );
        }
    }
    let o = &est.occupancy;
    let _ = writeln!(
        s,
        "\n  occupancy    {} block(s)/SM ({}), {} threads, {} B shared memory, {} registers per block",
        o.blocks_per_sm, o.limited_by, o.threads_per_block, o.smem_bytes_per_block, o.regs_per_block
    );
    let _ = writeln!(
        s,
        "  schedule     {} tiles, {} blocks{}, {} active SMs, {:.2} waves, busiest block {} tiles (tail efficiency {:.0}%)",
        o.tiles,
        o.grid_blocks,
        if o.persistent { " (persistent)" } else { "" },
        o.active_sms,
        o.waves,
        o.tiles_per_block_max,
        100.0 * o.tail_efficiency
    );
    let t = &est.traffic;
    let _ = writeln!(
        s,
        "  traffic      {:.3} TFLOP; L2 -> SM {}; DRAM read {}, write {}",
        t.tensor_flops * 1e-12,
        bytes(t.l2_to_sm_bytes),
        bytes(t.dram_read_bytes),
        bytes(t.dram_write_bytes)
    );
    for op in &t.operands {
        let _ = writeln!(
            s,
            "               {:<6} requested {}, from DRAM {}, {:.1} concurrent readers per window",
            op.tensor,
            bytes(op.requested_bytes),
            bytes(op.dram_bytes),
            op.concurrent_readers
        );
    }
    let _ = writeln!(
        s,
        "  calibration  {}{}",
        est.calibration.file,
        if est.calibration.fitted_on.is_empty() { " (initial values, not fitted)".to_string() } else { format!(" (fitted {})", est.calibration.fitted_on) }
    );
    for n in &est.notes {
        let _ = writeln!(s, "  = note: {n}");
    }
    if !est.hints.is_empty() {
        s.push('\n');
        s.push_str(&render::render_human(file_name, source, &est.hints, color));
    }
    s
}

/// The estimate as one JSON object; hints carry file, line and column like `--message-format
/// json` diagnostics.
pub fn json(est: &Estimate, file_name: &str, source: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(est).unwrap_or(serde_json::Value::Null);
    if let Some(obj) = v.as_object_mut() {
        let hints: Vec<serde_json::Value> = est
            .hints
            .iter()
            .filter_map(|d| serde_json::from_str(&render::render_json_line(file_name, source, d)).ok())
            .collect();
        obj.insert("hints".into(), serde_json::Value::Array(hints));
        obj.insert("file".into(), serde_json::Value::String(file_name.to_string()));
    }
    v
}
