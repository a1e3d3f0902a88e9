// The storefront conformance suite against the Leptos storefront (built by `cargo xtask test`).

import { resolve } from "node:path";
import { defineScenarios } from "./scenarios.mjs";
import { ROOT } from "./harness.mjs";

defineScenarios({ app: "leptos", dist: process.env.TETHER_LEPTOS_DIST ?? resolve(ROOT, "target/storefront-leptos/dist") });
