//! `tether`: the command line of the Tether agent server.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use tether_agent::{AgentLoop, ChatModel, LoopGuard, OpenAiConfig, OpenAiProvider, ToolMode};
use tether_hooks::{DeclarativeHooks, HookConfig};
use tether_scripted::ScriptedModel;
use tether_server::{RiskFloor, ServerConfig, TetherServer};

#[derive(Debug, Parser)]
#[command(name = "tether", version, about = "The Tether agent server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the WebSocket endpoint (/ws), /healthz and, optionally, static pages.
    #[command(after_long_help = tether_scripted::SCRIPTED_CONTRACT)]
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, default_value = "127.0.0.1:8787")]
    addr: String,
    /// `scripted` for the built-in deterministic model (not an LLM; its rules are below), or the
    /// base URL of an OpenAI-compatible server, e.g. `http://127.0.0.1:8080` or
    /// `https://api.openai.com/v1`.
    #[arg(long, default_value = "scripted")]
    model: String,
    /// With `--model scripted`: milliseconds between the pieces in which the built-in model
    /// writes a tool call's arguments (default 0), to watch them stream into the chat
    /// (`tool_call_delta` events) before the call runs.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    scripted_call_pace_ms: u64,
    /// Name of the environment variable that holds the provider's API key.
    #[arg(long)]
    api_key_env: Option<String>,
    /// The `model` field sent to the provider.
    #[arg(long, default_value = "default")]
    model_name: String,
    /// How tools are offered to an OpenAI-compatible model and its calls read: `native` (the
    /// provider's `tools`/`tool_calls`), `text` (tools listed in the prompt, calls read from the
    /// reply's text), `constrained` (as text, every reply held to a JSON Schema of the live tools
    /// and a final answer through `response_format`), or `auto` (asks the provider at start which
    /// works, and says what it chose). See docs/models.md.
    #[arg(long, default_value = "auto", value_parser = parse_tool_mode)]
    tool_mode: ToolMode,
    /// Sampling temperature sent to the provider (default: the provider's own). Small local
    /// models do best at 0.
    #[arg(long)]
    temperature: Option<f64>,
    /// Most tokens of one model reply (default: the provider's own).
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The model's context window in tokens (default: asked of the provider, which llama.cpp's
    /// server and vLLM tell). Requests are kept inside it: the oldest turns of a long
    /// conversation are left out (docs/models.md).
    #[arg(long)]
    context_tokens: Option<u32>,
    /// In the `text` and `constrained` tool modes, list the tools in the first system message
    /// (by default they go in a system message right before each run's request, so that a
    /// model server's prompt cache keeps the conversation when the page's tools change; a chat
    /// template that refuses that gets the first message by itself). See docs/models.md.
    #[arg(long)]
    tools_in_system_prompt: bool,
    /// Most calls to one tool per run; the calls over it are not run and the model reads why
    /// (0: no limit).
    #[arg(long, default_value_t = tether_agent::DEFAULT_MAX_CALLS_PER_TOOL)]
    max_calls_per_tool: u32,
    /// Run a call again when the model repeats it with the same arguments in one run (by default
    /// it is not run again: the model reads the earlier result, and a second repeat ends the
    /// run as `loop_detected`).
    #[arg(long)]
    allow_repeated_calls: bool,
    /// Do not ask the model first whether each message is only a question. By default, with an
    /// OpenAI-compatible model, every run starts with that small request, and a question's run
    /// is offered only the tools that change nothing (the model says which, once per tool), so
    /// a question never changes anything. See docs/models.md.
    #[arg(long)]
    no_question_check: bool,
    /// With the question check on, a request's call of a tool that changes something runs only
    /// when the model, asked alone whether the message asked for what the tool does, gives
    /// "yes" at least this probability (from 0 to 1; 0 turns the check off). Needs a provider
    /// that gives token probabilities (`logprobs`); without them calls run unchecked. See
    /// docs/models.md.
    #[arg(long, default_value_t = tether_agent::DEFAULT_FIT_THRESHOLD, value_parser = probability)]
    fit_threshold: f64,
    /// With the fit check on, also asks the model which of the app's actions the message asks
    /// for, and refuses a call when another one (or none) is this many times likelier (above 1;
    /// 3 measured best). Off unless given: with the 1.5B model it refused calls that were asked
    /// for. See docs/models.md.
    #[arg(long, value_parser = ratio)]
    rival_ratio: Option<f64>,
    /// With the fit check on, a call for a message that names none of the page's tools, which
    /// the fit question passed under 0.9, is compared with each other action of the page that
    /// changes something (the same question, one at a time), and refused when "no" is this many
    /// times likelier for it than for another (above 1; 0 turns the comparison off). See
    /// docs/models.md.
    #[arg(long, default_value_t = tether_agent::BETTER_FIT_RATIO, value_parser = ratio_or_off)]
    better_fit_ratio: f64,
    /// With the fit check on, do not check the values a call gives arguments that allow only a
    /// few (an `enum`). By default, unless the message names the value itself, the model is
    /// asked, alone, whether the message asks for it (and, when unsure, for each allowed value),
    /// and a call whose value is not asked for is refused (the one product a page allows, taken
    /// when the user asked for another). See docs/models.md.
    #[arg(long)]
    no_value_check: bool,
    /// With the fit check on, do not count the actions a message asks for. By default a call
    /// that waits for the user's approval, once the run's earlier calls changed as many things
    /// as the message asks for (the model lists them, in a request of its own), is refused
    /// before the user is asked (a small model went on to check out after adding what was
    /// asked). See docs/models.md.
    #[arg(long)]
    no_action_count: bool,
    /// With the question check on, do not ask about an answer of a run in which no call
    /// succeeded. By default such an answer (a request's, or a question's once the model was told
    /// of a claim) is held whole and the model is asked whether it says that what the message
    /// asks for was done; if so it is a claim no call backs, as the claim check's are (told once,
    /// then withheld), whatever its words. See docs/models.md.
    #[arg(long)]
    no_done_check: bool,
    /// With the question check on, do not check an answer's numbers that nothing showed. By
    /// default such an answer is held, the model writes the arithmetic that answers the message
    /// from what the app shows, and when Tether's result of it is not in the answer the model
    /// reads it and answers again (once per run). See docs/models.md.
    #[arg(long)]
    no_arithmetic_check: bool,
    /// With the question check on, do not look up the entry a question points at. By default a
    /// question that points, through what the app's data says, at one value of the one argument
    /// of a tool that only reads (an `enum`: `open_event`'s event ids) is answered after that
    /// tool's result, called by the server as the run's first step (the place of a lunch only
    /// `open_event` shows). See docs/models.md.
    #[arg(long)]
    no_look_up: bool,
    /// With the fit check on, do not refuse made-up identifiers. By default a call of a tool that
    /// changes something is refused when an argument reads as an address, a link or an id that
    /// appears nowhere the model could have read it (the user's messages, the app state, the
    /// results, the tools, the instructions): a small model mailed an invoice to an address it
    /// made up. See docs/models.md.
    #[arg(long)]
    no_made_up_check: bool,
    /// Declarative hooks file, recognised by its shape: Azure SRE Agent format (a `hooks:` block
    /// and/or an ExtendedAgent document with `spec.hooks` and `spec.instructions`) or Claude
    /// Code's settings format (`hooks.PreToolUse` …); may be given several times. See docs/hooks.md.
    #[arg(long)]
    hooks: Vec<PathBuf>,
    /// A text file with the agent's instructions (its system prompt). Tether's rule that tool
    /// results and hook messages are data is always appended. Overrides an ExtendedAgent's
    /// `spec.instructions`.
    #[arg(long)]
    instructions: Option<PathBuf>,
    /// Directory of static pages to serve at / (e.g. a built storefront).
    #[arg(long = "static")]
    static_dir: Option<PathBuf>,
    /// Most tools a session may have active at once (announced as maxActiveTools).
    #[arg(long, default_value_t = 30)]
    max_active_tools: u32,
    /// Most turns per run.
    #[arg(long, default_value_t = tether_agent::DEFAULT_MAX_TURNS)]
    max_turns: u32,
    /// Longest wall time of a run, in seconds.
    #[arg(long, default_value_t = tether_agent::DEFAULT_RUN_TIMEOUT.as_secs())]
    max_run_seconds: u64,
    /// Largest frame a client may send, in bytes.
    #[arg(long, default_value_t = tether_protocol::DEFAULT_MAX_FRAME_BYTES)]
    max_frame_bytes: usize,
    /// Most frames per second one connection may send (bursts of twice as many pass); 0: no limit.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_FRAMES_PER_SECOND)]
    max_frames_per_second: u32,
    /// Largest argument schema of one tool, in bytes of JSON.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_SCHEMA_BYTES)]
    max_schema_bytes: usize,
    /// Deepest nesting of objects and arrays in one tool's argument schema.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_SCHEMA_DEPTH)]
    max_schema_depth: usize,
    /// Longest tool description, in characters.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_DESCRIPTION_CHARS)]
    max_description_chars: usize,
    /// Most sessions one client IP address may have at once; 0: no limit.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_SESSIONS_PER_IP)]
    max_sessions_per_ip: usize,
    /// A reverse proxy in front (nginx) whose X-Forwarded-For names the client, for
    /// --max-sessions-per-ip and the logs (repeatable; docs/deploy.md).
    #[arg(long = "trusted-proxy", value_name = "IP")]
    trusted_proxies: Vec<std::net::IpAddr>,
    /// Most tool calls one session may have outstanding at once.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_PENDING_CALLS)]
    max_pending_calls: usize,
    /// How long a disconnected session's run waits in memory for its client to come back, in
    /// seconds (with a durable store the session itself is kept for --session-ttl-seconds).
    #[arg(long, default_value_t = 30)]
    reconnect_grace_seconds: u64,
    /// Where sessions are kept, so that a page reload, a restart or a deploy loses nothing:
    /// `sqlite:PATH` (the default, a file in $XDG_STATE_HOME/tether or ~/.local/state/tether,
    /// printed at start; one server per file), `redis://HOST:PORT/DB` (shared by several
    /// servers; for a Redis Cluster, any node's URL, or several separated by commas), or
    /// `memory` (nothing outlives the process).
    #[arg(long)]
    store: Option<String>,
    /// With Redis: how many replicas must have a write before it counts as stored (Redis `WAIT`,
    /// up to 1 s; until then the write is tried again and the frames that depend on it wait).
    /// 0 (the default) trusts the master alone: a master that dies can take its last
    /// acknowledged writes with it (docs/scaling.md).
    #[arg(long, default_value_t = 0)]
    redis_wait_replicas: u32,
    /// How long a stored session is kept after its last change, in seconds (default: a day).
    #[arg(long, default_value_t = tether_server::store::DEFAULT_SESSION_TTL.as_secs())]
    session_ttl_seconds: u64,
    /// With a shared store (Redis): how long this server's claims on its sessions stand after
    /// its last heartbeat, in milliseconds. A server silent for longer (killed, cut off) loses
    /// its sessions to the servers their clients reconnect to.
    #[arg(long, default_value_t = 5000)]
    lease_ms: u64,
    /// A browser origin allowed to connect, besides this server's own origin; may be given
    /// several times. `*` allows any origin, `localhost` any page on a loopback host, and `*` in
    /// a pattern matches any run of characters (`https://*.example.com`). Default: `localhost`.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
    /// Name of an environment variable holding the token(s) clients must present
    /// (`Authorization: Bearer TOKEN` or `?token=TOKEN` on the WebSocket URL); several tokens
    /// may be separated by commas. Without it, no token is needed.
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// Name of an environment variable holding the operator's token: `/metrics` then answers
    /// only requests that present it (`Authorization: Bearer TOKEN`). Without it, `/metrics`
    /// is open: keep it off the public network (docs/observability.md).
    #[arg(long, value_name = "VAR")]
    operator_token_env: Option<String>,
    /// Record what was said and done in the traces too: the user's message and the answer on
    /// each run's span, each tool call's arguments and result on its span. Off by default:
    /// traces hold names, ids, counts and outcomes only (docs/observability.md).
    #[arg(long)]
    trace_content: bool,
    /// The operator's risk floor for tools matching a name pattern, as PATTERN=RISK with RISK one
    /// of none, low, high, critical, blocked, e.g. `delete_*=blocked`; may be given several
    /// times (the strictest matching floor applies).
    #[arg(long = "risk-floor", value_name = "PATTERN=RISK")]
    risk_floors: Vec<RiskFloor>,
    /// A policy file (YAML): `riskFloor: {cart_clear: critical, "delete_*": blocked}`. Its floors
    /// are added to those of --risk-floor.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// An MCP server whose tools the model may call, run on this server: `NAME=COMMAND ARGS…`
    /// (a process speaking MCP over stdio, restarted when it exits) or `NAME=https://…`
    /// (streamable HTTP). Its tools are named `NAME__tool`; may be given several times. See
    /// docs/mcp.md.
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL")]
    mcp: Vec<tether_mcp::McpServerSpec>,
    /// Most MCP tools offered at once, over all --mcp servers (apart from the page's tools and
    /// --max-active-tools).
    #[arg(long, default_value_t = tether_mcp::DEFAULT_MAX_MCP_TOOLS)]
    max_mcp_tools: usize,
    /// Longest wait for one MCP tool call, in seconds; the call is then cancelled at its server.
    #[arg(long, default_value_t = 60)]
    mcp_timeout_seconds: u64,
    /// Let a page offer its tools to an MCP client the user paired in that page: the client
    /// reaches them at /mcp (streamable HTTP) with the code the page shows, every call running
    /// in the page (its approvals included). Off by default. See docs/mcp.md.
    #[arg(long)]
    expose_mcp: bool,
}

