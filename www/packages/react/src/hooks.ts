import {
  createContext,
  createElement,
  useContext,
  useEffect,
  useLayoutEffect,
  useMemo,
  useRef,
  useSyncExternalStore,
  type ReactNode,
} from "react";
import { flushSync } from "react-dom";
import type {
  ApprovalAnswer,
  ApprovalRequest,
  ClientOptions,
  ResolverHooks,
  Risk,
  TetherEvent,
  ToolContext,
  ToolDefinition,
} from "../wasm/tether_web.js";
import { loadTether, type WasmSource } from "./runtime.js";
import { toJsonSchema, type ArgsOf, type ToolSchema } from "./schema.js";
import { Slot, TetherStore, openPage, type ClientFactory, type TetherState, type ToolCallView } from "./store.js";

const StoreContext = createContext<TetherStore | null>(null);

/** What every hook and component says when it is used outside `<TetherProvider>` (after its own name). */
export const OUTSIDE_PROVIDER =
  "must be called inside <TetherProvider>; wrap the app (or this component) in it: <TetherProvider><App /><ChatPanel /><ApprovalDialog /></TetherProvider>";

const useIsomorphicLayoutEffect = typeof window === "undefined" ? useEffect : useLayoutEffect;

/** The provider's store; `what` (a hook or component) is named in the error outside the provider. */
function useStore(what: string): TetherStore {
  const store = useContext(StoreContext);
  if (!store) throw new Error(`@tether/react: ${what} ${OUTSIDE_PROVIDER}`);
  return store;
}

/** The URL a provider rendered on a server without `url` holds; it never connects (effects do not run there). */
const SERVER_RENDER_URL = "ws://server-render.invalid/ws";

/** Whether this runs in a browser page (a location with a host). */
const hasPage = () => Boolean((globalThis as { location?: Location }).location?.host);

/**
 * The WebSocket URL of a `tether serve` on the page's own origin: `ws(s)://<host>/ws`. A dev
 * server on another port reaches it through a proxy for `/ws` (Vite: `server.proxy`).
 */
export function sameOriginUrl(): string {
  const location = (globalThis as { location?: Location }).location;
  if (!location?.host) throw new Error("@tether/react: <TetherProvider> needs a `url` outside a browser page");
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
}

/** A ref that always holds the latest value (updated before effects and tool calls can read it). */
function useLatest<T>(value: T) {
  const ref = useRef(value);
  useIsomorphicLayoutEffect(() => {
    ref.current = value;
  });
  return ref;
}

export interface TetherProviderProps {
  /**
   * The server's WebSocket URL, e.g. `ws://127.0.0.1:8787/ws`. Default: `/ws` on the page's own
   * origin (`sameOriginUrl()`), where `tether serve --static DIR` serves it. A new URL makes a new client.
   * Rendered on a server (SSR) without it, the provider renders its children with the empty
   * state and connects only in the page.
   */
  url?: string;
  /** Reconnect and settle timings. Read when the client is made. */
  options?: ClientOptions;
  /** Where the wasm comes from (default: the file shipped in this package, next to its glue). */
  wasm?: WasmSource;
  /** Makes the client instead of `new TetherClient(url, options)` (tests, custom runtimes). */
  createClient?: ClientFactory;
  /**
   * Opens a page of the app (a path such as `/product/mug-blue`) when the agent calls a tool
   * that another page offers: the server asks for it, waits for that page's tools, then calls.
   * Default: `openPage` (`history.pushState` and a `popstate` event). Give your router's own,
   * e.g. `navigate={(url) => router.navigate(url)}`, when it does not follow `popstate`.
   */
  navigate?: (url: string) => void;
  children?: ReactNode;
}

/**
 * Connects to the agent server and provides what every Tether hook needs. The runtime's wasm is
 * loaded once per page; the client connects on mount and disconnects on unmount.
 */
export function TetherProvider({ url: given, options, wasm, createClient, navigate, children }: TetherProviderProps) {
  // Rendered on a server (no page, no effects): the state is empty and nothing connects; the
  // page's own render picks the URL.
  const url = given ?? (hasPage() ? sameOriginUrl() : SERVER_RENDER_URL);
  const settings = useLatest({ options, wasm, createClient, navigate });
  const store = useMemo(
    () =>
      new TetherStore(
        url,
        (u, o) => settings.current.createClient?.(u, o) ?? loadTether(settings.current.wasm).then((Client) => new Client(u, o)),
        settings.current.options,
        flushSync,
      ),
    [url, settings],
  );
  store.navigate = (page) => (settings.current.navigate ?? openPage)(page);
  useEffect(() => {
    store.attach();
    return () => store.detach();
  }, [store]);
  return createElement(StoreContext.Provider, { value: store }, children);
}

