// A small MCP server over stdio, written against the JSON-RPC wire directly, for the faults the
// reference servers cannot produce on demand: a tool that fails, one that crashes the process,
// one that hangs (and counts the cancellations it receives), one that blocks the whole process, one that answers with garbage, and
// a tool list that changes. Started by the tests as `node fake-server.mjs`.
//
// FAKE_MCP_FAIL_STARTS=N with FAKE_MCP_STATE=FILE: the first N starts exit at once (the file
// counts the starts), to test the restart backoff.
import { readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const state = process.env.FAKE_MCP_STATE;
if (state) {
  let started = 0;
  try { started = Number(readFileSync(state, "utf8")) || 0; } catch {}
  writeFileSync(state, String(started + 1));
  if (started < Number(process.env.FAKE_MCP_FAIL_STARTS || 0)) {
    process.stderr.write(`fake-server: start ${started + 1} fails on purpose\n`);
    process.exit(3);
  }
}

const object = (properties = {}, required = []) => ({ type: "object", properties, required });
const tools = [
  { name: "ping_pid", description: "The server process's id.", inputSchema: object(), annotations: { readOnlyHint: true } },
  { name: "add_tool", description: "Adds the tool `extra` and says the list changed.", inputSchema: object() },
  { name: "fail", description: "Always reports an error.", inputSchema: object() },
  { name: "crash", description: "Exits the process mid-call.", inputSchema: object() },
  { name: "hang", description: "Never answers.", inputSchema: object() },
  { name: "freeze", description: "Blocks the process: nothing is answered any more.", inputSchema: object() },
  { name: "garbage", description: "Answers with bytes that are not JSON-RPC.", inputSchema: object() },
  { name: "progress", description: "Reports two steps of progress, then answers.", inputSchema: object() },
  { name: "cancels", description: "How many cancellations this process received.", inputSchema: object() },
  { name: "calls", description: "How many tools/call requests this process received.", inputSchema: object() },
  { name: "trace", description: "The W3C traceparent the call carried in its _meta (SEP-414), or none.", inputSchema: object(), annotations: { readOnlyHint: true } },
  {
    name: "echo_count",
    description: "Echoes a count of at least 1.",
    inputSchema: object({ count: { type: "integer", minimum: 1 } }, ["count"]),
  },
];
const afterPing = new Map();
let cancels = 0;
let calls = 0;

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const text = (id, body, isError = false) =>
  send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: String(body) }], isError } });

createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try { message = JSON.parse(line); } catch { return; }
  const { id, method, params } = message;
  if (method === undefined && afterPing.has(id)) {
    afterPing.get(id)();
    return afterPing.delete(id);
  }
  if (method === "initialize") {
    return send({
      jsonrpc: "2.0",
      id,
      result: {
        protocolVersion: "2025-06-18",
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: "fake-server", version: "1.0.0" },
      },
    });
  }
  if (method === "notifications/cancelled") { cancels += 1; return; }
  if (method === "tools/list") return send({ jsonrpc: "2.0", id, result: { tools } });
  if (method === "ping") return send({ jsonrpc: "2.0", id, result: {} });
  if (method !== "tools/call") {
    if (id !== undefined) send({ jsonrpc: "2.0", id, error: { code: -32601, message: `no method ${method}` } });
    return;
  }
  calls += 1;
  const args = params.arguments ?? {};
  switch (params.name) {
    case "ping_pid": return text(id, process.pid);
    case "add_tool":
      if (!tools.some((t) => t.name === "extra")) {
        tools.push({ name: "extra", description: "Added at run time.", inputSchema: object() });
      }
      text(id, "added");
      return send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
    case "fail": return text(id, "the disk is full", true);
    case "crash": process.stderr.write("fake-server: crashing on purpose\n"); return process.exit(7);
    case "hang": return;
    case "freeze": for (;;) {}
    case "garbage": return process.stdout.write("this is not json\n{\"jsonrpc\": 5}\n");
    case "progress": {
      const progressToken = params._meta?.progressToken;
      for (const [step, message] of [[1, "packing"], [2, "shipping"]]) {
        if (progressToken !== undefined) {
          send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken, progress: step, total: 2, message } });
        }
      }
      // Answers after a ping round trip, so the client has read the notifications first.
      const ping = `fake-ping-${id}`;
      afterPing.set(ping, () => text(id, progressToken === undefined ? "no progress token" : "delivered"));
      return send({ jsonrpc: "2.0", id: ping, method: "ping" });
    }
    case "trace": return text(id, params._meta?.traceparent ?? "none");
    case "cancels": return text(id, cancels);
    case "calls": return text(id, calls);
    case "echo_count": return text(id, `count=${args.count}`);
    default: send({ jsonrpc: "2.0", id, error: { code: -32602, message: `unknown tool ${params.name}` } });
  }
});
