/* eslint-disable @typescript-eslint/no-require-imports -- provider methods are serialized into state and run in another process, so they load modules themselves */
import * as pulumi from "@pulumi/pulumi";

interface ManagedFileInputs {
  kind: "FileDigest";
  path: string;
  content: string;
  pinnedSha256: string;
}

/** State: the inputs plus what the provider measured on disk ("" when the file is missing). */
interface ManagedFileState extends ManagedFileInputs {
  sha256: string;
  size: number;
}

// Provider methods run in the dynamic provider's own process from serialized code: they may
// capture nothing but plain values, so every module is required inside the function.
function measure(path: string): { sha256: string; size: number } {
  const { createHash } = require("node:crypto") as typeof import("node:crypto");
  const { existsSync, readFileSync } = require("node:fs") as typeof import("node:fs");
  if (!existsSync(path)) return { sha256: "", size: 0 };
  const bytes = readFileSync(path);
  return { sha256: createHash("sha256").update(bytes).digest("hex"), size: bytes.length };
}

function write(inputs: ManagedFileInputs): ManagedFileState {
  const { renameSync, writeFileSync } = require("node:fs") as typeof import("node:fs");
  // Temporary name then rename: a crash never leaves a half-written file under the real name.
  const tmp = `${inputs.path}.tmp-${process.pid}`;
  writeFileSync(tmp, inputs.content);
  renameSync(tmp, inputs.path);
  return { ...inputs, ...measure(inputs.path) };
}

function sha256Of(text: string): string {
  const { createHash } = require("node:crypto") as typeof import("node:crypto");
  return createHash("sha256").update(text).digest("hex");
}

const provider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: ManagedFileInputs) {
    return { id: inputs.path, outs: write(inputs) };
  },
  // `pulumi refresh` calls read: re-measure, so an edited file shows up as drift.
  async read(id: string, props: ManagedFileState) {
    return { id, props: { ...props, ...measure(props.path) } };
  },
  async diff(_id: string, olds: ManagedFileState, news: ManagedFileInputs) {
    const drifted = olds.sha256 !== sha256Of(news.content);
    const changed = olds.content !== news.content || olds.pinnedSha256 !== news.pinnedSha256;
    return {
      changes: drifted || changed || olds.path !== news.path,
      replaces: olds.path !== news.path ? ["path"] : [],
      deleteBeforeReplace: true,
    };
  },
  async update(_id: string, _olds: ManagedFileState, news: ManagedFileInputs) {
    return { outs: write(news) };
  },
  async delete(_id: string, props: ManagedFileState) {
    const { rmSync } = require("node:fs") as typeof import("node:fs");
    rmSync(props.path, { force: true });
  },
};

export interface ManagedFileArgs {
  /** Absolute path of the file on the control node. */
  path: pulumi.Input<string>;
  /** Desired content (UTF-8). */
  content: pulumi.Input<string>;
  /** SHA-256 the content must have; checked by sha256-pinned in ../proof-policies. */
  pinnedSha256: pulumi.Input<string>;
}

/** A file whose content Pulumi owns: written on up, re-measured on refresh. */
export class ManagedFile extends pulumi.dynamic.Resource {
  declare readonly path: pulumi.Output<string>;
  declare readonly sha256: pulumi.Output<string>;
  declare readonly size: pulumi.Output<number>;

  constructor(name: string, args: ManagedFileArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { kind: "FileDigest", sha256: undefined, size: undefined, ...args },
      opts,
    );
  }
}
