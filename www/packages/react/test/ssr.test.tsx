// @vitest-environment node
// Server rendering: no page, no `url`, no runtime. The provider renders its children with the
// empty state and connects nowhere (effects do not run on a server).

import { createElement } from "react";
import { renderToString } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { ChatPanel, TetherProvider, ToolInspector, useAgentTool } from "../src/index.js";

function Tools() {
  useAgentTool({ name: "note_add", description: "Add a note." }, () => "added");
  return null;
}

describe("server rendering", () => {
  it("renders the provider, a tool and the components without a url or a page", () => {
    expect((globalThis as { location?: unknown }).location).toBeUndefined();
    const html = renderToString(
      createElement(TetherProvider, null, createElement(Tools), createElement(ChatPanel), createElement(ToolInspector)),
    );
    expect(html).toContain('data-testid="chat-panel"');
    expect(html).toContain('data-testid="chat-input"');
    expect(html).toContain('data-testid="inspector-connection"');
  });
});
