// The e2e harness: the real `tether` server with the built-in model serving a built storefront,
// a TCP proxy in front of it (so a test can cut every socket), and headless Chromium driven by
// playwright-core (Debian's /usr/bin/chromium; no browser download).

import { spawn } from "node:child_process";
import { createServer, connect } from "node:net";
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { chromium } from "playwright-core";

export const ROOT = resolve(import.meta.dirname, "../..");
export const ARTIFACTS = resolve(ROOT, "target/e2e-artifacts");

/**
 * Starts `tether serve <modelArgs> --static <dist>` on a free port; the built-in model unless
 * `modelArgs` says otherwise (the task benchmark passes a local model's URL and a tool mode).
 */
export async function startServer(dist, modelArgs = ["--model", "scripted"]) {
  const binary = resolve(ROOT, "target/debug/tether");
  const child = spawn(binary, ["serve", ...modelArgs, "--addr", "127.0.0.1:0", "--static", dist], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  let banner = "";
  child.stderr.on("data", (chunk) => (log += chunk));
  const url = await new Promise((resolveUrl, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      banner = out.split("\n")[0];
      const match = out.match(/http:\/\/(127\.0\.0\.1:\d+)/);
      if (match) resolveUrl(match[1]);
    });
    child.on("exit", (code) => reject(new Error(`tether exited with ${code}: ${log}`)));
  });
  const [host, port] = url.split(":");
  return { host, port: Number(port), stop: () => child.kill(), log: () => log, banner: () => banner };
}

/** A TCP proxy to `port` that can drop every connection at once. */
export async function startProxy(port) {
  const sockets = new Set();
  const server = createServer((client) => {
    const upstream = connect(port, "127.0.0.1");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return {
    port: server.address().port,
    /** Cuts every open connection, as a network failure would. */
    killAll() {
      const count = sockets.size;
      for (const socket of sockets) socket.destroy();
      return count;
    },
    stop: () => new Promise((done) => { for (const s of sockets) s.destroy(); server.close(done); }),
  };
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
      "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
}

/** Records every WebSocket frame the page sends and receives, parsed. */
export function recordFrames(page) {
  const frames = [];
  page.on("websocket", (socket) => {
    socket.on("framesent", (frame) => frames.push({ dir: "sent", at: frames.length, ...parse(frame.payload) }));
    socket.on("framereceived", (frame) => frames.push({ dir: "received", at: frames.length, ...parse(frame.payload) }));
  });
  return frames;
}

function parse(payload) {
  try {
    return { frame: JSON.parse(String(payload)) };
  } catch {
    return { frame: { type: "UNPARSEABLE" } };
  }
}

export function artifactPath(app, name) {
  const dir = resolve(ARTIFACTS, app);
  mkdirSync(dir, { recursive: true });
  return resolve(dir, name);
}

const DONE = '[data-testid="chat-message"][data-status]:not([data-status=""])';

/** How many agent answers are complete. */
export async function answers(page) {
  return page.locator(DONE).count();
}

/** Types a message into the chat and sends it. */
export async function say(page, text) {
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("chat-input").press("Enter");
}

/** Waits for answer number `count + 1` and returns its text and status. */
export async function nextAnswer(page, count) {
  await page.waitForFunction(([selector, n]) => document.querySelectorAll(selector).length > n, [DONE, count]);
  const last = page.locator(DONE).nth(count);
  return { text: await last.innerText(), status: await last.getAttribute("data-status") };
}

/** Sends a message and waits for the answer. */
export async function ask(page, text) {
  const count = await answers(page);
  await say(page, text);
  return nextAnswer(page, count);
}

/** Waits until the element with `testid` has exactly `text`. */
export async function waitForText(page, testid, text) {
  await page.waitForFunction(
    ([id, expected]) => document.querySelector(`[data-testid="${id}"]`)?.textContent.trim() === expected,
    [testid, text],
  );
}
