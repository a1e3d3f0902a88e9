// Packaging test: `npm pack` the package, install the tarball into a fresh Vite + React app in a
// temp dir (offline: from the tarball and npm's local cache, which the workspace install filled),
// type-check the app against the packed declarations, build it, and check that the wasm was
// emitted and that Node loads the runtime through the package's "node" condition.
//
// Usage: node scripts/pack-test.mjs [--keep]     (from www/packages/react, or `npm run pack-test`)

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(pkgDir, "../../..");
const keep = process.argv.includes("--keep");
const started = Date.now();
const step = (text) => console.log(`pack-test: ${text} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
const run = (cmd, args, cwd, options = {}) =>
  execFileSync(cmd, args, { cwd, stdio: options.capture ? "pipe" : "inherit", encoding: "utf8", env: { ...process.env, ...options.env } });

function fail(message) {
  console.error(`pack-test: FAILED: ${message}`);
  process.exit(1);
}

// The versions the workspace installed (and so npm's cache holds).
const version = (name) => JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")).version;

const work = mkdtempSync(join(tmpdir(), "tether-react-pack-"));
try {
  // 1. Build (copies the wasm in, compiles the TypeScript), then pack what was built.
  run("npm", ["run", "build", "--silent"], pkgDir);
  const packed = JSON.parse(run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", work], pkgDir, { capture: true }));
  const tarball = join(work, packed[0].filename);
  const files = packed[0].files.map((f) => f.path);
  step(`packed ${packed[0].filename}: ${files.length} files, ${(packed[0].size / 1024).toFixed(1)} KiB`);
  for (const needed of ["package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/wasm-source.node.js", "wasm/tether_web.js", "wasm/tether_web.d.ts", "wasm/tether_web_bg.wasm"]) {
    if (!files.includes(needed)) fail(`the tarball lacks ${needed}`);
  }
  const stray = files.filter((f) => /^(src|test|scripts)\//.test(f) || f.endsWith(".tgz"));
  if (stray.length) fail(`the tarball holds files it should not: ${stray.join(", ")}`);

  // 2. A fresh Vite app that uses the package.
  const app = join(work, "app");
  mkdirSync(join(app, "src"), { recursive: true });
  const deps = ["react", "react-dom", "zod"];
  const devDeps = ["vite", "typescript", "@types/react", "@types/react-dom"];
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify(
      {
        name: "tether-pack-test-app",
        private: true,
        type: "module",
        dependencies: { "@tether/react": `file:${tarball}`, ...Object.fromEntries(deps.map((d) => [d, version(d)])) },
        devDependencies: Object.fromEntries(devDeps.map((d) => [d, version(d)])),
      },
      null,
      2,
    ),
  );
  writeFileSync(join(app, "index.html"), `<!doctype html><div id="root"></div><script type="module" src="/src/main.tsx"></script>\n`);
  writeFileSync(
    join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022", lib: ["ES2022", "DOM"], module: "ESNext", moduleResolution: "Bundler",
        jsx: "react-jsx", strict: true, noEmit: true, skipLibCheck: false, types: [],
      },
      include: ["src"],
    }),
  );
  writeFileSync(
    join(app, "src/main.tsx"),
    `import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { z } from "zod";
import { ApprovalDialog, TetherProvider, useAgentTool } from "@tether/react";

const schema = z.object({ productId: z.enum(["mug-red", "mug-blue"]), quantity: z.number().int().min(1).default(1) });

function Cart() {
  const [items, setItems] = useState<string[]>([]);
  useAgentTool({ name: "cart_add", description: "Add a product to the cart.", schema }, ({ productId, quantity }) => {
    setItems((list) => [...list, ...Array<string>(quantity).fill(productId)]);
    return { items: items.length + quantity };
  });
  return <p>{items.length} items</p>;
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <TetherProvider url="ws://localhost:8787/ws">
      <Cart />
      <ApprovalDialog />
    </TetherProvider>
  </StrictMode>,
);
`,
  );
  const install = ["install", "--no-audit", "--no-fund", "--no-package-lock", "--ignore-scripts"];
  try {
    run("npm", [...install, "--offline"], app, { capture: true });
    step("installed the tarball offline (npm cache)");
  } catch (error) {
    console.warn(`pack-test: offline install failed (${String(error.stderr ?? error).split("\n")[0]}); retrying --prefer-offline`);
    run("npm", [...install, "--prefer-offline"], app);
    step("installed the tarball (--prefer-offline)");
  }

  // 3. Types, build, and the wasm in the output.
  run(join(app, "node_modules/.bin/tsc"), ["-p", "."], app);
  step("tsc --noEmit passed against the packed declarations");
  run(join(app, "node_modules/.bin/vite"), ["build", "--logLevel", "warn"], app);
  const assets = readdirSync(join(app, "dist/assets"));
  const wasm = assets.find((f) => f.endsWith(".wasm"));
  const js = assets.find((f) => f.endsWith(".js"));
  if (!wasm || !js) fail(`the build emitted no wasm or no JS: ${assets.join(", ")}`);
  if (!readFileSync(join(app, "dist/assets", js), "utf8").includes(wasm)) fail(`the bundle does not refer to ${wasm}`);
  step(`vite build: ${assets.join(", ")}`);

  // 4. Node resolves the "node" condition and loads the wasm shipped in the package.
  const out = run(
    process.execPath,
    ["--input-type=module", "-e", `import { loadTether } from "@tether/react"; const C = await loadTether(); const c = new C("ws://127.0.0.1:9/ws"); console.log(typeof c.registerTool, c.newOwner());`],
    app,
    { capture: true },
  );
  if (out.trim() !== "function 1") fail(`Node could not load the runtime: ${out}`);
  step("Node loaded the runtime from the package");
  console.log("pack-test: 1 passed, 0 failed");
} finally {
  if (keep) console.log(`pack-test: kept ${work}`);
  else if (existsSync(work)) rmSync(work, { recursive: true, force: true });
}
