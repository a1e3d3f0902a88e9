// A dev server that answers the wasm request with an HTML page (Vite without
// `optimizeDeps.exclude`): the error says what happened and names the fix. Its own file, so that
// no other test has loaded the runtime in this module instance.
import { expect, it } from "vitest";
import { loadTether } from "../src/index.js";

it("an HTML page instead of the wasm: the error names the Vite fix", async () => {
  const html = new TextEncoder().encode("<!doctype html><html><body>the app's index.html</body></html>");
  const error = await loadTether(html).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  expect(error?.message).toMatch(/^@tether\/react: the runtime's WebAssembly \(tether_web_bg.wasm\) did not load: /);
  expect(error?.message).toMatch(/expected magic word 00 61 73 6d, found 3c 21 64 6f/);
  expect(error?.message).toContain('add `optimizeDeps: { exclude: ["@tether/react"] }` to vite.config');
  // A failed load is not cached: the next try loads again.
  await expect(loadTether(html)).rejects.toThrow(/did not load/);
});
