// Bundle size, side by side: the same minimal app (a provider and one tool with a zod schema)
// on @tether/react and on @copilotkit/react-core (its v2 headless entry), bundled with esbuild
// (minified, ESM, browser) in the same run; gzip -9 sizes.
//
// "Library" rows leave out what both apps share and any React app already has (react,
// react-dom, zod): they are the cost of the agent library. "Whole app" rows include everything.
//
// Usage: node www/size/compare.mjs [--json]   (after `npm run react:build`; installs
// www/size's own dependencies, CopilotKit among them, on first use)

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const build = join(here, ".build");
const asJson = process.argv.includes("--json");

// www/size has its own install (not a workspace): CopilotKit's ~900 packages stay out of the
// workspace's node_modules.
const lock = join(here, "package-lock.json");
const stamp = join(here, "node_modules/.package-lock.json");
if (!existsSync(stamp) || readFileSync(stamp, "utf8").length === 0) {
  console.error("size: installing www/size's dependencies (@copilotkit/react-core, react, zod)…");
  execFileSync("npm", [existsSync(lock) ? "ci" : "install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund"], {
    cwd: here,
    stdio: ["ignore", "ignore", "inherit"],
  });
}

const tetherPkg = join(root, "node_modules/@tether/react");
if (!existsSync(join(tetherPkg, "dist/index.js")) || !existsSync(join(tetherPkg, "wasm/tether_web_bg.wasm"))) {
  console.error("size: @tether/react is not built: run `npm run react:build` (after `cargo xtask size`)");
  process.exit(1);
}

const esbuild = await import("esbuild");
const version = (dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;

rmSync(build, { recursive: true, force: true });
mkdirSync(build, { recursive: true });

const TOOL = `{ name: "cart_add", description: "Add a product to the cart.", schema }`;
const apps = {
  tether: `
import { createRoot } from "react-dom/client";
import { z } from "zod";
import { TetherProvider, useAgentTool } from "@tether/react";
const schema = z.object({ productId: z.enum(["mug-red", "mug-blue"]) });
function Cart() {
  useAgentTool(${TOOL}, ({ productId }) => ({ added: productId }));
  return null;
}
createRoot(document.getElementById("root")).render(<TetherProvider url="ws://localhost:8787/ws"><Cart /></TetherProvider>);
`,
  copilotkit: `
import { createRoot } from "react-dom/client";
import { z } from "zod";
import { CopilotKitCoreReact, useFrontendTool } from "@copilotkit/react-core/v2/headless";
import { CopilotKitContext } from "@copilotkit/react-core/v2/context";
const schema = z.object({ productId: z.enum(["mug-red", "mug-blue"]) });
const copilotkit = new CopilotKitCoreReact({ runtimeUrl: "/api/copilotkit" });
function Cart() {
  useFrontendTool({ name: "cart_add", description: "Add a product to the cart.", parameters: schema, handler: async ({ productId }) => ({ added: productId }) });
  return null;
}
createRoot(document.getElementById("root")).render(
  <CopilotKitContext.Provider value={{ copilotkit, executingToolCallIds: new Set() }}><Cart /></CopilotKitContext.Provider>,
);
`,
  // The package's own code, without the wasm-bindgen glue: what the minimal app uses of it…
  "tether-wrapper": `export { TetherProvider, useAgentTool } from "@tether/react";`,
  // …and all of it (hooks, approval dialog, chat panel, inspector).
  "tether-wrapper-all": `export * from "@tether/react";`,
  "tether-glue": `export * from "@tether/react/runtime"; export { default } from "@tether/react/runtime";`,
};

const SHARED = ["react", "react-dom", "react-dom/client", "react/jsx-runtime", "zod"];
const glueExternal = {
  name: "glue-external",
  setup(b) {
    b.onResolve({ filter: /wasm\/tether_web\.js$/ }, (args) => ({ path: args.path, external: true }));
  },
};

const gz = (bytes) => gzipSync(bytes, { level: 9 }).length;

async function bundle(name, { external = SHARED, plugins = [] } = {}) {
  const entry = join(build, `${name}.jsx`);
  writeFileSync(entry, apps[name]);
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": '"production"' },
    external,
    plugins,
    write: false,
    outdir: join(build, "out"),
    logLevel: "error",
  });
  const js = result.outputFiles.filter((f) => f.path.endsWith(".js")).map((f) => f.contents);
  const css = result.outputFiles.filter((f) => f.path.endsWith(".css")).map((f) => f.contents);
  const sum = (files, f) => files.reduce((n, c) => n + f(c), 0);
  return { raw: sum(js, (c) => c.length), gzip: sum(js, gz), cssGzip: sum(css, gz) };
}