/** What `useTether()` returns: the actions and the client (null until the runtime is loaded). */
export interface Tether {
  sendMessage(text: string): void;
  answerApproval(callId: string, answer: ApprovalAnswer): void;
  /** Stops the run in progress: it ends as `aborted` and its calls are cancelled. */
  stop(): void;
  readonly client: TetherStore["client"];
}

/** The provider's actions: send a chat message, answer an approval, stop the run; `client` for anything else. */
export function useTether(): Tether {
  const store = useStore("useTether()");
  return useMemo(
    () => ({
      sendMessage: (text: string) => store.sendMessage(text),
      answerApproval: (callId: string, answer: ApprovalAnswer) => store.answerApproval(callId, answer),
      stop: () => store.stop(),
      get client() {
        return store.client;
      },
    }),
    [store],
  );
}

/** The live state: connection, tools the model sees, refusals, calls, chat, approvals, errors. */
export function useTetherState(): TetherState;
export function useTetherState<T>(select: (state: TetherState) => T): T;
export function useTetherState<T>(select?: (state: TetherState) => T): T | TetherState {
  const store = useStore("useTetherState()");
  // The last selection: a selector that builds a new array or object each time (`s =>
  // s.messages.filter(…)`) gives the same value again until the state changes, and a value equal
  // to the last one (shallowly) keeps its identity, so React neither loops nor re-renders for it.
  const last = useRef<{ state: TetherState; select: (state: TetherState) => T; value: T } | null>(null);
  const get = () => {
    const state = store.getState();
    if (!select) return state;
    const cached = last.current;
    if (cached && cached.state === state && cached.select === select) return cached.value;
    const selected = select(state);
    const value = cached && shallowEqual(cached.value, selected) ? cached.value : selected;
    last.current = { state, select, value };
    return value;
  };
  return useSyncExternalStore(store.subscribe, get, get);
}

/** Whether two values are equal, or arrays or plain objects with identical entries. */
function shallowEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  return (
    keysA.length === keysB.length &&
    keysA.every((key) => Object.prototype.hasOwnProperty.call(b, key) && Object.is((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]))
  );
}

/** Calls `listener` with every runtime event while the component is mounted (latest listener). */
export function useTetherEvents(listener: (event: TetherEvent) => void): void {
  const store = useStore("useTetherEvents()");
  const latest = useLatest(listener);
  useEffect(() => store.listen((event) => latest.current(event)), [store, latest]);
}

/** Approval requests waiting for the user, and the ways to answer them. */
export interface ApprovalRequests {
  /** Oldest first. */
  requests: ApprovalRequest[];
  /** The one to show now. */
  current: ApprovalRequest | undefined;
  approve(callId: string): void;
  /**
   * Approves with arguments the user changed: the model is told and calls the tool again with
   * them (validated as every call), and that call runs without asking again.
   */
  approveWithArgs(callId: string, args: unknown): void;
  reject(callId: string, reason?: string): void;
  answer(callId: string, answer: ApprovalAnswer): void;
}

/** The `high` and `critical` calls waiting for the user's decision (build your own dialog). */
export function useApprovalRequests(): ApprovalRequests {
  const store = useStore("useApprovalRequests()");
  const requests = useTetherState((s) => s.approvals);
  return useMemo(
    () => ({
      requests,
      current: requests[0],
      approve: (callId: string) => store.answerApproval(callId, true),
      approveWithArgs: (callId: string, args: unknown) => store.approveWithArgs(callId, args),
      reject: (callId: string, reason?: string) => store.answerApproval(callId, { approved: false, reason }),
      answer: (callId: string, answer: ApprovalAnswer) => store.answerApproval(callId, answer),
    }),
    [store, requests],
  );
}

