//! The MCP protocol side of `cake mcp`: the tool list, each tool's argument schema, and the
//! hand-off from rmcp's async handlers to the tools (which block, so they run on tokio's
//! blocking pool and never stall the protocol loop).

use std::borrow::Cow;

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResult, Content, Implementation, ServerCapabilities, ServerInfo};
use rmcp::schemars::{self, JsonSchema};
use rmcp::{tool, tool_handler, tool_router, ErrorData};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;

use super::child::{self, RunRequest};
use super::input::Workspace;
use super::tools::{self, Reply};
use crate::runtime::harness::Mode;

/// A tool's arguments. The name matters: rmcp's `#[tool]` takes a tool's input schema from the
/// argument whose type is called `Parameters`. Unlike rmcp's own, arguments that do not fit the
/// schema are refused with the `M004` code and a help line in the error's data.
pub struct Parameters<P>(pub P);

impl<P: JsonSchema> JsonSchema for Parameters<P> {
    fn schema_name() -> Cow<'static, str> {
        P::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        P::json_schema(generator)
    }
}

impl<S, P: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<P> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, ErrorData> {
        let tool = context.name.clone();
        let arguments = context.arguments.take().unwrap_or_default();
        serde_json::from_value(serde_json::Value::Object(arguments)).map(Parameters).map_err(|e| {
            ErrorData::invalid_params(
                format!("M004: bad arguments for `{tool}`: {e}"),
                Some(json!({
                    "code": "M004",
                    "tool": tool,
                    "help": format!("call `tools/list` and send the arguments `{tool}`'s input schema describes"),
                })),
            )
        })
    }
}

