// The task benchmark (`cargo xtask bench --tasks`): a real local model behind `tether serve`,
// the storefronts in headless Chromium, the tasks of tasks.mjs each checked on the page, in fresh
// sessions and in one long conversation, for each tool mode side by side. A counting proxy in
// front of the model measures what is sent to it (prompt tokens per model call).
//
// Environment (set by xtask): TETHER_LLM_URL (the model server), TETHER_LEPTOS_DIST,
// TETHER_REACT_DIST, BENCH_OUT (a folder for results.json), and optionally BENCH_MODES
// (native,text,constrained,auto), BENCH_APPS (leptos,react), BENCH_SUITES (fresh,conversation),
// BENCH_TASKS (task ids), BENCH_TASK_TIMEOUT_S, BENCH_SERVE_ARGS (more `tether serve` flags); `cargo xtask bench --tasks` sets them from its flags
// (--modes, --apps, --suites, --only, --task-timeout). Prints one table per mode and suite (task,
// success, status, tool calls, model calls, seconds, failure reason) and a summary; writes
// BENCH_OUT/results.json and BENCH_OUT/report.md.

import { loadavg } from "node:os";
import { mkdirSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT, startServer, launchBrowser } from "../../tests/e2e/harness.mjs";
import { TASKS, CONVERSATION } from "./tasks.mjs";
import { startProxy, runTask, openPage } from "./lib.mjs";

const env = process.env;
const list = (name, fallback) => (env[name] ? env[name].split(",").map((s) => s.trim()).filter(Boolean) : fallback);
const MODES = list("BENCH_MODES", ["native", "text", "constrained", "auto"]);
const APPS = list("BENCH_APPS", ["leptos"]);
const SUITES = list("BENCH_SUITES", ["fresh", "conversation"]);
const ONLY = list("BENCH_TASKS", null);
const OUT = env.BENCH_OUT ?? resolve(ROOT, "target/bench-tasks");
const DISTS = { leptos: env.TETHER_LEPTOS_DIST, react: env.TETHER_REACT_DIST };
// As `cargo xtask demo --local-model` serves the storefront: the same model settings and the
// storefront's instructions (the system prompt).
const EXTRA_ARGS = env.BENCH_SERVE_ARGS ? env.BENCH_SERVE_ARGS.split(" ").filter(Boolean) : [];
const MODEL_ARGS = [
  ...EXTRA_ARGS,
  "--model-name", "qwen2.5-coder-1.5b-instruct", "--temperature", "0", "--max-tokens", "300",
  "--instructions", resolve(ROOT, "examples/storefront-leptos/instructions.md"),
];

const log = (...parts) => console.error("[bench]", ...parts);

// ---------------------------------------------------------------------------------------------
// Suites and the report.

async function suite(browser, server, proxy, name) {
  const results = [];
  if (name === "fresh") {
    for (const task of TASKS.filter((t) => !ONLY || ONLY.includes(t.id))) {
      const { page, frames, close } = await openPage(browser, server.port);
      const result = await runTask(page, frames, proxy.calls, task);
      log(`  fresh ${result.ok ? "ok  " : "FAIL"} ${task.id} ${result.seconds.toFixed(1)} s ${result.ok ? "" : result.problems.join("; ")}`);
      results.push(result);
      await close();
    }
  } else {
    const { page, frames, close } = await openPage(browser, server.port);
    for (const id of CONVERSATION.filter((id) => !ONLY || ONLY.includes(id))) {
      const task = TASKS.find((t) => t.id === id);
      const result = await runTask(page, frames, proxy.calls, task);
      log(`  conversation ${result.ok ? "ok  " : "FAIL"} ${task.id} ${result.seconds.toFixed(1)} s ${result.ok ? "" : result.problems.join("; ")}`);
      results.push(result);
    }
    await close();
  }
  return results;
}