fn parse_tool_mode(name: &str) -> Result<ToolMode, String> {
    name.parse().map_err(|error: tether_agent::AgentError| error.to_string())
}

/// A ratio above 1 (`--rival-ratio`).
fn ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value > 1.0 && value.is_finite() => Ok(value),
        _ => Err(format!("expected a ratio above 1 (such as 3), got {text:?}")),
    }
}

/// A ratio above 1, or 0 for off (`--better-fit-ratio`).
fn ratio_or_off(text: &str) -> Result<f64, String> {
    if text.parse::<f64>() == Ok(0.0) {
        return Ok(0.0);
    }
    ratio(text).map_err(|error| format!("{error}, or 0 for off"))
}

/// A probability from 0 to 1 (`--fit-threshold`).
fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("expected a probability from 0 to 1, got {text:?}")),
    }
}

fn model(args: &ServeArgs) -> Result<Arc<dyn ChatModel>> {
    if args.model == "scripted" {
        let pace = Duration::from_millis(args.scripted_call_pace_ms);
        return Ok(Arc::new(ScriptedModel::default().with_call_pace(pace)));
    }
    if !(args.model.starts_with("http://") || args.model.starts_with("https://")) {
        bail!("--model must be `scripted` or an http(s) base URL, not {:?}", args.model);
    }
    let mut config = OpenAiConfig::new(&args.model, &args.model_name);
    config.tool_mode = args.tool_mode;
    config.temperature = args.temperature;
    config.max_tokens = args.max_tokens;
    config.context_tokens = args.context_tokens;
    config.late_tools = !args.tools_in_system_prompt;
    if let Some(var) = &args.api_key_env {
        let key = std::env::var(var).with_context(|| format!("--api-key-env {var}: the variable is not set"))?;
        config.api_key = Some(key);
    }
    Ok(Arc::new(OpenAiProvider::new(config)?))
}

