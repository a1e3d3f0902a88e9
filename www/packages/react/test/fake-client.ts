// A stand-in for the wasm TetherClient with the runtime's registry semantics: same-name
// registration replaces in place, unregisterOwner keeps globals, and changes made in one tick
// are flushed in a microtask as one CONTEXT_UPDATE (none when the list is unchanged).
import type {
  Approver,
  CallRecord,
  ResolverHooks,
  TetherError,
  TetherEvent,
  TetherNotification,
  ToolDefinition,
  ToolHandler,
  ToolSpec,
} from "../wasm/tether_web.js";
import type { TetherClientLike } from "../src/store.js";

interface Entry {
  owner: number;
  def: ToolDefinition;
  handler: ToolHandler;
  prefix?: string;
}

interface ContextItem {
  owner: number;
  key: string;
  description: string;
  value: unknown;
}

export class FakeClient implements TetherClientLike {
  entries: Entry[] = [];
  context: ContextItem[] = [];
  log: string[] = [];
  contextUpdates: ToolSpec[][] = [];
  /** The app state each CONTEXT_UPDATE carried, beside `contextUpdates`. */
  contextValues: { key: string; description: string; value: unknown }[][] = [];
  hooks = new Map<string, ResolverHooks>();
  approver: Approver | undefined;
  notify: ((n: TetherNotification) => void) | undefined;
  error: ((e: TetherError) => void) | undefined;
  listeners = new Map<number, (e: TetherEvent) => void>();
  sent: string[] = [];
  connected = false;
  cap = 30;
  private owners = 0;
  private flushScheduled = false;
  private lastSent = "";

  connect() {
    this.connected = true;
    this.log.push("connect");
  }
  disconnect() {
    this.connected = false;
    this.log.push("disconnect");
  }
  newOwner() {
    return ++this.owners;
  }
  registerTool(owner: number, def: ToolDefinition, handler: ToolHandler) {
    this.log.push(`register ${def.name}`);
    this.insert({ owner, def, handler });
  }
  registerResolver(owner: number, prefix: string, defs: ToolDefinition[], handlers: ToolHandler[], hooks?: ResolverHooks | null) {
    this.log.push(`resolver ${prefix}`);
    if (hooks) this.hooks.set(prefix, hooks);
    let refusal: Error | undefined;
    defs.forEach((def, i) => {
      const name = prefix.endsWith("_") ? prefix + def.name : `${prefix}_${def.name}`;
      try {
        this.insert({ owner, def: { ...def, name }, handler: handlers[i]!, prefix });
      } catch (e) {
        refusal ??= e as Error;
      }
    });
    if (refusal) throw refusal;
  }
  unregisterOwner(owner: number) {
    this.log.push(`unregisterOwner ${owner}`);
    this.entries = this.entries.filter((e) => e.owner !== owner || e.def.global);
    this.context = this.context.filter((c) => c.owner !== owner);
    this.changed();
  }
  unregisterTool(owner: number, name: string) {
    this.log.push(`unregisterTool ${name}`);
    this.entries = this.entries.filter((e) => e.owner !== owner || e.def.name !== name);
    this.changed();
  }
  setContext(owner: number, key: string, description: string, value: unknown) {
    this.log.push(`setContext ${key}`);
    const item = { owner, key, description, value };
    const existing = this.context.findIndex((c) => c.key === key);
    if (existing >= 0) this.context[existing] = item;
    else this.context.push(item);
    this.changed();
  }
  setApprover(approver: Approver) {
    this.approver = approver;
  }
  onNotify(callback: (n: TetherNotification) => void) {
    this.notify = callback;
  }
  onError(callback: (e: TetherError) => void) {
    this.error = callback;
  }
  subscribe(listener: (e: TetherEvent) => void) {
    const id = this.listeners.size + 1;
    this.listeners.set(id, listener);
    return id;
  }
  unsubscribe(id: number) {
    this.listeners.delete(id);
  }
  sendMessage(text: string) {
    this.sent.push(text);
  }
  stops = 0;
  stop() {
    this.stops += 1;
  }
  /** Local calls started (`callLocal`): the test finishes them with `finishLocal`. */
  localCalls: { callId: string; tool: string; args: unknown }[] = [];
  callLocal(callId: string, tool: string, args: unknown) {
    this.localCalls.push({ callId, tool, args });
  }
  tools(): ToolSpec[] {
    return this.entries.map((e) => ({
      name: e.def.name,
      description: e.def.description,
      parameters: e.def.parameters ?? { type: "object" },
      risk: e.def.risk ?? "none",
      global: e.def.global ?? false,
    }));
  }

  // ---- test helpers ----

  emit(event: TetherEvent) {
    for (const listener of this.listeners.values()) listener(event);
  }
  /** Finishes a local call as the runtime does: a `callFinished` event with its id. */
  finishLocal(callId: string, status: CallRecord["status"], content: unknown) {
    const call = this.localCalls.find((c) => c.callId === callId)!;
    this.emit({ type: "callFinished", record: { callId, tool: call.tool, status, content } as CallRecord });
  }
  names() {
    return this.entries.map((e) => e.def.name);
  }
  /** Runs a tool as the runtime would (hooks around resolver tools). */
  async call(name: string, args: unknown = {}) {
    const entry = this.entries.find((e) => e.def.name === name);
    if (!entry) throw new Error(`no tool ${name}`);
    const hooks = entry.prefix ? this.hooks.get(entry.prefix) : undefined;
    const refusal = await hooks?.onBeforeAnyCall?.(name, args);
    if (typeof refusal === "string") return { refused: refusal };
    try {
      const output = await entry.handler(args, { signal: new AbortController().signal });
      hooks?.onAfterAnyCall?.(name, output);
      return output;
    } catch (e) {
      hooks?.onErrorAnyCall?.(name, String(e));
      throw e;
    }
  }

  private insert(entry: Entry) {
    const existing = this.entries.findIndex((e) => e.def.name === entry.def.name);
    if (existing >= 0) {
      this.entries[existing] = entry;
    } else if (this.entries.length >= this.cap) {
      const message = `the tool "${entry.def.name}" was refused: at most ${this.cap} tools may be active`;
      queueMicrotask(() => {
        this.emit({ type: "toolRefused", event: "tool.registry.limit", tool: entry.def.name, reason: message });
        this.error?.({ kind: "registry", message, event: "tool.registry.limit" });
      });
      this.changed();
      throw new Error(message);
    } else {
      this.entries.push(entry);
    }
    this.changed();
  }

  private changed() {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      const tools = this.tools();
      const context = this.context.map(({ key, description, value }) => ({ key, description, value }));
      const text = JSON.stringify([tools, context]);
      if (text === this.lastSent) return;
      this.lastSent = text;
      this.contextUpdates.push(tools);
      this.contextValues.push(context);
      this.emit({ type: "contextSent", revision: this.contextUpdates.length, tools: tools.map((t) => t.name) });
    });
  }
}
