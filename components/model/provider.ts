// ModelReplica's dynamic-provider implementation: the files of one model revision on one node,
// at `<modelsDir>/<repo>/<commit>/<file>`, each verified by SHA-256 on that node.
//
// The first node downloads from the hub endpoint itself (native/model/model-fetch.py: `.part` +
// Range resume, fail-closed SHA-256, atomic rename + fsync, free-space check). Every other node
// copies from it node to node over the fabric, the control node's agent forwarded for that one
// command (else relayed through the control node), into the `.part`, and verifies it itself.
// `read` re-measures (size + mtime, or a full re-hash with verify "full"); `diff` calls any file
// that is not known to hold the hub's bytes drift; `update` repairs only those files.
import type * as pulumi from "@pulumi/pulumi";
import { mkdirSync } from "node:fs";
import * as path from "node:path";
import { human } from "../bytes";
import { programCommand } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { progress, since } from "../providers/progress";
import { newRefToken, prepareDir, removeDir } from "../tree/node-dir";
import {
  askedFiles,
  containedPath,
  parseFilesResult,
  parsePrepareResult,
  parseRemoveResult,
  parseScriptLine,
  resultOf,
  type ScriptLine,
} from "./fetch-output";
import { copyFromPeerOrRelay } from "../peer-copy";
import { withStateUpgrade } from "../providers/state-upgrade";
import { homeRelative, openNode, type EnvValue } from "../transport";
import { FETCH_PROGRAM } from "./commands";
import type {
  ModelFile,
  ModelReplicaInputs,
  ModelReplicaOutputs,
  ModelSource,
  NodeFile,
} from "./state";
import { upgrade } from "./state-upgrade";
import { driftedFiles } from "./verdicts";

export type {
  ModelFile,
  ModelReplicaInputs,
  ModelReplicaOutputs,
  ModelSource,
  NodeFile,
} from "./state";
export { FETCH_PROGRAM, FETCH_SCRIPT, fetchScript, fetchScriptDigest } from "./commands";
export { driftedFiles } from "./verdicts";

const mib = human;
// Re-exported: callers (and tests) that format sizes beside the model read it from here.
export { human };

function label(i: Pick<ModelReplicaInputs, "target" | "repo">): string {
  return `[${i.target.name}] model ${i.repo}`;
}

/** Spec for the script: files with what the last measurement proved (trusted mtimes). */
function scriptSpec(
  inputs: ModelReplicaInputs,
  known: readonly NodeFile[] | undefined,
  files: readonly ModelFile[] = inputs.files,
): Record<string, unknown> {
  return {
    dir: inputs.dir,
    repo: inputs.repo,
    retries: inputs.retries,
    reserveBytes: inputs.reserveBytes,
    progressEvery: 1,
    files: files.map((f) => {
      const k = known?.find((n) => n.path === f.path);
      const trusted = k?.present && k.size === f.size && k.sha256 === f.sha256 && k.mtimeNs;
      return trusted ? { ...f, trustMtimeNs: k.mtimeNs } : f;
    }),
  };
}

async function runScript(
  inputs: ModelReplicaInputs,
  command: "fetch" | "prepare" | "place" | "measure" | "remove",
  spec: Record<string, unknown>,
  opts: { step: string; token?: string; onLine?: (l: ScriptLine) => void; timeoutMs?: number },
): Promise<ScriptLine[]> {
  const env: Record<string, EnvValue> = opts.token ? { HF_TOKEN: { secret: opts.token } } : {};
  const result = await openNode(inputs.target).run(
    // The script arrives on stdin after the secret line, so the node runs this checkout's code.
    programCommand(FETCH_PROGRAM, {
      args: [command, JSON.stringify(spec)],
      env,
      display: `python3 native/${FETCH_PROGRAM} ${command} ${inputs.dir}`,
    }),
    {
      step: opts.step,
      timeoutMs: opts.timeoutMs ?? 24 * 3600_000,
      onLine: (line, stream) => {
        if (stream !== "stdout" || !opts.onLine) return;
        // Progress display only: a bad line is refused below, when the whole output is parsed.
        let parsed: ScriptLine | undefined;
        try {
          parsed = parseScriptLine(line, inputs.target.name);
        } catch {
          return;
        }
        if (parsed) opts.onLine(parsed);
      },
    },
  );
  return result.stdout
    .split("\n")
    .map((l) => parseScriptLine(l, inputs.target.name))
    .filter((l): l is ScriptLine => l !== undefined);
}

