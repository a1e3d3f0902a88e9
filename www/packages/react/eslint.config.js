// Lint for @tether/react (`npm run lint`, part of `cargo xtask test`; warnings fail it too):
// typescript-eslint's recommended rules and React's rules of hooks (rules-of-hooks,
// exhaustive-deps; the React Compiler's stricter rules are not adopted).
import reactHooks from "eslint-plugin-react-hooks";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "wasm/", "node_modules/"] },
  ...tseslint.configs.recommended,
  {
    plugins: { "react-hooks": reactHooks },
    rules: {
      "react-hooks/rules-of-hooks": "error",
      "react-hooks/exhaustive-deps": "error",
      // `_name`: a parameter a signature needs and the body does not.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
    },
  },
  {
    // Type-level tests: expressions written only to be type-checked.
    files: ["test/types/**"],
    rules: { "@typescript-eslint/no-unused-expressions": "off" },
  },
);
