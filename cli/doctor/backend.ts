// The stack's backend, checked before anything reads the stack: on PostgreSQL (a team's shared
// state, issue 36) that the server answers, holds the state's table and, off this machine, is
// reached over TLS; on any backend, that the passphrase decrypts the stack. A failure here is
// what every later read would trip over in pulumi's words (a timeout, `incorrect passphrase`),
// so doctor stops at it and names the one fix (cli/doctor/index.ts).
import { execa } from "execa";
import { pbkdf2, createDecipheriv } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { pulumiBinary, pulumiEnv, teamSettingFile } from "../../setup/pulumi/env";
import { projectRoot } from "../stack";
import { project, yamlScalar } from "../stack-cache";
import { currentBackend, type Backend, type PostgresBackend } from "../team/backend";
import { addressText, isLoopback, pgAddress, pgProblem, PsqlError } from "../team/errors";
import { sqlTable, sqlText } from "../team/libpq";
import { psqlJson } from "../team/psql";
import type { Finding } from "./findings";

const where = "backend";

export interface BackendCheckOptions {
  /** The Pulumi project's directory (default: the commands' project). */
  readonly projectDir?: string;
  /** The environment the pulumi CLI and psql start from (default: this process's). */
  readonly env?: NodeJS.ProcessEnv;
}

/** TLS on a connection to `host`: a warn only where the bytes leave this machine in clear. */
export function tlsFinding(host: string, ssl: boolean, sslmode: string | undefined): Finding {
  const check = "backend-tls";
  if (ssl)
    return {
      check,
      where,
      status: "pass",
      what: `the connection is encrypted (TLS${sslmode ? `, sslmode=${sslmode}` : ""})`,
    };
  if (isLoopback(host))
    return {
      check,
      where,
      status: "pass",
      what: `plain text to ${host}, which never leaves this machine`,
    };
  return {
    check,
    where,
    status: "warn",
    what: `the connection to ${host} is not encrypted: the stack's state (its secrets' ciphertext, every host and key path) crosses the network in clear`,
    fix: "turn on ssl=on at the server and add ?sslmode=verify-full to the backend URL (`sparkform team login <url>`), with the server's CA in PGSSLROOTCERT",
  };
}

interface ServerFacts {
  readonly version: string;
  readonly ssl: boolean;
  readonly table: boolean;
  readonly user: string;
  readonly database: string;
}

/** One psql round trip: the server's version, whether this session is TLS, whether the table is there. */
async function serverFacts(pg: PostgresBackend, env: NodeJS.ProcessEnv): Promise<ServerFacts> {
  return (await psqlJson(
    pg,
    "select json_build_object(" +
      "'version', current_setting('server_version'), " +
      "'ssl', coalesce((select ssl from pg_stat_ssl where pid = pg_backend_pid()), false), " +
      `'table', to_regclass(${sqlText(sqlTable(pg))}) is not null, ` +
      "'user', current_user, 'database', current_database())",
    env,
  )) as ServerFacts;
}

