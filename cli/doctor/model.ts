// The configured model's size, for the disk check: from the last `up` when it fetched this
// revision, else resolved at the hub now (metadata and the GGUF header only, as `preview`
// does), which also proves the endpoint answers and the revision exists.
import type { StackConfigData } from "../../components/stack-config";
import type { StackOutputs } from "../../stack-outputs";
import { defaultGgufCacheDir, resolveModel } from "../../components/model/resolve";
import { bytes } from "../summary";
import type { Finding } from "./findings";

/** The hub gets this long to answer (its metadata and one GGUF header). */
export const RESOLVE_TIMEOUT_MS = 8_000;

export interface ModelSizes {
  readonly sizes?: Record<string, number>;
  readonly finding?: Finding;
}

/** Sizes the stack's outputs record for the configured revision, if they do. */
export function recordedSizes(
  config: StackConfigData,
  outputs: StackOutputs,
): Record<string, number> | undefined {
  const m = outputs.model;
  if (!m || !config.model || m.commit !== config.model.revision) return undefined;
  const sizes: Record<string, number> = {};
  for (const f of m.files) sizes[f.path] = f.size;
  return config.model.files.every((f) => sizes[f] !== undefined) ? sizes : undefined;
}

export async function modelSizes(
  config: StackConfigData,
  outputs: StackOutputs,
): Promise<ModelSizes> {
  const m = config.model;
  if (!m) return {};
  const recorded = recordedSizes(config, outputs);
  if (recorded) return { sizes: recorded };
  const where = "config";
  try {
    const r = await resolveModel({
      endpoint: m.endpoint,
      repo: m.repo,
      revision: m.revision,
      files: m.files,
      sha256: m.sha256,
      allowBranch: m.allowBranch,
      cacheDir: defaultGgufCacheDir(),
      fetch: (input, init) =>
        fetch(input, { ...init, signal: AbortSignal.timeout(RESOLVE_TIMEOUT_MS) }),
    });
    return {
      sizes: Object.fromEntries(r.files.map((f) => [f.path, f.size])),
      finding: {
        check: "model",
        where,
        status: "pass",
        what: `${m.repo}@${r.commit.slice(0, 12)} resolved at ${r.endpoint}: ${r.files.length} file(s), ${bytes(r.totalBytes)}`,
      },
    };
  } catch (err) {
    return {
      finding: {
        check: "model",
        where,
        status: "warn",
        what: `${m.repo}@${m.revision.slice(0, 12)} could not be resolved at ${m.endpoint}: ${(err as Error).message.split("\n")[0]}`,
        fix:
          "check sparkform:model.endpoint, repo and revision and the network; a private repo needs " +
          "`pulumi config set --secret sparkform:hfToken` (doctor resolves without it)",
      },
    };
  }
}
