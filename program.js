// The Pulumi program's entry (Pulumi.yaml `main`): index.ts, loaded through components/ts/require.js.
//
// The language host always registers ts-node with type checking for a TypeScript project, and
// ts-node type-checks every file it has not cached: a fresh checkout or an edited module cost
// the next preview a minute on 2 cores, a converged one still paid for its cache and its
// source-mapped stack traces. Registered here, after ts-node, require.js takes over `.ts`
// (esbuild, cached by content), so ts-node compiles nothing. The type check is `tsc -p .`
// (npm run typecheck, part of npm test), as it is for the CLI and the provider modules.
"use strict";
/* global require, module */
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS: this file is what loads TypeScript */
require("./components/ts/require").register();
// cmd/run installed ts-node's source-map-support as Error.prepareStackTrace. It maps only what
// ts-node compiled (nothing: require.js compiles the TypeScript), and it ran for every stack the
// SDK records (a stack per promise and resource: ~0.3 s of a preview's construction). Node's own
// source maps, enabled by require.js, map the esbuild output's inline maps to TypeScript lines.
Error.prepareStackTrace = undefined;
module.exports = require("./index.ts");
