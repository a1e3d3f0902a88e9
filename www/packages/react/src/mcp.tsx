// @tether/react/mcp: lets the user pair an MCP client with this page, so that the client can call
// the page's tools through `tether serve --expose-mcp` (docs/mcp.md). A subpath of its own: apps
// that do not offer it do not ship it.

import { useState } from "react";
import { useAgentContext } from "./hooks.js";

/** The context key the server reads a pairing from; it never reaches the model. */
export const MCP_PAIRING_KEY = "tether-mcp-pairing";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** A new pairing code: 128 random bits from `crypto.getRandomValues`, as 26 characters. */
export function pairingCode(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let bits = 0;
  let held = 0;
  let code = "";
  for (const byte of bytes) {
    held = (held << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      code += ALPHABET[(held >> bits) & 31];
    }
  }
  return code + ALPHABET[(held << (5 - bits)) & 31];
}

/** While mounted, the MCP client that presents `code` may use this page's tools. */
export function McpPairingEntry({ code }: { code: string }): null {
  useAgentContext({
    key: MCP_PAIRING_KEY,
    description: "MCP pairing (read by the server, never shown to the model)",
    value: { code },
  });
  return null;
}

/** Props of {@link McpPairing}. */
export interface McpPairingProps {
  /** The URL the MCP client connects to (default: `/mcp` on this page's origin). */
  endpoint?: string;
}

function defaultEndpoint(): string {
  const location = (globalThis as { location?: Location }).location;
  return location?.host ? `${location.protocol}//${location.host}/mcp` : "/mcp";
}

/**
 * A button that lets an MCP client use this page's tools: it makes a pairing code, shows it with
 * the endpoint to enter in the client, and a button that ends the pairing. Off until the user
 * clicks; a reload or unmount ends it. Calls that need approval are asked in this page.
 */
export function McpPairing({ endpoint }: McpPairingProps) {
  const [code, setCode] = useState<string | null>(null);
  if (code === null) {
    return (
      <button type="button" className="tether-mcp-pair" data-testid="mcp-pair" onClick={() => setCode(pairingCode())}>
        Let an MCP client use this page
      </button>
    );
  }
  return (
    <div className="tether-mcp-pairing" role="region" aria-label="MCP pairing" data-testid="mcp-pairing">
      <McpPairingEntry code={code} />
      <p>
        An MCP client may now use this page&apos;s tools. Give it the URL{" "}
        <code data-testid="mcp-endpoint">{endpoint ?? defaultEndpoint()}</code> and the header{" "}
        <code>
          Authorization: Bearer <span data-testid="mcp-code">{code}</span>
        </code>
        . Calls that need your approval are asked here.
      </p>
      <button type="button" data-testid="mcp-unpair" onClick={() => setCode(null)}>
        Stop sharing
      </button>
    </div>
  );
}
