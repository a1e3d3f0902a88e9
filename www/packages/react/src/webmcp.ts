// @tether/react/webmcp: the page's live tools for the browser's own agents, through WebMCP (the
// W3C draft's `document.modelContext`, or `navigator.modelContext` of earlier drafts and of
// polyfills such as `@mcp-b/global`). Every call runs through the runtime's executor, exactly as
// a call from Tether's server: validation, the risk policy with this page's approval dialog, the
// handler. A subpath of its own: apps that do not offer it do not ship it.

import { useEffect, useRef } from "react";
import type { CallRecord, Risk, TetherEvent, ToolSpec } from "../wasm/tether_web.js";
import { useTether, useTetherEvents, useTetherState } from "./hooks.js";
import { asText } from "./store.js";

/** A tool as WebMCP's `registerTool` takes it. */
export interface WebMcpTool {
  name: string;
  description: string;
  inputSchema: object;
  annotations: WebMcpAnnotations;
  execute(input: object): Promise<WebMcpResult>;
}

/** The hints a WebMCP tool carries (`destructiveHint` is MCP's, which MCP-B passes on). */
export interface WebMcpAnnotations {
  readOnlyHint: boolean;
  destructiveHint?: boolean;
}

/** What a call returns to the agent: an MCP `CallToolResult`. */
export interface WebMcpResult {
  content: { type: "text"; text: string }[];
  isError?: boolean;
}

/** The part of a WebMCP model context this uses. */
export interface ModelContextLike {
  registerTool(tool: WebMcpTool, options?: { signal?: AbortSignal }): unknown;
  /** Earlier drafts unregister by name; the current one by the registration's signal. */
  unregisterTool?(name: string): unknown;
}

/** The page's WebMCP model context, when the browser (or a polyfill) has one. */
export function modelContext(): ModelContextLike | undefined {
  const scope = globalThis as { document?: { modelContext?: ModelContextLike }; navigator?: { modelContext?: ModelContextLike } };
  const found = scope.document?.modelContext ?? scope.navigator?.modelContext;
  return typeof found?.registerTool === "function" ? found : undefined;
}

/**
 * The WebMCP hints for a Tether risk: `none` is read-only, `high` and `critical` destructive.
 * They are hints for the agent; the approval itself is asked in the page, whatever they say.
 */
export function webMcpAnnotations(risk: Risk): WebMcpAnnotations {
  if (risk === "none") return { readOnlyHint: true };
  if (risk === "high" || risk === "critical") return { readOnlyHint: false, destructiveHint: true };
  return { readOnlyHint: false };
}

/** A finished call as the agent reads it: the content as text, `isError` unless it succeeded. */
export function webMcpResult(record: Pick<CallRecord, "status" | "content">): WebMcpResult {
  const text = asText(record.content);
  return record.status === "ok" ? { content: [{ type: "text", text }] } : { content: [{ type: "text", text }], isError: true };
}

/** Starts a call in the runtime under a call id (`TetherClient.callLocal`). */
export type StartCall = (callId: string, tool: string, args: unknown) => void;

let calls = 0;

/**
 * Keeps a model context's tools equal to the page's tools (`blocked` ones left out: they never
 * run) and runs the agent's calls through `start`, answering each from its `callFinished` event.
 *
 * A tool with a call in flight stays registered as it was until its calls have answered: its own
 * call often changes it (removing the last item unmounts `cart_remove`), and a model context
 * cancels the calls of a tool that is unregistered, which would lose the answer.
 */
export class WebMcpBridge {
  readonly #context: ModelContextLike;
  readonly #start: StartCall;
  readonly #registered = new Map<string, { signature: string; controller: AbortController }>();
  readonly #waiting = new Map<string, (result: WebMcpResult) => void>();
  readonly #inFlight = new Map<string, number>();
  #tools: readonly ToolSpec[] = [];
  #closed = false;

  constructor(context: ModelContextLike, start: StartCall) {
    this.#context = context;
    this.#start = start;
  }

