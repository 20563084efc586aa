// A lock holder on PostgreSQL judged from any host (cli/drift/lock.ts lockLife, the session of
// cli/team/session.ts) without a server: live by its pid on its own host or by its open session
// elsewhere, stale when its pid is gone here or its session opened and ended, unknown when it
// never had one (plain `pulumi`); the line a refused command prints; a refusal read from
// pulumi's own words; which verbs open a session. The real server and CLI:
// test/integration/team-backend.test.ts.
import * as os from "node:os";
import { describe, expect, it } from "vitest";
import {
  judgedHolderLine,
  lockedRefusal,
  lockLife,
  parseLock,
  SESSION_GRACE_MS,
} from "../../cli/drift/lock";
import { type HolderSessions, pulumiVerb, sessionName, takesLock } from "../../cli/team/session";

const SINCE = "2026-12-07T19:06:02.123456789Z";
const KEY = "pulumi/.pulumi/locks/organization/driftprobe/prod/1b2c.json";
const lock = (host: string, pid: number | undefined = 4242) => ({
  ...parseLock(JSON.stringify({ pid, username: "alice", hostname: host, timestamp: SINCE }), KEY),
});
const later = (ms: number) => Date.parse(SINCE) + ms;
const none: HolderSessions = { open: [], opened: [] };
// Above any pid_max Linux allows (2^22): never a running process.
const GONE = 5_000_000;

describe("a holder's session name", () => {
  it("names the pid, then the host, as the lock row does", () => {
    expect(sessionName("spark-ctl", 4242)).toBe("sparkform-lock pid=4242 host=spark-ctl");
  });

  it("is clipped as the server clips application_name (63 bytes), the pid kept whole", () => {
    const name = sessionName("a".repeat(80), 4194303);
    expect(name).toHaveLength(63);
    expect(name.startsWith("sparkform-lock pid=4194303 host=aaa")).toBe(true);
  });

  it("has what is not printable ASCII replaced, as the server does", () => {
    expect(sessionName("hôte", 1)).toBe("sparkform-lock pid=1 host=h?te");
  });
});

describe("the verbs that open a session", () => {
  it("up, update, refresh, destroy, import and watch take the lock; preview, cancel and the rest do not", () => {
    for (const v of ["up", "update", "refresh", "destroy", "import", "watch"])
      expect(takesLock([v, "--yes", "-s", "prod"])).toBe(true);
    for (const v of ["preview", "cancel", "stack", "config", "version"])
      expect(takesLock([v, "-s", "prod"])).toBe(false);
    expect(takesLock([])).toBe(false);
  });

  it("the verb is the first positional argument, past global flags and their values", () => {
    expect(pulumiVerb(["--cwd", "up", "refresh"])).toBe("refresh");
    expect(pulumiVerb(["-C", "dir", "--non-interactive", "up"])).toBe("up");
    expect(pulumiVerb(["--color=never", "destroy"])).toBe("destroy");
  });
});

