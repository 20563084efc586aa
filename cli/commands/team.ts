// `sparkform team`: a stack shared by a team, its state on a backend every operator reaches
// (PostgreSQL, README "Team"). `move` takes this checkout's stack there with nothing lost
// (cli/team/move.ts); `login` points another checkout at it, after checking that the team's
// passphrase opens the stack; `logout` goes back to the checkout's own state. The setting is
// one file, .sparkform/team.json (setup/pulumi/env.ts reads it for every pulumi run).
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import {
  backendUrl,
  readTeamSetting,
  stateDir,
  type TeamSetting,
  teamSettingFile,
} from "../../setup/pulumi/env";
import { decryptFinding } from "../doctor/backend";
import { out, UsageError } from "../errors";
import { projectRoot } from "../stack";
import { project, selectedStackName } from "../stack-cache";
import { backendLocks, judgedHolderLine, lockLife } from "../drift/lock";
import { holderSessions } from "../team/session";
import { currentBackend, parseBackend } from "../team/backend";
import { moveStack, pulumiAt, shownUrl } from "../team/move";

export const summary = "share a stack with a team: its state on PostgreSQL (move, login, logout)";
export const usage = `usage: sparkform team [show] [--stack S]
       sparkform team move <url> [--stack S] [--passphrase-file F]
       sparkform team login <url> [--stack S] [--passphrase-file F]
       sparkform team logout
  move    moves the stack's state from where it is now to <url> (e.g.
          postgres://alice@db.lab:5432/sparkform?sslmode=verify-full), checks that every
          resource, output and secret arrived the same, removes the old copy (its export is
          kept under .sparkform/team/), then uses <url> from this checkout on
  login   uses <url> from this checkout on, once the passphrase decrypts the stack there
  logout  back to this checkout's own state (.sparkform/backend)
  show    where the state is, and who holds the stack's lock: live, stale (its control node
          died: the recovery is safe) or unknown (taken outside sparkform: ask first)
  <url> holds no password: libpq's PGPASSFILE (or ~/.pgpass) does.
  --passphrase-file F   the team's passphrase, from your own secret store (default: the
                        checkout's .sparkform/passphrase, or PULUMI_CONFIG_PASSPHRASE_FILE)
  --stack S             the stack (default: the selected one)`;

/** The checkout's own backend: what `logout` goes back to. */
const ownBackend = () => `file://${path.join(stateDir(), "backend")}`;

function checkedUrl(url: string | undefined): string {
  if (!url) throw new UsageError("give the backend's URL");
  if (url.startsWith("file://")) {
    if (!path.isAbsolute(url.slice("file://".length)))
      throw new UsageError(`${url}: a file:// backend must be an absolute path`);
    return url;
  }
  const b = parseBackend(url);
  if (b.kind !== "postgres")
    throw new UsageError(
      `${url}: sparkform team shares a stack on PostgreSQL (postgres://user@host:port/db) or a file:// directory`,
    );
  if (b.password !== undefined)
    throw new UsageError(
      `the URL holds a password, which would be saved in .sparkform/team.json and shown by \`ps\`: ` +
        `give ${b.url} and put the password in PGPASSFILE (a line host:port:database:user:password, mode 0600)`,
    );
  return url;
}

function passphraseFileOf(given: string | undefined): string | undefined {
  if (given === undefined) return undefined;
  const file = path.resolve(given);
  let mode: number;
  try {
    mode = fs.statSync(file).mode;
  } catch {
    throw new UsageError(`--passphrase-file ${file} does not exist`);
  }
  if ((mode & 0o077) !== 0)
    throw new UsageError(
      `--passphrase-file ${file} can be read by others (mode ${(mode & 0o777).toString(8)}): \`chmod 600 ${file}\``,
    );
  return file;
}