  /** Registers what is new or changed in `tools` and unregisters what is gone. */
  sync(tools: readonly ToolSpec[]): void {
    if (this.#closed) return;
    this.#tools = tools;
    const live = new Map(tools.filter((tool) => tool.risk !== "blocked").map((tool) => [tool.name, tool]));
    for (const [name, entry] of [...this.#registered]) {
      const tool = live.get(name);
      if ((!tool || signature(tool) !== entry.signature) && !this.#inFlight.has(name)) this.#unregister(name);
    }
    for (const tool of live.values()) if (!this.#registered.has(tool.name)) this.#register(tool);
  }

  /** Give it every runtime event: a `callFinished` answers the agent's call with that id. */
  onEvent(event: TetherEvent): void {
    if (event.type !== "callFinished") return;
    const answer = this.#waiting.get(event.record.callId);
    this.#waiting.delete(event.record.callId);
    answer?.(webMcpResult(event.record));
  }

  /** Unregisters every tool; calls still waiting are answered as cancelled. */
  close(): void {
    this.#closed = true;
    for (const name of [...this.#registered.keys()]) this.#unregister(name);
    for (const answer of this.#waiting.values()) answer(webMcpResult({ status: "cancelled", content: "the page stopped offering its tools" }));
    this.#waiting.clear();
  }

  #register(tool: ToolSpec): void {
    const controller = new AbortController();
    this.#registered.set(tool.name, { signature: signature(tool), controller });
    const name = tool.name;
    try {
      const registered = this.#context.registerTool(
        {
          name,
          description: tool.description,
          inputSchema: tool.parameters as object,
          annotations: webMcpAnnotations(tool.risk),
          execute: (input) => this.#execute(name, input),
        },
        { signal: controller.signal },
      );
      Promise.resolve(registered).catch((error: unknown) => this.#refused(name, controller, error));
    } catch (error) {
      this.#refused(name, controller, error);
    }
  }

  #refused(name: string, controller: AbortController, error: unknown): void {
    if (this.#registered.get(name)?.controller === controller) this.#registered.delete(name);
    if (!controller.signal.aborted) console.error(`@tether/react/webmcp: ${name} was not registered with WebMCP:`, error);
  }

  #unregister(name: string): void {
    const entry = this.#registered.get(name);
    if (!entry) return;
    this.#registered.delete(name);
    entry.controller.abort();
    if (typeof this.#context.unregisterTool !== "function") return;
    try {
      // Earlier drafts: by name (the current one has forgotten it already, and may say so).
      Promise.resolve(this.#context.unregisterTool(name)).catch(() => {});
    } catch {
      // Not registered any more.
    }
  }

  #execute(tool: string, input: object): Promise<WebMcpResult> {
    const callId = `webmcp-${++calls}-${Date.now().toString(36)}`;
    this.#inFlight.set(tool, (this.#inFlight.get(tool) ?? 0) + 1);
    const answered = new Promise<WebMcpResult>((resolve) => {
      this.#waiting.set(callId, resolve);
      try {
        this.#start(callId, tool, input ?? {});
      } catch (error) {
        this.#waiting.delete(callId);
        resolve(webMcpResult({ status: "error", content: error instanceof Error ? error.message : String(error) }));
      }
    });
    // A task later, when the answer has reached the agent through the model context's promises,
    // the call is no longer in flight; once none is left, the tool may change or go.
    void answered.then(() =>
      setTimeout(() => {
        const left = (this.#inFlight.get(tool) ?? 1) - 1;
        if (left > 0) {
          this.#inFlight.set(tool, left);
          return;
        }
        this.#inFlight.delete(tool);
        this.sync(this.#tools);
      }, 0),
    );
    return answered;
  }
}

function signature(tool: ToolSpec): string {
  return JSON.stringify([tool.description, tool.parameters, tool.risk]);
}

/**
 * While mounted (inside `<TetherProvider>`), registers the page's live tools with the browser's
 * WebMCP model context, when it has one, so that the browser's own agents can call them; nothing
 * happens where there is none. Each call is validated, passes the risk policy (`high` and
 * `critical` wait for this page's approval dialog) and runs the tool's handler, as a call from
 * Tether's server does; its result goes to the agent, not to the server.
 */
export function useWebMcp(): void {
  const tether = useTether();
  const tools = useTetherState((state) => state.tools);
  const bridge = useRef<WebMcpBridge | null>(null);
  useTetherEvents((event) => bridge.current?.onEvent(event));
  useEffect(() => {
    const context = modelContext();
    if (!context) return undefined;
    const created = new WebMcpBridge(context, (callId, tool, args) => {
      const client = tether.client;
      if (!client) throw new Error("the Tether runtime is not loaded yet");
      client.callLocal(callId, tool, args);
    });
    bridge.current = created;
    return () => {
      created.close();
      if (bridge.current === created) bridge.current = null;
    };
  }, [tether]);
  useEffect(() => bridge.current?.sync(tools), [tools, tether]);
}
