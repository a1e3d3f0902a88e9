import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { TetherProvider } from "../src/index.js";
import { MCP_PAIRING_KEY, McpPairing, pairingCode } from "../src/mcp.js";
import { FakeClient } from "./fake-client.js";

afterEach(cleanup);

const settle = () => act(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));

describe("McpPairing", () => {
  it("pairs only after the click, shows the code it puts in the context, and ends on Stop sharing", async () => {
    const client = new FakeClient();
    render(
      <TetherProvider url="ws://test/ws" createClient={vi.fn(() => client)}>
        <McpPairing endpoint="https://shop.example/mcp" />
      </TetherProvider>,
    );
    await settle();
    expect(client.contextValues.flat().some((entry) => entry.key === MCP_PAIRING_KEY)).toBe(false);

    fireEvent.click(screen.getByRole("button", { name: "Let an MCP client use this page" }));
    await settle();
    const entry = client.contextValues.at(-1)!.find((e) => e.key === MCP_PAIRING_KEY)!;
    const code = (entry.value as { code: string }).code;
    expect(code).toMatch(/^[0-9a-z]{26}$/);
    const shown = screen.getByRole("region", { name: "MCP pairing" }).textContent!;
    expect(shown).toContain(`Authorization: Bearer ${code}`);
    expect(shown).toContain("https://shop.example/mcp");

    fireEvent.click(screen.getByRole("button", { name: "Stop sharing" }));
    await settle();
    expect(client.contextValues.at(-1)!.some((e) => e.key === MCP_PAIRING_KEY)).toBe(false);
  });

  it("writes the bytes as tether-leptos writes them (crates/tether-leptos/tests/native.rs)", () => {
    const vectors: [Uint8Array, string][] = [
      [new Uint8Array(16).fill(255), "zzzzzzzzzzzzzzzzzzzzzzzzzw"],
      [Uint8Array.from({ length: 16 }, (_, i) => i * 17), "008j4ct4ank7f24snaxwsqfezw"],
    ];
    for (const [bytes, expected] of vectors) {
      const spy = vi.spyOn(crypto, "getRandomValues").mockImplementation((array) => {
        (array as Uint8Array).set(bytes);
        return array;
      });
      expect(pairingCode()).toBe(expected);
      spy.mockRestore();
    }
  });

  it("makes codes of 128 random bits that differ", () => {
    const codes = new Set(Array.from({ length: 200 }, pairingCode));
    expect(codes.size).toBe(200);
    for (const code of codes) expect(code).toMatch(/^[0-9a-z]{26}$/);
  });
});
