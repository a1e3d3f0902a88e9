// Shared by the task benchmark (run.mjs) and its extras (extras.mjs): a counting proxy in front
// of the model, the apps' state, setting a task up through the UI, running and judging one task.

import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { recordFrames, say } from "../../tests/e2e/harness.mjs";
import { misleads, tetherWords } from "./tasks.mjs";

export const TASK_TIMEOUT_MS = Number(process.env.BENCH_TASK_TIMEOUT_S ?? 240) * 1000;

// ---------------------------------------------------------------------------------------------
// The counting proxy: every model call, with its prompt tokens (the server's own count).

export function startProxy(target) {
  const calls = [];
  // Every request body as sent, one JSON per line, to replay against a model server by hand
  // (`requests.jsonl` next to the report).
  const dump = process.env.BENCH_OUT ? path.join(process.env.BENCH_OUT, "requests.jsonl") : null;
  if (dump) fs.mkdirSync(process.env.BENCH_OUT, { recursive: true });
  const upstream = new URL(target);
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (c) => chunks.push(c));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      if (dump) fs.appendFileSync(dump, body.toString().replace(/\n/g, " ") + "\n");
      const call = { start: Date.now(), end: null, promptTokens: null, evaluatedTokens: null, completionTokens: null, status: null, messages: null, reply: null };
      try {
        // What the model read (the schema of a constrained turn is left out: it is large and
        // follows from the tools) and, below, what it wrote: results.json keeps both per task.
        call.messages = JSON.parse(body.toString()).messages ?? null;
      } catch {}
      calls.push(call);
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, path: request.url, method: request.method, headers: { ...request.headers, host: upstream.host } },
        (reply) => {
          call.status = reply.statusCode;
          response.writeHead(reply.statusCode, reply.headers);
          let text = "";
          reply.on("data", (c) => {
            text += c;
            response.write(c);
          });
          reply.on("end", () => {
            call.end = Date.now();
            readUsage(text, call);
            call.reply = readReply(text);
            response.end();
          });
        },
      );
      forward.on("error", (error) => {
        call.end = Date.now();
        call.status = 502;
        response.writeHead(502).end(String(error));
      });
      forward.end(body);
    });
  });
  return new Promise((done) =>
    server.listen(0, "127.0.0.1", () => done({ url: `http://127.0.0.1:${server.address().port}`, calls, stop: () => server.close() })),
  );
}

/** The reply's text: the message of a JSON reply, or the content deltas of an SSE stream joined. */
function readReply(text) {
  if (text.startsWith("{")) {
    try {
      const value = JSON.parse(text);
      return value.choices?.[0]?.message?.content ?? null;
    } catch {
      return null;
    }
  }
  let out = "";
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    try {
      const delta = JSON.parse(line.slice(5).trim()).choices?.[0]?.delta;
      out += delta?.content ?? "";
      for (const call of delta?.tool_calls ?? []) out += JSON.stringify(call.function ?? call);
    } catch {}
  }
  return out;
}

/** Reads llama.cpp's `timings`/`usage` from a JSON reply or the last SSE event that has them. */
function readUsage(text, call) {
  const events = text.startsWith("{") ? [text] : text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim());
  for (const event of events) {
    try {
      const value = JSON.parse(event);
      if (value.usage?.prompt_tokens != null) {
        call.promptTokens = value.usage.prompt_tokens;
        call.completionTokens = value.usage.completion_tokens;
      } else if (value.timings?.prompt_n != null) {
        call.promptTokens = value.timings.prompt_n + (value.timings.cache_n ?? 0);
        call.completionTokens = value.timings.predicted_n;
      }
      // The prompt tokens the server had to read (not in its cache): what the machine's speed
      // does not change, unlike the seconds.
      if (value.timings?.prompt_n != null) call.evaluatedTokens = value.timings.prompt_n;
    } catch {}
  }
}

// ---------------------------------------------------------------------------------------------
// The page: state, setup through the UI, one task.

const DONE = '[data-testid="chat-message"][data-status]:not([data-status=""])';

/** The body of a function of `selector` that finds the finished answer to the user's last
 * message: the first line matching `selector` after the last user line, once that line is not
 * one that was there before the message was sent (`data-bench-seen`). (Counting answers does not
 * work: the chat keeps its last 50 lines only.) */
const FIND_ANSWER = `
  const users = document.querySelectorAll('[data-testid="chat-panel"] li.tether-line-user');
  const asked = users[users.length - 1];
  if (!asked || asked.dataset.benchSeen) return null;
  for (let line = asked.nextElementSibling; line; line = line.nextElementSibling) {
    if (line.matches(selector)) return line;
  }
  return null;`;

