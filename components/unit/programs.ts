// Which change of a unit's programs restarts it. A resource records each native program it runs
// by name and sha256 (components/native-script.ts), and a new sha256 has restarted its unit, so
// that a unit runs as this checkout's start.sh would start it. A change that leaves a running
// unit as it is (a refusal, a record the stage sets live) is declared here instead: the
// versions it replaces are then an update that rewrites state, and the unit keeps running.
import { recordedSha256, type ProgramRef } from "../native-script";

/** One program's declared upgrade: `from` (earlier sha256s) run a unit as `to` does. */
export interface ProgramUpgrade {
  /** sha256 of the earlier versions, as sent to a node (libraries inlined). */
  readonly from: readonly string[];
  /**
   * sha256 of this checkout's version when the upgrade was declared: a later edit of the
   * program (or of a library it inlines) voids the declaration, so that edit restarts units
   * until it is judged again (test/unit/unit-owner-upgrade.test.ts fails until then).
   */
  readonly to: string;
  /** Why a unit the earlier versions started needs no restart. */
  readonly why: string;
}

const ITEM_34_6 =
  "issue 34 item 6: the GGUF reader and the reference store moved to native/lib/ (gguf.py, " +
  "refstore.py) and are inlined where they were written out; the cache is warmed, referenced " +
  "and pruned as before, and neither program is part of how the worker runs";

const SMOKE_REFERENCE =
  "issue 34 item 6: the smoke's single-node reference is started by native/unit/start.sh and " +
  "stopped by stop.sh, and smoke.py only asks it (--reference); smoke.py is the smoke's client, " +
  "not part of how the server runs, so a running llama-server needs no restart for it";

const SMOKE_APIS =
  "issue 37 item 4: smoke.py --apis asks the Anthropic Messages and OpenAI Responses APIs one " +
  "token each, a mode of its own that the earlier modes do not run; smoke.py is the smoke's " +
  "client, not part of how the server runs, so a running llama-server needs no restart for it " +
  "(its status says the APIs were not checked until its next start)";

const FAST_PATH_WINDOW =
  "worker-log.py counts any [graph_recompute] after the smoke's first [graph_compute], not only " +
  "the first one (another client's decode may open the window); it reads the worker's log for " +
  "the smoke and is not part of how the server runs, so a running llama-server needs no restart";

// Issue 35 item 1 restarts every unit once at upgrade, undeclared on purpose: start.sh now writes
// unit files that the boot starts again, and a running transient unit (an older sparkform's)
// becomes one only by a restart. So the declarations of start.sh, stop.sh, status.py and
// router/files.sh (issue 33 item 8, which restarted nothing) are gone with it.

/** Per program (its name under native/), the upgrades declared (the main before item 8 → now). */
export const PROGRAM_UPGRADES: Readonly<Record<string, ProgramUpgrade>> = {
  "rpc-worker/prewarm.py": {
    from: ["eb7ffab3ff174a88bdbf18caffee440648711cd815411d9e9218668e587a17ed"],
    to: "89b5e26331e84c7155bdd7b5692530ddf0964dd458865aa08e823bf09933ed56",
    why: ITEM_34_6,
  },
  "rpc-worker/prune.py": {
    from: ["c0e296e1dc564cf8002298fbb2752d073f04dbccd2a622da156c53a726cb1a48"],
    to: "fde188e766bdbdb2dbbeb440c7a81ef8ed1189bfb5f8caf4c002b6cb622ae0cc",
    why: ITEM_34_6,
  },
  "serving/smoke.py": {
    from: [
      "b367d5b2baa2f90baf7071c0f014e37025fa5dbc353693abceda1bff23c5f5c0",
      "29bbd71be53831acae49b6076bb584563da819142e18e86868aced2d4a2bb96a",
    ],
    to: "2a24477c8585a8fa7223032479701f126fe061e85f2bd8fb2dea38d58b989121",
    why: `${SMOKE_REFERENCE}; ${SMOKE_APIS}`,
  },
  "serving/worker-log.py": {
    from: ["7ac76e05788a9653d9cd9e776de174f69c38cbe3ca12b658c14b4c98a5c14983"],
    to: "19665917a14c097cb140ad0b5180e91cfb47c3dcd0f44bb237d7705e71898eaf",
    why: FAST_PATH_WINDOW,
  },
};

const isRef = (v: unknown): v is ProgramRef =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as ProgramRef).name === "string" &&
  typeof (v as ProgramRef).sha256 === "string";

/** Whether `recorded` (state's) and `current` (this checkout's) run a unit the same way. */
export function sameForUnit(recorded: unknown, current: unknown): boolean {
  const a = recordedSha256(recorded);
  if (a === undefined || !isRef(current)) return false;
  if (a === current.sha256) return true;
  const u = PROGRAM_UPGRADES[current.name];
  return u !== undefined && u.to === current.sha256 && u.from.includes(a);
}

/**
 * What a change of a resource's `programs` does to its unit: "none" (the same sha256s),
 * "record" (only declared upgrades: state is rewritten, the unit keeps running) or "restart"
 * (any other change, a program added or removed included).
 */
export function programsChange(
  recorded: unknown,
  current: Readonly<Record<string, ProgramRef>>,
): "none" | "record" | "restart" {
  if (typeof recorded !== "object" || recorded === null) return "restart";
  const r = recorded as Record<string, unknown>;
  let change: "none" | "record" = "none";
  for (const k of new Set([...Object.keys(r), ...Object.keys(current)])) {
    const a = r[k];
    const b = current[k];
    if (JSON.stringify(a) === JSON.stringify(b)) continue;
    if (!sameForUnit(a, b)) return "restart";
    change = "record";
  }
  return change;
}
