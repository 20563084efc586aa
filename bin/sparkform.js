#!/usr/bin/env node
// The project's CLI. It runs the bundle bin/bundle.js compiles ahead of time (by `npm ci`), and
// rebuilds it first when any source that went into it changed, so an edit never runs stale.
// Without a bundle it can build (esbuild missing, an unwritable checkout), it runs the
// TypeScript itself through tsx, as before bundling: slower, never wrong.
"use strict";
const path = require("node:path");
const { build, freshBundle, load } = require("./bundle");

function fromSource(why) {
  process.stderr.write(`sparkform: ${why}; running from the TypeScript sources (slower)\n`);
  // execa is an ES module: load it with node's own require(esm) first, because tsx's CommonJS
  // hook would compile it to CommonJS and then fail on its dependencies' import-only exports.
  require("execa");
  require("tsx/cjs");
  require("../cli/main.ts").cli(process.argv.slice(2));
}

// The bundle's name says which build runs: the stack cache keeps parsed config per build. Each
// command has its own code cache, kept only under a command's name (a typo writes none).
const argv = process.argv.slice(2);
const key = /^[a-z][a-z-]{0,15}$/.test(argv[0] ?? "") ? argv[0] : "main";
const isCommand = (cli) => key === "main" || Object.hasOwn(cli.commands, key);
const run = (file) => load(file, key, isCommand).cli(argv, path.basename(file, ".js"));
const bundle = freshBundle();
if (bundle) run(bundle);
else
  build().then(run, (err) =>
    fromSource(`cannot build the CLI bundle (${String(err.message).split("\n")[0]})`),
  );
