import init, { TetherClient } from "../wasm/tether_web.js";
import type { InitInput } from "../wasm/tether_web.js";
import { defaultWasmSource } from "#wasm-source";

/** Where to load the runtime's WebAssembly from: a URL, a `Response`, bytes or a compiled module. */
export type WasmSource = InitInput | Promise<InitInput>;

let loading: Promise<typeof TetherClient> | undefined;

/**
 * Why the runtime's WebAssembly did not load, and what fixes it. The usual cause is a dev server
 * that answers the `.wasm` request with an HTML page (Vite pre-bundles the package unless told
 * not to, and the glue's `new URL("tether_web_bg.wasm", import.meta.url)` then points nowhere).
 */
export function wasmLoadError(error: unknown): Error {
  const reason = error instanceof Error ? error.message : String(error);
  const notWasm = /magic word|magic number|MIME type|expected magic|CompileError|not a wasm|Failed to fetch|404/i.test(reason);
  const hint = notWasm
    ? " The server did not answer with the .wasm file (an HTML page, most likely). With Vite, add " +
      '`optimizeDeps: { exclude: ["@tether/react"] }` to vite.config and restart the dev server; with esbuild, copy ' +
      "node_modules/@tether/react/wasm/tether_web_bg.wasm next to your bundle or pass `wasm` to <TetherProvider> " +
      '(see the package README, "Bundlers").'
    : "";
  return new Error(`@tether/react: the runtime's WebAssembly (tether_web_bg.wasm) did not load: ${reason}.${hint}`, { cause: error });
}

/**
 * Loads the WebAssembly runtime once per page and resolves to the `TetherClient` class.
 * Later calls (any source) return the same promise. `<TetherProvider>` calls it for you.
 */
export function loadTether(source?: WasmSource): Promise<typeof TetherClient> {
  loading ??= (async () => {
    const input = await (source ?? defaultWasmSource());
    await init(input === undefined ? undefined : { module_or_path: input });
    return TetherClient;
  })().catch((error: unknown) => {
    loading = undefined;
    throw wasmLoadError(error);
  });
  return loading;
}
