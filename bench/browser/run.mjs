// Opens the latency page in headless Chromium and prints the results (called by `cargo xtask bench`).

import { startServer, launchBrowser } from "../../tests/e2e/harness.mjs";

const dir = process.argv[2];
const server = await startServer(dir);
const browser = await launchBrowser();
try {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.port}/latency.html`);
  await page.waitForFunction(() => window.benchResults, null, { timeout: 120_000 });
  const results = await page.evaluate(() => window.benchResults);
  if (results.error) throw new Error(results.error);
  const row = (label, s) => `| ${label} | ${s.p50.toFixed(3)} | ${s.p95.toFixed(3)} | ${s.samples} |`;
  console.log("| in Chromium (µs per operation, medians of batches) | p50 | p95 | batches |");
  console.log("| --- | ---: | ---: | ---: |");
  console.log(row("call: lookup + validate + defaults + policy + no-op JS handler, 30 tools", results.call));
  console.log(row("validate only: tether (JS object → wasm, compact validator)", results.validateTether));
  console.log(row("validate only: ajv 8 (compiled)", results.validateAjv));
  console.log(`tether / ajv validation (p50 ratio): ${results.ratio.toFixed(2)}`);
} finally {
  await browser.close();
  server.stop();
}
