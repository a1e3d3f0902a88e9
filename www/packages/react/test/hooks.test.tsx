import { StrictMode, useState, type ReactNode } from "react";
import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import {
  ApprovalDialog,
  ChatPanel,
  editedArgs,
  allowedValues,
  OUTSIDE_PROVIDER,
  RuntimeErrors,
  SESSION_LOST,
  TetherProvider,
  ToolInspector,
  contextKey,
  useAgentContext,
  useAgentTool,
  useAgentToolResolver,
  useApprovalRequests,
  useHumanInTheLoop,
  useTetherEvents,
  useTetherState,
  useToolCallRenderer,
} from "../src/index.js";
import type { TetherEvent } from "../src/index.js";
import { FakeClient } from "./fake-client.js";

afterEach(cleanup);

/** Lets effects, the reconcile microtask and the fake runtime's flush run. */
const settle = () => act(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));

function setup(ui: ReactNode, { strict = false } = {}) {
  const client = new FakeClient();
  const createClient = vi.fn(() => client);
  const wrap = (children: ReactNode) => {
    const tree = (
      <TetherProvider url="ws://test/ws" createClient={createClient}>
        {children}
      </TetherProvider>
    );
    return strict ? <StrictMode>{tree}</StrictMode> : tree;
  };
  const view = render(wrap(ui));
  return { client, createClient, rerender: (next: ReactNode) => view.rerender(wrap(next)), unmount: view.unmount };
}

function Echo({ label = "echo", risk }: { label?: string; risk?: "none" | "high" }) {
  useAgentTool({ name: "echo", description: `Echo (${label}).`, risk }, (args) => ({ echoed: args, label }));
  return null;
}

describe("useAgentContext", () => {
  function Cart({ items }: { items: string[] }) {
    useAgentContext({ description: "The shopping cart", value: items.length ? items.join(", ") : "empty" });
    useAgentTool({ name: "cart_add", description: "Add." }, () => null);
    return null;
  }

  it("sends the state with the tools in one CONTEXT_UPDATE, again when it changes, and never after unmount", async () => {
    const { client, rerender } = setup(<Cart items={[]} />);
    await settle();
    expect(client.contextUpdates).toHaveLength(1);
    expect(client.contextUpdates[0]!.map((t) => t.name)).toEqual(["cart_add"]);
    expect(client.contextValues[0]).toEqual([{ key: "the_shopping_cart", description: "The shopping cart", value: "empty" }]);
    rerender(<Cart items={["1 × Red mug"]} />);
    await settle();
    expect(client.contextValues).toHaveLength(2);
    expect(client.contextValues[1]![0]!.value).toBe("1 × Red mug");
    // The same value again: no registration and no frame.
    const log = client.log.length;
    rerender(<Cart items={["1 × Red mug"]} />);
    await settle();
    expect(client.log.length).toBe(log);
    expect(client.contextValues).toHaveLength(2);
    rerender(null);
    await settle();
    expect(client.contextValues.at(-1)).toEqual([]);
    expect(client.contextUpdates.at(-1)).toEqual([]);
  });

  it("removes an entry whose key changed", async () => {
    function Keyed({ k }: { k: string }) {
      useAgentContext({ key: k, description: "Page", value: { k } });
      return null;
    }
    const { client, rerender } = setup(<Keyed k="one" />);
    await settle();
    rerender(<Keyed k="two" />);
    await settle();
    expect(client.contextValues.at(-1)).toEqual([{ key: "two", description: "Page", value: { k: "two" } }]);
  });

  it("makes keys from descriptions", () => {
    expect(contextKey("The shopping cart")).toBe("the_shopping_cart");
    expect(contextKey("Prix (€) — TTC")).toBe("prix_ttc");
    expect(contextKey("!!!")).toBe("context");
  });
});