describe("a lock's holder, judged", () => {
  it("on its own host, by its pid: live while it runs, stale once gone", () => {
    const host = os.hostname();
    expect(lockLife({ ...lock(host), pid: process.pid }, { sessions: none })).toEqual({
      life: "live",
      why: `pid ${process.pid} still runs on ${host}`,
    });
    expect(lockLife(lock(host, GONE), { sessions: none })).toEqual({
      life: "stale",
      why: `pid ${GONE} no longer runs on ${host}`,
    });
  });

  it("from another host with its session open: live", () => {
    const sessions = { open: [sessionName("ctl-a", 4242)], opened: [] };
    expect(lockLife(lock("ctl-a"), { host: "ctl-b", sessions, now: later(60_000) })).toEqual({
      life: "live",
      why: "its sparkform session to the backend is open",
    });
  });

  it("from another host, its session opened and ended: stale, however young the lock", () => {
    const sessions = {
      open: [sessionName("ctl-a", 999)],
      opened: [{ host: "ctl-a", pid: 4242, started: "2026-12-07T19:06:01.500Z" }],
    };
    const life = lockLife(lock("ctl-a"), { host: "ctl-b", sessions, now: later(1000) });
    expect(life.life).toBe("stale");
    expect(life.why).toMatch(/session ended without the lock being released/);
  });

  it("a session of the same host and pid opened long after the lock is another process's", () => {
    const sessions = {
      open: [],
      opened: [{ host: "ctl-a", pid: 4242, started: "2026-12-07T20:06:02Z" }],
    };
    expect(lockLife(lock("ctl-a"), { host: "ctl-b", sessions, now: later(3_600_000) })).toEqual({
      life: "unknown",
      why: "taken outside sparkform: no session to check",
    });
  });

  it("from another host with no session ever: unknown, never stale (taken outside sparkform)", () => {
    expect(lockLife(lock("ctl-a"), { host: "ctl-b", sessions: none, now: later(60_000) })).toEqual({
      life: "unknown",
      why: "taken outside sparkform: no session to check",
    });
    // Just taken: its session may still be opening.
    expect(
      lockLife(lock("ctl-a"), {
        host: "ctl-b",
        sessions: none,
        now: later(SESSION_GRACE_MS - 1),
      }),
    ).toEqual({
      life: "unknown",
      why: "taken just now, its session may still be opening: look again",
    });
  });

  it("without sessions to read (a file backend), or without a pid: unknown", () => {
    expect(lockLife(lock("ctl-a"), { host: "ctl-b" })).toEqual({
      life: "unknown",
      why: "taken on another host: only ctl-a can tell",
    });
    expect(lockLife(lock("ctl-a", undefined), { host: "ctl-b", sessions: none }).life).toBe(
      "unknown",
    );
  });
});

describe("the holder line a refused command prints", () => {
  const l = lock("ctl-a");
  const head = `alice@ctl-a (pid 4242) since ${SINCE}`;

  it("live: wait, or ask the holder", () => {
    expect(
      judgedHolderLine(l, { life: "live", why: "its sparkform session to the backend is open" }),
    ).toBe(
      `${head}: live, its sparkform session to the backend is open; wait for it to end, or ask alice@ctl-a`,
    );
  });

  it("stale: the proven recovery, for the lock's own stack", () => {
    expect(judgedHolderLine(l, { life: "stale", why: "its session ended" })).toBe(
      `${head}: stale, its session ended; remove it: \`npm run pulumi -- cancel --yes -s prod\`, ` +
        "then `npm run pulumi -- refresh --clear-pending-creates --yes -s prod` (drops the creates " +
        "it left pending), then `npm run pulumi -- up -s prod`",
    );
  });

  it("unknown: ask the holder first, the recovery only once it has ended", () => {
    expect(
      judgedHolderLine(l, { life: "unknown", why: "taken outside sparkform: no session to check" }),
    ).toBe(
      `${head}: unknown (taken outside sparkform: no session to check); ask alice@ctl-a whether it ` +
        "still runs; only once it does not, remove it: `npm run pulumi -- cancel --yes -s prod`, " +
        "then `npm run pulumi -- refresh --clear-pending-creates --yes -s prod`, then " +
        "`npm run pulumi -- up -s prod`",
    );
  });
});

describe("a refusal, read from pulumi's words", () => {
  // As the pulumi CLI 3.248 printed it on PostgreSQL (test/integration/team-backend.test.ts).
  const REFUSED =
    "error: the stack is currently locked by 2 lock(s). Either wait for the other process(es) " +
    "to end or delete the lock file with `pulumi cancel`.\n" +
    "  postgres://****:****@127.0.0.1:35541/pulumi/.pulumi/locks/organization/driftprobe/w/" +
    "675b815a.json?sslmode=disable: created by root@vm (pid 24764) at 2026-12-07T20:29:56Z\n" +
    "  file:///srv/state/.pulumi/locks/organization/driftprobe/w/9f.json: created by " +
    "bob@ctl-b (pid 7) at 2026-12-07T20:30:00Z\n";

  it("names each lock's key, without the URL's query", () => {
    expect(lockedRefusal(REFUSED)).toEqual([
      ".pulumi/locks/organization/driftprobe/w/675b815a.json",
      ".pulumi/locks/organization/driftprobe/w/9f.json",
    ]);
  });

  it("is no refusal when pulumi failed for another reason", () => {
    expect(lockedRefusal("error: update failed\n")).toBeUndefined();
  });
});
