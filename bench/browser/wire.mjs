// Bytes over the wire for a first load and a reload of each app given, served by
// `tether serve --static` (the binary in $TETHER_BINARY, else target/debug/tether), in headless
// Chromium: every response's encoded length with its headers (CDP `encodedDataLength`), the
// WebSocket left out. Called by `cargo xtask bench --wire`; prints one Markdown row per app.
//
//   node bench/browser/wire.mjs LABEL=DIST [LABEL=DIST …]

import { startServer, launchBrowser } from "../../tests/e2e/harness.mjs";

const apps = process.argv.slice(2).map((arg) => arg.split("="));
const browser = await launchBrowser();
try {
  console.log("| app | first load: bytes | requests | reload: bytes | requests |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const [label, dist] of apps) {
    const server = await startServer(dist);
    try {
      const context = await browser.newContext();
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send("Network.enable");
      const sockets = new Set();
      let count = { bytes: 0, requests: 0 };
      cdp.on("Network.webSocketCreated", (event) => sockets.add(event.requestId));
      cdp.on("Network.loadingFinished", (event) => {
        if (sockets.has(event.requestId)) return;
        count.bytes += event.encodedDataLength;
        count.requests += 1;
      });
      const url = `http://127.0.0.1:${server.port}/`;
      await page.goto(url, { waitUntil: "networkidle" });
      const first = count;
      count = { bytes: 0, requests: 0 };
      await page.reload({ waitUntil: "networkidle" });
      const reload = count;
      console.log(`| ${label} | ${first.bytes} | ${first.requests} | ${reload.bytes} | ${reload.requests} |`);
      await context.close();
    } finally {
      await server.stopped();
    }
  }
} finally {
  await browser.close();
}
