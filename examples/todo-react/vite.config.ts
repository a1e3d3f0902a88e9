import { defineConfig } from "vite";

export default defineConfig({
  // @tether/react finds its .wasm next to its JS: keep it out of Vite's dependency pre-bundling,
  // and pre-bundle what it imports from React (CommonJS), which Vite then does not see.
  optimizeDeps: { exclude: ["@tether/react"], include: ["react", "react/jsx-runtime", "react-dom"] },
  // The dev server (port 5173) passes the agent's WebSocket on to `tether serve` (port 8787), so
  // the page's default URL, /ws on its own origin, works in development too.
  server: { proxy: { "/ws": { target: process.env.TETHER_SERVER ?? "http://127.0.0.1:8787", ws: true } } },
});