/** The storefront's state: the cart (the badge's `data-cart`), the path, the last order number. */
export async function shopState(page) {
  return page.evaluate(() => {
    const badge = document.querySelector('[data-testid="cart-badge"]');
    const cart = {};
    for (const pair of (badge?.getAttribute("data-cart") ?? "").split(" ").filter(Boolean)) {
      const [id, quantity] = pair.split("=");
      cart[id] = Number(quantity);
    }
    const order = document.querySelector('[data-testid="order-number"]')?.textContent.trim() || null;
    return { cart, path: location.pathname, order };
  });
}

/** The to-do example's state: the items on the list, in order. */
export async function todoState(page) {
  return { todos: (await page.getByTestId("todo").allTextContents()).map((t) => t.trim()), path: await page.evaluate(() => location.pathname) };
}

/** Brings the storefront's cart up to `needs` and the page to `at` with clicks, as a user would. */
export async function shopSetUp(page, task) {
  const needs = task.needs ?? {};
  let state = await shopState(page);
  const missing = Object.entries(needs).filter(([id, q]) => (state.cart[id] ?? 0) < q);
  if (missing.length) {
    if (state.path !== "/") await page.locator("header a").first().click();
    for (const [id, q] of missing) {
      for (let n = state.cart[id] ?? 0; n < q; n++) {
        await page.locator(`[data-testid="product-card"][data-product="${id}"] button`).click();
      }
    }
  }
  state = await shopState(page);
  const go = task.at ?? (task.away && state.path === task.away ? "/" : null);
  if (go && state.path !== go) {
    if (go === "/cart") await page.locator("header .cart-link").click();
    else if (go === "/") await page.locator("header a").first().click();
    else {
      // A product's page: from the grid, as a user would.
      if (state.path !== "/") await page.locator("header a").first().click();
      await page.locator(`[data-testid="product-card"][data-product="${go.split("/").pop()}"] a`).first().click();
    }
    await page.waitForFunction((path) => location.pathname === path, go);
  }
}

/**
 * Sends the task's request, answers approval dialogs (`task.approve`: approved only when true) and the storefront's size
 * question (`task.size`, default M), waits for the answer, and judges it: done, the calls the
 * page received that the task did not ask for (wrong actions), a misleading answer, Tether's
 * own words in it. `fresh`: bring the page to the task's start first (a conversation starts
 * wherever the last task left it).
 */
export async function runTask(page, frames, calls, task, app, { fresh }) {
  if (fresh) await app.setUp(page, task);
  const before = await app.state(page);
  const firstFrame = frames.length;
  const firstCall = calls.length;
  const started = Date.now();
  await page.evaluate(() => document.querySelectorAll('[data-testid="chat-panel"] li').forEach((li) => (li.dataset.benchSeen = "1")));
  await say(page, task.say);
  const approvals = [];
  const questions = [];
  let timedOut = false;
  for (;;) {
    const remaining = TASK_TIMEOUT_MS - (Date.now() - started);
    if (remaining <= 0) {
      timedOut = true;
      break;
    }
    try {
      await page.waitForFunction(
        ([find, selector]) =>
          new Function("selector", find)(selector) ||
          document.querySelector('[data-testid="approval-dialog"]') ||
          document.querySelector('[data-testid="size-question"]'),
        [FIND_ANSWER, DONE],
        { timeout: remaining },
      );
    } catch {
      timedOut = true;
      break;
    }
    const question = page.getByTestId("size-question");
    if (await question.count()) {
      // cart_add asks which size of the T-shirt: the user answers, as a person would.
      questions.push(task.size ?? "M");
      await page.locator(`[data-testid="size-choice"][data-size="${task.size ?? "M"}"]`).first().click();
      await question.waitFor({ state: "detached" });
      continue;
    }
    const dialog = page.getByTestId("approval-dialog");
    if (await dialog.count()) {
      const risk = (await page.getByTestId("approval-risk").textContent()).trim();
      // The user approves what the task asked for, and nothing else.
      const approve = task.approve === true;
      approvals.push({ risk, approve });
      await page.getByTestId(approve ? "approval-approve" : "approval-reject").click();
      await dialog.waitFor({ state: "detached" });
      continue;
    }
    break;
  }
  const seconds = (Date.now() - started) / 1000;
  if (timedOut && process.env.BENCH_OUT) {
    // What the page had: a screenshot, its chat's last lines, and the frames of this task.
    const stamp = `${task.id}-${Date.now()}`;
    await page.screenshot({ path: path.join(process.env.BENCH_OUT, `timeout-${stamp}.png`) }).catch(() => {});
    const lines = await page.locator('[data-testid="chat-panel"] li').evaluateAll((items) => items.slice(-8).map((li) => li.outerHTML)).catch(() => []);
    const seen = frames.slice(firstFrame).map((f) => ({ dir: f.dir, at: f.at, frame: f.frame }));
    fs.writeFileSync(path.join(process.env.BENCH_OUT, `timeout-${stamp}.json`), JSON.stringify({ lines, frames: seen, pageErrors: page.pageErrors ?? [] }, null, 1));
  }
  const found = timedOut
    ? null
    : await page.evaluate(([find, selector]) => {
        const line = new Function("selector", find)(selector);
        return line && { text: line.innerText, status: line.getAttribute("data-status") };
      }, [FIND_ANSWER, DONE]);
  const answer = found ? found.text.trim() : "";
  const status = found ? found.status : "bench_timeout";
  const after = await app.state(page);
  // Tool calls the page received (and ran, or asked the user about) in this run.
  const toolCalls = frames
    .slice(firstFrame)
    .filter((f) => f.dir === "received" && f.frame.type === "TOOL_CALL")
    .filter((f, i, all) => all.findIndex((g) => g.frame.callId === f.frame.callId) === i);
  const keys = toolCalls.map((f) => `${f.frame.name} ${stable(f.frame.args)}`);
  const repeated = keys.length - new Set(keys).size;
  const serverEnded = frames
    .slice(firstFrame)
    .filter((f) => f.dir === "received" && f.frame.type === "EVENT" && f.frame.event.kind === "tool_execution_end").length;
  const modelCalls = calls.slice(firstCall);
  const hooks = frames
    .slice(firstFrame)
    .filter((f) => f.dir === "received" && f.frame.type === "EVENT" && f.frame.event.kind === "hook")
    .map((f) => ({ event: f.frame.event.hookEvent, decision: f.frame.event.decision, decidedBy: f.frame.event.decidedBy, reason: f.frame.event.reason }));
  // What the page ran and how each call ended, in order (for the report's failure analysis).
  const calledTools = toolCalls.map((f) => {
    const end = frames
      .slice(firstFrame)
      .find((g) => g.dir === "received" && g.frame.type === "EVENT" && g.frame.event.kind === "tool_execution_end" && g.frame.event.callId === f.frame.callId);
    return { name: f.frame.name, args: f.frame.args, status: end?.frame.event.status ?? null, output: end?.frame.event.output ?? null };
  });
  const navigations = frames.slice(firstFrame).filter((f) => f.dir === "received" && f.frame.type === "EVENT" && f.frame.event.kind === "navigate").map((f) => f.frame.event.url);
  return judge(task, app, {
    pageErrors: [...(page.pageErrors ?? [])],
    before, after, answer, timedOut, seconds, status, approvals, sizeQuestions: questions, calledTools, navigations, hooks,
    pageToolCalls: toolCalls.length, toolEnds: serverEnded, repeatedIdenticalCalls: repeated, modelCalls: modelCalls.length,
    promptTokens: modelCalls.map((c) => c.promptTokens).filter((n) => n != null),
    evaluatedTokens: modelCalls.map((c) => c.evaluatedTokens).filter((n) => n != null),
    model: modelCalls.map(modelCall),
  });
}

