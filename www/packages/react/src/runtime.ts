import init, { TetherClient } from "../wasm/tether_web.js";
import type { InitInput } from "../wasm/tether_web.js";
import { defaultWasmSource } from "#wasm-source";

/** Where to load the runtime's WebAssembly from: a URL, a `Response`, bytes or a compiled module. */
export type WasmSource = InitInput | Promise<InitInput>;

let loading: Promise<typeof TetherClient> | undefined;

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
    throw error;
  });
  return loading;
}
