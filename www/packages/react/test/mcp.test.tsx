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

  it("makes codes of 128 random bits that differ", () => {
    const codes = new Set(Array.from({ length: 200 }, pairingCode));
    expect(codes.size).toBe(200);
    for (const code of codes) expect(code).toMatch(/^[0-9a-z]{26}$/);
  });
});
