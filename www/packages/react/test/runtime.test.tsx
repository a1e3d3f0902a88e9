// The hooks on the real runtime: the wasm shipped in the package (loaded once, from the file, by
// the package's "node" wasm source), speaking the protocol over a real WebSocket to a small
// in-process peer that counts the frames.
import { readFileSync } from "node:fs";
import { StrictMode, useState, type ReactNode } from "react";
import { flushSync } from "react-dom";
import { act, cleanup, render, screen, waitFor } from "@testing-library/react";
import { WebSocketServer, type WebSocket as PeerSocket } from "ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadTether, TetherProvider, ToolInspector, useAgentTool } from "../src/index.js";
import { useWebMcp, type WebMcpTool } from "../src/webmcp.js";

interface Frame {
  type: string;
  [key: string]: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

let server: WebSocketServer;
let url: string;
let frames: Frame[] = [];
let socket: PeerSocket | undefined;

beforeAll(async () => {
  // vitest's jsdom environment gives modules a non-file import.meta.url: hand the bytes over
  // (in plain Node the package's "node" wasm source reads the file itself).
  await loadTether(readFileSync(process.env.TETHER_WASM!));
  server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise((resolve) => server.once("listening", resolve));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/ws`;
  server.on("connection", (ws) => {
    socket = ws;
    ws.on("message", (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      frames.push(frame);
      if (frame.type === "HELLO") {
        ws.send(
          JSON.stringify({
            type: "WELCOME",
            id: "w1",
            protocolVersion: 1,
            sessionId: "s1",
            resumeToken: "t1",
            resumed: false,
            maxActiveTools: 30,
            maxFrameBytes: 1_000_000,
            capabilities: ["tool_result_ack"],
          }),
        );
      }
      if (frame.type === "TOOL_RESULT") ws.send(JSON.stringify({ type: "TOOL_RESULT_ACK", id: `a-${frame.callId}`, callId: frame.callId }));
    });
  });
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
afterEach(() => {
  cleanup();
  frames = [];
});

const contextUpdates = () => frames.filter((f) => f.type === "CONTEXT_UPDATE");
const toolNames = (f: Frame) => (f.tools as { name: string }[]).map((t) => t.name);
const sleep = (ms: number) => act(() => new Promise<void>((resolve) => setTimeout(resolve, ms)));

async function mount(children: ReactNode) {
  const view = render(
    <StrictMode>
      <TetherProvider url={url}>
        {children}
        <ToolInspector />
      </TetherProvider>
    </StrictMode>,
  );
  await waitFor(() => expect(screen.getByTestId("inspector-connection").textContent).toBe("connected"));
  await sleep(20);
  return view;
}

describe("on the real runtime", () => {
  it("loads the wasm once per page", async () => {
    const first = loadTether();
    expect(loadTether(new Uint8Array())).toBe(first);
    const Client = await first;
    expect(typeof Client.prototype.registerTool).toBe("function");
  });

  it("WebMCP: an agent's call is validated and run by the runtime, and nothing of it reaches the server", async () => {
    const registered = new Map<string, WebMcpTool>();
    (document as { modelContext?: unknown }).modelContext = {
      registerTool(tool: WebMcpTool, options?: { signal?: AbortSignal }) {
        registered.set(tool.name, tool);
        options?.signal?.addEventListener("abort", () => registered.delete(tool.name));
      },
    };
    const runs: unknown[] = [];
    function Tools() {
      useWebMcp();
      useAgentTool(
        { name: "double", description: "Double n.", schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } },
        (args) => (runs.push(args), { doubled: (args as { n: number }).n * 2 }),
      );
      return null;
    }
    try {
      await mount(<Tools />);
      await waitFor(() => expect(registered.has("double")).toBe(true));
      const invalid = await act(() => registered.get("double")!.execute({ n: "two" }));
      expect(invalid.isError).toBe(true);
      expect(invalid.content[0]!.text).toMatch(/^Validation args "double": /);
      expect(runs).toEqual([]);
      const ok = await act(() => registered.get("double")!.execute({ n: 2 }));
      expect(ok).toEqual({ content: [{ type: "text", text: '{"doubled":4}' }] });
      expect(runs).toEqual([{ n: 2 }]);
      expect(frames.filter((f) => f.type === "TOOL_RESULT")).toEqual([]);
    } finally {
      delete (document as { modelContext?: unknown }).modelContext;
    }
  });

  it("StrictMode: one registration, one CONTEXT_UPDATE", async () => {
    function Page() {
      const [show, setShow] = useState(false);
      useAgentTool({ name: "show_echo", description: "Show the echo tool." }, () => {
        flushSync(() => setShow(true));
        return { shown: true };
      });
      return show ? <Echo /> : null;
    }
    function Echo() {
      useAgentTool({ name: "echo", description: "Echo." }, (args) => args);
      return null;
    }
    await mount(<Page />);
    expect(contextUpdates().map(toolNames)).toEqual([["show_echo"]]);
    socket!.send(JSON.stringify({ type: "TOOL_CALL", id: "c", callId: "call-1", runId: "r", name: "show_echo", args: {} }));
    await waitFor(() => expect(frames.some((f) => f.type === "TOOL_RESULT")).toBe(true));
    await sleep(50);
    // One more CONTEXT_UPDATE, with the new tool once. (Its order against the result needs a real
    // page: under jsdom the runtime sees no window, so it does not wait for the page to settle;
    // the e2e suite checks the order in Chromium.)
    expect(contextUpdates().map(toolNames)).toEqual([["show_echo"], ["show_echo", "echo"]]);
    expect(frames.find((f) => f.type === "TOOL_RESULT")).toMatchObject({ callId: "call-1", status: "ok", content: { shown: true } });
    expect(frames.filter((f) => f.type === "TOOL_RESULT")).toHaveLength(1);
  });

  it("a handler's signal is aborted when its call is cancelled, and never after it finished", async () => {
    const seen: string[] = [];
    let finishedSignal: AbortSignal | undefined;
    function Tools() {
      useAgentTool({ name: "slow_search", description: "Search slowly." }, (_args, { signal }) => {
        seen.push(`started, aborted=${signal.aborted}`);
        return new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            seen.push("aborted");
            resolve("stopped");
          });
        });
      });
      useAgentTool({ name: "quick", description: "Answer at once." }, (_args, { signal }) => {
        finishedSignal = signal;
        return "done";
      });
      return null;
    }
    await mount(<Tools />);
    socket!.send(JSON.stringify({ type: "TOOL_CALL", id: "c1", callId: "call-3", runId: "r", name: "slow_search", args: {} }));
    await waitFor(() => expect(seen).toEqual(["started, aborted=false"]));
    socket!.send(JSON.stringify({ type: "TOOL_CANCEL", id: "c2", callId: "call-3", reason: "the user pressed Stop" }));
    await waitFor(() => expect(seen).toEqual(["started, aborted=false", "aborted"]));
    socket!.send(JSON.stringify({ type: "TOOL_CALL", id: "c3", callId: "call-4", runId: "r", name: "quick", args: {} }));
    await waitFor(() => expect(frames.find((f) => f.type === "TOOL_RESULT")).toMatchObject({ callId: "call-4" }));
    // The cancelled call sends no result; the finished one's signal stays as it was.
    expect(frames.filter((f) => f.type === "TOOL_RESULT").map((f) => f.callId)).toEqual(["call-4"]);
    expect(finishedSignal!.aborted).toBe(false);
  });

  it("a handler reads state set after registration", async () => {
    let setLabel: (label: string) => void = () => {};
    function Labelled() {
      const [label, set] = useState("first");
      setLabel = set;
      useAgentTool({ name: "read_label", description: "Read the label." }, () => ({ label }));
      return null;
    }
    await mount(<Labelled />);
    act(() => setLabel("second"));
    socket!.send(JSON.stringify({ type: "TOOL_CALL", id: "c", callId: "call-2", runId: "r", name: "read_label", args: {} }));
    await waitFor(() => expect(frames.find((f) => f.type === "TOOL_RESULT")).toMatchObject({ content: { label: "second" } }));
    expect(contextUpdates()).toHaveLength(1);
  });

  it("a followUp: false tool is announced as such; other tools carry no followUp", async () => {
    function Tools() {
      useAgentTool({ name: "show_card", description: "Show a card.", followUp: false }, () => ({ shown: true }));
      useAgentTool({ name: "plain", description: "Plain." }, () => null);
      return null;
    }
    await mount(<Tools />);
    const [update] = contextUpdates();
    const tools = update!.tools as { name: string; followUp?: boolean }[];
    expect(tools.find((t) => t.name === "show_card")).toMatchObject({ followUp: false });
    expect(tools.find((t) => t.name === "plain")).not.toHaveProperty("followUp");
  });
});
