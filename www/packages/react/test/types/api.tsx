// Type test of the public API, as an app sees it (through the package's exports and the wasm
// `.d.ts`). Compiled with `tsc --noEmit`; every `@ts-expect-error` must be an error.
import { z } from "zod";
import {
  ApprovalDialog,
  ChatPanel,
  RuntimeErrors,
  TetherProvider,
  ToolInspector,
  loadTether,
  useAgentTool,
  useAgentToolResolver,
  resolverTool,
  useApprovalRequests,
  useTether,
  useTetherEvents,
  useTetherState,
  type ApprovalRequest,
  type TetherClient,
  type TetherEvent,
  type ToolDefinition,
  type TetherState,
} from "@tether/react";
import { TetherClient as RuntimeClient, type TetherError } from "@tether/react/runtime";

const schema = z.object({ productId: z.enum(["mug-red", "mug-blue"]), quantity: z.number().int().default(1) });

export function Tools() {
  useAgentTool({ name: "cart_add", description: "Add.", schema, risk: "none" }, (args) => {
    const id: "mug-red" | "mug-blue" = args.productId;
    const quantity: number = args.quantity; // the default makes it present in the handler
    // @ts-expect-error: not in the schema
    args.colour;
    return { id, quantity };
  });
  // A plain JSON Schema: the arguments are untyped.
  useAgentTool({ name: "navigate", description: "Go.", schema: { type: "object" }, global: true }, (args) => args.to);
  // No schema, async handler: the arguments are an empty object.
  useAgentTool({ name: "ping", description: "Ping.", timeoutMs: 500 }, async (args) => {
    const none: Record<string, never> = args;
    // @ts-expect-error: a tool without a schema has no arguments
    args.anything.length;
    return none;
  });
  // @ts-expect-error: not a risk level
  useAgentTool({ name: "x", description: "X.", risk: "medium" }, () => null);
  // @ts-expect-error: a description is required
  useAgentTool({ name: "x" }, () => null);

  useAgentToolResolver(
    {
      prefix: "flights",
      tools: [
        resolverTool({ name: "search", description: "Search.", schema: z.object({ to: z.string() }), handler: (a) => a.to.toUpperCase() }),
        { name: "book", description: "Book.", risk: "high", handler: () => "ok" },
      ],
    },
    {
      onBeforeAnyCall: (tool: string) => (tool === "flights_book" ? "refused" : undefined),
      onAfterAnyCall: (_tool: string, _output: unknown) => {},
      onErrorAnyCall: (_tool: string, error: string) => void error.length,
    },
  );

  useTetherEvents((event: TetherEvent) => {
    if (event.type === "toolRefused") {
      const e: string = event.event;
      void e;
    }
    // @ts-expect-error: not an event type
    if (event.type === "nope") return;
  });

  const { requests, current, approve, reject } = useApprovalRequests();
  const first: ApprovalRequest | undefined = requests[0] ?? current;
  if (first) {
    approve(first.callId);
    reject(first.callId, "no");
  }
  const state: TetherState = useTetherState();
  const count: number = useTetherState((s) => s.tools.length);
  const { sendMessage, client } = useTether();
  sendMessage(`${state.connection} ${count}`);
  const c: TetherClient | Pick<TetherClient, "registerTool"> | null = client;
  void c;
  return (
    <>
      <ChatPanel />
      <ToolInspector />
      <RuntimeErrors />
      <ApprovalDialog />
    </>
  );
}

export const app = (
  <TetherProvider url="ws://localhost:8787/ws" options={{ maxSettleMs: 100 }}>
    <Tools />
  </TetherProvider>
);

// The URL defaults to /ws on the page's own origin.
export const sameOrigin = (
  <TetherProvider>
    <Tools />
  </TetherProvider>
);

export async function runtime() {
  const Client = await loadTether();
  const client: TetherClient = new Client("ws://localhost:8787/ws");
  const def: ToolDefinition = { name: "t", description: "T.", parameters: { type: "object" } };
  client.registerTool(client.newOwner(), def, (args: unknown) => args);
  client.onError((error: TetherError) => console.log(error.kind, error.event));
  const direct = new RuntimeClient("ws://x/ws", { reconnectBaseMs: 100 });
  // @ts-expect-error: registerTool needs an owner
  direct.registerTool(def, () => null);
}
