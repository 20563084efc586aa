// The control node's prerequisites: Node.js, the Pulumi CLI (or Go to build it), ssh, rsync,
// python3, and an ssh agent when nodes will copy from each other. Read-only: version probes.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import type { StackConfigData } from "../../components/stack-config";
import { childEnv, agentAvailable, sshCapabilities } from "../../components/transport";
import { pulumiBinary, readToolchain, repoRoot } from "../../setup/pulumi/env";
import type { Finding } from "./findings";

const where = "control node";

/** `[major, minor, patch]` of the first dotted version in `text`. */
export function versionOf(text: string): number[] | undefined {
  const m = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(text);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

export function atLeast(v: readonly number[], min: readonly number[]): boolean {
  for (let i = 0; i < min.length; i++) {
    const a = v[i] ?? 0;
    const b = min[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}

/** package.json's engines: 20.x from 20.19, or 22+ (20.19 loads ES modules from CommonJS). */
export function nodeVersionFinding(version: string): Finding {
  const v = versionOf(version) ?? [0, 0, 0];
  const ok = (v[0] === 20 && atLeast(v, [20, 19])) || (v[0] ?? 0) >= 22;
  return ok
    ? { check: "node", where, status: "pass", what: `Node.js ${version}` }
    : {
        check: "node",
        where,
        status: "fail",
        what: `Node.js ${version} is older than sparkform needs (20.19+ or 22+)`,
        fix: "install Node.js 22 LTS (or 20.19+) and run `npm ci` again",
      };
}

/**
 * `cmd args` for its version: with the minimal environment every child of sparkform's gets
 * (child-env.ts), since doctor may run where PULUMI_CONFIG holds decrypted secrets.
 */
function probe(cmd: string, args: string[]): { ok: boolean; text: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 5000, env: childEnv() });
  return { ok: !r.error && r.status === 0, text: `${r.stdout ?? ""}${r.stderr ?? ""}`.trim() };
}

function pinnedPulumiVersion(): string {
  const text = readFileSync(path.join(repoRoot, "setup", "versions.env"), "utf8");
  return /^PULUMI_VERSION=(\S+)/m.exec(text)?.[1] ?? "3.248.0";
}

function pulumiFinding(): Finding {
  const want = pinnedPulumiVersion();
  try {
    readToolchain();
    const r = probe(pulumiBinary(), ["version"]);
    const v = versionOf(r.text);
    if (r.ok && v && atLeast(v, versionOf(want) ?? [])) {
      return { check: "pulumi", where, status: "pass", what: `pulumi ${r.text}` };
    }
    return {
      check: "pulumi",
      where,
      status: "fail",
      what: `the recorded pulumi (${pulumiBinary()}) ${r.ok ? `is ${r.text}, older than ${want}` : "does not run"}`,
      fix: "run `npm run setup` (it uses a pulumi ≥ the SDK on PATH, or builds one from Go)",
    };
  } catch {
    const go = probe("go", ["version"]);
    const v = go.ok ? versionOf(go.text) : undefined;
    return {
      check: "pulumi",
      where,
      status: "fail",
      what: `no Pulumi CLI recorded (.sparkform/toolchain.env)${v ? `; ${go.text.split("\n")[0]} can build one` : "; no Go either"}`,
      fix: v
        ? "run `npm run setup`: it builds the CLI from Go modules (cached afterwards)"
        : `install the Pulumi CLI ≥ ${want}, or Go ≥ 1.21, then run \`npm run setup\``,
    };
  }
}

function toolFinding(check: string, args: string[], fix: string, need: boolean): Finding {
  const r = probe(check, args);
  if (r.ok) return { check, where, status: "pass", what: r.text.split("\n")[0] ?? check };
  return {
    check,
    where,
    status: need ? "fail" : "warn",
    what: `${check} is not installed or does not run`,
    fix,
  };
}

/** Whether any stage of `config` copies between nodes (then an agent lets them go direct). */
export function copiesBetweenNodes(config: StackConfigData): boolean {
  const many = config.nodes.length > 1;
  return (
    many &&
    (config.toolchain !== undefined ||
      (config.model?.nodes.length ?? 0) > 1 ||
      (config.build !== undefined && config.build.cacheFrom !== "none"))
  );
}

export function agentFinding(config: StackConfigData, env = process.env): Finding {
  if (!copiesBetweenNodes(config)) {
    return { check: "ssh-agent", where, status: "pass", what: "no node-to-node copies configured" };
  }
  if (agentAvailable(env)) {
    return {
      check: "ssh-agent",
      where,
      status: "pass",
      what: "an agent runs (SSH_AUTH_SOCK): nodes copy from each other over the fabric with a private agent holding only the cluster's key",
    };
  }
  return {
    check: "ssh-agent",
    where,
    status: "warn",
    what: "no ssh agent (SSH_AUTH_SOCK unset): toolchain, model and cache copies relay through the control node instead of going node to node",
    fix: `start one for the session: eval "$(ssh-agent -s)" (sparkform loads only the cluster's key${config.sshKeyPath ? `, ${config.sshKeyPath}` : ""} into a private agent per copy)`,
  };
}

/** Every control-node check (config may be undefined when it did not parse). */
export function controlFindings(config: StackConfigData | undefined): Finding[] {
  const ssh = probe("ssh", ["-V"]);
  const sshV = versionOf(ssh.text.replace(/^OpenSSH_/, ""));
  const findings: Finding[] = [
    nodeVersionFinding(process.versions.node),
    pulumiFinding(),
    ssh.ok && sshV
      ? {
          check: "ssh",
          where,
          ...(sshCapabilities().forwardAgentPath
            ? { status: "pass" as const, what: ssh.text.split("\n")[0] ?? "ssh" }
            : {
                status: "warn" as const,
                what: `${ssh.text.split("\n")[0]}: older than OpenSSH 8.2, so node-to-node copies relay through the control node`,
                fix: "install a newer openssh-client",
              }),
        }
      : {
          check: "ssh",
          where,
          status: "fail",
          what: "ssh (OpenSSH) is not installed",
          fix: "install openssh-client (apt-get install openssh-client)",
        },
    toolFinding("rsync", ["--version"], "install rsync (apt-get install rsync)", true),
    toolFinding(
      "python3",
      ["--version"],
      "install python3: the tree digest runs on the control node too",
      config?.tree !== undefined,
    ),
  ];
  if (config) findings.push(agentFinding(config));
  return findings;
}
