// The CLI compiled ahead of time: cli/main.ts and everything it imports, bundled by esbuild into
// one CommonJS file under .sparkform/cli/ that bin/sparkform.js runs with plain node. Compiling
// TypeScript at every start (tsx) cost ~1 s of a 1.8 s `--help`, and on a busy machine more.
//
// Made by `npm ci` / `npm install` (the package's `prepare` script: `node bin/bundle.js`) and
// remade by bin/sparkform.js whenever it is stale. Stale means: any file that went into it (the
// TypeScript sources, the packages bundled in, this file, package.json, tsconfig.json) or any
// directory holding one differs from what the manifest recorded when the build read it: size,
// mtime, ctime, inode. ctime cannot be set back by touch, tar, rsync or git, so an edited source
// never runs stale; a directory's times change when a file is added to or removed from it, which
// covers a new file that an import would now resolve to. The check is a few hundred stat calls.
//
// What is bundled: the project's code and the small pure-JavaScript packages it imports on every
// path (zod, execa and its dependencies, ajv, p-limit, fast-deep-equal): one file parses faster
// than hundreds. Packages with native code or their own loaders stay external and load from
// node_modules at run time. One of those, @pulumi/pulumi, is imported at the top of a module the
// CLI needs (components/config.ts) but used only by the Pulumi program: it is bound lazily here
// (each export a getter that loads the package on first use), which saves ~1 s of every start
// that parses a stack's config.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const repo = path.resolve(__dirname, "..");
/** This checkout's CLI: its entry, and where the bundle and its manifest go. */
const CHECKOUT = {
  root: repo,
  entry: path.join(repo, "cli", "main.ts"),
  outDir: path.join(repo, ".sparkform", "cli"),
};
/** Bumped when the manifest's meaning changes: an older manifest then reads as stale. */
const FORMAT = 1;

/** Bundled into the CLI, with every package they import in turn. */
const BUNDLED = new Set(["zod", "execa", "ajv", "p-limit", "fast-deep-equal"]);
/** External, and loaded only when one of their exports is first used. */
const LAZY = ["@pulumi/pulumi"];

/** What identifies a file's content without reading it (git's index keeps the same). */
function signature(file) {
  try {
    const st = fs.statSync(file, { bigint: true });
    return `${st.size}:${st.mtimeNs}:${st.ctimeNs}:${st.ino}`;
  } catch {
    return "absent";
  }
}

const manifestOf = (outDir) => path.join(outDir, "manifest.json");

/** The bundle to run: its path when it is there and not stale, else undefined. */
function freshBundle({ root, outDir } = CHECKOUT) {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestOf(outDir), "utf8"));
  } catch {
    return undefined;
  }
  if (manifest.format !== FORMAT || typeof manifest.bundle !== "string") return undefined;
  for (const [rel, sig] of manifest.inputs) {
    if (signature(path.join(root, rel)) !== sig) return undefined;
  }
  const file = path.join(outDir, manifest.bundle);
  return fs.existsSync(file) ? file : undefined;
}

const isBare = (p) => !p.startsWith(".") && !path.isAbsolute(p) && !p.startsWith("node:");
const packageName = (p) =>
  p
    .split("/")
    .slice(0, p.startsWith("@") ? 2 : 1)
    .join("/");

/** A module whose exports load `name` on first use (see the header). */
function lazyModule(name, keys) {
  return [
    `"use strict";`,
    `let real;`,
    `const load = () => (real ??= require(${JSON.stringify(name)}));`,
    `Object.defineProperty(exports, "__esModule", { value: true });`,
    `for (const key of ${JSON.stringify(keys)})`,
    `  Object.defineProperty(exports, key, { enumerable: true, get: () => load()[key] });`,
  ].join("\n");
}