/** The findings for a PostgreSQL backend; a fail among them means nothing else can read the stack. */
export async function postgresFindings(
  pg: PostgresBackend,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Finding[]> {
  let facts: ServerFacts;
  try {
    facts = await serverFacts(pg, env);
  } catch (err) {
    // Anything else (psql's output not the one JSON value asked for) is still the one line.
    const { what, fix } =
      err instanceof PsqlError ? err.problem : pgProblem((err as Error).message, pg, env);
    return [{ check: "backend", where, status: "fail", what, fix }];
  }
  const a = pgAddress(pg, env);
  return [
    {
      check: "backend",
      where,
      status: "pass",
      what: `${pg.url} answers at ${addressText(a)} as ${facts.user} (database ${facts.database}): PostgreSQL ${facts.version}`,
    },
    facts.table
      ? {
          check: "backend-table",
          where,
          status: "pass",
          what: `table ${pg.table} holds the state`,
        }
      : {
          check: "backend-table",
          where,
          status: "warn",
          what: `no table ${pg.table} in database ${facts.database} yet: no stack has been made on this backend`,
          fix: `the first \`pulumi login ${pg.url}\` and \`pulumi stack init\` create it; if the team's state is elsewhere, correct the URL's database or ?table=`,
        },
    tlsFinding(a.host, facts.ssl, pg.sslmode),
  ];
}

/** Where the pulumi CLI takes the passphrase from, as a finding names it. */
function passphraseSource(env: NodeJS.ProcessEnv): { name: string; read(): string } {
  if (env.PULUMI_CONFIG_PASSPHRASE !== undefined && env.PULUMI_CONFIG_PASSPHRASE !== "")
    return { name: "PULUMI_CONFIG_PASSPHRASE", read: () => env.PULUMI_CONFIG_PASSPHRASE ?? "" };
  const file = env.PULUMI_CONFIG_PASSPHRASE_FILE ?? "";
  return {
    name: `PULUMI_CONFIG_PASSPHRASE_FILE (${file})`,
    // As the CLI reads it: surrounding whitespace is not part of the passphrase.
    read: () => readFileSync(file, "utf8").trim(),
  };
}

/**
 * Whether `passphrase` opens `encryptionsalt` (`v1:<salt>:v1:<nonce>:<ciphertext>`): the
 * CLI's own check (PBKDF2-SHA256, 1,000,000 rounds, AES-256-GCM over the word "pulumi"), for a
 * stack whose config holds no secret yet, which `pulumi config --show-secrets` then never
 * decrypts. About 0.25 s.
 */
export async function passphraseOpensSalt(passphrase: string, salt: string): Promise<boolean> {
  const m = /^v1:([^:]+):v1:([^:]+):([^:]+)$/.exec(salt.trim());
  if (!m) return false;
  const key = await promisify(pbkdf2)(
    passphrase,
    Buffer.from(m[1]!, "base64"),
    1_000_000,
    32,
    "sha256",
  );
  const sealed = Buffer.from(m[3]!, "base64");
  if (sealed.length < 16) return false;
  const d = createDecipheriv("aes-256-gcm", key, Buffer.from(m[2]!, "base64"));
  d.setAuthTag(sealed.subarray(sealed.length - 16));
  try {
    return (
      Buffer.concat([d.update(sealed.subarray(0, sealed.length - 16)), d.final()]).toString() ===
      "pulumi"
    );
  } catch {
    return false;
  }
}

function passphraseFix(): string {
  return (
    "point PULUMI_CONFIG_PASSPHRASE_FILE at the file holding the team's passphrase (from your " +
    `secret store), or record that file once as "passphraseFile" in ${teamSettingFile()} ` +
    "(`sparkform team login`); a PULUMI_CONFIG_PASSPHRASE in the environment wins over both: unset it"
  );
}

/**
 * Whether the passphrase this checkout hands the pulumi CLI decrypts `stack`: its config's
 * secrets through the real CLI (`pulumi config --show-secrets`, ~0.35 s; a `stack export
 * --show-secrets` loads the whole state and proves no more), else its encryptionsalt. A stack of
 * another secrets provider, or none selected, is a skip. Exported for `sparkform team login`.
 */
export async function decryptFinding(
  stack: string | undefined,
  o: BackendCheckOptions = {},
): Promise<Finding> {
  const check = "passphrase";
  const skip = (what: string): Finding => ({ check, where, status: "skip", what });
  const projectDir = o.projectDir ?? projectRoot();
  if (!stack) return skip("no stack selected: give --stack to check its passphrase");
  const p = project(projectDir);
  if (!p) return skip(`no Pulumi project in ${projectDir}`);
  const file = path.join(p.stackConfigDir, `Pulumi.${stack}.yaml`);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return skip(`no ${file}: the stack's config check below says more`);
  }
  const provider = yamlScalar(text, "secretsprovider");
  const salt = yamlScalar(text, "encryptionsalt");
  if (provider && !provider.startsWith("passphrase"))
    return skip(`stack ${stack}'s secrets are kept by ${provider.split(":")[0]}, not a passphrase`);
  if (!salt) return skip(`stack ${stack} has no encryptionsalt: not a passphrase-encrypted stack`);
  let env: NodeJS.ProcessEnv;
  let bin: string;
  try {
    env = pulumiEnv(o.env ?? process.env);
    bin = pulumiBinary();
  } catch {
    return skip("no pulumi CLI to decrypt with (the pulumi check above says why)");
  }
  const source = passphraseSource(env);
  const wrong = (why: string): Finding => ({
    check,
    where,
    status: "fail",
    what: `the passphrase from ${source.name} does not decrypt stack ${stack}: ${why}`,
    fix: passphraseFix(),
  });
  const r = await execa(bin, ["config", "--show-secrets", "--json", "-s", stack], {
    cwd: projectDir,
    env,
    extendEnv: false,
    reject: false,
    timeout: 60_000,
  });
  const said = (r.stderr || r.shortMessage || "")
    .replace(/^error:\s*/i, "")
    .replace(/\s+/g, " ")
    .trim();
  if (r.exitCode !== 0 || r.failed) {
    if (/passphrase|failed to decrypt|decrypt/i.test(said)) return wrong(said);
    return skip(
      `pulumi could not read stack ${stack}'s config (${said}): the check below says more`,
    );
  }
  const secrets = (text.match(/^\s+secure:/gm) ?? []).length;
  if (secrets > 0)
    return {
      check,
      where,
      status: "pass",
      what: `the passphrase from ${source.name} decrypts stack ${stack}'s ${secrets} secret${secrets === 1 ? "" : "s"}`,
    };
  let passphrase: string;
  try {
    passphrase = source.read();
  } catch (err) {
    return wrong((err as Error).message);
  }
  return (await passphraseOpensSalt(passphrase, salt))
    ? {
        check,
        where,
        status: "pass",
        what: `the passphrase from ${source.name} opens stack ${stack}'s encryptionsalt (no secret set yet)`,
      }
    : wrong("incorrect passphrase (it does not open the stack's encryptionsalt)");
}

/**
 * Every finding of the stack's backend, in the order a person fixes them; a fail among them
 * means the stack cannot be read, and the caller stops there.
 */
export async function backendFindings(
  stack: string | undefined,
  o: BackendCheckOptions = {},
): Promise<Finding[]> {
  const env = o.env ?? process.env;
  let backend: Backend;
  try {
    backend = currentBackend(env);
  } catch (err) {
    return [
      {
        check: "backend",
        where,
        status: "fail",
        what: (err as Error).message.split(": run")[0] ?? String(err),
        fix: "run `sparkform team login <url>` again, or `sparkform team logout` for this checkout's own state",
      },
    ];
  }
  const findings: Finding[] = [];
  if (backend.kind === "postgres") {
    findings.push(...(await postgresFindings(backend, env)));
    if (findings.some((f) => f.status === "fail")) return findings;
  }
  findings.push(await decryptFinding(stack, o));
  return findings;
}