/** A tool as a component declares it. */
export interface AgentTool<S extends ToolSchema | undefined = ToolSchema | undefined> {
  /** Letters, digits, `_` and `-`; at most 64 characters. */
  name: string;
  /** What it does, written for the model. */
  description: string;
  /** The arguments: a zod 4 schema or a JSON Schema object. Default: no arguments. */
  schema?: S;
  /** Default "none"; "high" and "critical" ask the user first. */
  risk?: Risk;
  /** Stays registered when the component unmounts. */
  global?: boolean;
  /**
   * `false`: once a call of this tool succeeded, the run ends without asking the model again;
   * the call's rendered result (`render`) is the answer. A failed or refused call is still
   * followed up. Default `true`.
   */
  followUp?: boolean;
  /** Handler timeout in milliseconds (default 10000). */
  timeoutMs?: number;
  /**
   * How the tool's calls look in the chat (`<ChatPanel/>`): gets the call (`status`, `args`,
   * `result`) and returns an element. Kept after the component unmounts, so the calls already
   * in the chat keep their look. Without it: `useToolCallRenderer("*", …)`, else a line with the
   * tool, its arguments and its status.
   */
  render?: (call: ToolCallView) => ReactNode;
}

/** The renderer of each tool's calls (for `<ChatPanel/>`; not exported from the package). */
export function useRendererLookup(): (tool: string) => ((call: ToolCallView) => ReactNode) | undefined {
  const store = useStore("<ChatPanel/>");
  return (tool) => store.renderer(tool);
}

/**
 * Draws the calls of `tool` in the chat (`"*"`: of every tool without a renderer of its own),
 * while the component is mounted and after (the calls already shown keep their look).
 */
export function useToolCallRenderer(tool: string, render: (call: ToolCallView) => ReactNode): void {
  const store = useStore(`useToolCallRenderer("${tool}")`);
  const latest = useLatest(render);
  useEffect(() => {
    store.setRenderer(tool, (call) => latest.current(call));
  }, [store, tool, latest]);
}

/**
 * Runs a tool: gets validated arguments (defaults applied); returns JSON or throws. `signal` is
 * aborted when the call is cancelled before the handler finished (the user's Stop, the server's
 * `TOOL_CANCEL`, the timeout, the component unmounted): pass it to `fetch` or stop on its
 * `abort` event. Whatever the handler returns after that is not sent.
 */
export type AgentToolHandler<S> = (args: ArgsOf<S>, context: AgentToolContext) => unknown | Promise<unknown>;

/** What a `useAgentTool` handler gets besides its arguments. */
export interface AgentToolContext extends ToolContext {
  /** The call's id (as the chat and `TetherEvent`s name it). */
  callId?: string;
  /**
   * Asks the user and waits for the answer: the call's line in the chat gets `question` and
   * `respond` (draw them in the tool's `render`); a chat message sent meanwhile answers with its
   * text. Rejects when the call is cancelled.
   */
  ask(question?: unknown): Promise<unknown>;
}

/** The handler's context: the runtime's, with the call's id and `ask`. */
function agentContext(store: TetherStore, tool: string, context: ToolContext): AgentToolContext {
  const callId = store.claim(tool);
  return { signal: context.signal, callId, ask: (question?: unknown) => store.ask(callId, context.signal, question) };
}

function definition(tool: AgentTool): ToolDefinition {
  const def: ToolDefinition = { name: tool.name, description: tool.description, parameters: toJsonSchema(tool.schema) };
  if (tool.risk !== undefined) def.risk = tool.risk;
  if (tool.global !== undefined) def.global = tool.global;
  if (tool.followUp !== undefined) def.followUp = tool.followUp;
  if (tool.timeoutMs !== undefined) def.timeoutMs = tool.timeoutMs;
  return def;
}

/** Registers `want` for the calling component while it is mounted and while `key` holds. */
function useRegistration(
  store: TetherStore,
  key: string,
  want: () => Omit<Parameters<TetherStore["want"]>[1] & object, "key">,
) {
  // A new slot for a new store: the store is the key, not an input.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const slot = useMemo(() => new Slot(), [store]);
  const make = useLatest(want);
  useEffect(() => {
    store.want(slot, { key, ...make.current() });
    return () => store.want(slot, null);
  }, [store, slot, key, make]);
}

/**
 * Registers a tool while the calling component is mounted.
 *
 * The handler is kept in a ref: it always sees the component's current props and state, and a
 * re-render with the same definition changes nothing. A changed definition re-registers the
 * tool in place. StrictMode's double mount leaves one registration and sends no extra update.
 */