/** Build the bundle and its manifest; resolves to the bundle's path. */
async function build({ root, entry, outDir } = CHECKOUT) {
  const esbuild = require("esbuild");
  const manifestFile = manifestOf(outDir);
  let previous;
  try {
    previous = JSON.parse(fs.readFileSync(manifestFile, "utf8"));
  } catch {
    // first build
  }
  // A lazy package's export names, read by loading it once (the build's process only), and
  // reused from the last build while its package.json is unchanged.
  const lazy = {};
  const lazyKeys = (name) => {
    const pkg = require.resolve(`${name}/package.json`, { paths: [root] });
    const sig = signature(pkg);
    const old = previous?.lazy?.[name];
    lazy[name] =
      old && old.sig === sig
        ? old
        : { sig, keys: Object.keys(require(require.resolve(name, { paths: [root] }))) };
    record(pkg);
    return lazy[name].keys;
  };
  // Each input's signature as it was just before the build read it: an edit during the build
  // then shows as a difference at the next start, never as a fresh bundle of old text.
  const seen = new Map();
  const record = (file) => {
    const rel = path.relative(root, file);
    if (!seen.has(rel)) seen.set(rel, signature(file));
  };
  const plugin = {
    name: "sparkform-cli",
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => {
        if (!isBare(args.path)) return undefined;
        const name = packageName(args.path);
        if (LAZY.includes(args.path)) {
          return args.namespace === "lazy"
            ? { path: args.path, external: true }
            : { path: args.path, namespace: "lazy" };
        }
        // A bundled package's own imports are bundled with it; the project's go by the list.
        const fromPackage = args.importer.split(path.sep).includes("node_modules");
        return fromPackage || BUNDLED.has(name) ? undefined : { path: args.path, external: true };
      });
      b.onLoad({ filter: /.*/, namespace: "lazy" }, (args) => ({
        contents: lazyModule(args.path, lazyKeys(args.path)),
        loader: "js",
      }));
      b.onLoad({ filter: /\.([cm]?[jt]s|json)$/ }, (args) => {
        record(args.path);
        let contents = fs.readFileSync(args.path, "utf8");
        // __dirname is the bundle's directory once bundled: give each module its own back,
        // relative to the bundle, so the checkout can move.
        const rel = path.relative(outDir, path.dirname(args.path));
        contents = contents.replace(
          /\b__dirname\b/g,
          `require("node:path").join(__dirname, ${JSON.stringify(rel)})`,
        );
        const loader = args.path.endsWith(".json")
          ? "json"
          : /\.[cm]?ts$/.test(args.path)
            ? "ts"
            : "js";
        return { contents, loader };
      });
    },
  };
  for (const f of [__filename, path.join(root, "package.json"), path.join(root, "tsconfig.json")])
    record(f);
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "cjs",
    target: `node${process.versions.node.split(".")[0]}`,
    // import() of a package becomes a require: a script compiled through node:vm (load, below)
    // has no loader of its own for it.
    supported: { "dynamic-import": false },
    write: false,
    metafile: true,
    logLevel: "silent",
    plugins: [plugin],
  });
  // Every directory that holds a module: adding a file there could change what an import
  // resolves to. (Not the root, which holds only package.json and tsconfig.json of the inputs,
  // and gains and loses logs and state directories.)
  const dirs = new Set([...seen.keys()].map((rel) => path.dirname(rel)));
  for (const dir of dirs) if (dir !== ".") record(path.join(root, dir));
  const code = result.outputFiles[0].contents;
  const id = require("node:crypto").createHash("sha256").update(code).digest("hex").slice(0, 16);
  const bundle = `sparkform-${id}.js`;
  fs.mkdirSync(outDir, { recursive: true });
  // The bundle under its own name first, then the manifest that names it, each by rename: a
  // concurrent start reads a complete manifest that names a complete bundle of what it lists.
  const tmp = (f) => `${f}.${process.pid}.tmp`;
  const file = path.join(outDir, bundle);
  fs.writeFileSync(tmp(file), code);
  fs.renameSync(tmp(file), file);
  const manifest = { format: FORMAT, bundle, inputs: [...seen], lazy };
  fs.writeFileSync(tmp(manifestFile), `${JSON.stringify(manifest)}\n`);
  fs.renameSync(tmp(manifestFile), manifestFile);
  // Older bundles and their code caches: a start that read the previous manifest a moment ago
  // may still be about to load its bundle, so only those written over a minute ago go.
  for (const f of fs.readdirSync(outDir)) {
    if (!/^sparkform-[0-9a-f]+\./.test(f) || f.startsWith(`sparkform-${id}.`)) continue;
    try {
      const p = path.join(outDir, f);
      if (Date.now() - fs.statSync(p).mtimeMs > 60_000) fs.rmSync(p);
    } catch {
      // another build removed it
    }
  }
  return file;
}

/**
 * Load bundle `file` as node's require would, with V8's code cache beside it: compiling the
 * 1.7 MB bundle and then its functions was a third of a start's CPU. A cache per command
 * (`key`), written at the end of that command's first run when `keep(exports)` agrees, so it
 * holds the functions the command compiled; V8 checks it against the source and its flags and
 * ignores a stale one.
 */
function load(file, key, keep = () => true) {
  const Module = require("node:module");
  const vm = require("node:vm");
  const cacheFile = `${file.slice(0, -".js".length)}.${key}.v8cache`;
  let cachedData;
  try {
    cachedData = fs.readFileSync(cacheFile);
  } catch {
    // first run of this command with this bundle
  }
  const script = new vm.Script(Module.wrap(fs.readFileSync(file, "utf8")), {
    filename: file,
    cachedData,
  });
  if (cachedData === undefined || script.cachedDataRejected) {
    process.once("exit", () => {
      if (!keep(mod.exports)) return;
      try {
        const tmp = `${cacheFile}.${process.pid}.tmp`;
        fs.writeFileSync(tmp, script.createCachedData());
        fs.renameSync(tmp, cacheFile);
      } catch {
        // no cache costs the next start its compile, nothing else
      }
    });
  }
  const mod = new Module(file, module);
  mod.filename = file;
  mod.paths = Module._nodeModulePaths(path.dirname(file));
  const wrapper = script.runInThisContext();
  wrapper.call(mod.exports, mod.exports, Module.createRequire(file), mod, file, path.dirname(file));
  mod.loaded = true;
  return mod.exports;
}

module.exports = { build, freshBundle, load };

if (require.main === module) {
  const started = Date.now();
  build().then(
    (file) =>
      process.stdout.write(
        `sparkform: CLI bundle ${path.relative(repo, file)} (${Date.now() - started} ms)\n`,
      ),
    (err) => {
      process.stderr.write(`sparkform: cannot build the CLI bundle: ${err.message}\n`);
      process.exitCode = 1;
    },
  );
}
