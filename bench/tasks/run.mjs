// The task benchmark (`cargo xtask bench --tasks`): a real local model behind `tether serve`, the
// apps of tasks.mjs (the storefront with and without its instructions file, the README's to-do
// example, the travel example) in headless Chromium, each task checked on the page: in fresh
// sessions, and in one long conversation per seeded order of the app's tasks (each task starting
// wherever the last one left the page). A counting proxy in front of the model measures what is
// sent to it (prompt tokens read per task).
//
// Environment (set by xtask): TETHER_LLM_URL (the model server), TETHER_LEPTOS_DIST,
// TETHER_REACT_DIST, TETHER_TODO_REACT_DIST, TETHER_TODO_LEPTOS_DIST, TETHER_TRAVEL_BIN,
// TETHER_MAIL_BIN, TETHER_CALENDAR_BIN, BENCH_OUT (a folder for results.json and report.md), and
// optionally BENCH_APPS (shop, shop+instructions, shop-react, todo-react, todo-leptos, travel,
// mail, calendar), BENCH_MODES (native, text, constrained, auto), BENCH_SUITES (fresh,
// conversation, long: one conversation of BENCH_LONG_TASKS requests, 75 by default, for the
// context window), BENCH_ORDERS (the seeds of the conversations' orders; 0 is the order of
// tasks.mjs), BENCH_TASKS (task ids), BENCH_TASK_TIMEOUT_S, BENCH_MODEL_NAME, BENCH_SERVE_ARGS
// (more `tether serve` flags).
// `cargo xtask bench --tasks` sets them from its flags. Prints one table per app, mode and suite
// and a summary; writes BENCH_OUT/results.json and BENCH_OUT/report.md.

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { loadavg } from "node:os";
import { mkdirSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT, startServer, launchBrowser } from "../../tests/e2e/harness.mjs";
import { SHOP_TASKS, SHOP_ORDER, TODO_TASKS, TODO_ORDER, TRAVEL_TASKS, TRAVEL_ORDER, MAIL_TASKS, MAIL_ORDER, CALENDAR_TASKS, CALENDAR_ORDER, shuffled, markCopies } from "./tasks.mjs";
import { startProxy, runTask, openPage, shopState, shopSetUp, todoState, judge, modelCall } from "./lib.mjs";

const env = process.env;
const execFileAsync = promisify(execFile);
const list = (name, fallback) => (env[name] ? env[name].split(",").map((s) => s.trim()).filter(Boolean) : fallback);
const MODES = list("BENCH_MODES", ["constrained"]);
const APP_NAMES = list("BENCH_APPS", ["shop", "shop+instructions", "todo-react", "travel", "mail", "calendar"]);
const SUITES = list("BENCH_SUITES", ["fresh", "conversation"]);
const ORDERS = list("BENCH_ORDERS", ["0", "1", "2"]).map(Number);
const ONLY = list("BENCH_TASKS", null);
const OUT = env.BENCH_OUT ?? resolve(ROOT, "target/bench-tasks");
const MODEL_NAME = env.BENCH_MODEL_NAME ?? "qwen2.5-coder-1.5b-instruct";
const EXTRA_ARGS = env.BENCH_SERVE_ARGS ? env.BENCH_SERVE_ARGS.split(" ").filter(Boolean) : [];
// As `cargo xtask demo --local-model` serves the storefront: the same model settings.
const MODEL_ARGS = [...EXTRA_ARGS, "--model-name", MODEL_NAME, "--temperature", "0", "--max-tokens", "300"];

const SHOP = { tasks: SHOP_TASKS, order: SHOP_ORDER, state: shopState, setUp: shopSetUp, harmless: ["navigate", "open_cart", "product_view", "cart_view", "size_guide"] };
const TODO = { tasks: TODO_TASKS, order: TODO_ORDER, state: todoState, setUp: async () => {}, harmless: [], fresh: (task) => !task.needs?.length };

