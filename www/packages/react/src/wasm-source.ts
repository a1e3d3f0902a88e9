// Where the runtime's WebAssembly comes from in browsers and bundlers: `undefined` lets the
// wasm-bindgen glue use `new URL("tether_web_bg.wasm", import.meta.url)`, which Vite, webpack,
// Rollup and Parcel turn into an emitted asset (esbuild: copy `@tether/react/tether_web_bg.wasm`
// next to the bundle, or pass `wasm` to <TetherProvider>).
import type { InitInput } from "../wasm/tether_web.js";

export function defaultWasmSource(): InitInput | Promise<InitInput> | undefined {
  return undefined;
}
