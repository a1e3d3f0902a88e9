import type {
  ApprovalAnswer,
  ApprovalRequest,
  CallRecord,
  ClientOptions,
  TetherClient,
  TetherError,
  TetherEvent,
  TetherNotification,
  ToolSpec,
} from "../wasm/tether_web.js";
import type { ReactNode } from "react";
import type { RunEvent } from "./protocol.js";

/** The part of `TetherClient` the provider uses (tests pass a fake through `createClient`). */
export type TetherClientLike = Pick<
  TetherClient,
  | "connect"
  | "disconnect"
  | "newOwner"
  | "registerTool"
  | "registerResolver"
  | "unregisterOwner"
  | "unregisterTool"
  | "setContext"
  | "setApprover"
  | "onNotify"
  | "onError"
  | "subscribe"
  | "unsubscribe"
  | "sendMessage"
  | "stop"
  | "tools"
  | "callLocal"
>;

/** What the chat says when the server could not resume the conversation (the same in tether-leptos). */
export const SESSION_LOST =
  "The server could not resume this conversation (it expired, or the server lost it): the run in progress ended, and what you say next starts a new conversation.";

/** Makes the client once the provider mounts. */
export type ClientFactory = (url: string, options?: ClientOptions) => TetherClientLike | Promise<TetherClientLike>;

export type ConnectionState = Extract<TetherEvent, { type: "connection" }>["state"];

/** The connection state in words, as the inspector and the chat show it. */
export function connectionWords(state: ConnectionState, attempt = 0): string {
  switch (state) {
    case "idle":
      return "not connected";
    case "connecting":
      return attempt === 0 ? "connecting…" : `connecting (try ${attempt + 1})…`;
    case "open":
      return "connected";
    case "reconnecting":
      return `offline, retrying (${attempt} failed)`;
    case "closed":
      return "disconnected";
  }
}

/** How the error list words a connection that failed; `wasOpen` when it had been connected. */
export function connectionError(url: string, attempt: number, wasOpen: boolean): string {
  return wasOpen
    ? `lost the connection to the agent server at ${url}; reconnecting`
    : `cannot reach the agent server at ${url} (${attempt} failed attempt${attempt === 1 ? "" : "s"}); is \`tether serve\` running there? Retrying`;
}

/** What an outage's entry in the error list becomes once the connection is back: the same words
 * in the past tense; `wasLost` when it began with a lost connection. */
export function connectionRestored(url: string, attempt: number, wasLost: boolean): string {
  const tries = `${attempt} failed attempt${attempt === 1 ? "" : "s"}`;
  return wasLost
    ? `the connection to the agent server at ${url} was lost and is back (${tries})`
    : `the agent server at ${url} could not be reached (${tries}); connected since`;
}

/** Draws a tool call in the chat (see `useAgentTool`'s `render` and `useToolCallRenderer`). */
export type ToolCallRenderer = (call: ToolCallView) => ReactNode;

/**
 * Where a tool call shown in the chat stands: `streaming` while the model still writes it (its
 * arguments so far in `partialArgs`), `approval` while it waits for the user, `running`, then how
 * it ended.
 */
export type ToolCallStatus = "streaming" | "approval" | "running" | "done" | "failed" | "refused" | "cancelled";

/** A tool call as the chat shows it (what a tool's `render` gets). */
export interface ToolCallView {
  /** The run that made it, when the server said (a call streamed while the model wrote it). */
  runId?: string;
  callId: string;
  tool: string;
  /** The arguments the model gave (validated once the call runs); while `streaming`, `partialArgs`. */
  args: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  /**
   * The arguments as far as the model has written them, read from the incomplete JSON on the
   * server (strings may be cut short, later fields missing); kept once the call runs. Absent when
   * the model did not stream the call.
   */
  partialArgs?: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  status: ToolCallStatus;
  /** The handler's last progress message, while it runs. */
  progress?: string;
  /** What the handler returned (`done`), or the message (`failed`, `refused`, `cancelled`). */
  result?: unknown;
  /** The message, when the call did not succeed. */
  error?: string;
  /** What the handler asks the user (`context.ask(question)`), while it waits for the answer. */
  question?: unknown;
  /**
   * Answers the call's question (`useHumanInTheLoop`, or a handler's `context.ask`): present while
   * the call waits for the user. For `useHumanInTheLoop` the value is the tool's result.
   */
  respond?: (value: unknown) => void;
}

