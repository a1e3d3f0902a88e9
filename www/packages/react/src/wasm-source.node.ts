// Node (tests, server-side tools): read the wasm file that ships in the package.
import type { InitInput } from "../wasm/tether_web.js";

export async function defaultWasmSource(): Promise<InitInput> {
  const { readFile } = await import("node:fs/promises");
  return readFile(new URL("../wasm/tether_web_bg.wasm", import.meta.url));
}