/** Measured files, with the known hash carried over where size and mtime did not change. */
function nodeFilesFrom(
  measured: NodeFile[],
  inputs: ModelReplicaInputs,
  known: readonly NodeFile[] | undefined,
  verified: ReadonlySet<string>,
  hashed: boolean,
): NodeFile[] {
  return inputs.files.map((f) => {
    const m = measured.find((x) => x.path === f.path);
    const base: NodeFile = m ?? {
      path: f.path,
      present: false,
      size: 0,
      mtimeNs: "",
      sha256: "",
      partBytes: 0,
    };
    if (!base.present) return { ...base, sha256: "" };
    if (hashed) return base;
    if (verified.has(f.path)) return { ...base, sha256: f.sha256 };
    const k = known?.find((x) => x.path === f.path);
    const same = k?.present && k.size === base.size && k.mtimeNs === base.mtimeNs;
    return { ...base, sha256: same ? k.sha256 : "" };
  });
}

async function measure(
  inputs: ModelReplicaInputs,
  known: readonly NodeFile[] | undefined,
  hash: boolean,
  verified: ReadonlySet<string> = new Set(),
  ref?: string,
): Promise<NodeFile[]> {
  const lines = await runScript(
    inputs,
    "measure",
    {
      dir: inputs.dir,
      files: inputs.files.map((f) => ({ path: f.path })),
      hash,
      // Records these files as this reference's list: `remove` by another one keeps them.
      ...(ref ? { ref } : {}),
    },
    { step: hash ? "model re-hash" : "model measure" },
  );
  const { files } = resultOf(lines, inputs.target.name, parseFilesResult);
  return nodeFilesFrom(files, inputs, known, verified, hash);
}

function reporter(inputs: ModelReplicaInputs): (l: ScriptLine) => void {
  const lastTenth = new Map<string, number>();
  return (l) => {
    const d = l.data;
    const file = String(d.file ?? "");
    if (l.kind === "progress") {
      const done = Number(d.done);
      const total = Number(d.total);
      const pct = total > 0 ? Math.floor((100 * done) / total) : 100;
      const eta = d.eta === null ? "?" : `${Number(d.eta).toFixed(0)} s`;
      const msg =
        `${label(inputs)} ${file}: ${pct}% (${mib(done)} of ${mib(total)}) ` +
        `at ${mib(Number(d.rate))}/s, ETA ${eta}`;
      void progress(msg, { ephemeral: true });
      // A lasting line every 10%, so non-interactive logs show the download moving too.
      const tenth = Math.floor(pct / 10);
      if (tenth !== lastTenth.get(file) && pct < 100) {
        lastTenth.set(file, tenth);
        void progress(msg);
      }
    } else if (l.kind === "event") {
      const what: Record<string, string> = {
        resume: `resuming the .part from byte ${String(d.from)}`,
        restart: `the server ignored Range (asked from byte ${String(d.ignoredRangeFrom)}): restarting from byte 0`,
        retry: `interrupted (${String(d.error)}); retry ${String(d.attempt)}`,
        placed: "SHA-256 verified, renamed into place",
        "discard-wrong-file": "the file in place has wrong bytes: fetching it again",
        "wrong-file-to-part": "the file in place has wrong bytes: repairing it from the peer",
      };
      const text = what[String(d.event)];
      if (text) void progress(`${label(inputs)} ${file}: ${text}`);
    }
  };
}

async function fetchFromHub(
  inputs: ModelReplicaInputs,
  known: readonly NodeFile[] | undefined,
): Promise<{ placed: string[] }> {
  const start = Date.now();
  const lines = await runScript(inputs, "fetch", scriptSpec(inputs, known), {
    step: `download ${inputs.repo}@${inputs.commit.slice(0, 12)} from the hub`,
    ...(inputs.token ? { token: inputs.token } : {}),
    onLine: reporter(inputs),
  });
  const placed = askedFiles(
    lines
      .filter((l) => l.kind === "event" && l.data.event === "placed")
      .map((l) => String(l.data.file)),
    inputs.files.map((f) => f.path),
    inputs.target.name,
    "model-fetch.py fetch's placed events",
  );
  if (placed.length > 0) {
    const bytes = inputs.files
      .filter((f) => placed.includes(f.path))
      .reduce((a, f) => a + f.size, 0);
    const s = (Date.now() - start) / 1000;
    await progress(
      `${label(inputs)}: downloaded ${placed.length} file(s), ${mib(bytes)} from the hub in ` +
        `${s.toFixed(1)} s (${mib(bytes / Math.max(s, 0.001))}/s), SHA-256 verified`,
    );
  }
  return { placed };
}

/**
 * Node to node over the fabric with an agent to forward, else relayed file by file through
 * the control node (components/peer-copy/); either way into each file's `.part`, verified
 * afterwards.
 */