describe("useAgentTool", () => {
  it("registers on mount and unregisters on unmount", async () => {
    const { client, rerender, unmount, createClient } = setup(<Echo />);
    await settle();
    expect(createClient).toHaveBeenCalledTimes(1);
    expect(client.names()).toEqual(["echo"]);
    expect(client.log).toEqual(["register echo", "connect"]);
    expect(await client.call("echo", { a: 1 })).toEqual({ echoed: { a: 1 }, label: "echo" });
    rerender(null);
    await settle();
    expect(client.names()).toEqual([]);
    expect(client.log.at(-1)).toBe("unregisterOwner 1");
    expect(client.contextUpdates).toHaveLength(2);
    unmount();
    await settle();
    expect(client.log.at(-1)).toBe("disconnect");
  });

  it("leaves exactly one registration under StrictMode and sends no extra CONTEXT_UPDATE", async () => {
    function Page() {
      const [show, setShow] = useState(false);
      return (
        <>
          <button onClick={() => setShow(true)}>show</button>
          {show && <Echo />}
        </>
      );
    }
    const { client } = setup(<Page />, { strict: true });
    await settle();
    expect(client.log).toEqual(["connect"]);
    expect(client.contextUpdates).toHaveLength(0);
    fireEvent.click(screen.getByText("show"));
    await settle();
    expect(client.log.filter((l) => l !== "connect")).toEqual(["register echo"]);
    expect(client.names()).toEqual(["echo"]);
    expect(client.contextUpdates).toHaveLength(1);
  });

  it("connects once under StrictMode (the provider's double mount is absorbed too)", async () => {
    const { client, createClient } = setup(<Echo />, { strict: true });
    await settle();
    expect(createClient).toHaveBeenCalledTimes(1);
    expect(client.log).toEqual(["register echo", "connect"]);
  });

  it("a provider shown again after an unmount reconnects with a new client and its tools", async () => {
    const clients: FakeClient[] = [];
    const createClient = () => {
      clients.push(new FakeClient());
      return clients.at(-1)!;
    };
    // The same provider instance (same store) unmounts its effects and mounts them again later,
    // as a hidden <Activity> does.
    const { Activity } = await import("react");
    const tree = (mode: "visible" | "hidden") => (
      <Activity mode={mode}>
        <TetherProvider url="ws://test/ws" createClient={createClient}>
          <Echo />
        </TetherProvider>
      </Activity>
    );
    const view = render(tree("visible"));
    await settle();
    view.rerender(tree("hidden"));
    await settle();
    expect(clients[0]!.log.at(-1)).toBe("disconnect");
    view.rerender(tree("visible"));
    await settle();
    expect(clients).toHaveLength(2);
    expect(clients[1]!.names()).toEqual(["echo"]);
    expect(clients[1]!.connected).toBe(true);
  });

  it("does not re-register on a re-render with the same definition", async () => {
    const { client, rerender } = setup(<Echo />);
    await settle();
    rerender(<Echo />);
    rerender(<Echo />);
    await settle();
    expect(client.log.filter((l) => l.startsWith("register"))).toHaveLength(1);
    expect(client.contextUpdates).toHaveLength(1);
  });

  it("re-registers in place when the definition changes, once per tick", async () => {
    function Two({ label }: { label: string }) {
      useAgentTool({ name: "first", description: "First." }, () => 1);
      useAgentTool({ name: "second", description: `Second ${label}.` }, () => 2);
      return null;
    }
    const { client, rerender } = setup(<Two label="a" />);
    await settle();
    rerender(<Two label="b" />);
    await settle();
    expect(client.names()).toEqual(["first", "second"]);
    expect(client.tools()[1]!.description).toBe("Second b.");
    expect(client.log.filter((l) => l.startsWith("unregister"))).toEqual([]);
    expect(client.contextUpdates).toHaveLength(2);
  });

  it("a handler sees state updated after registration (no stale closure)", async () => {
    function Counter() {
      const [count, setCount] = useState(0);
      useAgentTool({ name: "read_count", description: "Read the count." }, () => ({ count }));
      return <button onClick={() => setCount((n) => n + 1)}>inc</button>;
    }
    const { client } = setup(<Counter />);
    await settle();
    expect(await client.call("read_count")).toEqual({ count: 0 });
    fireEvent.click(screen.getByText("inc"));
    fireEvent.click(screen.getByText("inc"));
    await settle();
    expect(await client.call("read_count")).toEqual({ count: 2 });
    expect(client.log.filter((l) => l.startsWith("register"))).toHaveLength(1);
  });

  it("a handler that mounts tools commits at once: their tools are registered in the same tick", async () => {
    function Echoes() {
      useAgentTool({ name: "echo_1", description: "Echo 1." }, () => 1);
      useAgentTool({ name: "echo_2", description: "Echo 2." }, () => 2);
      return null;
    }
    function Page() {
      const [show, setShow] = useState(false);
      useAgentTool({ name: "show", description: "Show the echoes." }, () => {
        setShow(true);
        return { shown: true };
      });
      return show ? <Echoes /> : null;
    }
    const { client } = setup(<Page />);
    await settle();
    client.log.length = 0;
    let registeredInSameTick: string[] = [];
    await act(async () => {
      await client.call("show");
      // The handler's state update was committed inside the call (flushSync) and the new tools
      // are applied in this tick's microtask; the runtime yields one microtask after a handler
      // before deciding whether the page changed, so it sees them and waits for the page.
      await Promise.resolve();
      registeredInSameTick = client.names();
    });
    await settle();
    expect(registeredInSameTick).toEqual(["show", "echo_1", "echo_2"]);
    expect(client.log).toEqual(["register echo_1", "register echo_2"]);
  });

  it("a page change reaches the runtime as one batch: one CONTEXT_UPDATE", async () => {
    function Home() {
      useAgentTool({ name: "product_view", description: "Open a product's page." }, () => null);
      useAgentTool({ name: "cart_add", description: "Add." }, () => null);
      return null;
    }
    function Product() {
      useAgentTool({ name: "product_view", description: "Show this product's details." }, () => null);
      useAgentTool({ name: "cart_add", description: "Add this one." }, () => null);
      return null;
    }
    function Layout({ page }: { page: "home" | "product" }) {
      useAgentTool({ name: "navigate", description: "Go.", global: true }, () => null);
      return page === "home" ? <Home /> : <Product />;
    }
    const { client, rerender } = setup(<Layout page="home" />);
    await settle();
    expect(client.contextUpdates).toHaveLength(1);
    rerender(<Layout page="product" />);
    await settle();
    expect(client.contextUpdates).toHaveLength(2);
    expect(client.tools().map((t) => t.description)).toEqual(["Go.", "Show this product's details.", "Add this one."]);
  });

  it("keeps global tools when their component unmounts", async () => {
    function Global() {
      useAgentTool({ name: "navigate", description: "Go.", global: true }, () => null);
      return null;
    }
    const { client, rerender } = setup(<Global />);
    await settle();
    rerender(null);
    await settle();
    expect(client.names()).toEqual(["navigate"]);
  });

  it("converts a zod schema with zod's own converter (input side: defaults are optional)", async () => {
    const schema = z.object({
      productId: z.enum(["mug-red", "mug-blue"]),
      quantity: z.number().int().min(1).max(10).default(1),
    });
    let got: { productId: string; quantity: number } | undefined;
    function Add() {
      useAgentTool({ name: "cart_add", description: "Add.", schema }, (args) => {
        got = args; // typed: { productId: "mug-red" | "mug-blue"; quantity: number }
        return { ok: true };
      });
      return null;
    }
    const { client } = setup(<Add />);
    await settle();
    const parameters = client.tools()[0]!.parameters as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(parameters.type).toBe("object");
    expect(parameters.properties.productId.enum).toEqual(["mug-red", "mug-blue"]);
    expect(parameters.properties.quantity).toMatchObject({ type: "integer", minimum: 1, maximum: 10, default: 1 });
    expect(parameters.required).toEqual(["productId"]);
    await client.call("cart_add", { productId: "mug-red", quantity: 1 });
    expect(got).toEqual({ productId: "mug-red", quantity: 1 });
  });

  it("gives the handler a zod schema's output, and refuses what its refinements refuse", async () => {
    // The JSON Schema checks the shape (in the runtime, before any approval); zod's own
    // validation runs before the handler: transforms and defaults applied, refinements checked.
    const schema = z
      .object({ code: z.string().transform((code) => code.toUpperCase()), quantity: z.number().int().default(1) })
      .refine((args) => args.code !== "MUG-0", { message: "there is no product 0", path: ["code"] });
    const got: { code: string; quantity: number }[] = [];
    function Add() {
      useAgentTool({ name: "cart_add", description: "Add.", schema }, (args) => {
        got.push(args);
        return { ok: true };
      });
      return null;
    }
    const { client } = setup(<Add />);
    await settle();
    await client.call("cart_add", { code: "mug-red" });
    expect(got).toEqual([{ code: "MUG-RED", quantity: 1 }]);
    await expect(client.call("cart_add", { code: "mug-0", quantity: 2 })).rejects.toThrow(
      'Validation args "cart_add": code: there is no product 0',
    );
    expect(got).toHaveLength(1);
    // An asynchronous refinement is awaited before the handler.
    const slow = z.object({ id: z.string() }).refine(async (args) => args.id !== "gone", "no such id");
    const seen: string[] = [];
    function Remove() {
      useAgentTool({ name: "remove", description: "Remove.", schema: slow }, (args) => {
        seen.push(args.id);
        return "removed";
      });
      return null;
    }
    const second = setup(<Remove />);
    await settle();
    await expect(second.client.call("remove", { id: "gone" })).rejects.toThrow('Validation args "remove": no such id');
    expect(await second.client.call("remove", { id: "a" })).toBe("removed");
    expect(seen).toEqual(["a"]);
  });

  it("passes a plain JSON Schema as it is", async () => {
    const schema = { type: "object", properties: { to: { type: "string", enum: ["home", "cart"] } }, required: ["to"] };
    function Nav() {
      useAgentTool({ name: "navigate", description: "Go.", schema: { ...schema } }, () => null);
      return null;
    }
    const { client, rerender } = setup(<Nav />);
    await settle();
    rerender(<Nav />);
    await settle();
    expect(client.tools()[0]!.parameters).toEqual(schema);
    expect(client.log.filter((l) => l.startsWith("register"))).toHaveLength(1);
  });

  it("reports refusals over the cap", async () => {
    function Many() {
      // The same 31 calls in every render: a loop of fixed length keeps the hooks' order.
      // eslint-disable-next-line react-hooks/rules-of-hooks
      for (let n = 1; n <= 31; n++) useAgentTool({ name: `stress_tool_${n}`, description: `Stress tool number ${n}.` }, () => ({ n }));
      return (
        <>
          <ToolInspector />
          <RuntimeErrors />
        </>
      );
    }
    const { client } = setup(<Many />);
    await settle();
    await settle();
    expect(client.names()).toHaveLength(30);
    expect(screen.getByTestId("inspector-count").textContent).toBe("30");
    expect(screen.getByTestId("inspector-refused").getAttribute("data-event")).toBe("tool.registry.limit");
    expect(screen.getByTestId("runtime-errors").textContent).toMatch(/stress_tool_31/);
  });

  it("throws a clear error outside the provider, naming the hook and the tool", () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    expect(() => render(<Echo />)).toThrow(`@tether/react: useAgentTool("echo") ${OUTSIDE_PROVIDER}`);
    expect(() => render(<ChatPanel />)).toThrow(/useTether\(\) must be called inside <TetherProvider>/);
  });
});

