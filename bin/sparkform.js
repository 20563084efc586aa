#!/usr/bin/env node
// The project's CLI is TypeScript; tsx compiles it on the fly so there is no build step.
// execa is an ES module: load it with node's own require(esm) first, because tsx's CommonJS
// hook would compile it to CommonJS and then fail on its dependencies' import-only exports
// (the same order components/providers/delegate.ts uses).
require("execa");
require("tsx/cjs");
require("../cli/main.ts");
