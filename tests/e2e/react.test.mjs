// The storefront conformance suite against the React storefront (built by `cargo xtask test`).

import { resolve } from "node:path";
import { defineScenarios } from "./scenarios.mjs";
import { ROOT } from "./harness.mjs";

defineScenarios({ app: "react", dist: process.env.TETHER_REACT_DIST ?? resolve(ROOT, "www/storefront-react/dist") });
