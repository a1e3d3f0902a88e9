//! `tether`: the command line of the Tether agent server.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use tether_server::{
    AgentLoop, ChatModel, DeclarativeHooks, HookConfig, OpenAiConfig, OpenAiProvider, ScriptedModel, ServerConfig,
    TetherServer,
};

#[derive(Debug, Parser)]
#[command(name = "tether", version, about = "The Tether agent server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the WebSocket endpoint (/ws), /healthz and, optionally, static pages.
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, default_value = "127.0.0.1:8787")]
    addr: String,
    /// `scripted` for the built-in deterministic model (not an LLM), or the base URL of an
    /// OpenAI-compatible server, e.g. `http://127.0.0.1:8080` or `https://api.openai.com/v1`.
    #[arg(long, default_value = "scripted")]
    model: String,
    /// Name of the environment variable that holds the provider's API key.
    #[arg(long)]
    api_key_env: Option<String>,
    /// The `model` field sent to the provider.
    #[arg(long, default_value = "default")]
    model_name: String,
    /// Declarative hooks file (Azure SRE Agent format: a `hooks:` block and/or an ExtendedAgent
    /// document with `spec.hooks`); may be given several times. See docs/hooks.md.
    #[arg(long)]
    hooks: Vec<PathBuf>,
    /// Directory of static pages to serve at / (e.g. a built storefront).
    #[arg(long = "static")]
    static_dir: Option<PathBuf>,
    /// Most tools a session may have active at once (announced as maxActiveTools).
    #[arg(long, default_value_t = 30)]
    max_active_tools: u32,
    /// Most turns per run.
    #[arg(long, default_value_t = tether_server::DEFAULT_MAX_TURNS)]
    max_turns: u32,
}

fn model(args: &ServeArgs) -> Result<Arc<dyn ChatModel>> {
    if args.model == "scripted" {
        return Ok(Arc::new(ScriptedModel));
    }
    if !(args.model.starts_with("http://") || args.model.starts_with("https://")) {
        bail!("--model must be `scripted` or an http(s) base URL, not {:?}", args.model);
    }
    let mut config = OpenAiConfig::new(&args.model, &args.model_name);
    if let Some(var) = &args.api_key_env {
        let key = std::env::var(var).with_context(|| format!("--api-key-env {var}: the variable is not set"))?;
        config.api_key = Some(key);
    }
    Ok(Arc::new(OpenAiProvider::new(config)?))
}

#[allow(clippy::print_stdout)]
async fn serve(args: ServeArgs) -> Result<()> {
    let model = model(&args)?;
    let model_name = model.name().to_string();
    let mut agent = AgentLoop::new(model.clone()).with_max_turns(args.max_turns);
    if !args.hooks.is_empty() {
        // Invalid hooks refuse to start the server, with a message naming the hook and the field.
        let mut config = HookConfig::default();
        for path in &args.hooks {
            config.extend(HookConfig::load(path)?)?;
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
    let config = ServerConfig { max_active_tools: args.max_active_tools, ..ServerConfig::default() };
    let mut server = TetherServer::new(config, agent);
    if let Some(dir) = &args.static_dir {
        if !dir.join("index.html").is_file() {
            bail!("--static {}: no index.html there", dir.display());
        }
        server = server.with_static_dir(dir);
    }
    let listener =
        tokio::net::TcpListener::bind(&args.addr).await.with_context(|| format!("cannot listen on {}", args.addr))?;
    let addr = listener.local_addr()?;
    println!("Tether listening on http://{addr}  (WebSocket: ws://{addr}/ws, model: {model_name})");
    use std::io::Write;
    std::io::stdout().flush()?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server.serve(listener, shutdown).await?;
    Ok(())
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "tether_server=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    match cli.command {
        Command::Serve(args) => runtime.block_on(serve(args)),
    }
}
