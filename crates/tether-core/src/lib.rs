//! The sans-IO core of Tether: the tool registry, argument validation and defaults, the risk
//! policy and the executor state machine.
//!
//! Nothing here does IO, spawns tasks or reads a clock: the browser runtime (`tether-web`) and
//! the server (`tether-server`) drive these state machines and perform what they ask. That is
//! why the same rules hold in the browser and on the server, and why every rule is tested here
//! without a socket or a browser.
//!
//! - [`ToolRegistry`]: one tool per name, owned by a component, capped, with a change journal
//!   that yields one [`ContextSnapshot`] per flush.
//! - [`validate`]: the [`Validator`](validate::Validator) seam with a compact validator for the
//!   browser and (feature `full`) the `jsonschema`-backed one.
//! - [`Executor`]: lookup → validate → defaults → policy → hooks → handler → result.
//! - [`session`]: the browser's and the server's sides of a session (results kept until
//!   acknowledged, numbered frames replayed after a reconnect, calls answered once).

mod error;
mod executor;
mod json;
mod policy;
mod recent;
mod registry;
pub mod session;
mod small_map;
pub mod validate;

pub use error::CoreError;
pub use executor::{
    ApprovalDecision, ApprovalRequest, CallRequest, DEFAULT_APPROVAL_TIMEOUT_MS, DEFAULT_HANDLER_TIMEOUT_MS, Executor,
    ExecutorConfig, HookOutcome, Outcome, Phase, Step,
};
pub use json::{integer_number, set_float_printer, to_text as json_text};
pub use policy::{PolicyDecision, decide, effective_risk};
pub use recent::RecentIds;
pub use registry::{
    CONTEXT_LIMIT_EVENT, ContextSnapshot, LIMIT_EVENT, MAX_TOOL_NAME_LEN, OwnerId, RefusedTool, Registered,
    RegisteredTool, RegistryEvent, ToolDef, ToolRegistry, check_tool_name, resolver_tool_name,
};
pub use small_map::SmallMap;
pub use tether_protocol::{CallId, ResultStatus, Risk, RunId, ToolSpec};