describe("useAgentToolResolver", () => {
  it("registers prefixed tools with hooks that see the latest props", async () => {
    const seen: string[] = [];
    function Flights({ mark }: { mark: string }) {
      useAgentToolResolver(
        {
          prefix: "flights",
          tools: [
            { name: "search", description: "Search flights.", handler: () => ({ mark }) },
            { name: "book", description: "Book a flight.", risk: "high", handler: () => "booked" },
          ],
        },
        {
          onBeforeAnyCall: (tool) => (tool === "flights_book" ? "not today" : undefined),
          onAfterAnyCall: (tool) => void seen.push(`${mark}:${tool}`),
        },
      );
      return null;
    }
    const { client, rerender } = setup(<Flights mark="a" />);
    await settle();
    expect(client.names()).toEqual(["flights_search", "flights_book"]);
    rerender(<Flights mark="b" />);
    await settle();
    expect(await client.call("flights_search")).toEqual({ mark: "b" });
    expect(await client.call("flights_book")).toEqual({ refused: "not today" });
    expect(seen).toEqual(["b:flights_search"]);
    expect(client.log.filter((l) => l.startsWith("resolver"))).toHaveLength(1);
  });
});

describe("events, approvals and the chat", () => {
  it("useTetherEvents gets every event", async () => {
    const events: TetherEvent[] = [];
    function Spy() {
      useTetherEvents((event) => events.push(event));
      return null;
    }
    const { client } = setup(<Spy />);
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(events).toEqual([{ type: "connection", state: "open", attempt: 0 }]);
  });

  it("ApprovalDialog shows a request and answers it", async () => {
    const { client } = setup(<ApprovalDialog />);
    await settle();
    expect(screen.queryByTestId("approval-dialog")).toBeNull();
    let answer: Promise<unknown> | undefined;
    act(() => {
      answer = Promise.resolve(
        client.approver!({
          callId: "c1",
          tool: "cart_remove",
          description: "Remove.",
          risk: "high",
          args: { productId: "mug-red", quantity: 2, note: { gift: true } },
        }),
      );
    });
    expect(screen.getByTestId("approval-risk").textContent).toBe("high");
    // Field by field, not raw JSON.
    expect(screen.getAllByTestId("approval-arg").map((row) => row.textContent)).toEqual([
      "productIdmug-red",
      "quantity2",
      'note{"gift":true}',
    ]);
    // The safe choice has the focus: Enter does not approve.
    expect(document.activeElement).toBe(screen.getByTestId("approval-reject"));
    fireEvent.click(screen.getByTestId("approval-reject"));
    await expect(answer).resolves.toEqual({ approved: false, reason: "the user pressed Reject" });
    expect(screen.queryByTestId("approval-dialog")).toBeNull();
  });

  it("ApprovalDialog: edited arguments refuse the call with them, and the model's call with exactly those runs unasked", async () => {
    const { client } = setup(<ApprovalDialog />);
    await settle();
    const request = (callId: string, args: unknown) => ({ callId, tool: "cart_remove", description: "Remove.", risk: "high" as const, args });
    let first: Promise<unknown> | undefined;
    act(() => {
      first = Promise.resolve(client.approver!(request("c1", { productId: "mug-red", quantity: 2 })));
    });
    fireEvent.click(screen.getByTestId("approval-edit"));
    const inputs = screen.getAllByTestId("approval-arg-input");
    expect(inputs.map((input) => input.getAttribute("data-field"))).toEqual(["productId", "quantity"]);
    fireEvent.change(inputs[0]!, { target: { value: "mug-blue" } });
    fireEvent.change(inputs[1]!, { target: { value: "1" } });
    expect(screen.getByTestId("approval-approve").textContent).toBe("Approve with changes");
    fireEvent.click(screen.getByTestId("approval-approve"));
    await expect(first).resolves.toEqual({
      approved: false,
      reason: 'the user changed the arguments before approving; call cart_remove again with exactly these arguments: {"productId":"mug-blue","quantity":1}',
    });
    // Another call (other arguments) still asks; the one with the user's arguments does not.
    let other: Promise<unknown> | undefined;
    act(() => {
      other = Promise.resolve(client.approver!(request("c2", { productId: "mug-red", quantity: 1 })));
    });
    expect(screen.getByTestId("approval-dialog")).toBeTruthy();
    fireEvent.click(screen.getByTestId("approval-reject"));
    await expect(other).resolves.toMatchObject({ approved: false });
    let edited: unknown;
    act(() => {
      edited = client.approver!(request("c3", { quantity: 1, productId: "mug-blue" }));
    });
    expect(edited).toBe(true);
    expect(screen.queryByTestId("approval-dialog")).toBeNull();
    // Once only.
    act(() => {
      edited = client.approver!(request("c4", { quantity: 1, productId: "mug-blue" }));
    });
    expect(edited).toBeInstanceOf(Promise);
  });

  it("ApprovalDialog offers the values an enum allows as a choice (through a $ref too)", async () => {
    function Tools() {
      useAgentTool(
        {
          name: "note_colour",
          description: "Colour a note.",
          risk: "high",
          schema: {
            type: "object",
            properties: { id: { type: "string" }, colour: { $ref: "#/$defs/Colour" } },
            required: ["id", "colour"],
            $defs: { Colour: { oneOf: [{ const: "yellow" }, { const: "pink" }] } },
          },
        },
        () => "ok",
      );
      return null;
    }
    const { client } = setup(
      <>
        <Tools />
        <ApprovalDialog />
      </>,
    );
    await settle();
    let answer: Promise<unknown> | undefined;
    act(() => {
      answer = Promise.resolve(client.approver!({ callId: "c1", tool: "note_colour", description: "Colour a note.", risk: "high", args: { id: "n1", colour: "yellow" } }));
    });
    fireEvent.click(screen.getByTestId("approval-edit"));
    const [id, colour] = screen.getAllByTestId("approval-arg-input");
    expect(id!.tagName).toBe("INPUT");
    expect(colour!.tagName).toBe("SELECT");
    expect([...colour!.querySelectorAll("option")].map((o) => o.value)).toEqual(["yellow", "pink"]);
    fireEvent.change(colour!, { target: { value: "pink" } });
    fireEvent.click(screen.getByTestId("approval-approve"));
    await expect(answer).resolves.toMatchObject({ approved: false, reason: expect.stringContaining('{"id":"n1","colour":"pink"}') });
  });

  it("allowedValues reads enum, const, oneOf/anyOf and local $refs, and leaves null out", () => {
    const schema = {
      properties: {
        a: { enum: ["x", "y", null] },
        b: { anyOf: [{ $ref: "#/$defs/C" }, { type: "null" }] },
        c: { type: "string" },
        d: { $ref: "#/$defs/missing" },
      },
      $defs: { C: { oneOf: [{ const: 1 }, { const: 2 }] } },
    };
    expect(allowedValues(schema, "a")).toEqual(["x", "y"]);
    expect(allowedValues(schema, "b")).toEqual([1, 2]);
    expect(allowedValues(schema, "c")).toBeNull();
    expect(allowedValues(schema, "d")).toBeNull();
    expect(allowedValues(schema, "nope")).toBeNull();
  });

  it("editedArgs keeps strings as typed and reads numbers and booleans", () => {
    expect(editedArgs({ id: "7", n: 2, x: 0.5, flag: true, on: false }, { id: "8", n: "3", x: "2.5", flag: "nope", on: "true" })).toEqual({
      id: "8",
      n: 3,
      x: 2.5,
      flag: "nope",
      on: true,
    });
  });

  it("ApprovalDialog refuses with the words the user typed as the reason", async () => {
    const { client } = setup(<ApprovalDialog />);
    await settle();
    let answer: Promise<unknown> | undefined;
    act(() => {
      answer = Promise.resolve(
        client.approver!({ callId: "c1", tool: "checkout", description: "Pay.", risk: "critical", args: {} }),
      );
    });
    fireEvent.change(screen.getByTestId("approval-reason"), { target: { value: "not before Friday" } });
    // Enter in the text field submits its form: a refusal, never an approval.
    fireEvent.submit(screen.getByTestId("approval-reason"));
    await expect(answer).resolves.toEqual({ approved: false, reason: "the user said: not before Friday" });
    expect(screen.queryByTestId("approval-dialog")).toBeNull();
  });

  it("a message sent while a call waits for approval refuses it with the message as the reason", async () => {
    const { client } = setup(
      <>
        <ChatPanel />
        <ApprovalDialog />
      </>,
    );
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "remove the mug" } });
    fireEvent.submit(screen.getByTestId("chat-input"));
    let answer: Promise<unknown> | undefined;
    act(() => {
      answer = Promise.resolve(
        client.approver!({ callId: "c1", tool: "cart_remove", description: "", risk: "high", args: {} }),
      );
    });
    // The run waits for the approval: the chat takes a message again.
    expect((screen.getByTestId("chat-send") as HTMLButtonElement).disabled).toBe(false);
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "no, keep it" } });
    fireEvent.submit(screen.getByTestId("chat-input"));
    await expect(answer).resolves.toEqual({ approved: false, reason: "the user wrote instead: no, keep it" });
    // No second run was asked for; the words are in the chat; the run goes on.
    expect(client.sent).toEqual(["remove the mug"]);
    expect(screen.getAllByTestId("chat-message").map((line) => line.textContent)).toEqual([
      "remove the mug",
      "no, keep it",
    ]);
    expect(screen.queryByTestId("approval-dialog")).toBeNull();
    expect((screen.getByTestId("chat-send") as HTMLButtonElement).disabled).toBe(true);
  });

  it("a session the server could not resume ends the run in words and closes its approvals unrun", async () => {
    const { client } = setup(
      <>
        <ChatPanel />
        <ApprovalDialog />
      </>,
    );
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    act(() => client.emit({ type: "welcome", sessionId: "s1", maxActiveTools: 30, resumed: false }));
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "remove the mug" } });
    fireEvent.submit(screen.getByTestId("chat-input"));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Removing", done: false }));
    let answer: Promise<unknown> | undefined;
    act(() => {
      answer = Promise.resolve(client.approver!({ callId: "c1", tool: "cart_remove", description: "", risk: "high", args: {} }));
    });
    // The same session resumed: nothing changes.
    act(() => client.emit({ type: "welcome", sessionId: "s1", maxActiveTools: 30, resumed: true }));
    expect(screen.getByTestId("approval-dialog")).toBeTruthy();
    // A new session instead of the old one.
    act(() => client.emit({ type: "welcome", sessionId: "s2", maxActiveTools: 30, resumed: false }));
    await expect(answer).resolves.toBe("dismissed");
    expect(screen.queryByTestId("approval-dialog")).toBeNull();
    const lines = screen.getAllByTestId("chat-message");
    expect(lines.map((l) => [l.textContent, l.getAttribute("data-status")])).toEqual([
      ["remove the mug", ""],
      ["Removing", "failed"],
      [SESSION_LOST, ""],
    ]);
    expect((screen.getByTestId("chat-send") as HTMLButtonElement).disabled).toBe(false);
  });

  it("ChatPanel shows each tool call at its place between the agent's words, live, drawn by its renderer", async () => {
    function Tools() {
      useAgentTool(
        {
          name: "cart_remove",
          description: "Remove.",
          risk: "high",
          render: (call) => <b data-testid="card">{`remove ${call.args.productId}: ${call.status}`}</b>,
        },
        () => "removed",
      );
      useToolCallRenderer("*", (call) => <i data-testid="wildcard">{`${call.tool} ${call.status}`}</i>);
      return null;
    }
    const { client } = setup(
      <>
        <Tools />
        <ChatPanel />
        <ApprovalDialog />
      </>,
    );
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "remove the mug" } });
    fireEvent.submit(screen.getByTestId("chat-input"));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Looking. ", done: false }));
    act(() => client.emit({ type: "callStarted", callId: "c1", tool: "cart_remove", args: { productId: "mug-red" } }));
    act(() => {
      void client.approver!({ callId: "c1", tool: "cart_remove", description: "", risk: "high", args: { productId: "mug-red" } });
    });
    const lines = () =>
      screen
        .getAllByRole("listitem")
        .map((li) => [li.getAttribute("data-testid"), li.textContent, li.getAttribute("data-call-status") ?? li.getAttribute("data-status")]);
    expect(lines()).toEqual([
      ["chat-message", "remove the mug", ""],
      ["chat-message", "Looking. ", ""],
      ["chat-tool-call", "remove mug-red: approval", "approval"],
    ]);
    fireEvent.click(screen.getByTestId("approval-approve"));
    expect(screen.getByTestId("card").textContent).toBe("remove mug-red: running");
    act(() => client.emit({ type: "callFinished", record: { callId: "c1", tool: "cart_remove", status: "ok", content: "removed" } }));
    act(() => client.emit({ type: "callStarted", callId: "c2", tool: "cart_view", args: {} }));
    act(() => client.emit({ type: "callFinished", record: { callId: "c2", tool: "cart_view", status: "error", content: "no cart" } }));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Removed.", done: true, status: "completed" }));
    expect(lines()).toEqual([
      ["chat-message", "remove the mug", ""],
      ["chat-message", "Looking. ", ""],
      ["chat-tool-call", "remove mug-red: done", "done"],
      ["chat-tool-call", "cart_view failed", "failed"],
      // The words after the calls: the run's last line, which carries its status.
      ["chat-message", "Removed.", "completed"],
    ]);
  });

  it("a call the model is still writing is in the chat with its arguments so far, then runs in the same place", async () => {
    const seen: string[] = [];
    function Tools() {
      useToolCallRenderer("cart_add", (call) => {
        seen.push(`${call.status} ${JSON.stringify(call.partialArgs)}`);
        return <b data-testid="card">{`${call.status}: ${call.args.productId ?? "?"}`}</b>;
      });
      return null;
    }
    const { client } = setup(
      <>
        <Tools />
        <ChatPanel />
      </>,
    );
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    const delta = (partialArgs: unknown) =>
      act(() => client.emit({ type: "run", runId: "r1", event: { kind: "tool_call_delta", callId: "r1.1.0", tool: "cart_add", partialArgs } }));
    delta({});
    delta({ productId: "mug-r" });
    expect(screen.getByTestId("card").textContent).toBe("streaming: mug-r");
    expect(screen.getByTestId("chat-tool-call").getAttribute("data-call-status")).toBe("streaming");
    act(() => client.emit({ type: "callStarted", callId: "r1.1.0", tool: "cart_add", args: { productId: "mug-red", quantity: 1 } }));
    // The streamed arguments after the call started change nothing.
    delta({ productId: "mug-x" });
    act(() => client.emit({ type: "run", runId: "r1", event: { kind: "tool_progress", callId: "r1.1.0", message: "half way" } }));
    act(() => client.emit({ type: "callFinished", record: { callId: "r1.1.0", tool: "cart_add", status: "ok", content: "added" } }));
    expect(screen.getAllByTestId("chat-tool-call")).toHaveLength(1);
    expect(screen.getByTestId("card").textContent).toBe("done: mug-red");
    expect(seen[0]).toBe("streaming {}");
    expect(seen).toContain('streaming {"productId":"mug-r"}');
    expect(seen).not.toContain('streaming {"productId":"mug-x"}');
  });

  it("a streamed call refused on the server ends in the chat; one never made leaves it when the run ends", async () => {
    const { client } = setup(<ChatPanel />);
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    const run = (event: { kind: string; [key: string]: unknown }) => act(() => client.emit({ type: "run", runId: "r2", event }));
    run({ kind: "tool_call_delta", callId: "r2.1.0", tool: "cart_clear", partialArgs: {} });
    run({ kind: "tool_call_delta", callId: "r2.1.1", tool: "cart_view", partialArgs: {} });
    run({ kind: "tool_execution_end", callId: "r2.1.0", tool: "cart_clear", status: "denied", output: "Blocked by policy" });
    expect(screen.getAllByTestId("chat-tool-call").map((li) => li.getAttribute("data-call-status"))).toEqual(["refused", "streaming"]);
    run({ kind: "run_end", status: "completed", turns: 1 });
    expect(screen.getAllByTestId("chat-tool-call").map((li) => li.getAttribute("data-call-status"))).toEqual(["refused"]);
  });

  it("useHumanInTheLoop: the question is drawn in the chat, and respond's value is the tool's result", async () => {
    function AskSize() {
      useHumanInTheLoop({
        name: "ask_size",
        description: "Ask the user which size.",
        schema: z.object({ product: z.string() }),
        render: (call) =>
          call.respond ? (
            <span>
              {`Which size of ${call.args.product}?`}
              <button data-testid="size-m" onClick={() => call.respond!("M")}>
                M
              </button>
            </span>
          ) : (
            <span data-testid="answered">{`${call.status}: ${JSON.stringify(call.result ?? null)}`}</span>
          ),
      });
      return null;
    }
    const { client } = setup(
      <>
        <AskSize />
        <ChatPanel />
      </>,
    );
    await settle();
    expect(client.entries[0]!.def).toMatchObject({ name: "ask_size", timeoutMs: 600000 });
    expect(client.entries[0]!.def.risk).toBeUndefined();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    act(() => client.emit({ type: "callStarted", callId: "q1", tool: "ask_size", args: { product: "T-shirt" } }));
    let result: unknown;
    await act(async () => {
      void client.call("ask_size", { product: "T-shirt" }).then((r) => (result = r));
    });
    expect(screen.getByTestId("chat-tool-call").textContent).toBe("Which size of T-shirt?M");
    // Waiting for the user: the chat takes a message (it would answer the question).
    expect(screen.getByTestId("chat-send").hasAttribute("disabled")).toBe(false);
    await act(async () => fireEvent.click(screen.getByTestId("size-m")));
    expect(result).toBe("M");
    act(() => client.emit({ type: "callFinished", record: { callId: "q1", tool: "ask_size", status: "ok", content: "M" } }));
    expect(screen.getByTestId("answered").textContent).toBe('done: "M"');
  });

  it("a message typed while a question waits answers it with the text; nothing new is sent", async () => {
    function AskSize() {
      useHumanInTheLoop({ name: "ask_size", description: "Ask.", render: (call) => <span>{call.respond ? "asking" : call.status}</span> });
      return null;
    }
    const { client } = setup(
      <>
        <AskSize />
        <ChatPanel />
      </>,
    );
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    act(() => client.emit({ type: "callStarted", callId: "q2", tool: "ask_size", args: {} }));
    let result: unknown;
    await act(async () => {
      void client.call("ask_size").then((r) => (result = r));
    });
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "large please" } });
    await act(async () => fireEvent.submit(screen.getByTestId("chat-input")));
    expect(result).toBe("large please");
    expect(client.sent).toEqual([]);
  });

  it("a handler asks the user with context.ask: the question is at its call in the chat, the answer goes on", async () => {
    function Shirts() {
      useAgentTool(
        {
          name: "cart_add",
          description: "Add.",
          render: (call) =>
            call.respond ? (
              <button data-testid="size" onClick={() => call.respond!("M")}>{`pick one of ${(call.question as { sizes: string[] }).sizes.join("/")}`}</button>
            ) : (
              <span data-testid="added">{String(call.result ?? call.status)}</span>
            ),
        },
        async (_args, context) => {
          const size = await context.ask({ sizes: ["S", "M", "L"] });
          return `added a T-shirt in ${String(size)} (call ${context.callId})`;
        },
      );
      return null;
    }
    const { client } = setup(
      <>
        <Shirts />
        <ChatPanel />
      </>,
    );
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    act(() => client.emit({ type: "callStarted", callId: "c7", tool: "cart_add", args: {} }));
    let result: unknown;
    await act(async () => {
      void client.call("cart_add").then((r) => (result = r));
    });
    expect(screen.getByTestId("size").textContent).toBe("pick one of S/M/L");
    await act(async () => fireEvent.click(screen.getByTestId("size")));
    expect(result).toBe("added a T-shirt in M (call c7)");
    act(() => client.emit({ type: "callFinished", record: { callId: "c7", tool: "cart_add", status: "ok", content: result } }));
    expect(screen.getByTestId("added").textContent).toBe("added a T-shirt in M (call c7)");
  });

  it("a followUp: false tool is registered with followUp false", async () => {
    function Card() {
      useAgentTool({ name: "product_card", description: "Show a card.", followUp: false }, () => ({ shown: true }));
      return null;
    }
    const { client } = setup(<Card />);
    await settle();
    expect(client.entries[0]!.def).toMatchObject({ name: "product_card", followUp: false });
  });

  it("a run that starts its words again (reset) has one line for them, after its calls", async () => {
    const { client } = setup(<ChatPanel />);
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Looking. ", done: false }));
    act(() => client.emit({ type: "callStarted", callId: "c1", tool: "cart_view", args: {} }));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Half", done: false }));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Again.", done: true, status: "completed", reset: true }));
    expect(screen.getAllByRole("listitem").map((li) => [li.getAttribute("data-testid"), li.textContent])).toEqual([
      ["chat-tool-call", "cart_view — running"],
      ["chat-message", "Again."],
    ]);
  });

  it("a low-risk call's notice stands before the call's own line, even when it comes after it", async () => {
    const { client } = setup(<ChatPanel />);
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    act(() => client.emit({ type: "callStarted", callId: "n1", tool: "note_add", args: { text: "milk" } }));
    act(() => client.emit({ type: "callFinished", record: { callId: "n1", tool: "note_add", status: "ok", content: "added" } as never }));
    act(() => client.notify!({ callId: "n1", tool: "note_add", args: { text: "milk" } }));
    const lines = screen.getAllByRole("listitem").map((li) => li.textContent);
    expect(lines[0]).toBe('Running note_add {"text":"milk"}');
    expect(lines[1]).toContain("note_add");
    expect(lines).toHaveLength(2);
  });

  it("useApprovalRequests lists pending requests oldest first", async () => {
    let api: ReturnType<typeof useApprovalRequests> | undefined;
    function Custom() {
      api = useApprovalRequests();
      return null;
    }
    const { client } = setup(<Custom />);
    await settle();
    let first: Promise<unknown> | undefined;
    act(() => {
      first = Promise.resolve(client.approver!({ callId: "a", tool: "t", description: "", risk: "critical", args: {} }));
      void client.approver!({ callId: "b", tool: "t", description: "", risk: "high", args: {} });
    });
    expect(api!.requests.map((r) => r.callId)).toEqual(["a", "b"]);
    act(() => api!.approve("a"));
    await expect(first).resolves.toBe(true);
    expect(api!.current?.callId).toBe("b");
  });

  it("ChatPanel sends a message and streams the answer with its status", async () => {
    const { client } = setup(<ChatPanel />);
    await settle();
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(screen.queryByTestId("chat-status")).toBeNull();
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "add the red mug" } });
    fireEvent.submit(screen.getByTestId("chat-input"));
    expect(client.sent).toEqual(["add the red mug"]);
    expect((screen.getByTestId("chat-send") as HTMLButtonElement).disabled).toBe(true);
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "(scripted model) ", done: false }));
    act(() => client.emit({ type: "agentMessage", runId: "r1", delta: "Done.", done: true, status: "completed" }));
    const lines = screen.getAllByTestId("chat-message");
    expect(lines.map((l) => [l.textContent, l.getAttribute("data-status")])).toEqual([
      ["add the red mug", ""],
      ["(scripted model) Done.", "completed"],
    ]);
    expect((screen.getByTestId("chat-send") as HTMLButtonElement).disabled).toBe(false);
  });
});