/** The apps: what each serves, with which flags. */
const APPS = {
  shop: { ...SHOP, dist: env.TETHER_LEPTOS_DIST, serve: [] },
  "shop+instructions": { ...SHOP, dist: env.TETHER_LEPTOS_DIST, serve: ["--instructions", resolve(ROOT, "examples/storefront-leptos/instructions.md")] },
  "shop-react": { ...SHOP, dist: env.TETHER_REACT_DIST, serve: [] },
  // The to-do list lives in the page only (no way to fill it but the agent): a fresh session runs
  // the tasks that start from an empty list.
  "todo-react": { ...TODO, dist: env.TETHER_TODO_REACT_DIST, serve: [] },
  "todo-leptos": { ...TODO, dist: env.TETHER_TODO_LEPTOS_DIST, serve: [] },
  travel: { tasks: TRAVEL_TASKS, order: TRAVEL_ORDER, harmless: ["find_trains"], travel: true, bin: env.TETHER_TRAVEL_BIN },
  // Run in process like the travel example (bench/travel-local's mail-local and calendar-local).
  mail: { tasks: MAIL_TASKS, order: MAIL_ORDER, harmless: ["open_email"], travel: true, bin: env.TETHER_MAIL_BIN },
  calendar: { tasks: CALENDAR_TASKS, order: CALENDAR_ORDER, harmless: ["open_event"], travel: true, bin: env.TETHER_CALENDAR_BIN },
};

const log = (...parts) => console.error("[bench]", ...parts);

// ---------------------------------------------------------------------------------------------
// Suites.

/** How many tasks the `long` suite's one conversation has: 75 requests, 150 messages at least. */
const LONG_TASKS = Number(env.BENCH_LONG_TASKS ?? 75);

function suites() {
  const out = [];
  for (const name of SUITES) {
    if (name === "conversation") for (const seed of ORDERS) out.push({ name: `conversation/${seed}`, seed });
    else if (name === "long") out.push({ name: "long", seed: "long" });
    else out.push({ name, seed: null });
  }
  return out;
}

/** The order of a suite's conversation: the app's order shuffled by the seed; for `long`, orders
 * of seeds 1, 2, … one after the other until it has [`LONG_TASKS`] tasks. */
function orderOf(app, seed) {
  if (seed !== "long") return shuffled(app.order, seed);
  const ids = [];
  for (let n = 1; ids.length < LONG_TASKS; n++) ids.push(...shuffled(app.order, n));
  return ids.slice(0, LONG_TASKS);
}

const pick = (app, ids) => ids.filter((id) => !ONLY || ONLY.includes(id)).map((id) => app.tasks.find((t) => t.id === id));

async function pageSuite(browser, server, proxy, app, suite) {
  const results = [];
  const record = (result, label) => {
    log(`  ${label} ${result.ok ? "ok  " : "FAIL"} ${result.id} ${result.seconds.toFixed(1)} s${result.wrongActions.length ? ` WRONG ${result.wrongActions.map((c) => `${c.name} ${JSON.stringify(c.args)}`).join(", ")}` : ""}${result.misleading ? ` ${result.misleading.toUpperCase()}` : ""} ${result.ok ? "" : result.problems.join("; ")}`);
    results.push(result);
  };
  if (suite.seed === null) {
    for (const task of pick(app, app.order).filter((t) => app.fresh?.(t) ?? true)) {
      const { page, frames, close } = await openPage(browser, server.port);
      record(await runTask(page, frames, proxy.calls, task, app, { fresh: true }), "fresh");
      await close();
    }
  } else {
    const { page, frames, close } = await openPage(browser, server.port);
    for (const task of pick(app, orderOf(app, suite.seed))) {
      record(await runTask(page, frames, proxy.calls, task, app, { fresh: false }), suite.name);
    }
    await close();
  }
  return results;
}

