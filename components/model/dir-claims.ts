// "Stage each revision once", on resolved commits (issue 33 item 9). A model revision lives on a
// node at `<modelsDir>/<repo>/<commit>`, named by the commit the revision resolved to; two of
// a stack's models (sparkform:model and a staged one, or two staged ones) that resolve to one
// commit would own that one directory through two stages: an update that drops a file from
// one removes it from under the other, and the two stages' downloads race on the same files.
// The config check (config.ts crossCheckStaged) compares revisions as spelled, which misses a
// sha and the branch that points at it; only the resolve knows. So every Model of a stack
// claims its directory once resolved, and the second claim on a directory of a shared node
// fails the preview, naming both keys and the fix. (Two stacks sharing a directory are
// legitimate: references keep it, and model-fetch.py `remove` keeps a file that another
// reference still lists.)
import { ModelResolveError } from "./resolve";

export interface ModelDirClaim {
  /** The model's config key: `model` or `models.<name>`. */
  readonly key: string;
  readonly repo: string;
  /** The revision as configured. */
  readonly revision: string;
  /** The commit it resolved to. */
  readonly commit: string;
  /** `<modelsDir>/<repo>/<commit>` as the config spells it (modelDir, resolve.ts). */
  readonly dir: string;
  /** The nodes that hold it. */
  readonly nodes: readonly string[];
}

/** Config keys in the summaries' order: `model` first, then the staged ones by name. */
const order = (a: ModelDirClaim, b: ModelDirClaim) =>
  a.key === b.key ? 0 : a.key === "model" ? -1 : b.key === "model" ? 1 : a.key < b.key ? -1 : 1;

/** Why two models may not both be staged (one directory on a shared node), or undefined. */
export function sharedDirProblem(x: ModelDirClaim, y: ModelDirClaim): string | undefined {
  const shared = x.nodes.filter((n) => y.nodes.includes(n));
  if (x.dir !== y.dir || shared.length === 0) return undefined;
  const [a, b] = [x, y].sort(order) as [ModelDirClaim, ModelDirClaim];
  const fix =
    a.key === "model"
      ? `remove sparkform:${b.key} (sparkform:model stages it; leave sparkform:server.model unset to serve it)`
      : `remove one of sparkform:${a.key} and sparkform:${b.key}, and select the other with sparkform:server.model`;
  return (
    `sparkform:${a.key} (${a.repo} at ${a.revision}) and sparkform:${b.key} (${b.repo} at ${b.revision}) ` +
    `both resolve to commit ${a.commit}: both would own ${a.dir} on ${shared.join(", ")}, and a file ` +
    `dropped from one would be removed from under the other. Stage each commit once: ${fix}`
  );
}

/** The directories a stack's models claimed so far; one instance per SparkCluster. */
export class ModelDirClaims {
  private readonly claims: ModelDirClaim[] = [];

  /** Record `c`, or throw (a ModelResolveError) when another model owns its directory. */
  claim(c: ModelDirClaim): void {
    for (const other of this.claims) {
      const problem = sharedDirProblem(other, c);
      if (problem !== undefined) throw new ModelResolveError(problem);
    }
    this.claims.push(c);
  }
}