describe("useTetherState", () => {
  it("a selector that builds a new array each time neither loops nor re-renders for an equal value", async () => {
    let renders = 0;
    function Lines() {
      const user = useTetherState((s) => s.messages.filter((m) => m.role === "user").map((m) => m.text));
      renders++;
      return <p data-testid="user-lines">{user.join("|")}</p>;
    }
    const { client } = setup(<Lines />);
    await settle();
    const before = renders;
    // A change the selection does not see: no new render of the component.
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(renders).toBe(before);
    expect(screen.getByTestId("user-lines").textContent).toBe("");
  });
});

describe("every state in words", () => {
  it("before connecting: the page's tools in the inspector, the connection in words", async () => {
    function Tools() {
      useAgentTool({ name: "todo_add", description: "Add an item." }, () => null);
      useAgentTool({ name: "todo_remove", description: "Remove an item.", risk: "high" }, () => null);
      return <ToolInspector />;
    }
    const { client } = setup(<Tools />);
    await settle();
    // Nothing was sent (the fake runtime is not connected), yet the inspector lists both tools.
    expect(screen.getByTestId("inspector-count").textContent).toBe("2");
    expect(screen.getAllByTestId("inspector-tool").map((t) => t.getAttribute("data-tool"))).toEqual(["todo_add", "todo_remove"]);
    expect(screen.getByTestId("inspector-connection").textContent).toBe("not connected");
    expect(screen.getByTestId("inspector-note").textContent).toMatch(/the model sees them once connected/);
    const risks = screen.getAllByTestId("inspector-tool").map((t) => t.querySelector(".tether-risk")!.className);
    expect(risks).toEqual(["tether-risk tether-risk-none", "tether-risk tether-risk-high"]);
    act(() => client.emit({ type: "connection", state: "reconnecting", attempt: 2 }));
    expect(screen.getByTestId("inspector-connection").textContent).toBe("offline, retrying (2 failed)");
    expect(screen.getByTestId("inspector-connection").getAttribute("data-state")).toBe("reconnecting");
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(screen.getByTestId("inspector-connection").textContent).toBe("connected");
    expect(screen.queryByTestId("inspector-note")).toBeNull();
  });

  it("connection failures reach the error list, one line per outage", async () => {
    const { client } = setup(<RuntimeErrors />);
    await settle();
    for (const attempt of [1, 2, 3]) {
      act(() => client.emit({ type: "connection", state: "connecting", attempt: attempt - 1 }));
      act(() => client.emit({ type: "connection", state: "reconnecting", attempt }));
    }
    const lines = () => screen.queryAllByTestId("runtime-error").map((l) => l.textContent);
    expect(lines()).toEqual([
      "cannot reach the agent server at ws://test/ws (3 failed attempts); is `tether serve` running there? Retrying",
    ]);
    // Back: the outage's line says it ended, in the past tense.
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(lines()).toEqual(["the agent server at ws://test/ws could not be reached (3 failed attempts); connected since"]);
    act(() => client.emit({ type: "connection", state: "reconnecting", attempt: 1 }));
    expect(lines()).toHaveLength(2);
    expect(lines()[1]).toBe("lost the connection to the agent server at ws://test/ws; reconnecting");
    act(() => client.emit({ type: "connection", state: "connecting", attempt: 1 }));
    act(() => client.emit({ type: "connection", state: "reconnecting", attempt: 2 }));
    expect(lines()).toHaveLength(2);
    expect(lines()[1]).toBe("lost the connection to the agent server at ws://test/ws; reconnecting");
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(lines()[1]).toBe("the connection to the agent server at ws://test/ws was lost and is back (2 failed attempts)");
  });

  it("a message written offline says it waits, and leaves when the connection opens", async () => {
    const { client } = setup(<ChatPanel />);
    await settle();
    act(() => client.emit({ type: "connection", state: "reconnecting", attempt: 1 }));
    expect(screen.getByTestId("chat-status").textContent).toBe(
      "Not connected to the agent server (offline, retrying (1 failed)). Messages you send wait until the connection is back.",
    );
    fireEvent.change(screen.getByTestId("chat-input"), { target: { value: "add buy milk" } });
    fireEvent.submit(screen.getByTestId("chat-input"));
    const line = () => screen.getAllByTestId("chat-message")[0]!;
    expect(line().getAttribute("data-waiting")).toBe("true");
    expect(line().textContent).toBe("add buy milk (waiting for the connection)");
    expect(screen.getByTestId("chat-send").textContent).toBe("Waiting for the server…");
    act(() => client.emit({ type: "connection", state: "open", attempt: 0 }));
    expect(line().getAttribute("data-waiting")).toBeNull();
    expect(line().textContent).toBe("add buy milk");
    expect(screen.getByTestId("chat-send").textContent).toBe("Working…");
    expect(screen.queryByTestId("chat-status")).toBeNull();
  });

  it("a runtime that does not load is in the error list, with the fix", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const createClient = () => Promise.reject(new Error("the wasm is missing"));
    render(
      <TetherProvider url="ws://test/ws" createClient={createClient}>
        <RuntimeErrors />
      </TetherProvider>,
    );
    await settle();
    expect(screen.getByTestId("runtime-error").textContent).toBe("the wasm is missing");
  });

  it("the URL defaults to /ws on the page's own origin", async () => {
    let url: string | undefined;
    const createClient = (u: string) => {
      url = u;
      return new FakeClient();
    };
    render(<TetherProvider createClient={createClient} />);
    await settle();
    expect(url).toBe(`ws://${location.host}/ws`);
  });
});
