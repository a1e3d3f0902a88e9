// The run console (`/console`, docs/observability.md) in Chromium, while a shopper uses the
// Leptos storefront served by the same `tether serve`: the operator's token is asked for and a
// wrong one refused; the shopper's session appears; a run waiting for the shopper's approval
// shows as running with its approval event, and as completed with its model turns and tool call
// once approved, without reloading the console.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { ROOT, startServer, launchBrowser, artifactPath, ask, say, answers, nextAnswer, waitForText } from "./harness.mjs";

const dist = process.env.TETHER_LEPTOS_DIST ?? resolve(ROOT, "target/storefront-leptos/dist");
const TOKEN = "console-e2e-token";

let server;
let browser;
before(async () => {
  process.env.TETHER_E2E_OPERATOR_TOKEN = TOKEN;
  server = await startServer(dist, "127.0.0.1:0", ["--model", "scripted", "--operator-token-env", "TETHER_E2E_OPERATOR_TOKEN"]);
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  server?.stop();
});

async function open(path) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(error));
  await page.goto(`http://127.0.0.1:${server.port}${path}`);
  return { page, errors, close: () => context.close() };
}

test("console: asks for the operator's token, then follows a shopper's run live, approval wait included", async () => {
  const operator = await open("/console");
  const console = operator.page;
  // Nothing is shown without the token; a wrong one is refused.
  await console.getByTestId("login").waitFor();
  assert.equal(await console.locator("#console").isVisible(), false);
  await console.getByTestId("token").fill("not-the-token");
  await console.getByTestId("token").press("Enter");
  await waitForText(console, "login-error", "That token was refused.");
  await console.getByTestId("token").fill(TOKEN);
  await console.getByTestId("token").press("Enter");
  await console.locator("#console").waitFor();
  await console.getByTestId("no-sessions").waitFor();

  const shopper = await open("/");
  await ask(shopper.page, "add the red mug to my cart");
  const row = console.getByTestId("session");
  await row.waitFor();
  assert.equal(await row.count(), 1);
  await row.click();
  const runs = console.getByTestId("run");
  await runs.first().waitFor();
  await waitForText(console, "run-outcome", "completed");

  // A run that waits for the shopper: the console shows it running, with the approval asked.
  const count = await answers(shopper.page);
  await say(shopper.page, "remove the mug");
  await shopper.page.getByTestId("approval-dialog").waitFor();
  await console.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 2);
  const live = runs.first();
  await live.locator('[data-testid="run-outcome"]', { hasText: "running" }).waitFor();
  await live.locator('[data-testid="entry"][data-kind="event"][data-name="the page asks the user to approve the call"]').waitFor();
  assert.equal(await live.locator('[data-testid="entry"][data-kind="tool"]').count(), 0, "the call has not ended");

  await shopper.page.getByTestId("approval-approve").click();
  const answer = await nextAnswer(shopper.page, count);
  assert.equal(answer.status, "completed");
  await live.locator('[data-testid="run-outcome"]', { hasText: "completed" }).waitFor();
  const tool = live.locator('[data-testid="entry"][data-kind="tool"][data-name="cart_remove"]');
  await tool.waitFor();
  assert.match(await tool.innerText(), /\bok\b/);
  assert.match(await tool.innerText(), /page · high/);
  await live.locator('[data-testid="entry"][data-kind="event"][data-name="the approval wait ended"]').waitFor();
  assert.ok((await live.locator('[data-testid="entry"][data-kind="chat"]').count()) >= 2, "the model's turns");
  await console.screenshot({ path: artifactPath("console", "console.png") });

  assert.deepEqual(operator.errors, []);
  assert.deepEqual(shopper.errors, []);
  await operator.close();
  await shopper.close();
});