fn server_config(args: &ServeArgs) -> Result<ServerConfig> {
    let mut config = ServerConfig {
        max_active_tools: args.max_active_tools,
        max_frame_bytes: args.max_frame_bytes,
        max_frames_per_second: args.max_frames_per_second,
        max_schema_bytes: args.max_schema_bytes,
        max_schema_depth: args.max_schema_depth,
        max_description_chars: args.max_description_chars,
        max_sessions_per_ip: args.max_sessions_per_ip,
        trusted_proxies: args.trusted_proxies.clone(),
        max_pending_calls: args.max_pending_calls,
        reconnect_grace: Duration::from_secs(args.reconnect_grace_seconds),
        session_ttl: Duration::from_secs(args.session_ttl_seconds.max(1)),
        instance_lease: Duration::from_millis(args.lease_ms.max(100)),
        risk_floors: args.risk_floors.clone(),
        expose_mcp: args.expose_mcp,
        ..ServerConfig::default()
    };
    if !args.allow_origins.is_empty() {
        config.allowed_origins = args.allow_origins.clone();
    }
    if let Some(var) = &args.operator_token_env {
        let token =
            std::env::var(var).with_context(|| format!("--operator-token-env {var}: the variable is not set"))?;
        if token.trim().is_empty() {
            bail!("--operator-token-env {var}: the variable holds no token");
        }
        config.operator_token = Some(token.trim().to_string());
    }
    if let Some(var) = &args.token_env {
        let tokens = std::env::var(var).with_context(|| format!("--token-env {var}: the variable is not set"))?;
        config.auth_tokens = tokens.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
        if config.auth_tokens.is_empty() {
            bail!("--token-env {var}: the variable holds no token");
        }
    }
    if let Some(path) = &args.policy {
        let text = std::fs::read_to_string(path).with_context(|| format!("--policy {}", path.display()))?;
        config.risk_floors.extend(RiskFloor::from_yaml_str(&text, &path.display().to_string())?);
    }
    if !config.risk_floors.is_empty() {
        let floors: Vec<String> = config.risk_floors.iter().map(ToString::to_string).collect();
        tracing::info!("risk floors: {}", floors.join(", "));
    }
    Ok(config)
}