/// A program, inline or as a file.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramArgs {
    /// The program's Cake IR text (preferred).
    pub program: Option<String>,
    /// Instead of `program`: a `.cake` file, relative to the server's working directory.
    pub path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    /// A diagnostic code (`V201`, `E0101`) or an operation of the op catalog (`wgmma`).
    pub query: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostArgs {
    /// The program's Cake IR text (preferred).
    pub program: Option<String>,
    /// Instead of `program`: a `.cake` file, relative to the server's working directory.
    pub path: Option<String>,
    /// A value for every dim the program declares: `M=8192,N=8192,K=8192`.
    pub shape: String,
    /// A calibration file to use instead of the built-in `calibration/<target>.toml`.
    pub calibration: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LowerArgs {
    /// The program's Cake IR text (preferred).
    pub program: Option<String>,
    /// Instead of `program`: a `.cake` file, relative to the server's working directory.
    pub path: Option<String>,
    /// Precede lines lowered from a statement with `#line L "FILE"`.
    #[serde(default)]
    pub line_directives: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildArgs {
    /// The program's Cake IR text (preferred).
    pub program: Option<String>,
    /// Instead of `program`: a `.cake` file, relative to the server's working directory.
    pub path: Option<String>,
    /// Compile for this architecture instead of the program's target (`sm_90`).
    pub arch: Option<String>,
    /// Also write kernel.cu, kernel.cubin, launch.json and ptxas.json into this directory
    /// (inside the server's working directory; created if needed).
    pub out: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The program's Cake IR text (preferred; then `workload` or `workload_path` is needed).
    pub program: Option<String>,
    /// Instead of `program`: a `.cake` file, relative to the server's working directory; its
    /// workload spec defaults to `<stem>.workload.toml` beside it.
    pub path: Option<String>,
    /// The workload spec's TOML text (oracle, shapes, distributions; see `examples/*.workload.toml`).
    pub workload: Option<String>,
    /// Instead of `workload`: a workload spec file, relative to the server's working directory.
    pub workload_path: Option<String>,
    /// Shapes to run, each a value for every dim: `M=8192,N=8192,K=8192`. Default: the
    /// workload's `shapes`.
    #[serde(default)]
    pub shapes: Vec<String>,
    /// Input distributions (`normal`, `uniform`, `outliers`, `ties`), one run each. Default: the
    /// workload's.
    #[serde(default)]
    pub dists: Vec<String>,
    /// Wall-clock limit of one run in seconds (default 60).
    pub timeout_s: Option<f64>,
    /// Wall-clock limit of the whole call in seconds (default 600, at most 3600).
    pub time_limit_s: Option<f64>,
    /// Seed of the input generator (default: the workload's, else 1).
    pub seed: Option<u64>,
    /// Evidence root inside the server's working directory; records go to `EVIDENCE/runs/`.
    /// Default: `.cake/evidence`.
    pub evidence: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BenchArgs {
    /// The program's Cake IR text (preferred; then `workload` or `workload_path` is needed).
    pub program: Option<String>,
    /// Instead of `program`: a `.cake` file, relative to the server's working directory; its
    /// workload spec defaults to `<stem>.workload.toml` beside it.
    pub path: Option<String>,
    /// The workload spec's TOML text (oracle, shapes, distributions; see `examples/*.workload.toml`).
    pub workload: Option<String>,
    /// Instead of `workload`: a workload spec file, relative to the server's working directory.
    pub workload_path: Option<String>,
    /// Shapes to time, each a value for every dim: `M=8192,N=8192,K=8192`. Default: the
    /// workload's `headline` shape.
    #[serde(default)]
    pub shapes: Vec<String>,
    /// Input distributions (`normal`, `uniform`, `outliers`, `ties`), one run each. Default: the
    /// workload's.
    #[serde(default)]
    pub dists: Vec<String>,
    /// Wall-clock limit of one run in seconds (default 60).
    pub timeout_s: Option<f64>,
    /// Wall-clock limit of the whole call in seconds (default 600, at most 3600).
    pub time_limit_s: Option<f64>,
    /// Seed of the input generator (default: the workload's, else 1).
    pub seed: Option<u64>,
    /// Evidence root inside the server's working directory; records go to `EVIDENCE/runs/`.
    /// Default: `.cake/evidence`.
    pub evidence: Option<String>,
    /// The peer timed in the same run: `cublas` or `none` (default: the workload's `baseline`).
    pub baseline: Option<String>,
}

impl From<RunArgs> for RunRequest {
    fn from(a: RunArgs) -> RunRequest {
        RunRequest {
            program: a.program,
            path: a.path,
            workload: a.workload,
            workload_path: a.workload_path,
            shapes: a.shapes,
            dists: a.dists,
            timeout_s: a.timeout_s,
            time_limit_s: a.time_limit_s,
            seed: a.seed,
            evidence: a.evidence,
            baseline: None,
        }
    }
}

impl From<BenchArgs> for RunRequest {
    fn from(a: BenchArgs) -> RunRequest {
        RunRequest {
            program: a.program,
            path: a.path,
            workload: a.workload,
            workload_path: a.workload_path,
            shapes: a.shapes,
            dists: a.dists,
            timeout_s: a.timeout_s,
            time_limit_s: a.time_limit_s,
            seed: a.seed,
            evidence: a.evidence,
            baseline: a.baseline,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorpusShowArgs {
    /// A corpus case id, `family/case` (`cake corpus list --cases` lists them).
    pub id: String,
}

/// The server: the working directory it confines paths to, and its tools.
#[derive(Clone)]
pub struct CakeServer {
    workspace: Workspace,
    tool_router: ToolRouter<CakeServer>,
}

/// Run a blocking tool on tokio's blocking pool and turn its reply into an MCP result: the JSON
/// object as text content and as structured content, `isError` from the reply.
async fn answer(work: impl FnOnce() -> Reply + Send + 'static) -> Result<CallToolResult, ErrorData> {
    let reply = tokio::task::spawn_blocking(work).await.map_err(|e| {
        // A tool that panicked is a bug; the server answers and stays up.
        ErrorData::internal_error(format!("M006: internal error in the tool: {e}"), Some(json!({ "code": "M006" })))
    })?;
    let text = serde_json::to_string(&reply.value).unwrap_or_default();
    let mut result = if reply.is_error {
        CallToolResult::error(vec![Content::text(text)])
    } else {
        CallToolResult::success(vec![Content::text(text)])
    };
    result.structured_content = Some(reply.value);
    Ok(result)
}

#[tool_router]
impl CakeServer {
    pub fn new(workspace: Workspace) -> CakeServer {
        CakeServer { workspace, tool_router: Self::tool_router() }
    }

    #[tool(annotations(read_only_hint = true), description = "Parse, type-check and verify a Cake IR program (`cake check`). Returns every finding as the CLI's JSON (code, severity, message, primary span with line/column, secondary spans, notes, help), the error/warning counts, and `rules`: the rule set that judged them (the checkout's `compiler/rules`, as `cake check` uses).")]
    async fn check(&self, Parameters(a): Parameters<ProgramArgs>) -> Result<CallToolResult, ErrorData> {
        let ws = self.workspace.clone();
        answer(move || tools::check(&ws, a.program.as_deref(), a.path.as_deref())).await
    }

    #[tool(annotations(read_only_hint = true), description = "What a diagnostic code (`V201`) or an operation of the op catalog (`wgmma`) means: the text `cake explain QUERY` prints.")]
    async fn explain(&self, Parameters(a): Parameters<ExplainArgs>) -> Result<CallToolResult, ErrorData> {
        answer(move || tools::explain(&a.query)).await
    }

    #[tool(annotations(read_only_hint = true), description = "Predict a program's run time at a shape with the calibrated cost model (`cake cost --message-format json`): predicted time, bottleneck, per-resource times, hints. Programs with errors get their findings instead.")]
    async fn cost(&self, Parameters(a): Parameters<CostArgs>) -> Result<CallToolResult, ErrorData> {
        let ws = self.workspace.clone();
        answer(move || tools::cost(&ws, a.program.as_deref(), a.path.as_deref(), &a.shape, a.calibration.as_deref())).await
    }

    #[tool(annotations(read_only_hint = true), description = "Lower a verified program to CUDA C++ with inline PTX (`cake lower`): the CUDA text, or the coded findings (verifier, `L0xx` lowering) that stop it.")]
    async fn lower(&self, Parameters(a): Parameters<LowerArgs>) -> Result<CallToolResult, ErrorData> {
        let ws = self.workspace.clone();
        answer(move || tools::lower(&ws, a.program.as_deref(), a.path.as_deref(), a.line_directives)).await
    }

    #[tool(description = "Lower and compile with NVRTC (`cake build`): entry, launch spec, ptxas report (registers, spills, shared memory) and build findings. Without the CUDA toolchain: status `skipped` with code N001.")]
    async fn build(&self, Parameters(a): Parameters<BuildArgs>) -> Result<CallToolResult, ErrorData> {
        let ws = self.workspace.clone();
        answer(move || tools::build(&ws, a.program.as_deref(), a.path.as_deref(), a.arch.as_deref(), a.out.as_deref())).await
    }

    #[tool(description = "Run a program on the GPU over its workload's shapes and distributions against the oracle (`cake run`, in a child process with a timeout). Returns the run records. Without a GPU: status `skipped`, `skipped: no GPU`.")]
    async fn run(&self, Parameters(a): Parameters<RunArgs>) -> Result<CallToolResult, ErrorData> {
        let ws = self.workspace.clone();
        let req = RunRequest::from(a);
        answer(move || child::run(&ws, Mode::Run, &req)).await
    }

    #[tool(description = "Time a program at its workload's headline shape against a baseline measured in the same run (`cake bench`, cuBLAS for GEMM), checking the output too. Returns the run records. Without a GPU: status `skipped`, `skipped: no GPU`.")]
    async fn bench(&self, Parameters(a): Parameters<BenchArgs>) -> Result<CallToolResult, ErrorData> {
        let ws = self.workspace.clone();
        let req = RunRequest::from(a);
        answer(move || child::run(&ws, Mode::Bench, &req)).await
    }

    #[tool(annotations(read_only_hint = true), description = "A kernel corpus case (`cake corpus show`): its program text (the template expanded) and its effective manifest (target, tiers, expected verdict and findings).")]
    async fn corpus_show(&self, Parameters(a): Parameters<CorpusShowArgs>) -> Result<CallToolResult, ErrorData> {
        answer(move || tools::corpus_show(&a.id)).await
    }
}

#[tool_handler]
impl rmcp::ServerHandler for CakeServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo {
            capabilities: ServerCapabilities::builder().enable_tools().build(),
            server_info: Implementation {
                name: "cake".into(),
                title: Some("Cake IR compiler".into()),
                version: env!("CARGO_PKG_VERSION").into(),
                icons: None,
                website_url: None,
            },
            instructions: Some(
                "Cake IR compiler tools. Pass programs inline as `program` (or as `path`, inside the server's working directory). \
                 `check` first; its findings are the CLI's JSON (`explain` a code for what it means and how to fix it). \
                 `cost` predicts time at a shape; `lower` and `build` produce CUDA and a cubin; `run` and `bench` need a GPU and \
                 report `skipped` without one."
                    .into(),
            ),
            ..Default::default()
        }
    }
}
