import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    alias: { "#wasm-source": fileURLToPath(new URL("./src/wasm-source.node.ts", import.meta.url)) },
  },
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.{ts,tsx}"],
    testTimeout: 20_000,
    env: {
      TETHER_WASM: fileURLToPath(new URL("./wasm/tether_web_bg.wasm", import.meta.url)),
      // The chat fixtures shared with the runtime's tests (tests/chat at the repository root).
      TETHER_CHAT_FIXTURES: fileURLToPath(new URL("../../../tests/chat/", import.meta.url)),
    },
  },
});