#[allow(clippy::print_stdout)]
async fn serve(args: ServeArgs, metrics: Arc<tether_server::metrics::Metrics>) -> Result<()> {
    let model = model(&args)?;
    let model_name = model.name().to_string();
    // For `--tool-mode auto` this asks the provider once which mode works.
    let mode = model.describe_mode().await;
    let guard = LoopGuard {
        refuse_repeats: !args.allow_repeated_calls,
        max_calls_per_tool: args.max_calls_per_tool,
        ..LoopGuard::default()
    };
    let mut agent = AgentLoop::new(model.clone())
        .with_max_turns(args.max_turns)
        .with_run_timeout(Duration::from_secs(args.max_run_seconds.max(1)))
        .with_loop_guard(guard)
        .with_question_check(args.model != "scripted" && !args.no_question_check)
        .with_fit_check((args.fit_threshold > 0.0).then_some(args.fit_threshold))
        .with_rival_check(args.rival_ratio)
        .with_better_fit_check((args.better_fit_ratio > 0.0).then_some(args.better_fit_ratio))
        .with_value_check(!args.no_value_check)
        .with_action_count(!args.no_action_count)
        .with_made_up_check(!args.no_made_up_check)
        .with_look_up(!args.no_look_up)
        .with_done_check(!args.no_done_check)
        .with_arithmetic_check(!args.no_arithmetic_check)
        .with_trace_content(args.trace_content);
    if !args.hooks.is_empty() {
        // Invalid hooks refuse to start the server, with a message naming the hook and the field.
        let mut config = HookConfig::default();
        for path in &args.hooks {
            config.extend(HookConfig::load(path)?)?;
        }
        if let Some(text) = config.instructions() {
            if args.instructions.is_none() {
                tracing::info!("instructions: spec.instructions of the ExtendedAgent ({} chars)", text.len());
                agent = agent.with_instructions(text);
            } else {
                tracing::info!("--instructions overrides the ExtendedAgent's spec.instructions");
            }
        }
        let declarative = DeclarativeHooks::new(config, model)?;
        if let Some(name) = declarative.agent_name() {
            agent = agent.with_agent_name(name);
        }
        tracing::info!(
            "loaded {} declarative hook(s) from {}",
            declarative.specs().count(),
            args.hooks.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        agent = agent.with_hooks(declarative.hooks());
    }
    if let Some(path) = &args.instructions {
        let text = std::fs::read_to_string(path).with_context(|| format!("--instructions {}", path.display()))?;
        if text.trim().is_empty() {
            bail!("--instructions {}: the file is empty", path.display());
        }
        tracing::info!("instructions: {} ({} chars)", path.display(), text.len());
        agent = agent.with_instructions(&text);
    }
    let config = server_config(&args)?;
    let mut server = TetherServer::new(config, agent).with_metrics(metrics);
    if let Some(dir) = &args.static_dir {
        if !dir.join("index.html").is_file() {
            bail!("--static {}: no index.html there", dir.display());
        }
        server = server.with_static_dir(dir);
    }
    if !args.mcp.is_empty() {
        let options = tether_mcp::McpOptions {
            call_timeout: Duration::from_secs(args.mcp_timeout_seconds.max(1)),
            ..tether_mcp::McpOptions::default()
        };
        let mcp = tether_mcp::McpTools::start(args.mcp.clone(), options, args.max_mcp_tools)?;
        // The first sessions should see the tools: wait for the servers a little (those not up
        // by then go on being retried, and their tools appear when they are).
        for name in mcp.ready(options.connect_timeout).await {
            tracing::warn!(server = name, "MCP server not running yet; retrying in the background (see /healthz)");
        }
        for server in mcp.servers() {
            tracing::info!(
                server = server.name(),
                tools = server.tools().len(),
                "MCP server attached: {}",
                server.spec()
            );
        }
        server = server.with_mcp(mcp);
    }
    let mut store = store_spec(args.store.as_deref())?;
    match &mut store {
        tether_server::store::StoreSpec::Redis { wait_replicas, .. } => *wait_replicas = args.redis_wait_replicas,
        _ if args.redis_wait_replicas > 0 => bail!("--redis-wait-replicas needs a Redis store (--store redis://…)"),
        _ => {}
    }
    let store = store.open().await.with_context(|| format!("--store {}", describe_spec(&store)))?;
    let store_name = store.describe();
    server = server.with_store(store);
    let listener =
        tokio::net::TcpListener::bind(&args.addr).await.with_context(|| format!("cannot listen on {}", args.addr))?;
    let addr = listener.local_addr()?;
    let mode = mode.map(|mode| format!(", {mode}")).unwrap_or_default();
    // One write, whose failure (nobody reads stdout any more) does not stop the server.
    let banner = format!(
        "Tether listening on http://{addr}  (WebSocket: ws://{addr}/ws, model: {model_name}{mode})\nSessions are \
         kept in {store_name}\n"
    );
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(banner.as_bytes()).and_then(|()| stdout.flush());
    drop(stdout);
    server.serve(listener, shutdown_signal()).await?;
    Ok(())
}

/// Ctrl-C or SIGTERM (what a deploy sends): the server drains (see `TetherServer::serve`).
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; Ctrl-C still stops the server");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: storing sessions and telling clients to reconnect");
}