function copyFiles(
  inputs: ModelReplicaInputs,
  source: ModelSource,
  todo: readonly string[],
): Promise<"fabric" | "relay"> {
  const dir = homeRelative(inputs.dir);
  return copyFromPeerOrRelay(openNode(inputs.target), source, {
    fabric: {
      dest: dir,
      source: dir,
      body: [
        'for f in "$@"; do',
        '  mkdir -p "$(dirname "$DST/$f")"',
        // -I: never trust size+mtime (a wrong file kept its size); --inplace: the .part (a wrong
        // file's bytes, or an interrupted copy) is the delta basis, so only changed blocks move.
        '  rsync -s -I --inplace --partial -e "$RSH" -- "$SRC/$f" "$DST/$f.part"',
        "done",
      ].join("\n"),
      args: todo,
      step: `copy model from ${source.target.name}`,
      display: `rsync ${source.target.name}:${inputs.dir} over the fabric`,
      timeoutMs: 24 * 3600_000,
    },
    stagingPrefix: "sparkform-model-",
    relay: async ({ staging, from, to }) => {
      for (const f of todo) {
        // Contained in staging on the control node, whatever the node said (fetch-output.ts).
        const local = containedPath(staging, f);
        mkdirSync(path.dirname(local), { recursive: true });
        await from.rsync({ remote: `${inputs.dir}/${f}` }, local, {
          step: `fetch model file from ${source.target.name}`,
          compress: false,
        });
        await to.rsync(
          local,
          { remote: `${inputs.dir}/${f}.part` },
          {
            step: `push model file from ${source.target.name}`,
            compress: false,
            extraArgs: ["-I", "--inplace"],
          },
        );
      }
    },
  });
}

async function copyFromSource(
  inputs: ModelReplicaInputs,
  source: ModelSource,
  known: readonly NodeFile[] | undefined,
): Promise<{ placed: string[]; by: ModelReplicaOutputs["fetchedBy"] }> {
  const prep = resultOf(
    await runScript(inputs, "prepare", scriptSpec(inputs, known), {
      step: "model free-space check",
      onLine: reporter(inputs),
    }),
    inputs.target.name,
    parsePrepareResult,
  );
  // Only files the resource asked for become paths on the peer, here and on the target.
  const todo = askedFiles(
    prep.todo,
    inputs.files.map((f) => f.path),
    inputs.target.name,
    "model-fetch.py prepare's todo list",
  );
  if (todo.length === 0) return { placed: [], by: "present" };
  const start = Date.now();
  const by = await copyFiles(inputs, source, todo);
  const files = inputs.files.filter((f) => todo.includes(f.path));
  await runScript(
    inputs,
    "place",
    { ...scriptSpec(inputs, undefined, files) },
    {
      step: "model verify copy",
      onLine: reporter(inputs),
    },
  );
  const bytes = files.reduce((a, f) => a + f.size, 0);
  await progress(
    `${label(inputs)}: copied ${files.length} file(s), ${mib(bytes)} from ${source.target.name} ` +
      `${by === "fabric" ? "over the fabric" : "relayed through the control node"} in ${since(start)}, ` +
      `SHA-256 verified on ${inputs.target.name}`,
  );
  return { placed: files.map((f) => f.path), by };
}

async function converge(
  inputs: ModelReplicaInputs,
  olds: ModelReplicaOutputs | undefined,
): Promise<ModelReplicaOutputs> {
  const known = olds?.nodeFiles;
  const refToken = olds?.refToken ?? newRefToken();
  // On the node, before anything is written: the directory is checked (strictly inside the
  // home, no symlink; native/lib/guard.sh). Nothing is created yet: the free-space check
  // comes first and leaves the disk as it was when it fails.
  const checked = await prepareDir(openNode(inputs.target), inputs.dir, {
    step: "check model directory",
    mode: "check",
  });
  let placed: string[];
  let by: ModelReplicaOutputs["fetchedBy"];
  if (inputs.source) {
    ({ placed, by } = await copyFromSource(inputs, inputs.source, known));
  } else {
    ({ placed } = await fetchFromHub(inputs, known));
    by = placed.length > 0 ? "hub" : "present";
  }
  // This resource's reference, once the files are in place: destroying another stack that
  // uses the same revision on this node keeps them.
  await prepareDir(openNode(inputs.target), inputs.dir, {
    step: "reference model directory",
    mode: "ref",
    token: refToken,
    created: checked.created,
  });
  // The script succeeded: every file was either placed just now (hashed on the node) or found
  // in place and proven (hashed, or its size and mtime unchanged since the last proof). The
  // measure also records the files beside the reference (after it, so that the list exists only
  // with its reference): another resource's update that drops one keeps it (cmd_remove).
  const nodeFiles = await measure(
    inputs,
    known,
    false,
    new Set(inputs.files.map((f) => f.path)),
    refToken,
  );
  const created = [...new Set([...(olds?.created ?? []), ...placed])].filter((p) =>
    inputs.files.some((f) => f.path === p),
  );
  const { token: _token, ...rest } = inputs;
  return {
    ...rest,
    nodeFiles,
    fetchedBy: olds && placed.length === 0 ? olds.fetchedBy : by,
    created,
    refToken,
  };
}

