// The README's walkthroughs, as a newcomer follows them: examples/todo-react and
// examples/todo-leptos, built the documented way (`cargo xtask test` builds them), served by the
// real `tether serve` with the built-in model and talked to through their chat in Chromium. Also
// the React dev server reaching `tether serve` through its /ws proxy, and, in the Leptos
// storefront's size-optimised build, a hook outside the provider saying so.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import {
  ROOT, startServer, startSwitchProxy, freePort, launchBrowser, artifactPath, ask, say, answers, nextAnswer,
  waitForText, waitForMatch,
} from "./harness.mjs";

const APPS = [
  { app: "todo-leptos", dist: process.env.TETHER_TODO_LEPTOS_DIST ?? resolve(ROOT, "examples/todo-leptos/dist") },
  { app: "todo-react", dist: process.env.TETHER_TODO_REACT_DIST ?? resolve(ROOT, "examples/todo-react/dist") },
];

let browser;
before(async () => {
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
});

async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(error));
  return { page, errors, close: () => context.close() };
}

const todos = (page) => page.getByTestId("todo").allTextContents();

for (const { app, dist } of APPS) {
  test(`${app}: offline, every state is in words; once the server is reachable the waiting message is answered`, async () => {
    const server = await startServer(dist);
    const proxy = await startSwitchProxy(server.port);
    const { page, errors, close } = await newPage();
    try {
      await page.goto(`http://127.0.0.1:${proxy.port}/`);
      // The tools are registered in the page before any connection, and the inspector shows them.
      await waitForText(page, "inspector-count", "2");
      const tools = await page.getByTestId("inspector-tool").evaluateAll((items) => items.map((i) => i.dataset.tool));
      assert.deepEqual(tools.sort(), ["todo_add", "todo_remove"]);
      await page.getByTestId("inspector-note").waitFor();
      const state = await waitForMatch(page, "inspector-connection", /^offline, retrying \(\d+ failed\)$/);
      assert.match(state, /offline/);
      // The failure is in the error list, with the URL and the attempts.
      const error = await waitForMatch(page, "runtime-errors", /failed attempts?\)/);
      assert.match(error, new RegExp(`^cannot reach the agent server at ws://127\\.0\\.0\\.1:${proxy.port}/ws \\(\\d+ failed attempts?\\); is \`tether serve\` running there\\? Retrying$`));
      assert.equal(await page.getByTestId("runtime-error").count(), 1, "one line per outage");
      // A message written now says that it waits.
      const count = await answers(page);
      await say(page, "add buy milk");
      const line = page.locator('[data-testid="chat-message"][data-waiting="true"]');
      await line.waitFor();
      assert.match(await line.textContent(), /^add buy milk \(waiting for the connection\)$/);
      assert.match(await page.getByTestId("chat-status").textContent(), /^Not connected to the agent server \(.+\)\. Messages you send wait until the connection is back\.$/);
      assert.equal((await page.getByTestId("chat-send").textContent()).trim(), "Waiting for the server…");
      await page.screenshot({ path: artifactPath(app, "offline.png") });
      assert.ok(proxy.refused >= 1, "the page tried to connect");

      proxy.online = true;
      const answer = await nextAnswer(page, count);
      assert.equal(answer.status, "completed");
      assert.deepEqual(await todos(page), ["buy milk"], "the verb is not part of the item");
      assert.equal(await line.count(), 0, "the message is no longer waiting");
      await waitForText(page, "inspector-connection", "connected");
      assert.equal(await page.getByTestId("chat-status").count(), 0);
      assert.equal(await page.getByTestId("inspector-note").count(), 0);
      assert.deepEqual(errors, []);
    } finally {
      await close();
      await proxy.stop();
      server.stop();
    }
  });

  test(`${app}: the agent adds with todo_add and removes with todo_remove after an approval`, async () => {
    const server = await startServer(dist);
    const { page, errors, close } = await newPage();
    try {
      await page.goto(`http://127.0.0.1:${server.port}/`);
      await page.locator('[data-testid="inspector-connection"][data-state="open"]').waitFor();
      let answer = await ask(page, "add buy milk");
      assert.equal(answer.status, "completed");
      // The leading verb decides: this is an add, not a checkout.
      answer = await ask(page, "please add check out the library book to my list");
      assert.equal(answer.status, "completed");
      assert.deepEqual(await todos(page), ["buy milk", "check out the library book"]);

      let count = await answers(page);
      await say(page, "remove buy milk");
      const dialog = page.getByTestId("approval-dialog");
      await dialog.waitFor();
      assert.equal((await page.getByTestId("approval-risk").textContent()).trim(), "high");
      assert.equal(await page.getByTestId("approval-risk").getAttribute("class"), "tether-risk tether-risk-high");
      assert.deepEqual(await page.getByTestId("approval-arg").allInnerTexts().then(rows => rows.map(r => r.split(/\n+/))), [["title", "buy milk"]]);
      // The components bring their styles: the dialog is a modal over the page.
      const position = await page.locator(".tether-approval-backdrop").evaluate((e) => getComputedStyle(e).position);
      assert.equal(position, "fixed");
      await page.screenshot({ path: artifactPath(app, "approval.png") });
      await page.getByTestId("approval-reject").click();
      answer = await nextAnswer(page, count);
      assert.match(answer.text, /could not complete todo_remove/);
      assert.deepEqual(await todos(page), ["buy milk", "check out the library book"]);

      count = await answers(page);
      await say(page, "remove buy milk");
      await dialog.waitFor();
      await page.getByTestId("approval-approve").click();
      answer = await nextAnswer(page, count);
      assert.equal(answer.status, "completed");
      assert.match(answer.text, /Done: todo_remove/);
      assert.deepEqual(await todos(page), ["check out the library book"]);
      // Risk classes in words: none and high differ.
      const risks = await page
        .locator('[data-testid="inspector-tool"] .tether-risk')
        .evaluateAll((spans) => spans.map((s) => `${s.textContent.trim()}:${s.className}`).sort());
      assert.deepEqual(risks, ["high:tether-risk tether-risk-high", "none:tether-risk tether-risk-none"]);
      await page.getByTestId("tool-inspector").screenshot({ path: artifactPath(app, "inspector.png") });
      assert.deepEqual(errors, []);
    } finally {
      await close();
      server.stop();
    }
  });
}

