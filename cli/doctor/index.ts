// `sparkform doctor`: every preflight check, in the order a person fixes things — the control
// node, the stack's backend (a shared PostgreSQL, the passphrase), the configuration (the schema
// and the policy pack's own checks), then every node at once. A backend that fails ends it
// there: every later check reads the stack through that backend. It changes nothing anywhere
// (test/e2e/doctor.test.ts compares a node's files and units before and after).
import { ConfigError } from "../../components/stack-config";
import { closeAll } from "../../components/transport";
import { projectRoot, readStack, type StackView } from "../stack";
import { selectedStackName } from "../stack-cache";
import { backendFindings } from "./backend";
import { controlFindings } from "./control";
import type { Finding } from "./findings";
import { modelSizes } from "./model";
import { nodeFindings } from "./nodes";
import { policyFindings } from "./policy";

export { EXIT, exitCode, renderFindings, type Finding, type Status } from "./findings";

export interface DoctorOptions {
  /** The stack (default: the selected one). */
  readonly stack?: string;
  /** The Pulumi project's directory (default: this checkout). */
  readonly projectDir?: string;
}

/**
 * The commit the stack's builds recorded, so the policy's flags need no git in the tree; none
 * before the first `up`, or when the state cannot be read (the other findings say why).
 */
function recordedCommit(view: StackView): string | undefined {
  try {
    const flags = Object.values(view.recorded.buildFlags)[0];
    return typeof flags?.LLAMA_COMMIT === "string" ? flags.LLAMA_COMMIT : undefined;
  } catch {
    return undefined;
  }
}

export async function doctor(opts: DoctorOptions = {}): Promise<Finding[]> {
  const projectDir = opts.projectDir ?? projectRoot();
  // Before anything reads the stack or touches a node: an unreachable server or a wrong
  // passphrase is one line with its fix, not a pulumi error per later read.
  const backend = await backendFindings(opts.stack ?? selectedStackName(projectDir), {
    projectDir,
  });
  if (backend.some((f) => f.status === "fail")) return [...controlFindings(undefined), ...backend];
  let view: StackView;
  try {
    view = readStack(opts.stack, projectDir);
  } catch (err) {
    // A config error is one line per problem, each with its fix; reading the stack fails as a
    // few lines (what pulumi said, then how to select one), said here on one line.
    const config = err instanceof ConfigError;
    const lines = config
      ? err.lines
      : [
          (err as Error).message
            .split("\n")
            .filter((l) => l.trim() !== "" && !l.startsWith("Select the stack"))
            .join(" ")
            .replace(/:\s+/g, ": "),
        ];
    return [
      ...controlFindings(undefined),
      ...backend,
      ...lines.map((l): Finding => ({
        check: "config",
        where: "config",
        status: "fail",
        what: l,
        fix: config
          ? "as the line says, with `pulumi config set` or in stacks/Pulumi.<stack>.yaml"
          : "pass --stack S (`pulumi stack ls` lists them), or make it: `npm run local` for the simulated pair, `pulumi stack init S` for Sparks",
      })),
    ];
  }
  try {
    // The hub and the nodes at once (their ssh processes start here, before the control
    // node's own probes run); the disk check waits for the model's size only.
    const model = modelSizes(view.config, view.outputs);
    const nodes = nodeFindings(
      view.config,
      (n) => view.target(n),
      model.then((m) => m.sizes),
    );
    const findings: Finding[] = [
      ...controlFindings(view.config),
      ...backend,
      {
        check: "config",
        where: "config",
        status: "pass",
        what: `stack ${view.name ?? "(selected)"}: ${view.config.nodes.length} nodes, the schema accepts every key`,
      },
      ...policyFindings(view.config, recordedCommit(view)),
    ];
    const m = await model;
    if (m.finding) findings.push(m.finding);
    findings.push(...(await nodes));
    return findings;
  } finally {
    closeAll();
  }
}
