// `npm run pulumi`'s entry: setup/pulumi/main.ts, through tsx. execa (which main.ts reaches
// through the team backend's psql) is an ES module: node's own require(esm) loads it first, as
// bin/sparkform.js does, because tsx's CommonJS hook would compile it to CommonJS and then fail
// on its dependencies' import-only exports.
"use strict";
/* global require */
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS: this file is what loads TypeScript */
require("execa");
require("tsx/cjs");
require("./main.ts");
