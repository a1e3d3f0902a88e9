// Copies the runtime's wasm-bindgen output (`cargo xtask react-package` or `cargo xtask size` →
// target/pkg/tether-web, or the folder in TETHER_WEB_PKG) into the package's wasm/ folder: the wasm
// ships inside the npm package, nothing is fetched at install. It says which build it copied.
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const from = process.env.TETHER_WEB_PKG ?? resolve(pkg, "../../../target/pkg/tether-web");
const to = resolve(pkg, "wasm");
// (No `tether_web_bg.wasm.d.ts`: the build shortens the module's export names, and nothing imports the
// wasm directly; the glue does.)
const files = ["tether_web.js", "tether_web.d.ts", "tether_web_bg.wasm"];

const missing = files.filter((f) => !existsSync(resolve(from, f)));
if (missing.length) {
  if (files.every((f) => existsSync(resolve(to, f)))) {
    console.warn(`copy-wasm: ${from} has no ${missing.join(", ")}; keeping the copy in wasm/`);
    process.exit(0);
  }
  console.error(`copy-wasm: ${from} lacks ${missing.join(", ")}: build the runtime first (cargo xtask react-package builds it and packs this package)`);
  process.exit(1);
}
mkdirSync(to, { recursive: true });
for (const f of files) copyFileSync(resolve(from, f), resolve(to, f));
// wasm-bindgen declares `[Symbol.dispose]()`: make the declarations compile for apps whose `lib`
// stops before ES2025/esnext (TypeScript 5.2+ knows `esnext.disposable`).
const dts = resolve(to, "tether_web.d.ts");
const reference = '/// <reference lib="esnext.disposable" />\n';
const text = readFileSync(dts, "utf8");
if (text.includes("Symbol.dispose") && !text.startsWith(reference)) writeFileSync(dts, reference + text);
const kb = (f) => (statSync(resolve(to, f)).size / 1024).toFixed(1);
const built = statSync(resolve(from, "tether_web_bg.wasm")).mtime.toISOString();
console.log(`copy-wasm: ${files.length} files from ${from} (wasm ${kb("tether_web_bg.wasm")} KiB, built ${built})`);