/** One model request as results.json keeps it: its seconds, tokens, the last two messages and the reply. */
export function modelCall(c) {
  return { seconds: c.end && (c.end - c.start) / 1000, promptTokens: c.promptTokens, evaluatedTokens: c.evaluatedTokens, completionTokens: c.completionTokens, last: c.messages?.slice(-2), reply: c.reply };
}

/** A task's outcome from what happened: done, wrong actions, a misleading answer, Tether's words. */
export function judge(task, app, r) {
  const problems = r.timedOut ? [`no answer within ${TASK_TIMEOUT_MS / 1000} s`] : task.check({ before: r.before, after: r.after, answer: r.answer, bookings: r.bookings, effects: r.effects });
  if (!r.timedOut && !r.answer) problems.push("empty answer");
  const ok = problems.length === 0;
  const wrongActions = r.calledTools.filter((call) => !app.harmless.includes(call.name) && !(task.allow?.(call, r.before) ?? false));
  // Something that changes the app ran (a call without a status is one the example ran).
  const changed = r.calledTools.some((call) => !app.harmless.includes(call.name) && (call.status == null || call.status === "ok"));
  const misleading = misleads(task, { answer: r.answer }, ok, changed);
  return {
    id: task.id, kind: task.kind, ok, problems, ...r,
    emptyAnswer: !r.timedOut && !r.answer,
    wrongActions, misleading, tetherWords: tetherWords(r.answer),
  };
}

export function stable(value) {
  if (Array.isArray(value)) return `[${value.map(stable).join(",")}]`;
  if (value && typeof value === "object") return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${stable(value[k])}`).join(",")}}`;
  return JSON.stringify(value);
}

export async function openPage(browser, port) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const frames = recordFrames(page);
  // What the page said went wrong, for the report (a task that times out shows why).
  page.pageErrors = [];
  page.on("pageerror", (error) => page.pageErrors.push(String(error)));
  page.on("console", (message) => ["error", "warning"].includes(message.type()) && page.pageErrors.push(`console.${message.type()}: ${message.text()}`));
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.locator('[data-testid="inspector-connection"][data-state="open"]').waitFor();
  return { page, frames, close: () => context.close() };
}
