// The task benchmark's extras: three declarative hook examples on the storefront, with the same
// local model (`cargo xtask bench --tasks` runs this after run.mjs; the travel example is an app
// of run.mjs).
//
// Environment: TETHER_LLM_URL, TETHER_LEPTOS_DIST, BENCH_OUT, optionally BENCH_EXTRA_MODES
// (default: BENCH_MODES, else constrained).

import { mkdirSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT, startServer, launchBrowser } from "../../tests/e2e/harness.mjs";
import { SHOP_TASKS as TASKS } from "./tasks.mjs";
import { startProxy, runTask, openPage, shopState, shopSetUp } from "./lib.mjs";

const SHOP = { tasks: TASKS, state: shopState, setUp: shopSetUp, harmless: ["navigate", "open_cart", "product_view", "cart_view", "size_guide"] };

const env = process.env;
const MODES = (env.BENCH_EXTRA_MODES || env.BENCH_MODES || "constrained").split(",").filter((m) => m !== "auto");
const OUT = env.BENCH_OUT ?? resolve(ROOT, "target/bench-tasks");
const log = (...parts) => console.error("[bench]", ...parts);

// Each hook example with the tasks it is tried on, and what must hold besides the task's check.
const HOOKS = [
  {
    file: "examples/hooks/post-tool-use-audit.yaml",
    tasks: ["add-red-mug", "add-3-tshirts", "price-tshirt"],
    check: (r) => (r.hooks.some((h) => h.event === "PostToolUse") || r.pageToolCalls === 0 ? [] : ["no PostToolUse audit"]),
  },
  {
    file: "examples/hooks/stop-prompt-marker.yaml",
    tasks: ["price-tshirt", "add-red-mug", "mug-volume"],
    check: (r) => [
      ...r.hooks.filter((h) => h.event === "Stop" && h.decidedBy !== "hook").map((h) => `a judge's answer was not read (${h.decidedBy}: ${h.reason ?? ""})`),
      ...(r.hooks.some((h) => h.event === "Stop") ? [] : ["the judge never ran"]),
    ],
  },
  {
    file: "examples/hooks/stop-command-jq.yaml",
    tasks: ["price-tshirt", "add-red-mug", "open-cart"],
    check: (r) =>
      r.status === "completed" && !r.answer.trimEnd().endsWith("Task complete.") ? ["completed without the marker"] : [],
  },
];

async function main() {
  mkdirSync(OUT, { recursive: true });
  const results = { hooks: {} };
  const proxy = await startProxy(env.TETHER_LLM_URL);
  const browser = await launchBrowser();
  for (const mode of MODES) {
    for (const hook of HOOKS) {
      const server = await startServer(env.TETHER_LEPTOS_DIST, "127.0.0.1:0", [
        "--model", proxy.url, "--tool-mode", mode, "--model-name", env.BENCH_MODEL_NAME ?? "qwen2.5-coder-1.5b-instruct",
        "--temperature", "0", "--max-tokens", "300", "--hooks", resolve(ROOT, hook.file),
      ]);
      const key = `${mode} ${hook.file}`;
      results.hooks[key] = [];
      try {
        for (const id of hook.tasks) {
          const task = TASKS.find((t) => t.id === id);
          const { page, frames, close } = await openPage(browser, server.port);
          const r = await runTask(page, frames, proxy.calls, task, SHOP, { fresh: true });
          r.problems.push(...hook.check(r));
          r.ok = r.problems.length === 0;
          log(`  ${key} ${r.ok ? "ok  " : "FAIL"} ${id} [${r.status}] ${r.seconds.toFixed(1)} s ${r.problems.join("; ")}`);
          results.hooks[key].push(r);
          await close();
        }
      } finally {
        server.stop();
      }
    }
  }
  await browser.close();
  proxy.stop();
  writeFileSync(resolve(OUT, "extras.json"), JSON.stringify(results, null, 1));
  console.log("\n| example | mode | ok | statuses | repeated identical calls run | empty answers |");
  console.log("| --- | --- | --- | --- | --- | --- |");
  for (const [key, runs] of Object.entries(results.hooks)) {
    const [mode, file] = key.split(" ");
    console.log(`| ${file.replace("examples/hooks/", "")} | ${mode} | ${runs.filter((r) => r.ok).length}/${runs.length} | ${runs.map((r) => r.status).join(", ")} | ${runs.reduce((n, r) => n + r.repeatedIdenticalCalls, 0)} | ${runs.filter((r) => r.emptyAnswer).length} |`);
  }
  console.log("\nFailures:");
  for (const [key, runs] of Object.entries(results.hooks)) for (const r of runs.filter((r) => !r.ok)) console.log(`- ${key} ${r.id}: ${r.problems.join("; ")}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
