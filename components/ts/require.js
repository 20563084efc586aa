// Loads the project's TypeScript in plain node, for the program, the policy pack and the
// dynamic-provider process. Each .ts file is transpiled once by esbuild (types stripped, nothing
// checked: `tsc -p .` is the type check) and the JavaScript is kept in a cache keyed by the
// SHA-256 of the source and the options, so later processes load it without compiling.
//
// Why not tsx: its CommonJS hook also reads and rewrites every .js file loaded after it
// registers (node_modules included), which made loading the provider modules' dependencies
// several times slower than plain node; and it must not see execa (see delegate.ts). Only
// `.ts` is hooked here; node loads JavaScript, and ES modules through require(esm), itself.
"use strict";
/* global require, module, process, __dirname */
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS: this file is what loads TypeScript */
const crypto = require("node:crypto");
const fs = require("node:fs");
const Module = require("node:module");
const os = require("node:os");
const path = require("node:path");

const KEY = Symbol.for("sparkform.ts-require");

function cacheDir() {
  if (process.env.SPARKFORM_TS_CACHE_DIR) return process.env.SPARKFORM_TS_CACHE_DIR;
  const base = process.env.SPARKFORM_CACHE_DIR || path.join(os.homedir(), ".cache", "sparkform");
  return path.join(base, "ts-require");
}

/** esbuild's options, from tsconfig.json's compilerOptions where they matter to the output. */
function transformOptions(version) {
  const tsconfig = JSON.parse(
    fs.readFileSync(path.join(__dirname, "..", "..", "tsconfig.json"), "utf8"),
  );
  const { target, useDefineForClassFields, esModuleInterop } = tsconfig.compilerOptions ?? {};
  return {
    version,
    options: {
      loader: "ts",
      format: "cjs",
      platform: "node",
      target: `node${process.versions.node.split(".")[0]}`,
      sourcemap: "inline",
      tsconfigRaw: { compilerOptions: { target, useDefineForClassFields, esModuleInterop } },
    },
  };
}

function register() {
  if (globalThis[KEY]) return;
  // esbuild itself only on a cache miss: a converged run compiles nothing.
  const { version, options } = transformOptions(require("esbuild/package.json").version);
  const dir = cacheDir();
  const salt = JSON.stringify({ version, options });
  const compile = (source, filename) => {
    const key = crypto
      .createHash("sha256")
      .update(salt)
      .update("\0")
      .update(filename)
      .update("\0")
      .update(source)
      .digest("hex");
    const file = path.join(dir, key.slice(0, 2), `${key}.js`);
    try {
      return fs.readFileSync(file, "utf8");
    } catch {
      // not cached yet
    }
    const { code } = require("esbuild").transformSync(source, { ...options, sourcefile: filename });
    try {
      // Temp name then rename: a concurrent process never reads half a file.
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, code);
      fs.renameSync(tmp, file);
    } catch {
      // an unwritable cache only costs the next process a compile
    }
    return code;
  };
  Module._extensions[".ts"] = function loadTs(module, filename) {
    module._compile(compile(fs.readFileSync(filename, "utf8"), filename), filename);
  };
  // Stack traces point at the TypeScript lines (the maps are inline).
  process.setSourceMapsEnabled(true);
  globalThis[KEY] = true;
}

module.exports = { register };
