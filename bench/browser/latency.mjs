// Latency in the browser: a typical tool call through the runtime (lookup, validation, defaults,
// risk policy, a no-op handler) with 30 tools registered, and validation alone next to ajv on
// the same schema and arguments, in the same page and run. Results land in `window.benchResults`.
//
// Chromium coarsens performance.now() (to 100 µs without cross-origin isolation), so each
// sample times a batch of operations and divides; percentiles are over batches.

import init, { TetherClient } from "/tether_web.js";
import Ajv from "ajv";

const schema = {
  type: "object",
  properties: {
    productId: { type: "string", pattern: "^[a-z]+-[a-z]+$" },
    quantity: { type: "integer", minimum: 1, maximum: 99, default: 1 },
    gift: { type: "boolean", default: false },
    note: { type: "string", maxLength: 200 },
  },
  required: ["productId"],
  additionalProperties: false,
};
const args = { productId: "mug-red", quantity: 2, note: "for my sister" };

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.round((sorted.length - 1) * p))];
  return { p50: at(0.5), p95: at(0.95), samples: sorted.length };
}

async function batches(count, size, run) {
  const samples = [];
  for (let b = 0; b < count; b++) {
    const start = performance.now();
    for (let i = 0; i < size; i++) await run();
    samples.push(((performance.now() - start) / size) * 1000); // µs per operation
  }
  return samples;
}

/** How many operations make a batch of about `targetMs` (timer granularity is ~0.1 ms). */
function calibrate(run, targetMs = 2) {
  let size = 1;
  for (;;) {
    const start = performance.now();
    for (let i = 0; i < size; i++) run();
    if (performance.now() - start >= targetMs) return Math.max(size, 100);
    size *= 2;
  }
}

function syncBatches(count, size, run) {
  const samples = [];
  for (let b = 0; b < count; b++) {
    const start = performance.now();
    for (let i = 0; i < size; i++) run();
    samples.push(((performance.now() - start) / size) * 1000);
  }
  return samples;
}

async function main() {
  await init({ module_or_path: "/tether_web_bg.wasm" });
  const client = new TetherClient("ws://127.0.0.1:9/not-connected");
  const owner = client.newOwner();
  for (let n = 0; n < 30; n++) {
    client.registerTool(owner, { name: `tool_${n}`, description: "A typical tool.", parameters: schema }, () => null);
  }
  const check = await client.invokeLocal("tool_29", args);
  if (check.status !== "ok") throw new Error(`unexpected ${JSON.stringify(check)}`);
  if (client.validate("tool_29", { quantity: 0 }).length !== 2) throw new Error("validation does not report errors");

  const ajv = new Ajv({ allErrors: true, useDefaults: false });
  const ajvValidate = ajv.compile(schema);
  if (!ajvValidate(args) || ajvValidate({ quantity: 0 })) throw new Error("ajv disagrees");

  // Warm-up, then measure the three side by side, interleaved so that noise hits all of them.
  await batches(20, 50, () => client.invokeLocal("tool_29", args));
  syncBatches(20, 200, () => client.validate("tool_29", args));
  syncBatches(20, 200, () => ajvValidate(args));
  const ourSize = calibrate(() => client.validate("tool_29", args));
  const theirSize = calibrate(() => ajvValidate(args));
  const call = [], ours = [], theirs = [];
  for (let round = 0; round < 10; round++) {
    call.push(...(await batches(10, 100, () => client.invokeLocal("tool_29", args))));
    ours.push(...syncBatches(10, ourSize, () => client.validate("tool_29", args)));
    theirs.push(...syncBatches(10, theirSize, () => ajvValidate(args)));
  }
  const results = {
    call: stats(call),
    validateTether: stats(ours),
    validateAjv: stats(theirs),
  };
  results.ratio = results.validateTether.p50 / results.validateAjv.p50;
  window.benchResults = results;
}

main().catch((error) => { window.benchResults = { error: String(error && error.stack || error) }; });
