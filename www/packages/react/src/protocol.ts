// Generated from crates/tether-protocol/protocol.schema.json (protocol 5) by `cargo xtask
// protocol-schema`; xtask's tidy test checks it is up to date. Do not edit.

/** One record per declarative hook call. */
export interface HookAudit {
  /** Whether the hook, a timeout or the fail mode decided. */
  decidedBy: HookDecidedBy;
  /** `allow` or `block`. */
  decision: string;
  /** How long the hook took, in milliseconds. */
  durationMs: number;
  /** The process exit code of a command hook, when it exited. */
  exitCode?: number | null;
  /** `Stop`, `PostToolUse` or `PreToolUse`. */
  hookEvent: string;
  /** The hook's id (its position and name in the configuration). */
  hookId: string;
  /** `agent` or `custom_agent`. */
  level: string;
  /** The reason given, if any. */
  reason?: string | null;
}

/** Who decided a hook's outcome, in a [`HookAudit`] record. */
export type HookDecidedBy = "hook" | "timeout" | "fail_mode";

/** `navigate`: the agent asks the page to open `url`, a page of this session that offered the tool `tool` with arguments the page the user is on does not accept (a call of a tool on another page, docs/models.md). The toolkits open it as the app's router would (`history.pushState` and a `popstate` event, or the app's own `navigate`); the server waits for that page's `CONTEXT_UPDATE`, then sends the call as a `TOOL_CALL` with the same `callId`. Since protocol 5. */
export interface NavigateEvent {
  /** The call that waits for the page. */
  callId: string;
  /** The tool the page offers. */
  tool: string;
  /** The page to open, as the page reported it (`PageInfo.url`: a path with its query). */
  url: string;
}

/** How a tool call ended, as the client reports it. */
export type ResultStatus = "ok" | "error" | "invalid_args" | "unknown_tool" | "denied" | "blocked" | "cancelled" | "timeout" | "interrupted";

/** `run_end`: the run ended. */
export interface RunEndEvent {
  /** The error, when `status` is `failed`. */
  error?: string | null;
  /** How it ended. */
  status: RunStatus;
  /** How many turns it took. */
  turns: number;
}

/** `run_start`: a run started for a user message. */
export interface RunStartEvent {
  /** The user's message. */
  text: string;
}

/** How an agent run ended. */
export type RunStatus = "completed" | "capped" | "max_turns" | "timed_out" | "failed" | "aborted" | "refused" | "loop_detected";

/** `tool_call_delta`: the arguments of a tool call the model is still writing, parsed from the incomplete JSON so far (strings may be cut short, later properties missing). Observe-only: the call runs only from its complete, validated `TOOL_CALL`, which carries the same `callId` (if the call is made at all: a refused call gets a `tool_execution_end` instead). Since protocol 4. */
export interface ToolCallDeltaEvent {
  /** The id the call will have. */
  callId: string;
  /** The arguments as far as they are written: always a JSON object. */
  partialArgs: unknown;
  /** The tool's name. */
  tool: string;
}

/** `tool_collision`: a client tool has the same name as a server-side tool; the server-side tool wins. */
export interface ToolCollisionEvent {
  /** The tool's name. */
  tool: string;
}

/** `tool_execution_end`: a tool finished; `output` is what the model reads (after `after_tool_execution`). */
export interface ToolEndEvent {
  /** The call id. */
  callId: string;
  /** What the model reads. */
  output: string;
  /** How it ended. */
  status: ResultStatus;
  /** The tool's name. */
  tool: string;
}

/** `tool_progress`: progress reported by a running client tool. */
export interface ToolProgressEvent {
  /** The call id. */
  callId: string;
  /** The progress message. */
  message: string;
}

/** `tool_execution_start`: a tool is about to run (after `before_tool_execution` allowed it). */
export interface ToolStartEvent {
  /** The arguments. */
  args: unknown;
  /** The call id. */
  callId: string;
  /** The tool's name. */
  tool: string;
}

/** `turn_end`: a turn ended. */
export interface TurnEndEvent {
  /** The model's text in this turn (may be empty when it only called tools). */
  reply: string;
  /** 1-based turn number. */
  turn: number;
}

/** `turn_start`: a turn (one model call and the tools it asked for) started. */
export interface TurnStartEvent {
  /** 1-based turn number. */
  turn: number;
}

/** What an [`EventFrame`] reports; the `kind` field names the variant. */
export type RunEvent =
  | ({ kind: "run_start" } & RunStartEvent)
  | ({ kind: "turn_start" } & TurnStartEvent)
  | ({ kind: "tool_execution_start" } & ToolStartEvent)
  | ({ kind: "tool_execution_end" } & ToolEndEvent)
  | ({ kind: "turn_end" } & TurnEndEvent)
  | ({ kind: "run_end" } & RunEndEvent)
  | ({ kind: "tool_collision" } & ToolCollisionEvent)
  | ({ kind: "tool_progress" } & ToolProgressEvent)
  | ({ kind: "tool_call_delta" } & ToolCallDeltaEvent)
  | ({ kind: "navigate" } & NavigateEvent)
  | ({ kind: "hook" } & HookAudit);
