// Item 8 of issue 16: peak resident memory of each process of a `pulumi up`: the CLI, the
// language host, the program, the policy pack and the dynamic-provider process. Sampled every
// 200 ms from /proc: each process's VmHWM (the kernel's own peak RSS, monotonic) at its last
// sample, so a peak is missed only if it came in its last 200 ms.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { policyPackArgs } from "../setup/pulumi/policy";

export interface ProcessPeak {
  role: string;
  pid: number;
  peakMiB: number;
  command: string;
}

function role(cmd: string): string {
  if (cmd.includes("cmd/dynamic-provider")) return "dynamic providers (node)";
  if (cmd.includes("run-policy-pack/index")) return "policy pack (node)";
  if (cmd.includes("cmd/run/index")) return "program (node)";
  if (cmd.includes("pulumi-language-nodejs")) return "language host (Go)";
  if (/(^|\/)pulumi\s/.test(cmd)) return "pulumi CLI (Go)";
  if (cmd.startsWith("ssh") || cmd.includes("/ssh ")) return "ssh";
  return "other";
}

function children(): Map<number, number[]> {
  const kids = new Map<number, number[]>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      kids.set(ppid, [...(kids.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone
    }
  }
  return kids;
}

/** Runs `bin args` in `cwd` and returns its processes' peaks and its exit code. */
export async function peakRss(
  bin: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ exitCode: number; peaks: ProcessPeak[]; seconds: number }> {
  const t = Date.now();
  const child = spawn(bin, args, { ...opts, stdio: "ignore" });
  const seen = new Map<number, ProcessPeak>();
  const sample = () => {
    const kids = children();
    const todo = [child.pid as number];
    while (todo.length) {
      const pid = todo.pop() as number;
      todo.push(...(kids.get(pid) ?? []));
      try {
        const status = readFileSync(`/proc/${pid}/status`, "utf8");
        const hwm = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
        const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
        const prev = seen.get(pid);
        if (!prev || hwm > prev.peakMiB) {
          seen.set(pid, { role: role(cmd), pid, peakMiB: hwm, command: cmd.slice(0, 160) });
        }
      } catch {
        // exited between listing and reading
      }
    }
  };
  const timer = setInterval(sample, 200);
  const exitCode = await new Promise<number>((resolve) => child.on("exit", (c) => resolve(c ?? 1)));
  clearInterval(timer);
  return { exitCode, peaks: [...seen.values()], seconds: (Date.now() - t) / 1000 };
}

/** The largest peak per role (a role can have several processes, e.g. ssh). */
export function byRole(
  peaks: readonly ProcessPeak[],
): { role: string; peakMiB: number; processes: number }[] {
  const roles = new Map<string, { peakMiB: number; processes: number }>();
  for (const p of peaks) {
    const r = roles.get(p.role) ?? { peakMiB: 0, processes: 0 };
    roles.set(p.role, { peakMiB: Math.max(r.peakMiB, p.peakMiB), processes: r.processes + 1 });
  }
  return [...roles].map(([role, r]) => ({ role, ...r })).sort((a, b) => b.peakMiB - a.peakMiB);
}

export interface MemoryResult {
  command: string;
  exitCode: number;
  peaks: ProcessPeak[];
  seconds: number;
  roles: { role: string; peakMiB: number; processes: number }[];
}

/** One no-op `up` of `stack` with every process it starts sampled. */
export async function runMemory(opts: {
  stack: string;
  log(s: string): void;
}): Promise<MemoryResult> {
  const args = ["up", "--yes", "--stack", opts.stack, "--expect-no-changes", "--non-interactive"];
  args.push(...policyPackArgs(opts.stack));
  opts.log("memory: one up with its processes sampled");
  const r = await peakRss(pulumiBinary(), args, { cwd: repoRoot, env: pulumiEnv() });
  return { command: `pulumi ${args.join(" ")}`, ...r, roles: byRole(r.peaks) };
}

export function memoryMarkdown(r: MemoryResult): string {
  return [
    `\`${r.command}\` (exit ${r.exitCode}, ${r.seconds.toFixed(1)} s), every process sampled each 200 ms from /proc (VmHWM):`,
    "",
    "| process | peak RSS | processes |",
    "|---|---:|---:|",
    ...r.roles.map((x) => `| ${x.role} | ${x.peakMiB.toFixed(0)} MiB | ${x.processes} |`),
    "",
  ].join("\n");
}
