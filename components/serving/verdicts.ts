// What the server's diff judges: which changed inputs restart it and which only rewrite state.
// Reads the current shape only: older state is upgraded first (state-upgrade.ts).
import { changedKeys } from "../providers/diff";
import { keyDigest } from "../unit/api-key";
import { programsChange } from "../unit/programs";
import type { LlamaServerInputs, LlamaServerOutputs } from "./state";

/**
 * Inputs whose change restarts the server. Not the plan itself: its flags are what the server
 * runs, while its numbers (usable memory, measured) move a little on every refresh. Not the
 * evidence's health lines either. `programs` restarts it only when a program changed other
 * than by a declared upgrade (components/unit/programs.ts).
 */
export const RESTART_KEYS = [
  "providerVersion",
  "target",
  "bind",
  "port",
  "flags",
  "binary",
  "binaryDigest",
  "modelPath",
  "smokeRequest",
  "workers",
  "rssLimitPercent",
  "rssIntervalSeconds",
  "programs",
] as const;

/**
 * Inputs whose change only rewrites state: the server keeps running (its owner is recorded on
 * the running unit first, components/unit/owner.ts).
 */
export const RECORD_KEYS = ["owner"] as const;

/** The changed inputs by what they do: restart the server, or only rewrite state. */
export function serverChanges(
  olds: LlamaServerOutputs,
  news: LlamaServerInputs,
): { restart: string[]; record: string[] } {
  const restart: string[] = [];
  const record: string[] = [];
  for (const k of changedKeys(olds, news, RESTART_KEYS)) {
    if (k !== "programs") restart.push(k);
    else {
      const c = programsChange(olds.programs, news.programs);
      if (c !== "none") (c === "restart" ? restart : record).push(k);
    }
  }
  // Builds and models of the evidence: a rebuilt peer is a restart, a worker's health is not.
  if (JSON.stringify(olds.evidence?.builds) !== JSON.stringify(news.evidence.builds))
    restart.push("evidence.builds");
  if (JSON.stringify(olds.evidence?.models) !== JSON.stringify(news.evidence.models))
    restart.push("evidence.models");
  if (olds.apiKeySha256 !== keyDigest(news.apiKey)) restart.push("apiKey");
  // The program may leave standby out: absent is a serving server, as `false` is.
  if (Boolean(olds.standby) !== Boolean(news.standby)) restart.push("standby");
  if (olds.drift.length > 0) restart.push("drift");
  record.push(...changedKeys(olds, news, RECORD_KEYS));
  return { restart, record };
}