export function useAgentTool<S extends ToolSchema | undefined = undefined>(
  tool: AgentTool<S>,
  handler: AgentToolHandler<S>,
): void {
  const store = useStore(`useAgentTool("${tool.name}")`);
  const latest = useLatest(handler);
  const render = useLatest(tool.render);
  const hasRender = tool.render !== undefined;
  useEffect(() => {
    if (hasRender) store.setRenderer(tool.name, (call) => render.current?.(call));
  }, [store, tool.name, hasRender, render]);
  const def = definition(tool);
  const key = JSON.stringify(def);
  useRegistration(store, key, () => ({
    names: [def.name],
    register: (client, owner) =>
      client.registerTool(owner, def, (args, context) =>
        withSchemaOutput(tool.schema, def.name, args, (value) =>
          store.runHandler(() => latest.current(value as ArgsOf<S>, agentContext(store, def.name, context))),
        ),
      ),
  }));
}

/** What a Standard Schema's `validate` gives: the output, or what is wrong. */
type StandardResult = { value?: unknown; issues?: ReadonlyArray<{ message: string; path?: ReadonlyArray<unknown> }> };

/**
 * Runs `schema`'s own validation when it is a Standard Schema (`~standard.validate`: zod's
 * refinements, transforms and defaults) on arguments the runtime already checked against its
 * JSON Schema, and calls `run` with its output, which is what the handler's type says it gets.
 * Arguments it refuses never reach the handler: the call fails with
 * `Validation args "<name>": …` (after an approval, for a tool that needs one: only what JSON
 * Schema can say is checked before). Plain JSON Schema: `run` gets the arguments as they are.
 */
function withSchemaOutput(schema: ToolSchema | undefined, name: string, args: unknown, run: (value: unknown) => unknown): unknown {
  const validate = schema && "~standard" in schema ? (schema["~standard"] as { validate?: (value: unknown) => unknown }).validate : undefined;
  if (typeof validate !== "function") return run(args);
  const settle = (result: StandardResult) => {
    if (result.issues) {
      const issues = result.issues.map((issue) => {
        const path = (issue.path ?? []).map((key) => (typeof key === "object" && key && "key" in key ? (key as { key: unknown }).key : key));
        return path.length ? `${path.join(".")}: ${issue.message}` : issue.message;
      });
      throw new Error(`Validation args "${name}": ${issues.join("; ")}`);
    }
    return run(result.value);
  };
  const result = validate(args) as StandardResult | Promise<StandardResult>;
  return result instanceof Promise ? result.then(settle) : settle(result);
}

/** A tool that asks the user (`useHumanInTheLoop`): what it is, and how its question looks in the chat. */
export interface HumanInTheLoopTool<S extends ToolSchema | undefined = ToolSchema | undefined> {
  /** Letters, digits, `_` and `-`; at most 64 characters. */
  name: string;
  /** What it asks, written for the model (e.g. "Ask the user which size they want"). */
  description: string;
  /** The arguments: a zod 4 schema or a JSON Schema object. Default: no arguments. */
  schema?: S;
  /** Handler timeout in milliseconds: how long the question waits for an answer (default 10 minutes). */
  timeoutMs?: number;
  /**
   * The question in the chat: gets the call (`status`, `args`, …) and, while it waits, `respond`;
   * the value given to `respond` is the tool's result. A message the user types instead answers
   * it too (the text is the result).
   */
  render: (call: ToolCallView & { args: ArgsOf<S> }) => ReactNode;
}

/**
 * Registers a tool whose handler asks the user, while the calling component is mounted: the call
 * is drawn in the chat by `render`, which answers with `respond(value)`; that value is the
 * result the model reads. The question is the user's decision, so the tool asks no approval
 * (risk `none`); Stop or an unmount cancels it.
 */
export function useHumanInTheLoop<S extends ToolSchema | undefined = undefined>(tool: HumanInTheLoopTool<S>): void {
  const { render, timeoutMs = 600_000, ...rest } = tool;
  useAgentTool<S>(
    { ...rest, timeoutMs, render: render as AgentTool<S>["render"] },
    (args, context) => context.ask(args),
  );
}

