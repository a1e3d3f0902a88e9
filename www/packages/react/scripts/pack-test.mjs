// Packaging test, on what the README has a newcomer do: `cargo xtask react-package` packs the
// package standalone (a copy of this folder, its own `npm install`, `npm pack`), and a Vite app
// (examples/todo-react) installs the tarball and builds (`tsc --noEmit && vite build`). This
// script then checks what came out: the tarball holds what it must and nothing else, the app's
// bundle refers to the wasm it emitted, and Node loads the runtime through the package's "node"
// condition from the app's node_modules.
//
// Usage: node scripts/pack-test.mjs [TARBALL] [APP_DIR]
//   (defaults: target/npm/tether-react-0.1.0.tgz and examples/todo-react; `cargo xtask test` runs
//   the packing and the app's install and build first)

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(pkgDir, "../../..");
const tarball = resolve(process.argv[2] ?? join(root, "target/npm/tether-react-0.1.0.tgz"));
const app = resolve(process.argv[3] ?? join(root, "examples/todo-react"));

function fail(message) {
  console.error(`pack-test: FAILED: ${message}`);
  process.exit(1);
}

if (!existsSync(tarball)) fail(`no ${tarball}: run \`cargo xtask react-package\` first`);
if (!existsSync(join(app, "dist/assets"))) fail(`no ${app}/dist/assets: run \`npm install && npm run build\` in ${app} first`);

// 1. The tarball: what the app needs, and no sources, tests or scripts.
const files = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" })
  .split("\n")
  .filter(Boolean)
  .map((f) => f.replace(/^package\//, ""));
for (const needed of ["package.json", "README.md", "styles.css", "dist/index.js", "dist/index.d.ts", "dist/wasm-source.node.js", "wasm/tether_web.js", "wasm/tether_web.d.ts", "wasm/tether_web_bg.wasm"]) {
  if (!files.includes(needed)) fail(`the tarball lacks ${needed}`);
}
const stray = files.filter((f) => /^(src|test|scripts|node_modules)\//.test(f) || f.endsWith(".tgz"));
if (stray.length) fail(`the tarball holds files it should not: ${stray.join(", ")}`);
console.log(`pack-test: ${tarball}: ${files.length} files`);

// 2. The app installed that tarball and its bundle refers to the wasm it emitted.
const installed = JSON.parse(readFileSync(join(app, "node_modules/@tether/react/package.json"), "utf8"));
if (installed.name !== "@tether/react") fail(`${app} has no @tether/react installed`);
const assets = readdirSync(join(app, "dist/assets"));
const wasm = assets.find((f) => f.endsWith(".wasm"));
const js = assets.filter((f) => f.endsWith(".js"));
if (!wasm || !js.length) fail(`the app's build emitted no wasm or no JS: ${assets.join(", ")}`);
if (!js.some((f) => readFileSync(join(app, "dist/assets", f), "utf8").includes(wasm))) fail(`the app's bundle does not refer to ${wasm}`);
console.log(`pack-test: ${app}/dist/assets: ${assets.join(", ")}`);

// 3. Node resolves the "node" condition and loads the wasm shipped in the package.
const out = execFileSync(
  process.execPath,
  ["--input-type=module", "-e", `import { loadTether } from "@tether/react"; const C = await loadTether(); const c = new C("ws://127.0.0.1:9/ws"); console.log(typeof c.registerTool, c.newOwner());`],
  { cwd: app, encoding: "utf8" },
);
if (out.trim() !== "function 1") fail(`Node could not load the runtime: ${out}`);
console.log("pack-test: Node loaded the runtime from the installed package");
console.log("pack-test: 1 passed, 0 failed");