/** The travel example or the mail app: bench/travel-local, a conversation or each request on its own. */
async function travelSuite(proxy, app, mode, suite) {
  const tasks = suite.seed === null ? pick(app, app.order) : pick(app, orderOf(app, suite.seed));
  const args = [proxy.url, mode, ...(suite.seed === null ? [] : ["--conversation"]), ...tasks.map((t) => t.say)];
  // Not execFileSync: the counting proxy the example calls lives in this process's event loop.
  const { stdout: out } = await execFileAsync(app.bin, args, { encoding: "utf8", timeout: 3_600_000, maxBuffer: 64 << 20 });
  const lines = out.trim().split("\n").map((line) => JSON.parse(line));
  return lines.map((run, n) => {
    const task = tasks[n];
    const calls = proxy.calls.filter((c) => c.start >= run.startedMs && c.start <= run.endedMs);
    const result = judge(task, app, {
      before: run.before ?? {}, after: {}, answer: run.answer, bookings: run.bookings, effects: run.effects, timedOut: false, seconds: run.seconds, status: run.status,
      calledTools: run.calls, pageToolCalls: run.calls.length, repeatedIdenticalCalls: 0, modelCalls: calls.length,
      promptTokens: calls.map((c) => c.promptTokens).filter((x) => x != null), evaluatedTokens: calls.map((c) => c.evaluatedTokens).filter((x) => x != null),
      model: calls.map(modelCall),
    });
    log(`  ${suite.name} ${result.ok ? "ok  " : "FAIL"} ${task.id} ${result.seconds.toFixed(1)} s${result.wrongActions.length ? ` WRONG ${JSON.stringify(result.wrongActions)}` : ""}${result.misleading ? ` ${result.misleading.toUpperCase()}` : ""} ${result.ok ? "" : result.problems.join("; ")}`);
    return result;
  });
}

// ---------------------------------------------------------------------------------------------
// The report.

const median = (values) => {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const sum = (values) => values.reduce((a, b) => a + b, 0);

function summarise(results) {
  const ok = results.filter((r) => r.ok).length;
  return {
    tasks: results.length,
    ok,
    rate: results.length ? ok / results.length : 0,
    wrongActions: sum(results.map((r) => r.wrongActions.length)),
    tasksWithWrongActions: results.filter((r) => r.wrongActions.length).length,
    falseClaims: results.filter((r) => r.misleading === "claim").length,
    inventedFacts: results.filter((r) => r.misleading === "invented").length,
    tetherWords: results.filter((r) => r.tetherWords).length,
    copiedAnswers: results.filter((r) => r.copiedAnswer).length,
    emptyAnswers: results.filter((r) => r.emptyAnswer).length,
    repeatedIdenticalCalls: sum(results.map((r) => r.repeatedIdenticalCalls)),
    medianSeconds: median(results.map((r) => r.seconds)),
    evaluatedTokensPerTask: results.length ? sum(results.map((r) => sum(r.evaluatedTokens ?? []))) / results.length : 0,
    modelCallsPerTask: results.length ? sum(results.map((r) => r.modelCalls)) / results.length : 0,
    statuses: results.reduce((m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }), {}),
  };
}

const HEADER = ["app", "mode", "suite", "done", "wrong actions (tasks)", "false claims", "invented facts", "Tether's words", "copied answers", "empty answers", "repeated calls", "median s/task", "model calls/task", "prompt tokens read/task"];

function row(r) {
  const s = r.summary;
  return [
    r.app, r.mode, r.suite, `${s.ok}/${s.tasks} (${Math.round(s.rate * 100)} %)`, `${s.wrongActions} (${s.tasksWithWrongActions})`, s.falseClaims, s.inventedFacts,
    s.tetherWords, s.copiedAnswers ?? 0, s.emptyAnswers, s.repeatedIdenticalCalls, s.medianSeconds?.toFixed(1) ?? "-", s.modelCallsPerTask.toFixed(2), Math.round(s.evaluatedTokensPerTask),
  ];
}

