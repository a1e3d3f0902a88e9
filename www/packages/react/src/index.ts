// @tether/react: tools for AI agents declared in React components, run by the Tether runtime
// (Rust compiled to WebAssembly, shipped in this package and loaded once per page).

export {
  TetherProvider,
  useAgentTool,
  useAgentContext,
  contextKey,
  useAgentToolResolver,
  resolverTool,
  useTether,
  useTetherState,
  useTetherEvents,
  useApprovalRequests,
  useToolCallRenderer,
  useHumanInTheLoop,
  sameOriginUrl,
  OUTSIDE_PROVIDER,
} from "./hooks.js";
export type {
  TetherProviderProps,
  Tether,
  AgentTool,
  AgentToolHandler,
  AgentToolContext,
  HumanInTheLoopTool,
  AgentContext,
  AgentToolResolver,
  ResolverTool,
  ApprovalRequests,
} from "./hooks.js";
/** The run events a `run` event of `useTetherEvents` carries, generated from the protocol's schema. */
export type { RunEvent } from "./protocol.js";
export { ApprovalDialog, ChatPanel, ToolInspector, RuntimeErrors, argsSummary, editedArgs, allowedValues, TOOL_CALL_STATUS_WORDS } from "./components.js";
export { loadTether, wasmLoadError } from "./runtime.js";
export { connectionWords, connectionError, connectionRestored, SESSION_LOST, canonicalJson, editedArgsReason, openPage } from "./store.js";
export type { WasmSource } from "./runtime.js";
export { toJsonSchema } from "./schema.js";
export type { ToolSchema, JsonSchema, StandardSchemaLike, ArgsOf, NoArgs } from "./schema.js";
export { finishedStatus } from "./store.js";
export type {
  TetherState,
  ChatLine,
  ToolCallView,
  ToolCallStatus,
  ToolCallRenderer,
  RefusedTool,
  ConnectionState,
  TetherClientLike,
  ClientFactory,
} from "./store.js";
export type {
  TetherClient,
  Risk,
  ToolDefinition,
  ToolHandler,
  ToolContext,
  ToolSpec,
  ApprovalRequest,
  ApprovalAnswer,
  Approver,
  TetherNotification,
  TetherError,
  TetherEvent,
  ResolverHooks,
  ClientOptions,
  CallRecord,
} from "../wasm/tether_web.js";
