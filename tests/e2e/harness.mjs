// The e2e harness: the real `tether` server with the built-in model serving a built storefront,
// a TCP proxy in front of it (so a test can cut every socket), and headless Chromium driven by
// playwright-core (Debian's /usr/bin/chromium; no browser download).

import { spawn } from "node:child_process";
import { createServer, connect } from "node:net";
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { chromium } from "playwright-core";

export const ROOT = resolve(import.meta.dirname, "../..");
export const ARTIFACTS = resolve(ROOT, "target/e2e-artifacts");

/**
 * Starts `tether serve <modelArgs> --static <dist>` (no pages when `dist` is null) on `addr`; the
 * built-in model unless `modelArgs` says otherwise (the task benchmark passes a local model's URL
 * and a tool mode).
 */
export async function startServer(dist, addr = "127.0.0.1:0", modelArgs = ["--model", "scripted"]) {
  // A benchmark may compare another build (`bench/browser/wire.mjs`).
  const binary = process.env.TETHER_BINARY ?? resolve(ROOT, "target/debug/tether");
  const pages = dist ? ["--static", dist] : [];
  // In memory unless a test names a store: the default SQLite file is one server's at a time.
  const store = modelArgs.includes("--store") ? [] : ["--store", "memory"];
  const child = spawn(binary, ["serve", ...modelArgs, ...store, "--addr", addr, ...pages], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  let banner = "";
  const exited = new Promise((done) => child.once("exit", done));
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
  return {
    host,
    port: Number(port),
    stop: () => child.kill(),
    /** Stops it and waits until the process is gone (its port is free again). */
    stopped: () => (child.kill(), exited),
    log: () => log,
    banner: () => banner,
  };
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

/**
 * Records every WebSocket frame the page sends and receives, parsed. Set `frames.onSent` to a
 * function to be called with each sent frame as it is recorded. `frames.waitFor(predicate)`
 * resolves with the first recorded frame that matches (one recorded already, or the next one),
 * and fails after `timeoutMs`.
 */
export function recordFrames(page) {
  const frames = [];
  const waiters = new Set();
  const record = (entry) => {
    frames.push(entry);
    for (const waiter of waiters) waiter(entry);
  };
  page.on("websocket", (socket) => {
    socket.on("framesent", (frame) => {
      const entry = { dir: "sent", at: frames.length, ...parse(frame.payload) };
      record(entry);
      frames.onSent?.(entry);
    });
    socket.on("framereceived", (frame) => record({ dir: "received", at: frames.length, ...parse(frame.payload) }));
  });
  frames.waitFor = (predicate, timeoutMs = 10_000) => {
    const found = frames.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`no matching frame within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (entry) => {
        if (!predicate(entry)) return;
        clearTimeout(timer);
        waiters.delete(waiter);
        resolve(entry);
      };
      waiters.add(waiter);
    });
  };
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

/**
 * A TCP proxy to `port` that serves the pages but, while `online` is false, drops every
 * WebSocket upgrade to /ws: the page loads, and the agent server is unreachable for it.
 */
export async function startSwitchProxy(port) {
  const sockets = new Set();
  const proxy = {
    online: false,
    refused: 0,
    port: 0,
    stop: () => new Promise((done) => { for (const s of sockets) s.destroy(); server.close(done); }),
  };
  const server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    client.once("data", (first) => {
      if (!proxy.online && first.toString("latin1").startsWith("GET /ws")) {
        proxy.refused++;
        client.destroy();
        return;
      }
      const upstream = connect(port, "127.0.0.1");
      sockets.add(upstream);
      upstream.on("close", () => sockets.delete(upstream));
      upstream.on("error", () => {});
      upstream.write(first);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  proxy.port = server.address().port;
  return proxy;
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
export async function freePort() {
  const server = createServer();
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address();
  await new Promise((done) => server.close(done));
  return port;
}

/**
 * Waits until the element with `testid` has text matching `pattern`; returns that text (as it was
 * when it matched: it may have changed since, e.g. a connection state moving on).
 */
export async function waitForMatch(page, testid, pattern) {
  const matched = await page.waitForFunction(
    ([id, source, flags]) => {
      const text = (document.querySelector(`[data-testid="${id}"]`)?.textContent ?? "").trim();
      return new RegExp(source, flags).test(text) ? text : null;
    },
    [testid, pattern.source, pattern.flags],
  );
  return matched.jsonValue();
}

/**
 * Runs the MCP Inspector's CLI mode (npm `@modelcontextprotocol/inspector-cli`, the CLI of
 * `npx @modelcontextprotocol/inspector --cli`) against `endpoint` with `code` as the bearer
 * token; resolves with its exit status, stdout and stderr.
 */
export function inspectorCli(endpoint, code, args) {
  const cli = resolve(ROOT, "node_modules/@modelcontextprotocol/inspector-cli/build/index.js");
  const child = spawn(process.execPath, [cli, endpoint, "--transport", "http", "--header", `Authorization: Bearer ${code}`, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    // It looks for its own package.json as `../package.json` from the working directory (and
    // imports it from its module's folder), so it runs from its build folder.
    cwd: dirname(cli),
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((done) => child.once("close", (status) => done({ status, stdout, stderr })));
}

/**
 * An MCP client made with the official Python SDK (tests/e2e/mcp_driver.py, run by the venv
 * `cargo xtask setup` makes in target/python-mcp), connected to `endpoint` with `code`.
 * `send(command)` writes one command and resolves with its answer; `next(predicate)` resolves
 * with the first line printed (already, or from now on) that matches and is not yet taken.
 */
export function pythonMcpClient(endpoint, code) {
  const python = resolve(ROOT, "target/python-mcp/bin/python");
  const child = spawn(python, [resolve(ROOT, "tests/e2e/mcp_driver.py"), endpoint, code], { stdio: ["pipe", "pipe", "pipe"] });
  const lines = [];
  const waiters = [];
  let stderr = "";
  let pending = "";
  let exited = null;
  const settle = () => {
    for (const waiter of [...waiters]) {
      const index = lines.findIndex(waiter.predicate);
      if (index >= 0) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(lines.splice(index, 1)[0]);
      } else if (exited !== null) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.reject(new Error(`the Python MCP client exited (${exited}): ${stderr}`));
      }
    }
  };
  child.stdout.on("data", (chunk) => {
    pending += chunk;
    const complete = pending.split("\n");
    pending = complete.pop();
    for (const line of complete.filter(Boolean)) lines.push(JSON.parse(line));
    settle();
  });
  child.stderr.on("data", (chunk) => (stderr += chunk));
  child.once("exit", (status) => ((exited = status), settle()));
  const next = (predicate) => new Promise((resolve, reject) => {
    waiters.push({ predicate: (line) => line.error !== undefined || predicate(line), resolve: (line) => {
      if (line.error !== undefined) reject(new Error(`the Python MCP client failed: ${line.error}\n${stderr}`));
      else resolve(line);
    }, reject });
    settle();
  });
  return {
    next,
    send(command) {
      child.stdin.write(`${JSON.stringify(command)}\n`);
      return next((line) => line.event === undefined && line.ready === undefined);
    },
    stop: () => new Promise((done) => (exited !== null ? done() : (child.once("exit", done), child.stdin.end()))),
  };
}
