// The one place that says how sparkform runs the Pulumi CLI offline. `npm run pulumi`, the
// scripts and the tests all take their environment from here.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import * as path from "node:path";

export const repoRoot = path.resolve(__dirname, "..", "..");

/** Where sparkform keeps per-checkout state (stack state, sim, passphrase): gitignored. */
export function stateDir(): string {
  return process.env.SPARKFORM_STATE_DIR ?? path.join(repoRoot, ".sparkform");
}

export interface PulumiToolchain {
  /** "user": a pulumi found on PATH; "built": built from Go modules by `npm run setup`. */
  source: "user" | "built";
  binDir: string;
  version: string;
}

/** Reads what `npm run setup` recorded; throws with the fix when setup has not run. */
export function readToolchain(): PulumiToolchain {
  // Always the checkout's own: setup records the toolchain once per checkout, whatever state
  // directory a test or the simulated cluster uses.
  const file = path.join(repoRoot, ".sparkform", "toolchain.env");
  if (!existsSync(file)) {
    throw new Error(
      `no Pulumi toolchain recorded in ${file}: run \`npm run setup\` first ` +
        `(it uses your pulumi, or builds one from Go modules)`,
    );
  }
  const values = Object.fromEntries(
    readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line.includes("="))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
  const source = values.SPARKFORM_PULUMI_SOURCE;
  if ((source !== "user" && source !== "built") || !values.SPARKFORM_PULUMI_BIN_DIR) {
    throw new Error(`${file} is malformed: run \`npm run setup\` again`);
  }
  return {
    source,
    binDir: values.SPARKFORM_PULUMI_BIN_DIR,
    version: values.SPARKFORM_PULUMI_VERSION ?? "",
  };
}

/**
 * The passphrase for stacks that use the passphrase secrets provider (the simulated `local`
 * stack): generated once per checkout into a 0600 file. Real stacks choose their own provider
 * at `pulumi stack init --secrets-provider ...`, and then this is unused.
 */
export function passphraseFile(): string {
  const file = path.join(stateDir(), "passphrase");
  if (!existsSync(file)) {
    mkdirSync(stateDir(), { recursive: true });
    writeFileSync(file, randomBytes(24).toString("base64url") + "\n", { mode: 0o600, flag: "wx" });
  }
  return file;
}

/** Environment for the pulumi CLI: local file backend, no update check, no plugin downloads. */
export function pulumiEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const toolchain = readToolchain();
  const state = stateDir();
  const backendDir = path.join(state, "backend");
  mkdirSync(backendDir, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...base,
    PATH: [toolchain.binDir, path.join(repoRoot, "node_modules", ".bin"), base.PATH ?? ""].join(
      path.delimiter,
    ),
    PULUMI_HOME: base.PULUMI_HOME ?? path.join(state, "pulumi-home"),
    PULUMI_BACKEND_URL: base.PULUMI_BACKEND_URL ?? `file://${backendDir}`,
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: "true",
  };
  if (!env.PULUMI_CONFIG_PASSPHRASE && !env.PULUMI_CONFIG_PASSPHRASE_FILE) {
    env.PULUMI_CONFIG_PASSPHRASE_FILE = passphraseFile();
  }
  return env;
}

/** Absolute path of the pulumi executable chosen by setup. */
export function pulumiBinary(): string {
  return path.join(readToolchain().binDir, "pulumi");
}
