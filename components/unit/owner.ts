// Which stack a node's unit belongs to, as the providers ask it (issue 33 item 8). Unit names
// carry only the port (`sparkform-router-8090`), so two stacks serving on one node and port
// would stop and replace each other's units: every unit records its stack, `<project>/<stack>`,
// as its Description (native/unit/start.sh), and a stage checks it before it writes anything of
// the port, adopts a unit an older sparkform started (no record) without restarting it, and
// leaves another stack's unit alone on destroy.
import { progress } from "../providers/progress";
import { openNode, RemoteCommandError, type SshTarget } from "../transport";
import {
  adoptedUnit,
  OTHER_OWNER_EXIT,
  type UnitOwner,
  type UnitProgramRefs,
  unitOwnerCheckCommand,
} from "./commands";
import { type UnitRole, unitName } from "./names";

/** The other stack a refusal named (`otherOwner=` on start.sh's or files.sh's stdout). */
export const otherOwnerOf = (stdout: string): string | undefined =>
  /^otherOwner=(\S+)$/m.exec(stdout)?.[1];

const unitNameOf = (c: Pick<OwnerCheck, "role" | "port">) => unitName(c.role, c.port);

/** What a check of the unit at `role`/`port` on `target` needs. */
export interface OwnerCheck {
  readonly role: UnitRole;
  readonly port: number;
  /** The record's word for the unit: "worker", "server", "router". */
  readonly what: string;
  readonly target: SshTarget;
  /** Absent (state from before owners, or a caller without one): nothing to check. */
  readonly owner: UnitOwner | undefined;
  readonly programs: UnitProgramRefs;
  /** How the stage's lines start: `[spark-2] rpc-worker`. */
  readonly tag: string;
}

/**
 * start.sh --owner-check on the unit's node: the other stack's name when another stack's unit
 * holds the port (nothing was written), else undefined; a loaded unit with no record (an older
 * sparkform's) or the stack's old name is recorded as this stack's, live, and said so.
 */
export async function unitHeldBy(c: OwnerCheck): Promise<string | undefined> {
  if (!c.owner) return undefined;
  const r = await openNode(c.target).run(
    unitOwnerCheckCommand({ role: c.role, port: c.port, what: c.what, owner: c.owner }, c.programs),
    { step: `${c.role} owner check`, timeoutMs: 60_000, okExitCodes: [0, OTHER_OWNER_EXIT] },
  );
  if (r.exitCode === OTHER_OWNER_EXIT) return otherOwnerOf(r.stdout) ?? "another stack";
  const adopted = adoptedUnit(r.stdout);
  if (adopted)
    await progress(
      `${c.tag}: ${adopted} on ${c.owner.node} recorded as stack ${c.owner.stack}'s, live (it had ${c.owner.was ? `${c.owner.was}, the stack's name before` : "no owner: an older sparkform started it"})`,
    );
  return undefined;
}

/** The refusal when another stack's unit holds the port: the stage's `up` stops here. */
export function otherStackError(c: OwnerCheck & { owner: UnitOwner }, other: string): Error {
  return new Error(
    `${c.tag}: ${unitNameOf(c)} on ${c.owner.node} belongs to stack ${other}, not this stack (${c.owner.stack}), so nothing was stopped or written: ` +
      `give this stack another port (pulumi config set --path ${c.owner.portKey} <port>) or run \`pulumi destroy\` on stack ${other} first`,
  );
}

/** Before anything of the port is written: refuse another stack's unit (otherStackError). */
export async function claimUnit(c: OwnerCheck): Promise<void> {
  const other = await unitHeldBy(c);
  if (other && c.owner) throw otherStackError({ ...c, owner: c.owner }, other);
}

/** What a destroy says when the unit it would stop is another stack's. */
export const leftRunning = (c: OwnerCheck, other: string): Promise<void> =>
  progress(
    `${c.tag}: ${unitNameOf(c)} on ${c.target.name} belongs to stack ${other}, not this stack (${c.owner?.stack ?? "?"}): left running, with its files`,
  );

/**
 * start.sh's (or files.sh's) refusal of another stack's port, as the stage's error (naming
 * that stack and the fix); undefined for any other failure.
 */
export function refusedByOwner(err: unknown, c: OwnerCheck): Error | undefined {
  if (!(err instanceof RemoteCommandError) || err.exitCode !== OTHER_OWNER_EXIT || !c.owner)
    return undefined;
  return otherStackError({ ...c, owner: c.owner }, otherOwnerOf(err.outputTail) ?? "another stack");
}