test("todo-react: the Vite dev server on another port reaches `tether serve` through its /ws proxy", async () => {
  const tetherPort = await freePort();
  const server = await startServer(null, `127.0.0.1:${tetherPort}`);
  const vitePort = await freePort();
  const appDir = resolve(ROOT, "examples/todo-react");
  const vite = spawn(resolve(appDir, "node_modules/.bin/vite"), ["--host", "127.0.0.1", "--port", String(vitePort), "--strictPort"], {
    cwd: appDir,
    // NO_COLOR: with CI set (as CI machines do), Vite colours the port in its URL.
    env: { ...process.env, NO_COLOR: "1", TETHER_SERVER: `http://127.0.0.1:${tetherPort}` },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let viteLog = "";
  // Vite prints its URL once it listens. The promise exists before anything else is awaited, so
  // output that arrives while the browser page opens is not missed; colour codes are ignored in
  // case a terminal setting brings them back.
  const listening = new Promise((ready, fail) => {
    const check = () => viteLog.replace(/\x1b\[[0-9;]*m/g, "").includes(`:${vitePort}/`) && ready();
    vite.stdout.on("data", (chunk) => {
      viteLog += chunk;
      check();
    });
    vite.stderr.on("data", (chunk) => (viteLog += chunk));
    vite.on("exit", (code) => fail(new Error(`vite exited with ${code}: ${viteLog}`)));
  });
  const { page, errors, close } = await newPage();
  try {
    await listening;
    await page.goto(`http://127.0.0.1:${vitePort}/`);
    await page
      .locator('[data-testid="inspector-connection"][data-state="open"]')
      .waitFor({ timeout: 60_000 })
      .catch((error) => {
        throw new Error(`${error.message}\npage errors: ${errors.join("\n")}\nvite:\n${viteLog}`);
      });
    const answer = await ask(page, "add call mom");
    assert.equal(answer.status, "completed");
    assert.deepEqual(await todos(page), ["call mom"]);
    assert.deepEqual(await page.getByTestId("runtime-error").allTextContents(), []);
    assert.deepEqual(errors, []);
  } finally {
    await close();
    vite.kill();
    server.stop();
  }
});

test("storefront-leptos (size-optimised): a hook outside <AgentProvider> logs which one, and where, before it aborts", async () => {
  const dist = process.env.TETHER_LEPTOS_DIST ?? resolve(ROOT, "target/storefront-leptos/dist");
  const server = await startServer(dist);
  const { page, errors, close } = await newPage();
  const console = [];
  page.on("console", (message) => console.push(`${message.type()}: ${message.text()}`));
  try {
    const aborted = page.waitForEvent("pageerror");
    await page.goto(`http://127.0.0.1:${server.port}/outside-provider`);
    await aborted;
    const logged = console.find((line) => line.includes("<AgentProvider>"));
    assert.ok(logged, `nothing about the provider in the console:\n${console.join("\n")}`);
    assert.match(logged, /^error: tether-leptos: use_agent_tool\("orphan_tool"\) \(at examples\/storefront-leptos\/src\/lib\.rs:\d+\) must be called inside <AgentProvider>/);
    // The size-optimised build aborts without a message of its own.
    assert.match(String(errors[0]), /unreachable/);
  } finally {
    await close();
    server.stop();
  }
});