const wasmBytes = readFileSync(join(tetherPkg, "wasm/tether_web_bg.wasm"));
const wasm = { raw: wasmBytes.length, gzip: gz(wasmBytes) };
const wrapper = await bundle("tether-wrapper", { plugins: [glueExternal] });
const wrapperAll = await bundle("tether-wrapper-all", { plugins: [glueExternal] });
const glue = await bundle("tether-glue");
const tether = await bundle("tether");
const copilotkit = await bundle("copilotkit");
const tetherWhole = await bundle("tether", { external: [] });
const copilotkitWhole = await bundle("copilotkit", { external: [] });

const kb = (n) => `${(n / 1000).toFixed(1)} kB`;
const report = {
  versions: {
    "@tether/react": version(tetherPkg),
    "@copilotkit/react-core": version(join(here, "node_modules/@copilotkit/react-core")),
    react: version(join(here, "node_modules/react")),
    zod: version(join(here, "node_modules/zod")),
    esbuild: esbuild.version,
  },
  tether: {
    wrapperGzip: wrapper.gzip,
    wrapperAllGzip: wrapperAll.gzip,
    glueGzip: glue.gzip,
    appJsGzip: tether.gzip,
    wasmGzip: wasm.gzip,
    wasmRaw: wasm.raw,
    libraryTotalGzip: tether.gzip + wasm.gzip,
    wholeAppGzip: tetherWhole.gzip + wasm.gzip,
  },
  copilotkit: {
    appJsGzip: copilotkit.gzip,
    appCssGzip: copilotkit.cssGzip,
    libraryTotalGzip: copilotkit.gzip + copilotkit.cssGzip,
    wholeAppGzip: copilotkitWhole.gzip + copilotkitWhole.cssGzip,
  },
};
mkdirSync(join(here, "out"), { recursive: true });
writeFileSync(join(here, "out/report.json"), JSON.stringify(report, null, 2) + "\n");
rmSync(build, { recursive: true, force: true });

if (asJson) {
  console.log(JSON.stringify(report, null, 2));
} else {
  const t = report.tether;
  const c = report.copilotkit;
  const rows = [
    ["", "@tether/react", "@copilotkit/react-core v2 headless"],
    ["wrapper JS (used / all exports)", `${kb(t.wrapperGzip)} / ${kb(t.wrapperAllGzip)}`, ""],
    ["wasm-bindgen glue JS", kb(t.glueGzip), ""],
    ["app JS (library, without react/zod)", kb(t.appJsGzip), kb(c.appJsGzip)],
    ["wasm", `${kb(t.wasmGzip)} (${kb(t.wasmRaw)} raw)`, ""],
    ["library total (JS + wasm + CSS)", kb(t.libraryTotalGzip), kb(c.libraryTotalGzip)],
    ["whole app (with react, react-dom, zod)", kb(t.wholeAppGzip), kb(c.wholeAppGzip)],
  ];
  const width = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  console.log(`gzip -9, esbuild ${esbuild.version} --minify; versions: ${JSON.stringify(report.versions)}`);
  for (const r of rows) console.log(r.map((cell, i) => cell.padEnd(width[i])).join("  |  "));
  console.log(`(written to www/size/out/report.json)`);
}
