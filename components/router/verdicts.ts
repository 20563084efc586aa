// What the router's refresh and diff judge: drift from the router `up` started, what a refresh
// is judged by, and which changed inputs restart it or only rewrite state. Reads the current
// shape only: older state is upgraded first (state-upgrade.ts).
import { changedKeys } from "../providers/diff";
import { keyDigest } from "../unit/api-key";
import { programsChange } from "../unit/programs";
import { type Started, steadyUnit, type UnitBoot, unitDrift } from "../unit/status";
import { listenAddress } from "./caddy-config";
import { configPath, configText, drainPath, keyPath, textDigest } from "./commands";
import type { RouterInputs, RouterOutputs, RouterStatus } from "./state";

/** Why the measured router is not the one `up` started ([] = none). */
export function routerDrift(o: {
  status: RouterStatus;
  started: Started;
  boot?: UnitBoot;
  binaryDigest: string;
  configDigest: string;
  bind: string;
  port: number;
}): string[] {
  const r = unitDrift({
    words: { what: "router", binary: "caddy", guarded: "the router" },
    status: o.status,
    started: o.started,
    ...(o.boot ? { boot: o.boot } : {}),
    expectedDigest: o.binaryDigest,
    bind: o.bind,
    guardOn: false,
  });
  if (o.status.unit.ActiveState === "active" && o.status.listening.length === 0)
    r.push(`nothing listens on ${listenAddress(o.bind, o.port)}`);
  if (o.status.configDigest !== o.configDigest)
    r.push(
      `router config ${configPath(o.port)} sha256 ${o.status.configDigest.slice(0, 12) || "(missing)"} is not the one written (${o.configDigest.slice(0, 12)})`,
    );
  if (o.status.drained?.length)
    r.push(
      `${drainPath(o.port)} keeps ${o.status.drained.join(", ")} out of rotation: a roll of the replicas did not finish; \`pulumi up --refresh\` puts it back`,
    );
  if (o.status.keyFile !== undefined && o.status.keyFile !== "the stack's key")
    r.push(
      `router key ${keyPath(o.port)} ${o.status.keyFile === "missing" ? "is missing" : "does not hold the stack's key"}: every request would get 401`,
    );
  return r;
}

/**
 * The router's refresh is judged by its status and drift (both free of moving readings; what a
 * boot or an explained restart renews is left out: steadyUnit).
 */
export function routerVerdict(o: RouterOutputs) {
  // State a test or an older sparkform wrote may have no status: it is judged as it is.
  const s = o.status as RouterOutputs["status"] | undefined;
  return { status: s && { ...s, unit: steadyUnit(s.unit) }, drift: o.drift };
}

/** Inputs whose change restarts the router. */
export const RESTART_KEYS = [
  "providerVersion",
  "target",
  "bind",
  "port",
  "artifact",
  "upstreams",
  "unavailable",
  "healthIntervalSeconds",
  "programs",
] as const;
// apiKey and allowedOrigins are judged by the rendered config and the key's digest (below).
/**
 * Inputs that are only recorded: a change updates state, the router keeps running (the owner is
 * recorded on the running unit first, components/unit/owner.ts).
 */
export const RECORD_KEYS = ["node", "arch", "topology", "healthTimeoutSeconds", "owner"] as const;

/**
 * What changed between state and program: restart keys, the rendered config, drift. `programs`
 * restarts the router only when a program changed other than by a declared upgrade
 * (components/unit/programs.ts); that is recorded.
 */
export function routerChanges(olds: RouterOutputs, news: RouterInputs) {
  const programs = programsChange(olds.programs, news.programs);
  const restart: string[] = changedKeys(olds, news, RESTART_KEYS).filter(
    (k) => k !== "programs" || programs === "restart",
  );
  let rendered: string;
  try {
    rendered = textDigest(configText(news));
  } catch {
    rendered = "";
  }
  if (rendered !== olds.configDigest && !restart.includes("config")) restart.push("config");
  if ((olds.apiKeySha256 ?? "") !== keyDigest(news.apiKey)) restart.push("apiKey");
  if (olds.drift.length > 0) restart.push("drift");
  const record: string[] = [
    ...(programs === "record" ? ["programs"] : []),
    ...changedKeys(olds, news, RECORD_KEYS),
  ];
  return { restart, record };
}