/** The status a finished call shows, from its result status. */
export function finishedStatus(resultStatus: string): ToolCallStatus {
  switch (resultStatus) {
    case "ok":
      return "done";
    case "denied":
    case "blocked":
      return "refused";
    case "cancelled":
    case "interrupted":
      return "cancelled";
    default:
      return "failed";
  }
}

/**
 * Opens `url`, a page of this app, as a client-side router does: `history.pushState` and a
 * `popstate` event, which React Router, TanStack Router, Leptos's router and hand-written
 * routers listen to. A URL of another origin is never opened. Give `<TetherProvider navigate>`
 * your router's own function when it does not follow `popstate`.
 */
export function openPage(url: string): void {
  if (typeof location === "undefined" || typeof history === "undefined") return;
  const target = new URL(url, location.href);
  if (target.origin !== location.origin) return;
  const path = target.pathname + target.search + target.hash;
  if (path === location.pathname + location.search + location.hash) return;
  history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate", { state: null }));
}

/** A value in words: a string as it is, anything else as compact JSON (a failed call's message, an argument in the approval dialog). */
export const asText = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value));


/** JSON with its object keys sorted: equal for equal values. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value ?? null, (_, item: unknown) =>
    item && typeof item === "object" && !Array.isArray(item)
      ? Object.fromEntries(Object.keys(item).sort().map((key) => [key, (item as Record<string, unknown>)[key]]))
      : item,
  );

/**
 * The refusal that carries arguments the user changed in the approval dialog (the same words in
 * tether-leptos): the model calls the tool again with them, that call is validated like any
 * other, and it runs without asking again.
 */
export const editedArgsReason = (tool: string, args: unknown) =>
  `the user changed the arguments before approving; call ${tool} again with exactly these arguments: ${JSON.stringify(args)}`;

/** One line of the chat. */
export interface ChatLine {
  /** Stable key: the run id for agent lines (`runId~n` for the words after its n-th tool call), `call-<callId>` for calls. */
  key: string;
  role: "user" | "agent" | "system" | "tool";
  text: string;
  /** How the run ended, once it did (an agent line: the run's last). */
  status?: string;
  /** A user message written while not connected: it is sent when the connection opens. */
  waiting?: boolean;
  /** The run whose words these are (`role: "agent"`). */
  runId?: string;
  /** The call (`role: "tool"`). */
  call?: ToolCallView;
}

/** A registration the runtime refused (over the cap, invalid name or schema). */
export interface RefusedTool {
  tool: string;
  /** `tool.registry.limit` or `tool.registry.refused`. */
  event: string;
  reason: string;
}

/** What the provider keeps up to date from the runtime's events. */
export interface TetherState {
  connection: ConnectionState;
  /** Failed connection attempts since the last success. */
  attempt: number;
  sessionId: string | null;
  /** The tools registered in this page, as the model sees them once connected (kept up to date offline too). */
  tools: ToolSpec[];
  refused: RefusedTool[];
  /** The last calls, newest last. */
  calls: CallRecord[];
  messages: ChatLine[];
  /** A run is in progress. */
  running: boolean;
  /** Approval requests waiting for the user, oldest first. */
  approvals: ApprovalRequest[];
  /** Errors the runtime reported, newest last: refused tools, server errors, connection failures. */
  errors: TetherError[];
  /** How many `CONTEXT_UPDATE` frames were sent. */
  contextUpdates: number;
}