/// The store `--store` names, or the default SQLite file (its directory created).
fn store_spec(flag: Option<&str>) -> Result<tether_server::store::StoreSpec> {
    if let Some(flag) = flag {
        return Ok(flag.parse()?);
    }
    let dir = match (std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME")) {
        (Some(state), _) if !state.is_empty() => PathBuf::from(state).join("tether"),
        (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".local/state/tether"),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {} for the session store", dir.display()))?;
    Ok(tether_server::store::StoreSpec::Sqlite(dir.join("sessions.db")))
}

fn describe_spec(spec: &tether_server::store::StoreSpec) -> String {
    match spec {
        tether_server::store::StoreSpec::Memory => "memory".into(),
        tether_server::store::StoreSpec::Sqlite(path) => format!("sqlite:{}", path.display()),
        tether_server::store::StoreSpec::Redis { url, .. } => url.clone(),
    }
}

fn main() -> Result<()> {
    use tracing_subscriber::prelude::*;
    // Log lines (stderr, `RUST_LOG`), the metrics measured from Tether's spans, and those spans
    // exported over OTLP when the `OTEL_*` variables say where (docs/observability.md). The log
    // output leaves the spans out: their fields are attributes for traces, not messages.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "tether_server=info,tether_agent=info,tether_hooks=info".into())
        .add_directive(format!("{}=off", tether_agent::SPAN_TARGET).parse().context("the log filter")?);
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
    let metrics = Arc::new(tether_server::metrics::Metrics::default());
    let measured = metrics
        .layer()
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| metadata.target() == tether_agent::SPAN_TARGET));
    let registry = tracing_subscriber::registry().with(logs).with(measured);
    // A bad `OTEL_*` setting is said once logging works, and the server does not start.
    let (traces, otel_error) = match tether_server::telemetry::otlp_layer(&metrics) {
        Ok(Some((layer, traces))) => {
            registry.with(layer).init();
            (Some(traces), None)
        }
        Ok(None) => {
            registry.init();
            (None, None)
        }
        Err(error) => {
            registry.init();
            (None, Some(error))
        }
    };
    if let Some(error) = otel_error {
        return Err(error).context("traces");
    }
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let result = match cli.command {
        Command::Serve(args) => runtime.block_on(serve(args, metrics)),
    };
    if let Some(traces) = traces {
        traces.shutdown();
    }
    result
}
