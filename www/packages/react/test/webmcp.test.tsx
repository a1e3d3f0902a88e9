import { act, cleanup, render } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { TetherProvider, useAgentTool } from "../src/index.js";
import { type WebMcpTool, useWebMcp, webMcpAnnotations, webMcpResult } from "../src/webmcp.js";
import { FakeClient } from "./fake-client.js";

const settle = () => act(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));

/** A WebMCP model context as the current draft has it: registration by tool, removal by signal. */
class FakeModelContext {
  tools = new Map<string, WebMcpTool>();
  registrations: string[] = [];
  registerTool(tool: WebMcpTool, options?: { signal?: AbortSignal }) {
    if (this.tools.has(tool.name)) return Promise.reject(new Error(`duplicate ${tool.name}`));
    this.tools.set(tool.name, tool);
    this.registrations.push(tool.name);
    options?.signal?.addEventListener("abort", () => this.tools.delete(tool.name), { once: true });
    return Promise.resolve();
  }
}

function Shop({ withRemove }: { withRemove: boolean }) {
  useWebMcp();
  useAgentTool({ name: "cart_view", description: "See the cart." }, () => "cart: empty");
  useAgentTool({ name: "shutdown", description: "Never.", risk: "blocked" }, () => null);
  return withRemove ? <Remove /> : null;
}

function Remove() {
  useAgentTool({ name: "cart_remove", description: "Remove.", risk: "high" }, () => "removed");
  return null;
}

function mount(withRemove: boolean) {
  const client = new FakeClient();
  const ui = (remove: boolean) => (
    <TetherProvider url="ws://test/ws" createClient={vi.fn(() => client)}>
      <Shop withRemove={remove} />
    </TetherProvider>
  );
  const view = render(ui(withRemove));
  return { client, rerender: (remove: boolean) => view.rerender(ui(remove)), unmount: view.unmount };
}

afterEach(() => {
  cleanup();
  delete (document as { modelContext?: unknown }).modelContext;
});

describe("useWebMcp", () => {
  it("registers the live tools (not blocked ones) with their hints, and follows the page", async () => {
    const context = new FakeModelContext();
    (document as { modelContext?: unknown }).modelContext = context;
    const { rerender, unmount } = mount(true);
    await settle();
    expect([...context.tools.keys()].sort()).toEqual(["cart_remove", "cart_view"]);
    expect(context.tools.get("cart_view")!.annotations).toEqual({ readOnlyHint: true });
    expect(context.tools.get("cart_remove")!.annotations).toEqual({ readOnlyHint: false, destructiveHint: true });
    expect(context.tools.get("cart_remove")!.inputSchema).toEqual({ type: "object" });

    rerender(false);
    await settle();
    expect([...context.tools.keys()]).toEqual(["cart_view"]);
    unmount();
    await settle();
    expect(context.tools.size).toBe(0);
    expect(context.registrations).toEqual(["cart_view", "cart_remove"]);
  });

  it("runs a call through the runtime under its own call id and answers it from callFinished", async () => {
    const context = new FakeModelContext();
    (document as { modelContext?: unknown }).modelContext = context;
    const { client } = mount(true);
    await settle();

    const answer = context.tools.get("cart_remove")!.execute({ productId: "mug-red" });
    expect(client.localCalls).toHaveLength(1);
    const [call] = client.localCalls;
    expect(call).toMatchObject({ tool: "cart_remove", args: { productId: "mug-red" } });
    expect(call!.callId).toMatch(/^webmcp-/);
    await act(async () => client.finishLocal(call!.callId, "ok", { removed: "mug-red" }));
    await expect(answer).resolves.toEqual({ content: [{ type: "text", text: '{"removed":"mug-red"}' }] });

    const refused = context.tools.get("cart_remove")!.execute({});
    const second = client.localCalls[1]!;
    expect(second.callId).not.toBe(call!.callId);
    await act(async () => client.finishLocal(second.callId, "denied", 'The user rejected the call to "cart_remove".'));
    await expect(refused).resolves.toEqual({
      content: [{ type: "text", text: 'The user rejected the call to "cart_remove".' }],
      isError: true,
    });
  });

  it("keeps a tool registered while its call is in flight, so that the answer reaches the agent", async () => {
    const context = new FakeModelContext();
    (document as { modelContext?: unknown }).modelContext = context;
    const { client, rerender } = mount(true);
    await settle();
    const answer = context.tools.get("cart_remove")!.execute({ productId: "mug-red" });
    // The call empties the cart: the mini cart unmounts cart_remove while the call is answered.
    rerender(false);
    await settle();
    expect(context.tools.has("cart_remove")).toBe(true);
    await act(async () => client.finishLocal(client.localCalls[0]!.callId, "ok", "removed"));
    await expect(answer).resolves.toEqual({ content: [{ type: "text", text: "removed" }] });
    await settle();
    expect(context.tools.has("cart_remove")).toBe(false);
  });

  it("does nothing where the browser has no model context", async () => {
    const { client } = mount(true);
    await settle();
    expect(client.localCalls).toEqual([]);
    expect("modelContext" in document).toBe(false);
  });
});

describe("the mapping", () => {
  it("is the one tether-leptos uses (crates/tether-leptos/tests/native.rs)", () => {
    expect(webMcpAnnotations("none")).toEqual({ readOnlyHint: true });
    expect(webMcpAnnotations("low")).toEqual({ readOnlyHint: false });
    expect(webMcpAnnotations("critical")).toEqual({ readOnlyHint: false, destructiveHint: true });
    expect(webMcpResult({ status: "ok", content: "done" })).toEqual({ content: [{ type: "text", text: "done" }] });
    expect(webMcpResult({ status: "invalid_args", content: { n: 1 } })).toEqual({
      content: [{ type: "text", text: '{"n":1}' }],
      isError: true,
    });
  });
});