/** A component's wish: the tools it wants registered now, under one owner. */
export interface Want {
  /** Equal keys mean equal registrations (definitions, not handlers). */
  key: string;
  /** The tool names it registers. */
  names: string[];
  /** The context keys it sets (`useAgentContext`). */
  contextKeys?: string[];
  register(client: TetherClientLike, owner: number): void;
}

/** One hook call site: what it wants and what the runtime has. */
let slotCount = 0;

export class Slot {
  /** Render order (parents before children, siblings in order): the order tools are registered in. */
  readonly seq = ++slotCount;
  owner: number | undefined;
  want: Want | null = null;
  have: Want | null = null;
}

const KEPT = 50;

const keep = <T>(list: T[], item: T): T[] => keepAt(list, list.length, item);
/** `item` inserted at `at`, the list kept to its last `KEPT` entries. */
const keepAt = <T>(list: T[], at: number, item: T): T[] => [...list.slice(0, at), item, ...list.slice(at)].slice(-KEPT);

/** Whether a chat line holds words of run `runId`. */
const ofRun = (line: ChatLine, runId: string) => line.role === "agent" && line.runId === runId;

/**
 * The key of the line that takes run `runId`'s next words: its last line, unless a tool call came
 * after it (then a new line, `runId~n`, after the call); the run id for its first (the same rule
 * as tether-leptos).
 */
function runLine(lines: ChatLine[], runId: string): string {
  let last = lines.length - 1;
  while (last >= 0 && !ofRun(lines[last]!, runId)) last--;
  if (last < 0) return runId;
  if (lines.slice(last + 1).some((line) => line.role === "tool")) {
    return `${runId}~${lines.filter((line) => ofRun(line, runId)).length}`;
  }
  return lines[last]!.key;
}

const initialState: TetherState = {
  connection: "idle",
  attempt: 0,
  sessionId: null,
  tools: [],
  refused: [],
  calls: [],
  messages: [],
  running: false,
  approvals: [],
  errors: [],
  contextUpdates: 0,
};

/**
 * The provider's engine: owns the client, mirrors its events into an immutable state for
 * `useSyncExternalStore`, and reconciles the tools that mounted components want.
 *
 * Registry changes are applied in one microtask per tick, removals first: React runs an
 * unmount's cleanup and the next mount's effect in the same tick, so a StrictMode double
 * mount (want, unwant, want) nets out to nothing, and a page change (old page's tools out,
 * new page's in) reaches the runtime in one batch, which it sends as one `CONTEXT_UPDATE`.
 */
export class TetherStore {
  client: TetherClientLike | null = null;
  #state: TetherState = initialState;
  readonly #listeners = new Set<() => void>();
  readonly #eventListeners = new Set<(event: TetherEvent) => void>();
  readonly #dirty = new Set<Slot>();
  readonly #slots = new Set<Slot>();
  readonly #answers = new Map<string, (answer: ApprovalAnswer) => void>();
  #queued: string[] = [];
  /** Calls that reached the page and whose handler has not asked yet, oldest first (`ask`). */
  #arrived: { callId: string; tool: string }[] = [];
  /** The human-in-the-loop calls waiting for `respond`, by call id. */
  readonly #asks = new Map<string, (value: unknown) => void>();
  /** Calls the user approved with changed arguments, until the model makes them (this run only). */
  #preApproved: { tool: string; args: string }[] = [];
  /** How each tool's calls look in the chat (`"*"`: the rest). */
  readonly #renderers = new Map<string, ToolCallRenderer>();
  /** The outage going on now: its entry in `errors`, whether it began with a lost connection, the attempts that failed. */
  #outage: { entry: TetherError; lost: boolean; attempts: number } | null = null;
  #scheduled = false;
  #mounted = 0;
  #started = false;
  #closed = false;
  #subscription: number | undefined;
  #wants = 0;
  /** How many messages the user wrote (their lines' keys). */
  #users = 0;