const median = (values) => {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

function summarise(results) {
  const ok = results.filter((r) => r.ok).length;
  return {
    tasks: results.length,
    ok,
    rate: results.length ? ok / results.length : 0,
    medianSeconds: median(results.map((r) => r.seconds)),
    toolCallsPerTask: results.length ? results.reduce((n, r) => n + r.pageToolCalls, 0) / results.length : 0,
    medianPromptTokensPerCall: median(results.flatMap((r) => r.promptTokens)),
    evaluatedTokensPerTask: results.length ? results.reduce((n, r) => n + (r.evaluatedTokens ?? []).reduce((a, b) => a + b, 0), 0) / results.length : 0,
    modelCallsPerTask: results.length ? results.reduce((n, r) => n + r.modelCalls, 0) / results.length : 0,
    emptyAnswers: results.filter((r) => r.emptyAnswer).length,
    repeatedIdenticalCalls: results.reduce((n, r) => n + r.repeatedIdenticalCalls, 0),
    statuses: results.reduce((m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }), {}),
  };
}

function table(rows) {
  const header = ["app", "mode", "suite", "success", "median s/task", "tool calls/task", "model calls/task", "prompt tokens/call (median)", "prompt tokens read/task (not cached)", "empty answers", "repeated identical calls run"];
  const lines = [header, header.map(() => "---")];
  for (const r of rows) {
    const s = r.summary;
    lines.push([
      r.app,
      r.mode,
      r.suite,
      `${s.ok}/${s.tasks} (${Math.round(s.rate * 100)} %)`,
      s.medianSeconds?.toFixed(1) ?? "-",
      s.toolCallsPerTask.toFixed(2),
      s.modelCallsPerTask.toFixed(2),
      s.medianPromptTokensPerCall ?? "-",
      Math.round(s.evaluatedTokensPerTask),
      s.emptyAnswers,
      s.repeatedIdenticalCalls,
    ]);
  }
  return lines.map((l) => `| ${l.join(" | ")} |`).join("\n");
}

async function main() {
  mkdirSync(OUT, { recursive: true });
  const proxy = await startProxy(env.TETHER_LLM_URL);
  const browser = await launchBrowser();
  const rows = [];
  for (const app of APPS) {
    for (const mode of MODES) {
      const server = await startServer(DISTS[app], "127.0.0.1:0", ["--model", proxy.url, "--tool-mode", mode, ...MODEL_ARGS]);
      log(`${app}, tool mode ${mode}: ${server.banner()}`);
      try {
        for (const name of SUITES) {
          const results = await suite(browser, server, proxy, name);
          const row = { app, mode, suite: name, banner: server.banner(), summary: summarise(results), results };
          rows.push(row);
          writeFileSync(resolve(OUT, "results.json"), JSON.stringify({ loadavg: readLoad(), rows }, null, 1));
        }
      } finally {
        server.stop();
      }
    }
  }
  await browser.close();
  proxy.stop();
  const report = [];
  const say = (line = "") => {
    console.log(line);
    report.push(line);
  };
  say(`\nTask benchmark (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama.cpp on CPU, temperature 0; load ${readLoad()})`);
  for (const row of rows) {
    say(`\n### ${row.app}, tool mode ${row.mode}, ${row.suite}\n\n${row.banner}\n`);
    say(perTask(row.results));
  }
  say("\n### Summary\n");
  say(table(rows));
  say(`\nDetails: ${resolve(OUT, "results.json")}`);
  writeFileSync(resolve(OUT, "report.md"), report.join("\n") + "\n");
  console.log(`Report: ${resolve(OUT, "report.md")}`);
}

/** One line per task: what it asked for, whether it succeeded, and why not. */
function perTask(results) {
  const lines = [
    "| task | success | status | tool calls | model calls | seconds | failure reason |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of results) {
    const reason = r.ok ? "" : r.problems.join("; ").replaceAll("|", "\\|").replaceAll("\n", " ");
    lines.push(`| ${r.id} | ${r.ok ? "yes" : "no"} | ${r.status} | ${r.pageToolCalls} | ${r.modelCalls} | ${r.seconds.toFixed(1)} | ${reason} |`);
  }
  return lines.join("\n");
}

const readLoad = () => loadavg().map((n) => n.toFixed(2)).join(" ");

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