/** App state shared with the agent (`useAgentContext`). */
export interface AgentContext {
  /** What the value is, for the model, e.g. "The shopping cart". */
  description: string;
  /** The state: any JSON value (a string is read as it is). */
  value: unknown;
  /** Identifies the entry (1 to 64 of `A-Z a-z 0-9 _ -`). Default: made from the description (`the_shopping_cart`). */
  key?: string;
}

/** A context key made from a description: lowercase words joined by `_`, at most 64 characters. */
export function contextKey(description: string): string {
  const words = description.toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
  return words.join("_").slice(0, 64) || "context";
}

/**
 * Shares app state with the agent while the calling component is mounted: the model reads the
 * description and the value as data (never as instructions) before the user's message, so "what
 * is in my cart?" needs no tool call. A changed value is sent again, in the same
 * `CONTEXT_UPDATE` as this tick's tool changes. At most 16 entries and 8 KiB of JSON together per
 * page; past that the entry is refused loudly (`agent.context.limit` in the error list and the
 * inspector) and not sent.
 */
export function useAgentContext(context: AgentContext): void {
  const store = useStore(`useAgentContext("${context.description}")`);
  const key = context.key ?? contextKey(context.description);
  const value = JSON.stringify(context.value ?? null);
  useRegistration(store, JSON.stringify([key, context.description, value]), () => ({
    names: [],
    contextKeys: [key],
    register: (client, owner) => client.setContext(owner, key, context.description, JSON.parse(value)),
  }));
}

/** One tool of a resolver group (named `prefix_name` for the model). */
export interface ResolverTool<S extends ToolSchema | undefined = ToolSchema | undefined> extends AgentTool<S> {
  handler: AgentToolHandler<S>;
}

/** A group of tools named `prefix_name` that share hooks around every call. */
export interface AgentToolResolver {
  prefix: string;
  tools: ResolverTool<any>[]; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Builds a typed resolver tool (infers the handler's argument type from `schema`). */
export function resolverTool<S extends ToolSchema | undefined = undefined>(tool: ResolverTool<S>): ResolverTool<S> {
  return tool;
}

const resolverName = (prefix: string, name: string) => (prefix.endsWith("_") ? prefix + name : `${prefix}_${name}`);

/**
 * Registers a resolver group while the component is mounted: `onBeforeAnyCall` may refuse a
 * call (return a reason or throw), `onAfterAnyCall` and `onErrorAnyCall` observe. Handlers and
 * hooks are read at call time, like `useAgentTool`'s.
 */
export function useAgentToolResolver(resolver: AgentToolResolver, hooks: ResolverHooks = {}): void {
  const store = useStore(`useAgentToolResolver("${resolver.prefix}")`);
  const latest = useLatest({ resolver, hooks });
  const rendered = resolver.tools.filter((t) => t.render !== undefined).map((t) => t.name);
  const renderedKey = JSON.stringify(rendered);
  useEffect(() => {
    for (const name of JSON.parse(renderedKey) as string[]) {
      store.setRenderer(resolverName(resolver.prefix, name), (call) =>
        latest.current.resolver.tools.find((t) => t.name === name)?.render?.(call),
      );
    }
  }, [store, resolver.prefix, renderedKey, latest]);
  const defs = resolver.tools.map(definition);
  const key = JSON.stringify([resolver.prefix, defs]);
  useRegistration(store, key, () => ({
    names: defs.map((d) => resolverName(resolver.prefix, d.name)),
    register: (client, owner) =>
      client.registerResolver(
        owner,
        resolver.prefix,
        defs,
        defs.map((d) => (args: unknown, context: ToolContext) => {
          const tool = latest.current.resolver.tools.find((t) => t.name === d.name);
          if (!tool) throw new Error(`the tool ${d.name} is gone`);
          const name = resolverName(resolver.prefix, d.name);
          return withSchemaOutput(tool.schema, name, args, (value) =>
            store.runHandler(() => tool.handler(value as never, agentContext(store, name, context))),
          );
        }),
        {
          onBeforeAnyCall: (tool, args) => latest.current.hooks.onBeforeAnyCall?.(tool, args),
          onAfterAnyCall: (tool, output) => latest.current.hooks.onAfterAnyCall?.(tool, output),
          onErrorAnyCall: (tool, error) => latest.current.hooks.onErrorAnyCall?.(tool, error),
        },
      ),
  }));
}