  /**
   * Opens a page of the app when a call's tool is on another page (the `navigate` run event);
   * `<TetherProvider navigate>` sets it. Default: {@link openPage}.
   */
  navigate: ((url: string) => void) | undefined;
  readonly #create: ClientFactory;
  readonly #options: ClientOptions | undefined;
  readonly #commit: (update: () => void) => void;

  constructor(
    readonly url: string,
    create: ClientFactory,
    options?: ClientOptions,
    commit: (update: () => void) => void = (update) => update(),
  ) {
    this.#create = create;
    this.#options = options;
    this.#commit = commit;
  }

  // ---- lifecycle: connect on the first mount, disconnect when the last unmount sticks ----

  attach(): void {
    this.#mounted++;
    if (this.#closed) {
      // Shown again after a real unmount (e.g. a hidden <Activity>): a new client.
      this.#closed = false;
      this.#started = false;
    }
    if (this.#started) return;
    this.#started = true;
    Promise.resolve()
      .then(() => this.#create(this.url, this.#options))
      .then(
        (client) => this.#open(client),
        (error: unknown) => {
          const message = error instanceof Error ? error.message : String(error);
          console.error(message);
          this.#pushError({ kind: "connection", message });
        },
      );
  }

  detach(): void {
    this.#mounted--;
    queueMicrotask(() => {
      if (this.#mounted === 0) this.#close();
    });
  }

  #open(client: TetherClientLike): void {
    if (this.#closed) return;
    this.client = client;
    this.#subscription = client.subscribe((event) => this.#onEvent(event));
    client.onError((error) => this.#pushError(error));
    client.onNotify((n: TetherNotification) => {
      // Before the call's own line when that is in the chat already (the notice may come after it).
      const line: ChatLine = { key: `notify-${n.callId}`, role: "system", text: `Running ${n.tool} ${JSON.stringify(n.args)}` };
      const messages = this.#state.messages;
      const at = messages.findIndex((m) => m.key === `call-${n.callId}`);
      this.#update({ messages: keepAt(messages, at < 0 ? messages.length : at, line) });
    });
    client.setApprover((request) => {
      // The call the user approved with changed arguments: it runs without asking again.
      const approved = this.#preApproved.findIndex((p) => p.tool === request.tool && p.args === canonicalJson(request.args));
      if (approved >= 0) {
        this.#preApproved.splice(approved, 1);
        return true;
      }
      return new Promise<ApprovalAnswer>((resolve) => {
          this.#answers.set(request.callId, resolve);
          this.#update({
            approvals: [...this.#state.approvals, request],
            messages: this.#withCall(request.callId, { status: "approval" }),
          });
        });
    });
    // Tools wanted before the runtime was ready: registered before the first connection.
    this.#reconcile();
    this.#refreshTools();
    client.connect();
    for (const text of this.#queued.splice(0)) client.sendMessage(text);
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const client = this.client;
    this.client = null;
    // A later client starts from nothing: every slot that still wants tools registers again.
    for (const slot of this.#slots) {
      slot.have = null;
      slot.owner = undefined;
      if (slot.want) this.#dirty.add(slot);
    }
    if (!client) return;
    if (this.#subscription !== undefined) client.unsubscribe(this.#subscription);
    client.disconnect();
    for (const answer of this.#answers.values()) answer("dismissed");
    this.#answers.clear();
  }

  // ---- state for useSyncExternalStore ----

  getState = (): TetherState => this.#state;

  subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  };

  /** Every runtime event, as it happens. */
  listen(listener: (event: TetherEvent) => void): () => void {
    this.#eventListeners.add(listener);
    return () => this.#eventListeners.delete(listener);
  }

  #update(patch: Partial<TetherState>): void {
    this.#state = { ...this.#state, ...patch };
    for (const listener of [...this.#listeners]) listener();
  }

  #pushError(error: TetherError): void {
    this.#update({ errors: keep(this.#state.errors, error) });
  }

  /** The page's tools, read from the runtime (offline too). */
  #refreshTools(): void {
    const tools = this.client?.tools();
    if (tools && JSON.stringify(tools) !== JSON.stringify(this.#state.tools)) this.#update({ tools });
  }

  #onEvent(event: TetherEvent): void {
    const s = this.#state;
    switch (event.type) {
      case "connection": {
        const wasOpen = s.connection === "open";
        const patch: Partial<TetherState> = { connection: event.state, attempt: event.attempt };
        if (event.state === "reconnecting") {
          // One entry per outage, updated as the attempts fail.
          const outage = this.#outage;
          const lost = outage ? outage.lost : wasOpen;
          const error: TetherError = { kind: "connection", message: connectionError(this.url, event.attempt, lost) };
          const at = outage ? s.errors.lastIndexOf(outage.entry) : -1;
          patch.errors = at >= 0 ? s.errors.map((e, n) => (n === at ? error : e)) : keep(s.errors, error);
          this.#outage = { entry: error, lost, attempts: event.attempt };
        }
        if (event.state === "open" && this.#outage) {
          // The outage's entry says it ended.
          const { entry, lost, attempts } = this.#outage;
          this.#outage = null;
          const restored: TetherError = { kind: "connection", message: connectionRestored(this.url, attempts, lost) };
          patch.errors = s.errors.map((e) => (e === entry ? restored : e));
        }
        if (event.state === "open" && s.messages.some((m) => m.waiting)) {
          // Messages written while offline have now left.
          patch.messages = s.messages.map((m) => (m.waiting ? { ...m, waiting: false } : m));
        }
        this.#update(patch);
        break;
      }
      case "welcome": {
        if (s.sessionId === null || event.resumed || event.sessionId === s.sessionId) {
          this.#update({ sessionId: event.sessionId });
          break;
        }
        // The server could not resume the session (it expired, or the server lost it): nothing
        // of the old one will ever answer. The run in progress ends in the chat, the approvals
        // waiting for the user close without running their handlers, and the chat says so.
        for (const request of s.approvals) {
          const answer = this.#answers.get(request.callId);
          this.#answers.delete(request.callId);
          answer?.("dismissed");
        }
        const ended = s.messages.map((line) => (line.role === "agent" && !line.status ? { ...line, status: "failed" as const } : line));
        this.#update({
          sessionId: event.sessionId,
          approvals: [],
          running: false,
          messages: keep(ended, { key: `lost-${event.sessionId}`, role: "system", text: SESSION_LOST }),
        });
        break;
      }
      case "contextSent":
        this.#update({ contextUpdates: s.contextUpdates + 1, tools: this.client?.tools() ?? s.tools });
        break;
      case "toolRefused":
        this.#update({
          refused: [...s.refused.filter((r) => r.tool !== event.tool), { tool: event.tool, event: event.event, reason: event.reason }],
        });
        this.#refreshTools();
        break;
      case "callStarted": {
        // The call takes its place in the chat after the words so far (or keeps the place it took
        // while the model wrote it); the run's later words go in a line after it (`runLine`).
        this.#arrived.push({ callId: event.callId, tool: event.tool });
        const key = `call-${event.callId}`;
        if (s.messages.some((line) => line.key === key)) {
          this.#patchCall(event.callId, { args: event.args, status: "running" });
          break;
        }
        const call: ToolCallView = { callId: event.callId, tool: event.tool, args: event.args, status: "running" };
        this.#update({ messages: keep(s.messages, { key, role: "tool", text: "", call }) });
        break;
      }
      case "run":
        // The runtime forwards run events as the server sent them: read through the protocol's types.
        this.#onRunEvent(event.runId ?? null, event.event as unknown as RunEvent);
        break;
      case "callFinished": {
        // A call that ended while its approval was open (Stop, a timeout): the dialog goes.
        const { callId, status, content } = event.record;
        const open = this.#answers.get(callId);
        this.#answers.delete(callId);
        open?.("dismissed");
        this.#arrived = this.#arrived.filter((call) => call.callId !== callId);
        this.#asks.delete(callId);
        this.#update({
          calls: keep(s.calls, event.record),
          approvals: s.approvals.filter((request) => request.callId !== callId),
          messages: this.#withCall(callId, {
            status: finishedStatus(status),
            result: content,
            error: status === "ok" ? undefined : asText(content),
            respond: undefined,
          }),
        });
        break;
      }
      case "agentMessage": {
        // The run starts its words again on a reset: one line, after its calls.
        const messages = event.reset ? s.messages.filter((line) => !ofRun(line, event.runId)) : [...s.messages];
        const status = event.status ?? undefined;
        const key = runLine(messages, event.runId);
        const index = messages.findIndex((line) => line.key === key);
        if (index >= 0) messages[index] = { ...messages[index]!, text: messages[index]!.text + event.delta, status };
        else messages.push({ key, role: "agent", text: event.delta, status, runId: event.runId });
        if (messages.length > KEPT) messages.splice(0, messages.length - KEPT);
        if (event.done) this.#preApproved = [];
        this.#update({ messages, running: event.done ? false : s.running });
        break;
      }
      case "history": {
        // After a reload: the conversation so far comes first (lines this page added since stay after it).
        const restored: ChatLine[] = event.lines.map((line, n) => ({
          key: line.runId ?? `history-${n}`,
          role: line.role,
          text: line.text,
          status: line.status,
          runId: line.role === "agent" ? line.runId : undefined,
        }));
        const running = event.lines.some((line) => line.role === "agent" && !line.status);
        const rest = s.messages.filter((line) => !restored.some((r) => r.key === line.key));
        this.#update({ messages: [...restored, ...rest].slice(-KEPT), running: running || s.running });
        break;
      }
      case "serverError":
        if (event.code === "run_in_progress" || event.code === "run_failed") this.#update({ running: false });
        break;
    }
    for (const listener of [...this.#eventListeners]) listener(event);
  }

  /** What the server tells of a run: calls as the model writes them, progress, calls refused before they left. */
  #onRunEvent(runId: string | null, event: RunEvent): void {
    const s = this.#state;
    // A field of the wrong type (a server of another version) changes nothing.
    const callId = "callId" in event && typeof event.callId === "string" ? event.callId : undefined;
    const line = callId ? s.messages.find((l) => l.key === `call-${callId}`) : undefined;
    switch (event.kind) {
      case "tool_call_delta": {
        if (!callId || typeof event.tool !== "string") return;
        if (!line) {
          // The call takes its place in the chat as soon as the model starts writing it.
          const call: ToolCallView = {
            runId: runId ?? undefined,
            callId,
            tool: event.tool,
            args: event.partialArgs,
            partialArgs: event.partialArgs,
            status: "streaming",
          };
          this.#update({ messages: keep(s.messages, { key: `call-${callId}`, role: "tool", text: "", call }) });
        } else if (line.call?.status === "streaming") {
          this.#patchCall(callId, { args: event.partialArgs, partialArgs: event.partialArgs });
        }
        return;
      }
      case "tool_progress":
        if (callId && typeof event.message === "string") this.#patchCall(callId, { progress: event.message });
        return;
      case "tool_execution_end":
        // Refused on the server before it reached the page (a hook, the loop guard): it ends here.
        if (callId && line?.call?.status === "streaming") {
          const output = typeof event.output === "string" ? event.output : "";
          this.#patchCall(callId, { status: finishedStatus(event.status), result: output, error: output });
        }
        return;
      case "navigate":
        // The call's tool is on another page of the app: open it (the server then sends the call).
        if (typeof event.url === "string") (this.navigate ?? openPage)(event.url);
        return;
      case "run_end":
        // A call the model began but never finished writing (or that was never made) leaves the chat.
        if (runId) {
          const messages = s.messages.filter((l) => !(l.call?.runId === runId && l.call.status === "streaming"));
          if (messages.length !== s.messages.length) this.#update({ messages });
        }
        return;
    }
  }

  // ---- actions ----

  /**
   * Sends the user's message (kept until the server is reachable) and shows it in the chat.
   * While the run waits for approvals, the message answers them instead: each pending call is
   * refused with the message as the reason (`the user wrote instead: …`), the run goes on, and
   * the model reads those words with the refusal. No new run starts. The same as tether-leptos.
   */
  sendMessage(text: string): void {
    const trimmed = text.trim();
    if (!trimmed) return;
    const waiting = this.#state.connection !== "open";
    const pending = this.#state.approvals;
    const questions = [...this.#asks.keys()];
    this.#update({
      // Numbered by the user's messages, not by the lines: the list keeps its last lines only,
      // and a key must not come back.
      messages: keep(this.#state.messages, { key: `user-${this.#users++}`, role: "user", text: trimmed, waiting }),
      running: true,
    });
    if (pending.length > 0 || questions.length > 0) {
      for (const request of pending) {
        this.answerApproval(request.callId, { approved: false, reason: `the user wrote instead: ${trimmed}` });
      }
      // A question waiting for the user is answered with what they wrote.
      for (const callId of questions) this.respond(callId, trimmed);
      return;
    }
    if (this.client) this.client.sendMessage(trimmed);
    else this.#queued.push(trimmed);
  }

  /** Stops the run in progress (the chat's Stop button): it ends as `aborted`, and the calls
   * it waits for are cancelled (an open approval is dismissed). */
  stop(): void {
    this.client?.stop();
  }

  /**
   * Approves the request of `callId` with the arguments the user changed: unchanged, an ordinary
   * approval; changed, the call is refused with the new arguments for the model
   * ({@link editedArgsReason}), and the model's next call of the tool with exactly those runs
   * without asking again (after the runtime validated it against the schema, as every call).
   */
  approveWithArgs(callId: string, args: unknown): void {
    const request = this.#state.approvals.find((r) => r.callId === callId);
    if (!request) return;
    if (canonicalJson(args) === canonicalJson(request.args)) return this.answerApproval(callId, true);
    this.#preApproved.push({ tool: request.tool, args: canonicalJson(args) });
    this.answerApproval(callId, { approved: false, reason: editedArgsReason(request.tool, args) });
  }

  /** Answers the approval request of `callId`. */
  answerApproval(callId: string, answer: ApprovalAnswer): void {
    const resolve = this.#answers.get(callId);
    this.#answers.delete(callId);
    const approved = answer === true || (typeof answer === "object" && answer !== null && answer.approved === true);
    this.#update({
      approvals: this.#state.approvals.filter((r) => r.callId !== callId),
      messages: approved ? this.#withCall(callId, { status: "running" }) : this.#state.messages,
    });
    resolve?.(answer);
  }

  /**
   * A handler of `tool` starts: the id of its call, the oldest of `tool` that reached the page and
   * whose handler has not started yet (the runtime starts a tool's handlers in the order its calls
   * arrive, except calls that wait for an approval meanwhile: those ask no question).
   */
  claim(tool: string): string | undefined {
    const at = this.#arrived.findIndex((call) => call.tool === tool);
    return at < 0 ? undefined : this.#arrived.splice(at, 1)[0]!.callId;
  }

  /**
   * The handler of call `callId` asks the user: the call's chat line gets `question` and
   * `respond`, and this resolves with the value given to `respond` (or the text of a chat message
   * sent meanwhile). Rejects when the call is cancelled (`signal`).
   */
  ask(callId: string | undefined, signal: AbortSignal, question?: unknown): Promise<unknown> {
    // Without an id the call is not in the chat (e.g. run by the inspector), so nobody can answer.
    if (callId === undefined || signal.aborted) return Promise.reject(new Error("the question was cancelled"));
    return new Promise((resolve, reject) => {
      this.#asks.set(callId, resolve);
      this.#patchCall(callId, { question, respond: (value: unknown) => this.respond(callId, value) });
      // A signal aborts once.
      signal.addEventListener("abort", () => {
        if (!this.#asks.delete(callId)) return;
        this.#closeQuestion(callId);
        reject(new Error("the question was cancelled"));
      });
    });
  }

  #closeQuestion(callId: string): void {
    this.#patchCall(callId, { question: undefined, respond: undefined });
  }

  /** Answers the human-in-the-loop call `callId`: `value` is its result. Later answers are ignored. */
  respond(callId: string, value: unknown): void {
    const resolve = this.#asks.get(callId);
    if (!resolve) return;
    this.#asks.delete(callId);
    this.#closeQuestion(callId);
    resolve(value === undefined ? null : value);
  }

  /** Changes the chat line of call `callId` (if it is shown) by `patch`. */
  #patchCall(callId: string, patch: Partial<ToolCallView>): void {
    this.#update({ messages: this.#withCall(callId, patch) });
  }

  /** The chat lines with the line of call `callId` (if it is shown) changed by `patch`. */
  #withCall(callId: string, patch: Partial<ToolCallView>): ChatLine[] {
    const key = `call-${callId}`;
    if (!this.#state.messages.some((line) => line.key === key)) return this.#state.messages;
    return this.#state.messages.map((line) => (line.key === key && line.call ? { ...line, call: { ...line.call, ...patch } } : line));
  }

  /** How a tool's calls look in the chat: `render` for `tool` (`"*"`: every tool without its own). */
  setRenderer(tool: string, render: ToolCallRenderer | undefined): void {
    if (render) this.#renderers.set(tool, render);
  }

  /** The renderer for `tool`'s calls, if any was given. */
  renderer(tool: string): ToolCallRenderer | undefined {
    return this.#renderers.get(tool) ?? this.#renderers.get("*");
  }

  // ---- tools ----

  /**
   * Runs a tool handler. Its synchronous state updates are committed at once (`flushSync`), so
   * the components it mounts or unmounts state their tools (applied in this tick's microtask)
   * before the runtime decides whether the page changed; if it did, the runtime waits for the
   * page to settle and sends the new tool list before the result.
   */
  runHandler(handler: () => unknown): unknown {
    let result: unknown;
    this.#commit(() => {
      result = handler();
    });
    return result;
  }

  /** Records what `slot` wants; applied with every other change of this tick in one microtask. */
  want(slot: Slot, want: Want | null): void {
    this.#wants++;
    slot.want = want;
    if (want) this.#slots.add(slot);
    else if (!slot.have) this.#slots.delete(slot);
    this.#dirty.add(slot);
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#reconcile();
    });
  }

  #reconcile(): void {
    const client = this.client;
    if (!client || this.#dirty.size === 0) return;
    // React runs effects children first; register in render order (the layout's tools before the
    // page's), as the components appear on the page.
    const slots = [...this.#dirty].sort((a, b) => a.seq - b.seq);
    this.#dirty.clear();
    // Removals first: they free room under the cap.
    for (const slot of slots) {
      const { have, want } = slot;
      if (!have || (want && want.key === have.key)) continue;
      if (!want) {
        client.unregisterOwner(slot.owner!);
        slot.have = null;
        this.#slots.delete(slot);
      } else {
        for (const name of have.names) if (!want.names.includes(name)) client.unregisterTool(slot.owner!, name);
        // A context hook's owner holds its one entry: a new key replaces the old entry whole.
        if (have.contextKeys?.some((key) => !want.contextKeys?.includes(key))) client.unregisterOwner(slot.owner!);
      }
    }
    for (const slot of slots) {
      const { have, want } = slot;
      if (!want || (have && have.key === want.key)) continue;
      slot.owner ??= client.newOwner();
      slot.have = want;
      try {
        // The same name re-registered replaces the tool in place (its calls in flight go on).
        want.register(client, slot.owner);
      } catch {
        // A refusal (over the cap, invalid schema) is reported to onError and the inspector.
      }
    }
    this.#refreshTools();
  }
}
