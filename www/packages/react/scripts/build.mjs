// Builds the package: copies the runtime's wasm in (scripts/copy-wasm.mjs), then compiles the
// TypeScript with the package's own `typescript` devDependency (or, in the Tether checkout, the
// npm workspace's). Needs nothing else from the repository, so a copy of this folder builds and
// packs on its own: `npm install && npm pack`.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
execFileSync(process.execPath, [resolve(pkg, "scripts/copy-wasm.mjs")], { stdio: "inherit" });
let tsc;
try {
  tsc = createRequire(resolve(pkg, "package.json")).resolve("typescript/bin/tsc");
} catch {
  console.error("build: TypeScript is not installed here; run `npm install` in this folder first (it is a devDependency)");
  process.exit(1);
}
execFileSync(process.execPath, [tsc, "-p", resolve(pkg, "tsconfig.build.json")], { stdio: "inherit", cwd: pkg });
