// The policy pack's entry (package.json `main`): index.ts through components/ts/require.js, as
// the program loads (program.js says why): run-policy-pack registers a
// type-checking ts-node, which then compiles nothing.
"use strict";
/* global require, module */
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS: this file is what loads TypeScript */
require("../components/ts/require").register();
module.exports = require("./index.ts");