const table = (rows) => [HEADER, HEADER.map(() => "---"), ...rows.map(row)].map((l) => `| ${l.join(" | ")} |`).join("\n");

function perTask(results) {
  const lines = ["| task | done | wrong actions | misleading | status | model calls | seconds | failure reason |", "| --- | --- | --- | --- | --- | --- | --- | --- |"];
  for (const r of results) {
    const reason = r.ok ? "" : r.problems.join("; ").replaceAll("|", "\\|").replaceAll("\n", " ");
    const wrong = r.wrongActions.map((c) => `${c.name} ${JSON.stringify(c.args)}`).join(", ").replaceAll("|", "\\|");
    lines.push(`| ${r.id} | ${r.ok ? "yes" : "no"} | ${wrong} | ${r.misleading ?? ""}${r.tetherWords ? " Tether's words" : ""}${r.copiedAnswer ? " copied answer" : ""} | ${r.status} | ${r.modelCalls} | ${r.seconds.toFixed(1)} | ${reason} |`);
  }
  return lines.join("\n");
}

const readLoad = () => loadavg().map((n) => n.toFixed(2)).join(" ");

async function main() {
  mkdirSync(OUT, { recursive: true });
  const proxy = await startProxy(env.TETHER_LLM_URL);
  const browser = await launchBrowser();
  const rows = [];
  const save = () => writeFileSync(resolve(OUT, "results.json"), JSON.stringify({ model: MODEL_NAME, loadavg: readLoad(), rows }, null, 1));
  for (const name of APP_NAMES) {
    const app = APPS[name];
    if (!app) throw new Error(`unknown app ${name}: ${Object.keys(APPS).join(", ")}`);
    for (const mode of MODES) {
      if (app.travel) {
        for (const suite of suites()) {
          log(`${name}, tool mode ${mode}, ${suite.name}`);
          const results = await travelSuite(proxy, app, mode, suite);
          rows.push({ app: name, mode, suite: suite.name, banner: "travel-local", results: suite.seed === null ? results : markCopies(results) });
          rows.at(-1).summary = summarise(rows.at(-1).results);
          save();
        }
        continue;
      }
      if (!app.dist) throw new Error(`no build for ${name}`);
      const server = await startServer(app.dist, "127.0.0.1:0", ["--model", proxy.url, "--tool-mode", mode, ...MODEL_ARGS, ...app.serve]);
      log(`${name}, tool mode ${mode}: ${server.banner()}`);
      try {
        for (const suite of suites()) {
          const results = await pageSuite(browser, server, proxy, app, suite).then((r) => (suite.seed === null ? r : markCopies(r)));
          rows.push({ app: name, mode, suite: suite.name, banner: server.banner(), summary: summarise(results), results });
          save();
        }
      } finally {
        writeFileSync(resolve(OUT, `server-${name}-${mode}.log`), server.log());
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
  say(`\nTask benchmark (${MODEL_NAME}, llama.cpp on CPU, temperature 0; load ${readLoad()})`);
  for (const r of rows) {
    say(`\n### ${r.app}, tool mode ${r.mode}, ${r.suite}\n\n${r.banner}\n`);
    say(perTask(r.results));
  }
  say("\n### Summary\n");
  say(table(rows));
  // Per app and mode, every suite together.
  const totals = [];
  for (const name of APP_NAMES) {
    for (const mode of MODES) {
      const results = rows.filter((r) => r.app === name && r.mode === mode).flatMap((r) => r.results);
      if (results.length) totals.push({ app: name, mode, suite: "all", summary: summarise(results) });
    }
  }
  say("\n### Per app, all suites\n");
  say(table(totals));
  say(`\nDetails: ${resolve(OUT, "results.json")}`);
  writeFileSync(resolve(OUT, "report.md"), report.join("\n") + "\n");
  console.log(`Report: ${resolve(OUT, "report.md")}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