async function createReplica(
  inputs: ModelReplicaInputs,
): Promise<pulumi.dynamic.CreateResult<ModelReplicaOutputs>> {
  return { id: `${inputs.target.name}:${inputs.dir}`, outs: await converge(inputs, undefined) };
}

/** Refresh: size + mtime (verify "fast") or a full re-hash (verify "full") of every file. */
async function readReplica(
  id: string,
  props: ModelReplicaOutputs,
): Promise<pulumi.dynamic.ReadResult<ModelReplicaOutputs>> {
  const nodeFiles = await measure(props, props.nodeFiles, props.verify === "full");
  return { id, props: { ...props, nodeFiles } };
}

async function diffReplica(
  _id: string,
  olds: ModelReplicaOutputs,
  news: ModelReplicaInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const replaceKeys = ["repo", "commit", "modelsDir", "dir"] as const;
  const replaces: string[] = changedKeys(olds, news, replaceKeys);
  if (olds.target?.name !== news.target.name) replaces.push("target");
  const updateKeys = ["providerVersion", "files", "verify", "scriptDigest"] as const;
  const changed = changedKeys(olds, news, updateKeys);
  const drifted = driftedFiles(olds, news).length > 0;
  return {
    changes: replaces.length > 0 || changed.length > 0 || drifted,
    replaces,
    deleteBeforeReplace: false,
  };
}

async function updateReplica(
  _id: string,
  olds: ModelReplicaOutputs,
  news: ModelReplicaInputs,
): Promise<pulumi.dynamic.UpdateResult<ModelReplicaOutputs>> {
  const outs = await converge(news, olds);
  // Files dropped from the model that this resource created, unless another reference of the
  // directory (another stack on this revision) still lists them: the script keeps those.
  const dropped = olds.created.filter((p) => !news.files.some((f) => f.path === p));
  if (dropped.length > 0) await removeFiles(olds, dropped, outs.refToken);
  return { outs };
}

/**
 * Remove `files` from the revision's directory, except those another reference of it lists
 * (`ref`: this resource's own, not counted). Say which were kept and why.
 */
async function removeFiles(
  props: ModelReplicaOutputs,
  files: readonly string[],
  ref?: string,
): Promise<void> {
  const lines = await runScript(
    props,
    "remove",
    {
      dir: props.dir,
      root: props.modelsDir,
      files: files.map((p) => ({ path: p })),
      ...(ref ? { ref } : {}),
    },
    { step: "remove model files" },
  );
  const { kept } = resultOf(lines, props.target.name, parseRemoveResult);
  if (kept.length > 0) {
    await progress(
      `${label(props)}: kept ${kept.join(", ")} in ${props.dir}: another resource on the node ` +
        "references this revision and lists them (or was recorded before the lists, so what it " +
        "uses is unknown)",
    );
  }
}

/**
 * Destroy drops this resource's reference to the revision's directory; with the last one it
 * removes the files sparkform put there: all of the model's when sparkform made the directory
 * (another stack's download included: nobody references it any more), else only this
 * resource's own. State written before references has no token: the files are kept (said so),
 * as another stack on the node may use them and nothing on the node says otherwise.
 */
async function deleteReplicaRaw(_id: string, props: ModelReplicaOutputs): Promise<void> {
  if (!props.refToken) {
    if (props.created.length > 0) {
      await progress(
        `${label(props)}: kept ${props.dir} (its state predates sparkform's references, so another ` +
          "stack may use it); remove it by hand when nothing does",
      );
    }
    return;
  }
  const r = await removeDir(openNode(props.target), "unref", props.dir, {
    step: "drop model reference",
    token: props.refToken,
  });
  if (!r.last) {
    await progress(
      `${label(props)}: kept ${props.dir}: ${r.refsLeft} other resource(s) on the node use it`,
    );
    return;
  }
  const files = r.created ? props.files.map((f) => f.path) : props.created;
  if (files.length > 0) await removeFiles(props, files);
}

const current = {
  create: createReplica,
  read: readReplica,
  diff: diffReplica,
  update: updateReplica,
  delete: deleteReplicaRaw,
} satisfies ProviderImpl<ModelReplicaInputs, ModelReplicaOutputs>;

export const provider = withStateUpgrade(current, upgrade);
// Also as named exports: a delegate serialized before `provider` existed loads these, and its
// stack's state is the oldest of all.
export const { create, read, diff, update, delete: deleteReplica } = provider;
export { deleteReplica as delete };
