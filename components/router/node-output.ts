// Parsers of what the router's node programs print: files.sh's `key=value` lines and
// status.py's JSON (native/unit/status.py), kept as the router's status.
import { type UnitStatus, unitStatusParser } from "../unit/status";
import type { RouterStatus } from "./state";

/** files.sh's `key=value` lines (check, install, digest). */
export const keyValues = (stdout: string): Record<string, string> =>
  Object.fromEntries(
    stdout
      .split("\n")
      .map((l) => l.match(/^([A-Za-z]+)=(.*)$/))
      .filter((m): m is RegExpMatchArray => m !== null)
      .map((m) => [m[1], m[2]]),
  );

export const parseUnitStatus = unitStatusParser("router status (native/unit/status.py)");

export function routerStatusOf(u: UnitStatus, configDigest: string): RouterStatus {
  return {
    unit: {
      ActiveState: u.unit.ActiveState ?? "",
      SubState: u.unit.SubState ?? "",
      Result: u.unit.Result ?? "",
      NRestarts: u.unit.NRestarts ?? "",
      InvocationID: u.unit.InvocationID ?? "",
    },
    runningDigest: u.runningDigest,
    binaryDigest: u.binaryDigest,
    listening: u.listening,
    configDigest,
  };
}
