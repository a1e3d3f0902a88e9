import { defineConfig } from "vite";

// No React plugin: Vite's own transform handles JSX (automatic runtime).
export default defineConfig({
  base: "/",
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  // The package's wasm is found through `new URL(…, import.meta.url)`: keep it out of the dev
  // pre-bundle so the URL still points at the file.
  optimizeDeps: { exclude: ["@tether/react"] },
});
