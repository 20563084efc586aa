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

// Modules that @pulumi/pulumi loads eagerly and that no sparkform process uses: the Automation
// API (`pulumi.automation`, with its gRPC server and workspace code) and @npmcli/arborist (only
// `runtime.computeCodePaths`, for packaging function code, calls it). Loading them cost every
// program and policy-pack start ~0.3–0.5 s on 2 cores. Each is bound lazily where the SDK asks
// for it: an ES-module-shaped stand-in that loads the real module on first use, so
// `pulumi.automation.LocalWorkspace` or a computeCodePaths call still work as before. Other
// requesters get the module itself.
const LAZY = [
  { request: "./automation", from: /[\\/]@pulumi[\\/]pulumi[\\/]index\.js$/ },
  {
    request: "@npmcli/arborist",
    from: /[\\/]@pulumi[\\/]pulumi[\\/]runtime[\\/]closure[\\/]codePaths\.js$/,
  },
];

function lazyModule(load) {
  let real;
  const mod = () => (real ??= load());
  // `__esModule` answered without loading: the SDK's __importStar then keeps this object as it
  // is instead of copying (and so reading) every export.
  return new Proxy(
    {},
    {
      get: (_, key) => (key === "__esModule" ? true : mod()[key]),
      has: (_, key) => key === "__esModule" || key in mod(),
      ownKeys: () => Reflect.ownKeys(mod()),
      getOwnPropertyDescriptor: (_, key) => {
        const d = Object.getOwnPropertyDescriptor(mod(), key);
        return d && { ...d, configurable: true };
      },
    },
  );
}

function registerLazy() {
  const load = Module._load;
  Module._load = function sparkformLoad(request, parent, isMain) {
    const lazy =
      parent?.filename && LAZY.find((l) => l.request === request && l.from.test(parent.filename));
    if (lazy) return lazyModule(() => load.call(this, request, parent, isMain));
    return load.call(this, request, parent, isMain);
  };
}

function register() {
  if (globalThis[KEY]) return;
  registerLazy();
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
