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

/**
 * A team's setting for this checkout (`sparkform team login`, README "Team"): where the stack's
 * state lives and where this operator keeps the team's passphrase. Kept in the gitignored state
 * directory, since each operator's passphrase file is their own; a URL here never holds a
 * password (libpq's PGPASSFILE does).
 */
export interface TeamSetting {
  /** The backend URL, e.g. `postgres://alice@db.lab:5432/sparkform?sslmode=verify-full`. */
  readonly backend: string;
  /** The file holding the team's passphrase (the operator's own secret store). */
  readonly passphraseFile?: string;
}

/** The file `sparkform team login` writes. */
export function teamSettingFile(): string {
  return path.join(stateDir(), "team.json");
}

/** This checkout's team setting, or undefined when the stack is the checkout's own. */
export function readTeamSetting(): TeamSetting | undefined {
  let text: string;
  try {
    text = readFileSync(teamSettingFile(), "utf8");
  } catch {
    return undefined;
  }
  const parsed = JSON.parse(text) as Partial<TeamSetting>;
  if (typeof parsed.backend !== "string" || parsed.backend === "") {
    throw new Error(
      `${teamSettingFile()} has no "backend": run \`sparkform team login <url>\` again, or ` +
        `\`sparkform team logout\` to go back to this checkout's own state`,
    );
  }
  return parsed as TeamSetting;
}

/**
 * The backend URL every pulumi run gets: PULUMI_BACKEND_URL when the operator set it, else the
 * team setting, else the checkout's own file:// directory.
 */
export function backendUrl(base: NodeJS.ProcessEnv = process.env): string {
  return (
    base.PULUMI_BACKEND_URL ??
    readTeamSetting()?.backend ??
    `file://${path.join(stateDir(), "backend")}`
  );
}

/** Environment for the pulumi CLI: the stack's backend, no update check, no plugin downloads. */
export function pulumiEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const toolchain = readToolchain();
  const state = stateDir();
  const backend = backendUrl(base);
  if (backend.startsWith("file://"))
    mkdirSync(backend.slice("file://".length), { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...base,
    PATH: [toolchain.binDir, path.join(repoRoot, "node_modules", ".bin"), base.PATH ?? ""].join(
      path.delimiter,
    ),
    PULUMI_HOME: base.PULUMI_HOME ?? path.join(state, "pulumi-home"),
    PULUMI_BACKEND_URL: backend,
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: "true",
  };
  if (!env.PULUMI_CONFIG_PASSPHRASE && !env.PULUMI_CONFIG_PASSPHRASE_FILE) {
    env.PULUMI_CONFIG_PASSPHRASE_FILE = readTeamSetting()?.passphraseFile ?? passphraseFile();
  }
  return env;
}

/** Absolute path of the pulumi executable chosen by setup. */
export function pulumiBinary(): string {
  return path.join(readToolchain().binDir, "pulumi");
}