function writeSetting(setting: TeamSetting | undefined): void {
  const file = teamSettingFile();
  if (!setting) {
    fs.rmSync(file, { force: true });
    return;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(setting, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/** The environment a pulumi run gets with `passphraseFile` (when given) as the passphrase. */
function withPassphrase(passphraseFile: string | undefined): NodeJS.ProcessEnv {
  if (!passphraseFile) return process.env;
  const { PULUMI_CONFIG_PASSPHRASE: _p, ...rest } = process.env;
  return { ...rest, PULUMI_CONFIG_PASSPHRASE_FILE: passphraseFile };
}

/** Throws, naming the fix, unless the passphrase decrypts `stack` on `url`. */
export function checkDecrypts(
  url: string,
  stack: string,
  projectDir: string,
  env: NodeJS.ProcessEnv,
): void {
  const r = pulumiAt(url, projectDir, env, ["stack", "export", "--show-secrets", "-s", stack]);
  if (r.error) throw r.error;
  if (r.status === 0) return;
  const why = r.stderr.trim().split("\n").slice(-3).join(" ");
  if (/passphrase|decrypt/i.test(why))
    throw new Error(
      `the passphrase does not decrypt stack ${stack} on ${shownUrl(url)} (${why}): every ` +
        `operator needs the passphrase the stack was made with. Get it from the team's secret ` +
        `store into a 0600 file and pass --passphrase-file FILE (or set PULUMI_CONFIG_PASSPHRASE_FILE).`,
    );
  throw new Error(
    `cannot read stack ${stack} on ${shownUrl(url)}: ${why}. \`sparkform doctor\` checks the ` +
      `connection; \`sparkform team move\` puts a stack there first.`,
  );
}

/**
 * Who holds `stack`'s lock, each holder judged live, stale or unknown (cli/drift/lock.ts): what
 * an operator checks before the recovery of a killed `up`.
 */
async function holders(stack: string, projectDir: string): Promise<string> {
  const backend = currentBackend();
  const name = project(projectDir)?.name;
  if (!name) return "";
  // The sessions before the locks, as judgedLocks reads them (see holderSessions).
  const sessions = backend.kind === "postgres" ? await holderSessions(backend) : undefined;
  const locks = await backendLocks(backend, name, stack);
  if (locks.length === 0) return `lock   stack ${stack}: free`;
  return locks
    .map((lock) => `lock   stack ${stack}: ${judgedHolderLine(lock, lockLife(lock, { sessions }))}`)
    .join("\n");
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { stack: { type: "string" }, "passphrase-file": { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  const [verb = "show", url, extra] = positionals;
  if (extra !== undefined) throw new UsageError(`unexpected ${JSON.stringify(extra)}`);
  const dir = projectRoot();
  const setting = readTeamSetting();
  if (verb === "show") {
    if (url !== undefined) throw new UsageError(`unexpected ${JSON.stringify(url)}`);
    out(
      setting
        ? `backend ${shownUrl(backendUrl())} (team setting ${teamSettingFile()})` +
            (setting.passphraseFile ? `\npassphrase ${setting.passphraseFile}` : "")
        : `backend ${shownUrl(backendUrl())} (this checkout's own)`,
    );
    const stack = values.stack ?? selectedStackName(dir);
    if (stack) out(await holders(stack, dir));
    return 0;
  }
  if (verb === "logout") {
    if (url !== undefined) throw new UsageError(`unexpected ${JSON.stringify(url)}`);
    writeSetting(undefined);
    out(`backend ${shownUrl(backendUrl())}`);
    return 0;
  }
  if (verb !== "move" && verb !== "login")
    throw new UsageError(`unknown ${JSON.stringify(verb)}: move, login, logout or show`);
  const to = checkedUrl(url);
  const stack = values.stack ?? selectedStackName(dir);
  if (!stack) throw new UsageError("no stack selected: give --stack S");
  const passphraseFile =
    passphraseFileOf(values["passphrase-file"]) ?? setting?.passphraseFile ?? undefined;
  const env = withPassphrase(passphraseFile);
  if (verb === "move") {
    const from = backendUrl();
    if (from === to) throw new UsageError(`stack ${stack} is on ${shownUrl(to)} already`);
    const moved = moveStack({
      stack,
      from,
      to,
      projectDir: dir,
      env,
      say: (l) => out(l),
    });
    out(`the source's export is kept in ${moved.backup}`);
  } else {
    // The salt check finds a wrong passphrase even on a stack with no secret yet; the export,
    // that the stack is there and its state's secrets decrypt.
    const finding = await decryptFinding(stack, {
      projectDir: dir,
      env: { ...env, PULUMI_BACKEND_URL: to },
    });
    if (finding.status === "fail") throw new Error(`${finding.what}. ${finding.fix ?? ""}`.trim());
    checkDecrypts(to, stack, dir, env);
    out(`stack ${stack} on ${shownUrl(to)}: the passphrase decrypts it`);
  }
  writeSetting(to === ownBackend() ? undefined : { backend: to, passphraseFile });
  out(
    to === ownBackend()
      ? `this checkout uses its own state again`
      : `this checkout uses ${shownUrl(to)} from now on (${teamSettingFile()}); ` +
          `next: npm run pulumi -- preview -s ${stack} --expect-no-changes`,
  );
  return 0;
}
