// Runs the real pulumi CLI (the one `npm run setup` chose) with sparkform's offline settings,
// echoing its output into the test log so a failure can be read without re-running.
import { execa } from "execa";
import { pulumiBinary, pulumiEnv } from "../../setup/pulumi/env";
import { readState } from "../../stack-state";

export interface PulumiRun {
  exitCode: number;
  output: string;
}

export interface PulumiCli {
  run(
    args: string[],
    opts?: { expectFailure?: boolean; stdin?: string; env?: NodeJS.ProcessEnv; preview?: boolean },
  ): Promise<PulumiRun>;
  env: NodeJS.ProcessEnv;
  /**
   * How many resources stack `name` holds (its default providers left out): what a converged
   * `up` must report as unchanged.
   */
  resourceCount(name: string): Promise<number>;
}

/**
 * The lines of a pulumi output that name a resource's change, once each, in order (the step's
 * final form, with its `[diff: …]` when pulumi printed one): not the in-progress lines.
 */
export function changedResourceLines(output: string): string[] {
  const step =
    /^\s*(?:\+-|-\+|\+\+|--|[~+-])\s+\S+:\S+\s+\S+\s+(?:updated?|created?|deleted?|replaced?|create-replacement|delete-replaced)\b/;
  return [
    ...new Set(
      output
        .split("\n")
        .filter((l) => step.test(l))
        .map((l) => l.trim()),
    ),
  ];
}

export interface PulumiCliOptions {
  /**
   * An `up` or `refresh` expected to succeed skips its preview (`--skip-preview`) unless the
   * call asks for one (`preview: true`), prints JSON, or is expected to fail. The preview runs
   * the program and every node check a second time (5–8 s of each `up` on the simulated pair): a
   * feature test that judges what the update did pays for it a hundred times over. The README's walks
   * (test/acceptance) keep the user's `up`, preview and all, and leave this off.
   */
  skipPreviewWhenExpectedToSucceed?: boolean;
}

/** `--skip-preview` where PulumiCliOptions.skipPreviewWhenExpectedToSucceed says an `up` or `refresh` may go without one. */
export function withoutPreview(
  args: readonly string[],
  opts: { expectFailure?: boolean; preview?: boolean },
): string[] {
  const skip =
    (args[0] === "up" || args[0] === "refresh") &&
    !opts.expectFailure &&
    !opts.preview &&
    !args.includes("--json") &&
    !args.includes("--skip-preview");
  return skip ? [...args, "--skip-preview"] : [...args];
}

/** A CLI bound to one project directory and extra environment (e.g. a private backend). */
export function pulumiCli(
  cwd: string,
  extraEnv: NodeJS.ProcessEnv = {},
  options: PulumiCliOptions = {},
): PulumiCli {
  const env = { ...pulumiEnv(), ...extraEnv };
  const bin = pulumiBinary();
  return {
    env,
    async run(given, opts = {}) {
      const args = options.skipPreviewWhenExpectedToSucceed
        ? withoutPreview(given, opts)
        : [...given];
      const result = await execa(bin, [...args, "--non-interactive"], {
        cwd,
        env: { ...env, ...opts.env },
        extendEnv: false,
        all: true,
        reject: false,
        input: opts.stdin,
      });
      const output = result.all ?? "";
      // A state export is megabytes of serialized providers: echo its size, not its text.
      const quiet = args[0] === "stack" && args[1] === "export" && result.exitCode === 0;
      console.log(
        `$ pulumi ${args.join(" ")}  [exit ${result.exitCode}]\n` +
          (quiet ? `(${output.length} characters of state, not echoed)` : output),
      );
      const failed = result.exitCode !== 0;
      if (failed !== Boolean(opts.expectFailure)) {
        // The resource lines last: a failure's report keeps the tail of a long message, and
        // "which resource changed, in which field" is what a failed --expect-no-changes is about.
        const changes = changedResourceLines(output);
        throw new Error(
          `pulumi ${args.join(" ")} ${failed ? "failed" : "succeeded"} (exit ${result.exitCode}), ` +
            `expected ${opts.expectFailure ? "failure" : "success"}:\n${output}` +
            (changes.length ? `\nresources that changed:\n${changes.join("\n")}` : ""),
        );
      }
      return { exitCode: result.exitCode ?? -1, output };
    },
    async resourceCount(name) {
      const out = await this.run(["stack", "export", "-s", name]);
      return readState(out.output, name).resources.filter(
        (r) => !r.type.startsWith("pulumi:providers:"),
      ).length;
    },
  };
}
