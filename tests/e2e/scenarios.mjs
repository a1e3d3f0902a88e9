// The storefront conformance suite (docs/storefront.md, "Scenarios"): the same tests run against
// every storefront build. `defineScenarios({ app, dist })` registers them with node:test.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  startServer, startProxy, launchBrowser, recordFrames, artifactPath, say, ask, answers, nextAnswer, waitForText,
  freePort, inspectorCli, pythonMcpClient, ROOT,
} from "./harness.mjs";
import { resolve } from "node:path";

/** The WebMCP polyfill from npm (`@mcp-b/global`), as the script tag a page would load. */
const WEBMCP_POLYFILL = resolve(ROOT, "node_modules/@mcp-b/global/dist/index.iife.js");

export function defineScenarios({ app, dist }) {
  let server;
  let browser;

  before(async () => {
    server = await startServer(dist, "127.0.0.1:0", ["--model", "scripted", "--expose-mcp"]);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    server?.stop();
  });

  async function open(path = "/", port = server.port, { initScript } = {}) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    if (initScript) await context.addInitScript({ path: initScript });
    const page = await context.newPage();
    const frames = recordFrames(page);
    const errors = [];
    page.on("pageerror", (error) => errors.push(error));
    await page.goto(`http://127.0.0.1:${port}${path}`);
    await page.locator('[data-testid="inspector-connection"][data-state="open"]').waitFor();
    return { page, frames, errors, close: () => context.close() };
  }

  test(`${app}: "add the red mug to my cart" puts one mug in the cart`, async () => {
    const { page, errors, close } = await open();
    const answer = await ask(page, "add the red mug to my cart");
    assert.equal(answer.status, "completed");
    await waitForText(page, "cart-badge", "1");
    // The call is in the chat, drawn by the storefront, before the answer that follows it.
    const lines = await page.locator('[data-testid="chat-panel"] li').evaluateAll((items) =>
      items.map((li) => [li.dataset.testid, li.dataset.callStatus ?? li.dataset.status ?? "", li.innerText.replace(/\s+/g, " ").trim()]),
    );
    assert.deepEqual(lines.slice(0, 2), [
      ["chat-message", "", "add the red mug to my cart"],
      ["chat-tool-call", "done", "Add 1 × Red mug to the cart · done"],
    ]);
    assert.equal(lines[2][0], "chat-message");
    assert.equal(lines[2][1], "completed");
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: removing the mug asks first; Enter (on Reject) keeps it, a typed reason reaches the model, Approve removes it`, async () => {
    const { page, close } = await open();
    await ask(page, "add the red mug to my cart");
    let count = await answers(page);
    await say(page, "remove the mug");
    const dialog = page.getByTestId("approval-dialog");
    await dialog.waitFor();
    // The call is in the chat too, waiting for the user.
    await page.locator('[data-testid="chat-tool-call"][data-tool="cart_remove"][data-call-status="approval"]').waitFor();
    assert.equal((await page.getByTestId("approval-risk").textContent()).trim(), "high");
    assert.deepEqual(await page.getByTestId("approval-arg").allInnerTexts().then(rows => rows.map(r => r.split(/\n+/))), [["productId", "mug-red"]]);
    await page.screenshot({ path: artifactPath(app, "approval-dialog.png") });
    // Reject, the safe choice, has the focus: Enter refuses.
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "approval-reject");
    await page.keyboard.press("Enter");
    let answer = await nextAnswer(page, count);
    assert.match(answer.text, /cart_remove/);
    assert.match(answer.text, /denied|rejected/i, "the model was told");
    assert.equal(await page.locator('[data-testid="chat-tool-call"][data-call-status="refused"]').count(), 1);
    await waitForText(page, "cart-badge", "1");

    // What the user types in the dialog is the reason the model reads.
    count = await answers(page);
    await say(page, "remove the mug");
    await dialog.waitFor();
    await page.getByTestId("approval-reason").fill("I changed my mind");
    await page.getByTestId("approval-reason").press("Enter");
    answer = await nextAnswer(page, count);
    assert.match(answer.text, /the user said: I changed my mind/);
    await waitForText(page, "cart-badge", "1");

    count = await answers(page);
    await say(page, "remove the mug");
    await dialog.waitFor();
    assert.equal(await page.getByTestId("approval-reason").inputValue(), "", "a new request starts with no reason");
    await page.getByTestId("approval-approve").click();
    answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    await waitForText(page, "cart-badge", "0");
    await page.getByTestId("tool-inspector").screenshot({ path: artifactPath(app, "inspector.png") });
    await close();
  });

  test(`${app}: a reload during an approval brings back the conversation and the dialog; the run then ends`, async () => {
    const { page, errors, close } = await open();
    await ask(page, "add the black t-shirt in size M to my cart");
    await say(page, "check out");
    await page.getByTestId("approval-dialog").waitFor();
    await page.reload();
    // The conversation so far comes back from the server (HISTORY), and the call waiting for the
    // user is asked again: the dialog is back (checkout is a tool of every page).
    await page.getByTestId("approval-dialog").waitFor();
    const lines = await page.getByTestId("chat-message").allInnerTexts();
    assert.ok(lines.some((line) => line.includes("add the black t-shirt in size M to my cart")), lines.join("\n"));
    assert.ok(lines.some((line) => line.includes("check out")), lines.join("\n"));
    const count = await answers(page);
    await page.getByTestId("approval-reject").click();
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /denied|rejected/i);
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: a reload while a slow handler runs: the call is answered interrupted, never run again; the run ends`, async () => {
    // ?latency= makes cart_view wait for a (simulated) slow backend; the reload keeps the URL.
    const { page, frames, errors, close } = await open("/cart?latency=60000");
    await say(page, "show my cart");
    const { frame: call } = await frames.waitFor(
      (f) => f.dir === "received" && f.frame.type === "TOOL_CALL" && f.frame.name === "cart_view",
    );
    await page.locator('[data-testid="backend"][data-state="waiting"]').waitFor();
    await page.reload();
    // The run's first answer (nothing was answered before the reload): the model read that the
    // call was interrupted and said so; had the handler run again, it would still be waiting.
    const answer = await nextAnswer(page, 0);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /interrupted/i);
    const results = frames
      .filter((f) => f.dir === "sent" && f.frame.type === "TOOL_RESULT" && f.frame.callId === call.callId)
      .map((f) => f.frame);
    assert.ok(results.length >= 1, "the new page answered the call");
    assert.ok(results.every((f) => f.status === "interrupted"), JSON.stringify(results));
    assert.equal(await page.locator('[data-testid="backend"][data-state="waiting"]').count(), 0, "cart_view did not run again");
    const lines = await page.getByTestId("chat-message").allInnerTexts();
    assert.ok(lines.some((line) => line.includes("show my cart")), lines.join("\n"));
    await page.screenshot({ path: artifactPath(app, "reload-during-handler.png") });
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: Stop in the approval dialog ends the run as aborted and closes the dialog; nothing is removed`, async () => {
    const { page, close } = await open();
    await ask(page, "add the red mug to my cart");
    const count = await answers(page);
    await say(page, "remove the mug");
    await page.getByTestId("approval-dialog").waitFor();
    await page.getByTestId("approval-stop").click();
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "aborted");
    await page.getByTestId("approval-dialog").waitFor({ state: "detached" });
    await waitForText(page, "cart-badge", "1");
    // The session takes the next message at once.
    assert.equal((await ask(page, "add the red mug to my cart")).status, "completed");
    await waitForText(page, "cart-badge", "2");
    await close();
  });

  test(`${app}: Stop while a slow handler runs: the handler sees the abort and the run ends as aborted`, async () => {
    // ?latency= makes cart_view wait for a (simulated) slow backend.
    const { page, errors, close } = await open("/cart?latency=60000");
    const count = await answers(page);
    await say(page, "show my cart");
    await page.locator('[data-testid="backend"][data-state="waiting"]').waitFor();
    await page.getByTestId("chat-stop").click();
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "aborted");
    // The handler learnt it (an AbortSignal in React, its future dropped in Leptos).
    await waitForText(page, "backend", "cart_view was stopped before it finished");
    await page.screenshot({ path: artifactPath(app, "stopped-handler.png") });
    // The session takes the next message at once.
    assert.equal((await ask(page, "add the red mug to my cart")).status, "completed");
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: a server that lost the session: the chat says so, the open dialog closes unrun, the next message works`, async () => {
    // A server of its own, kept in memory: restarted, it has forgotten every session.
    const port = await freePort();
    let forgetful = await startServer(dist, `127.0.0.1:${port}`);
    const { page, errors, close } = await open("/", port);
    try {
      await ask(page, "add the red mug to my cart");
      await say(page, "remove the mug");
      await page.getByTestId("approval-dialog").waitFor();
      await forgetful.stopped();
      forgetful = await startServer(dist, `127.0.0.1:${port}`);
      await page.locator('[data-testid="chat-message"]', { hasText: "could not resume this conversation" }).waitFor();
      await page.getByTestId("approval-dialog").waitFor({ state: "detached" });
      // The handler never ran: the mug is still in the cart.
      await waitForText(page, "cart-badge", "1");
      assert.equal(await page.getByTestId("chat-send").isDisabled(), false);
      await page.screenshot({ path: artifactPath(app, "session-lost.png") });
      assert.equal((await ask(page, "add the red mug to my cart")).status, "completed");
      await waitForText(page, "cart-badge", "2");
      assert.deepEqual(errors, []);
    } finally {
      await close();
      forgetful.stop();
    }
  });

  test(`${app}: the chat follows its newest line, unless the user scrolled up to read`, async () => {
    const { page, errors, close } = await open();
    const lines = page.locator(".tether-chat-lines");
    const gap = () => lines.evaluate((list) => list.scrollHeight - list.scrollTop - list.clientHeight);
    for (let n = 0; n < 8; n++) await ask(page, "what is in my cart?");
    assert.ok(await lines.evaluate((list) => list.scrollHeight > list.clientHeight * 1.5), "the lines overflow the panel");
    // The newest answer is in view once drawn (the panel scrolls after it is drawn).
    await page.waitForFunction(() => {
      const list = document.querySelector(".tether-chat-lines");
      return list.scrollHeight - list.scrollTop - list.clientHeight <= 2;
    });
    // The user scrolls up to read: new lines do not take the view away.
    await lines.evaluate((list) => {
      list.scrollTop = 0;
      list.dispatchEvent(new Event("scroll"));
    });
    await ask(page, "what is in my cart?");
    assert.equal(await lines.evaluate((list) => list.scrollTop), 0);
    assert.ok((await gap()) > 100, "still where the user scrolled");
    // Back at the bottom, it follows again.
    await lines.evaluate((list) => {
      list.scrollTop = list.scrollHeight;
      list.dispatchEvent(new Event("scroll"));
    });
    await ask(page, "what is in my cart?");
    await page.waitForFunction(() => {
      const list = document.querySelector(".tether-chat-lines");
      return list.scrollHeight - list.scrollTop - list.clientHeight <= 2;
    });
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: a server restarted: the outage's error line says it ended, in the past tense`, async () => {
    const port = await freePort();
    let restarted = await startServer(dist, `127.0.0.1:${port}`);
    const { page, errors, close } = await open("/", port);
    try {
      await restarted.stopped();
      const line = page.getByTestId("runtime-error").last();
      await line.filter({ hasText: "lost the connection to the agent server" }).waitFor();
      restarted = await startServer(dist, `127.0.0.1:${port}`);
      await page.locator('[data-testid="inspector-connection"][data-state="open"]').waitFor();
      await line.filter({ hasText: "was lost and is back" }).waitFor();
      const texts = await page.getByTestId("runtime-error").allInnerTexts();
      assert.ok(!texts.some((t) => /retrying|reconnecting/i.test(t)), JSON.stringify(texts));
      assert.deepEqual(errors, []);
    } finally {
      await close();
      restarted.stop();
    }
  });

  test(`${app}: "check out" needs a critical approval and places the order`, async () => {
    const { page, close } = await open();
    await ask(page, "add the black t-shirt in size M to my cart");
    await ask(page, "show my cart");
    const count = await answers(page);
    await say(page, "check out");
    await page.getByTestId("approval-dialog").waitFor();
    assert.equal((await page.getByTestId("approval-risk").textContent()).trim(), "critical");
    await page.screenshot({ path: artifactPath(app, "checkout-approval.png") });
    await page.getByTestId("approval-approve").click();
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    const order = await page.getByTestId("order-number").innerText();
    assert.match(order, /^T-\d+$/);
    await close();
  });

  test(`${app}: navigating to a product page sends exactly one CONTEXT_UPDATE, before the result`, async () => {
    const { page, frames, close } = await open();
    const answer = await ask(page, "go to the product page for the blue mug");
    assert.equal(answer.status, "completed");
    await page.locator('[data-testid="product-page"][data-product="mug-blue"]').waitFor();
    // The call is drawn in the chat as the product's card.
    const card = page.locator('[data-testid="chat-tool-call"][data-tool="product_view"] [data-testid="product-card"]');
    assert.equal((await card.innerText()).replace(/\s+/g, " ").trim(), "Blue mug $12.00 · done");
    await page.getByTestId("chat-panel").screenshot({ path: artifactPath(app, "product-card.png") });
    const call = frames.find((f) => f.dir === "received" && f.frame.type === "TOOL_CALL" && f.frame.name === "product_view");
    assert.ok(call, "the model called product_view");
    const result = frames.find((f) => f.dir === "sent" && f.frame.type === "TOOL_RESULT" && f.frame.callId === call.frame.callId);
    assert.ok(result, "the result was sent");
    const updates = frames.filter((f) => f.dir === "sent" && f.frame.type === "CONTEXT_UPDATE" && f.at > call.at && f.at < result.at);
    assert.equal(updates.length, 1, "one CONTEXT_UPDATE for the whole navigation");
    const names = updates[0].frame.tools.map((t) => t.name).sort();
    assert.deepEqual(names, ["cart_add", "cart_clear", "checkout", "navigate", "open_cart", "product_view"]);
    assert.deepEqual(updates[0].frame.tools.find((t) => t.name === "cart_add").parameters.properties.productId.enum, ["mug-blue"]);
    // The state the new page shares rides in the same update: the product, and where the user is.
    const context = Object.fromEntries(updates[0].frame.context.map((entry) => [entry.key, entry.value]));
    assert.match(context.the_product_on_this_page, /^Blue mug \(mug-blue\): \$12\.00\. A blue ceramic mug, 350 ml\.$/);
    assert.equal(context.the_page_the_user_is_on, "the page of Blue mug");
    assert.equal(context.the_products_in_the_shop, undefined, "the grid's entry left with the grid");
    await close();
  });

  test(`${app}: a tool on another page: on the red mug's page, "add the space poster" opens the page that offers it, then adds it`, async () => {
    // The home page's grid offers cart_add for every product; the session remembers it.
    const { page, frames, errors, close } = await open();
    await ask(page, "go to the product page for the red mug");
    await page.locator('[data-testid="product-page"][data-product="mug-red"]').waitFor();
    const before = frames.length;
    const answer = await ask(page, "add the space poster to my cart");
    assert.equal(answer.status, "completed", answer.text);
    await page.waitForFunction(() => document.querySelector('[data-testid="cart-badge"]')?.dataset.cart === "poster-space=1");
    assert.equal(await page.evaluate(() => location.pathname), "/", "the page that offers it was opened");
    // The page was asked to open "/", its tools reached the server, then the call came: once.
    const received = frames.slice(before).filter((f) => f.dir === "received");
    const navigate = received.find((f) => f.frame.type === "EVENT" && f.frame.event.kind === "navigate");
    assert.ok(navigate, "a navigate event");
    assert.equal(navigate.frame.event.url, "/");
    assert.equal(navigate.frame.event.tool, "cart_add");
    const calls = received.filter((f) => f.frame.type === "TOOL_CALL");
    assert.deepEqual(calls.map((f) => [f.frame.name, f.frame.args.productId]), [["cart_add", "poster-space"]]);
    assert.equal(calls[0].frame.callId, navigate.frame.event.callId);
    const update = frames.find((f) => f.dir === "sent" && f.frame.type === "CONTEXT_UPDATE" && f.at > navigate.at && f.at < calls[0].at);
    assert.ok(update, "the new page's tools reached the server before the call");
    assert.deepEqual(update.frame.page.url, "/");
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: "what is in my cart?" is answered from the state the page shares, without a tool call`, async () => {
    const { page, frames, close } = await open();
    await ask(page, "add the red mug to my cart");
    const before = frames.length;
    const answer = await ask(page, "what is in my cart?");
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /1 × Red mug/);
    const calls = frames.slice(before).filter((f) => f.dir === "received" && f.frame.type === "TOOL_CALL");
    assert.deepEqual(calls, [], "no tool was called");
    // The state went out with the tools, in the page's CONTEXT_UPDATE.
    const update = frames.filter((f) => f.dir === "sent" && f.frame.type === "CONTEXT_UPDATE").at(-1);
    const cart = update.frame.context.find((entry) => entry.key === "the_shopping_cart");
    assert.match(cart.value, /1 item \(1 × Red mug\), total \$12\.00/);
    await close();
  });

  test(`${app}: the page's 31st tool is refused loudly`, async () => {
    const { page, close } = await open("/stress");
    await waitForText(page, "inspector-count", "30");
    const refused = page.locator('[data-testid="inspector-refused"]');
    await refused.first().waitFor();
    assert.equal(await refused.first().getAttribute("data-event"), "tool.registry.limit");
    assert.match(await refused.first().textContent(), /stress_tool_27/);
    await page.getByTestId("runtime-error").first().waitFor();
    assert.match(await page.getByTestId("runtime-errors").textContent(), /stress_tool_27.*at most 30/);
    await close();
  });

  test(`${app}: a socket cut during an approval loses nothing and applies the result once`, async () => {
    const proxy = await startProxy(server.port);
    const { page, frames, close } = await open("/", proxy.port);
    await ask(page, "add the red mug to my cart");
    await ask(page, "show my cart");
    const count = await answers(page);
    await say(page, "clear my cart");
    await page.getByTestId("approval-dialog").waitFor();
    assert.ok(proxy.killAll() > 0, "connections were cut");
    await page.getByTestId("approval-approve").click();
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /cart_clear/);
    await waitForText(page, "cart-badge", "0");
    const ends = frames.filter(
      (f) => f.dir === "received" && f.frame.type === "EVENT" && f.frame.event.kind === "tool_execution_end" && f.frame.event.tool === "cart_clear",
    );
    assert.equal(ends.length, 1, "the server applied the result once");
    const welcomes = frames.filter((f) => f.dir === "received" && f.frame.type === "WELCOME");
    assert.ok(welcomes.length >= 2 && welcomes.at(-1).frame.resumed, "the client resumed its session");
    await close();
    await proxy.stop();
  });

  test(`${app}: a socket cut as cart_add's result leaves: the handler runs once, the result is applied once`, async () => {
    const proxy = await startProxy(server.port);
    const { page, frames, close } = await open("/", proxy.port);
    let cut = 0;
    // Every connection is cut the moment the page sends cart_add's result: the result may or may
    // not have reached the server, and its acknowledgement is lost either way.
    frames.onSent = (entry) => {
      if (entry.frame.type === "TOOL_RESULT" && cut === 0) cut = proxy.killAll();
    };
    const answer = await ask(page, "add the red mug to my cart");
    assert.ok(cut > 0, "the connection was cut as the result left");
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /cart_add/);
    // The page counts its own handler runs: a second run of the call would show here.
    await waitForText(page, "cart-add-runs", "1");
    await waitForText(page, "cart-badge", "1");
    const calls = new Set(
      frames.filter((f) => f.dir === "received" && f.frame.type === "TOOL_CALL" && f.frame.name === "cart_add").map((f) => f.frame.callId),
    );
    assert.equal(calls.size, 1, "one cart_add call");
    const [callId] = calls;
    // The cut may land after the answer left the server (the page reports a sent frame a moment
    // after it went): the client resumes all the same, and its result is acknowledged in the end
    // (resent after the resume if it was lost). Wait for both; each may come after the answer.
    const resumed = await frames.waitFor((f) => f.dir === "received" && f.frame.type === "WELCOME" && f.frame.resumed);
    assert.ok(resumed, "the client resumed its session");
    await frames.waitFor((f) => f.dir === "received" && f.frame.type === "TOOL_RESULT_ACK" && f.frame.callId === callId);
    // Still once, after everything the resume replayed.
    await waitForText(page, "cart-add-runs", "1");
    // The server applied it once: one tool_execution_end for the call (a replayed copy has the same id).
    const ends = new Set(
      frames
        .filter((f) => f.dir === "received" && f.frame.type === "EVENT" && f.frame.event.kind === "tool_execution_end" && f.frame.event.callId === callId)
        .map((f) => f.frame.id),
    );
    assert.equal(ends.size, 1, "the server applied the result once");
    await close();
    await proxy.stop();
  });

  test(`${app}: a T-shirt added without a size: the chat asks which size, and the answer (a click or a message) adds it`, async () => {
    const { page, frames, errors, close } = await open();
    let count = await answers(page);
    await say(page, "add the black t-shirt to my cart");
    // The question is drawn at the call's place in the chat, and the run waits for it.
    await page.getByTestId("size-question").waitFor();
    assert.match(await page.getByTestId("size-question").innerText(), /Which size of Black T-shirt\?/);
    await page.screenshot({ path: artifactPath(app, "size-question.png") });
    await page.locator('[data-testid="size-choice"][data-size="M"]').click();
    let answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /Black T-shirt \(size M\)/);
    await waitForText(page, "cart-badge", "1");

    // A message typed while the question waits answers it: no new run, the words are the answer.
    count = await answers(page);
    const sentBefore = frames.filter((f) => f.dir === "sent" && f.frame.type === "USER_MESSAGE").length;
    await say(page, "add the black t-shirt to my cart");
    await page.getByTestId("size-question").waitFor();
    await say(page, "large please");
    answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /Black T-shirt \(size L\)/);
    await waitForText(page, "cart-badge", "2");
    const sent = frames.filter((f) => f.dir === "sent" && f.frame.type === "USER_MESSAGE").map((f) => f.frame.text);
    assert.deepEqual(sent.slice(sentBefore), ["add the black t-shirt to my cart"], "the typed answer started no run");
    assert.equal(await page.getByTestId("size-question").count(), 0, "no question is left open");
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: the size guide is a followUp: false tool: its table in the chat ends the run, with no answer after it`, async () => {
    const { page, frames, errors, close } = await open("/product/tee-black");
    const before = frames.length;
    const answer = await ask(page, "show the size guide");
    assert.equal(answer.status, "completed");
    assert.equal(answer.text.trim(), "", "no model turn after the tool");
    const guide = page.getByTestId("size-guide");
    assert.match(await guide.innerText(), /M\s+52 cm/);
    assert.equal(await page.locator('[data-testid="chat-tool-call"][data-tool="size_guide"][data-call-status="done"]').count(), 1);
    await page.screenshot({ path: artifactPath(app, "follow-up-off.png") });
    // The model was asked once: one turn, and the run ended after the tool's result.
    const events = frames.slice(before).filter((f) => f.dir === "received" && f.frame.type === "EVENT").map((f) => f.frame.event);
    assert.equal(events.filter((e) => e.kind === "turn_start").length, 1, JSON.stringify(events.map((e) => e.kind)));
    assert.deepEqual(
      events.filter((e) => e.kind === "tool_execution_end").map((e) => [e.tool, e.status]),
      [["size_guide", "ok"]],
    );
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: a call's arguments stream into the chat before it runs (a model that writes slowly)`, async () => {
    const slow = await startServer(dist, "127.0.0.1:0", ["--model", "scripted", "--scripted-call-pace-ms", "150"]);
    try {
      const { page, frames, errors, close } = await open("/", slow.port);
      // Every state the call's line goes through, as the page draws it.
      await page.evaluate(() => {
        window.callStates = [];
        new MutationObserver(() => {
          for (const li of document.querySelectorAll('[data-testid="chat-tool-call"]')) {
            const state = `${li.dataset.callStatus}|${li.innerText.replace(/\s+/g, " ").trim()}`;
            if (window.callStates.at(-1) !== state) window.callStates.push(state);
          }
        }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
      });
      const count = await answers(page);
      await say(page, "add two red mugs to my cart");
      await page.locator('[data-testid="chat-tool-call"][data-call-status="streaming"]').waitFor();
      await page.screenshot({ path: artifactPath(app, "streaming-args.png") });
      const answer = await nextAnswer(page, count);
      assert.equal(answer.status, "completed");
      await waitForText(page, "cart-badge", "2");
      const states = await page.evaluate(() => window.callStates);
      const firstRunning = states.findIndex((state) => !state.startsWith("streaming|"));
      const streamed = states.slice(0, firstRunning);
      // The product was read before the quantity was written, and both before the call ran.
      assert.ok(streamed.includes("streaming|Add 1 × Red mug to the cart · being written"), states.join("\n"));
      assert.ok(streamed.includes("streaming|Add 2 × Red mug to the cart · being written"), states.join("\n"));
      assert.equal(states.at(-1), "done|Add 2 × Red mug to the cart · done");
      // On the wire: observe-only deltas under the call's id, all before its TOOL_CALL.
      const call = frames.find((f) => f.dir === "received" && f.frame.type === "TOOL_CALL");
      const deltas = frames.filter((f) => f.dir === "received" && f.frame.type === "EVENT" && f.frame.event.kind === "tool_call_delta");
      assert.ok(deltas.length >= 3, `${deltas.length} deltas`);
      assert.ok(deltas.every((f) => f.at < call.at && f.frame.event.callId === call.frame.callId));
      assert.deepEqual(deltas.at(-1).frame.event.partialArgs, call.frame.args);
      assert.deepEqual(errors, []);
      await close();
    } finally {
      slow.stop();
    }
  });

  test(`${app}: a message typed while an approval waits refuses the call with those words; no new run starts`, async () => {
    const { page, frames, close } = await open();
    await ask(page, "add the red mug to my cart");
    const count = await answers(page);
    await say(page, "remove the mug");
    await page.getByTestId("approval-dialog").waitFor();
    const sentBefore = frames.filter((f) => f.dir === "sent" && f.frame.type === "USER_MESSAGE").length;
    await page.getByTestId("chat-input").fill("no, keep it");
    await page.getByTestId("chat-input").press("Enter");
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /denied|rejected/i);
    assert.equal(await page.getByTestId("approval-dialog").count(), 0, "the dialog closed");
    await waitForText(page, "cart-badge", "1");
    const result = frames.find((f) => f.dir === "sent" && f.frame.type === "TOOL_RESULT" && f.frame.status === "denied");
    assert.match(JSON.stringify(result.frame.content), /the user wrote instead: no, keep it/);
    const sent = frames.filter((f) => f.dir === "sent" && f.frame.type === "USER_MESSAGE").length;
    assert.equal(sent, sentBefore, "the typed words answered the dialog; no new run");
    await close();
  });

  test(`${app}: arguments edited in the approval dialog: the model is told, calls again with them, and that call runs unasked`, async () => {
    const { page, frames, errors, close } = await open();
    await ask(page, "add the red mug to my cart");
    await ask(page, "add the blue mug to my cart");
    const count = await answers(page);
    await say(page, "remove the red mug");
    await page.getByTestId("approval-dialog").waitFor();
    await page.getByTestId("approval-edit").click();
    // The product is a choice of the values the tool allows (the cart's products), not free text.
    const product = page.locator('[data-testid="approval-arg-input"][data-field="productId"]');
    assert.equal(await product.evaluate((field) => field.tagName), "SELECT");
    assert.deepEqual((await product.locator("option").allInnerTexts()).sort(), ["mug-blue", "mug-red"]);
    await product.selectOption("mug-blue");
    await page.screenshot({ path: artifactPath(app, "edit-args.png") });
    await page.getByTestId("approval-approve").click();
    const answer = await nextAnswer(page, count);
    assert.equal(answer.status, "completed");
    assert.match(answer.text, /removed Blue mug/);
    assert.equal(await page.getByTestId("cart-badge").getAttribute("data-cart"), "mug-red=1");
    // On the socket: the first call refused with the new arguments, the second made with them
    // (validated by the runtime as any call) and approved without a dialog.
    const calls = frames.filter((f) => f.dir === "received" && f.frame.type === "TOOL_CALL" && f.frame.name === "cart_remove");
    assert.deepEqual(calls.map((f) => f.frame.args), [{ productId: "mug-red" }, { productId: "mug-blue" }]);
    const results = calls.map((call) => frames.find((f) => f.dir === "sent" && f.frame.type === "TOOL_RESULT" && f.frame.callId === call.frame.callId).frame);
    assert.equal(results[0].status, "denied");
    assert.match(JSON.stringify(results[0].content), /call cart_remove again with exactly these arguments/);
    assert.equal(results[1].status, "ok");
    assert.equal(await page.getByTestId("approval-dialog").count(), 0);
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: an MCP client the user paired calls the page's tools through the page (Python SDK, MCP Inspector CLI)`, async () => {
    const { page, frames, errors, close } = await open();
    const endpoint = `http://127.0.0.1:${server.port}/mcp`;
    const refused = await inspectorCli(endpoint, "never-paired-code-0123456789", ["--method", "tools/list"]);
    assert.notEqual(refused.status, 0, "nothing is shared before the user pairs");

    await page.getByTestId("mcp-pair").click();
    const code = (await page.getByTestId("mcp-code").textContent()).trim();
    assert.match(code, /^[0-9a-z]{26}$/);
    assert.equal((await page.getByTestId("mcp-endpoint").textContent()).trim(), endpoint);
    // The server reads a socket's frames in order: once this answer is in, the CONTEXT_UPDATE
    // with the pairing that went before it has been applied.
    await ask(page, "hello");

    const python = pythonMcpClient(endpoint, code);
    await python.next((line) => line.ready);
    const listed = (await python.send({ op: "list" })).tools;
    const announced = frames.filter((f) => f.dir === "sent" && f.frame.type === "CONTEXT_UPDATE").at(-1).frame.tools;
    assert.deepEqual(listed.map((t) => t.name).sort(), announced.map((t) => t.name).sort(), "exactly the page's tools");
    assert.ok(!listed.some((t) => t.name === "cart_remove"), "the cart is empty");

    // The Inspector's CLI adds the mug; the page runs the call, and the list changes for the
    // Python client (the mini cart registers cart_remove).
    const added = await inspectorCli(endpoint, code, ["--method", "tools/call", "--tool-name", "cart_add", "--tool-arg", "productId=mug-red"]);
    assert.equal(added.status, 0, added.stderr);
    assert.match(JSON.parse(added.stdout).content[0].text, /added 1 × Red mug/);
    await waitForText(page, "cart-badge", "1");
    await python.next((line) => line.event === "tools/list_changed");
    const remove = (await python.send({ op: "list" })).tools.find((t) => t.name === "cart_remove");
    assert.deepEqual(remove, { name: "cart_remove", readOnly: false, destructive: true, risk: "high" });
    const viaInspector = JSON.parse((await inspectorCli(endpoint, code, ["--method", "tools/list"])).stdout).tools;
    assert.ok(viaInspector.some((t) => t.name === "cart_remove"));

    // Invalid arguments: refused by the page's validation, no approval asked, nothing run.
    const runs = await page.getByTestId("cart-add-runs").textContent();
    const invalid = await python.send({ op: "call", tool: "cart_add", args: { productId: "mug-red", quantity: 99 } });
    assert.equal(invalid.isError, true);
    assert.match(invalid.text, /Validation args "cart_add"/);
    assert.equal(await page.getByTestId("cart-add-runs").textContent(), runs);

    // A high-risk call waits for the user in the page's dialog; the client gets the result.
    const removing = python.send({ op: "call", tool: "cart_remove", args: { productId: "mug-red" } });
    await page.getByTestId("approval-dialog").waitFor();
    assert.equal((await page.getByTestId("approval-risk").textContent()).trim(), "high");
    await page.getByTestId("approval-approve").click();
    const removed = await removing;
    assert.equal(removed.isError, false);
    assert.match(removed.text, /removed Red mug/);
    await waitForText(page, "cart-badge", "0");
    // Exactly once: one TOOL_RESULT for the one call.
    const call = frames.find((f) => f.dir === "received" && f.frame.type === "TOOL_CALL" && f.frame.name === "cart_remove");
    assert.equal(frames.filter((f) => f.dir === "sent" && f.frame.type === "TOOL_RESULT" && f.frame.callId === call.frame.callId).length, 1);

    // Stop sharing ends it.
    await page.getByTestId("mcp-unpair").click();
    await ask(page, "hello");
    const after = await inspectorCli(endpoint, code, ["--method", "tools/list"]);
    assert.notEqual(after.status, 0, "unpaired: refused");
    assert.ok(!frames.some((f) => f.dir === "received" && JSON.stringify(f.frame).includes(code)), "the code never comes back");
    await python.stop();
    assert.deepEqual(errors, []);
    await close();
  });

  test(`${app}: with WebMCP (the @mcp-b/global polyfill) the browser's agent gets the live tools, run by the page's executor`, async () => {
    const { page, frames, errors, close } = await open("/", server.port, { initScript: WEBMCP_POLYFILL });
    const webmcp = {
      names: () => page.evaluate(() => navigator.modelContextTesting.listTools().map((t) => t.name).sort()),
      tools: () => page.evaluate(async () => (await document.modelContext.getTools()).map((t) => ({ name: t.name, annotations: t.annotations }))),
      // Resolves with the agent's result, parsed.
      call: (tool, args) => page.evaluate(async ([name, json]) => {
        const answer = await navigator.modelContextTesting.executeTool(name, json);
        return typeof answer === "string" ? JSON.parse(answer) : answer;
      }, [tool, JSON.stringify(args)]),
      waitFor: (name, present) => page.waitForFunction(([tool, wanted]) =>
        navigator.modelContextTesting.listTools().some((t) => t.name === tool) === wanted, [name, present]),
    };
    const announcing = (tool) => (f) => f.dir === "sent" && f.frame.type === "CONTEXT_UPDATE" && f.frame.tools.some((t) => t.name === tool);
    const announced = (await frames.waitFor(announcing("cart_add"))).frame.tools;
    await webmcp.waitFor("cart_add", true);
    assert.deepEqual(await webmcp.names(), announced.map((t) => t.name).sort(), "the same tools as the model sees");
    const hints = Object.fromEntries((await webmcp.tools()).map((t) => [t.name, t.annotations ?? {}]));
    assert.equal(hints.product_view.readOnlyHint, true, "risk none: read-only");
    assert.equal(hints.cart_clear.readOnlyHint, false, "risk high: not read-only");

    const callsBefore = frames.filter((f) => f.frame.type === "TOOL_CALL" || f.frame.type === "TOOL_RESULT").length;
    const added = await webmcp.call("cart_add", { productId: "mug-red" });
    assert.ok(!added.isError, JSON.stringify(added));
    assert.match(added.content[0].text, /added 1 × Red mug/);
    await waitForText(page, "cart-badge", "1");
    // The list follows the page: the mini cart's cart_remove comes with a non-empty cart.
    await webmcp.waitFor("cart_remove", true);

    // Invalid arguments: the page's validation answers, no approval is asked, nothing runs.
    const runs = await page.getByTestId("cart-add-runs").textContent();
    const invalid = await webmcp.call("cart_add", { productId: "mug-red", quantity: 99 });
    assert.equal(invalid.isError, true);
    assert.match(invalid.content[0].text, /Validation args "cart_add"/);
    assert.equal(await page.getByTestId("cart-add-runs").textContent(), runs);
    assert.equal(await page.getByTestId("approval-dialog").count(), 0);

    // High risk: the page's dialog asks; a refusal reaches the agent, an approval runs it.
    let removing = webmcp.call("cart_remove", { productId: "mug-red" });
    await page.getByTestId("approval-dialog").waitFor();
    await page.getByTestId("approval-reject").click();
    const rejected = await removing;
    assert.equal(rejected.isError, true);
    assert.match(rejected.content[0].text, /rejected/i);
    await waitForText(page, "cart-badge", "1");
    removing = webmcp.call("cart_remove", { productId: "mug-red" });
    await page.getByTestId("approval-dialog").waitFor();
    await page.getByTestId("approval-approve").click();
    const removed = await removing;
    assert.ok(!removed.isError, JSON.stringify(removed));
    assert.match(removed.content[0].text, /removed Red mug/);
    await waitForText(page, "cart-badge", "0");
    await webmcp.waitFor("cart_remove", false);

    // The calls ran here: none of them went to the server or came from it.
    assert.equal(frames.filter((f) => f.frame.type === "TOOL_CALL" || f.frame.type === "TOOL_RESULT").length, callsBefore);
    // Another page, other tools: the grid's product_view goes, the cart page's cart_view comes.
    await webmcp.call("open_cart", {});
    await webmcp.waitFor("cart_view", true);
    const cartPage = (await frames.waitFor(announcing("cart_view"))).frame.tools;
    assert.deepEqual(await webmcp.names(), cartPage.map((t) => t.name).sort());
    assert.deepEqual(errors, []);
    await close();
  });
}
