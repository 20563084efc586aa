// The policy pack's own check…() functions (policies/*.ts), applied to the configuration before
// anything exists: what `up --policy-pack policies` would refuse later, said now.
import { stackBuildFlags } from "../../components/build/tree-commit";
import type { StackConfigData } from "../../components/stack-config";
import { addressOf } from "../../components/fabric/checks";
import { linkAddress } from "../../components/fabric/config";
import { checkCudaArchPinned } from "../../policies/build";
import { checkModelPinned } from "../../policies/model";
import { checkHostKeyPinned } from "../../policies/node";
import { checkBoundToFabric, checkRssGuard } from "../../policies/rpc";
import type { Finding } from "./findings";

const SHA256 = /^[0-9a-f]{64}$/;

function judged(check: string, where: string, problems: string[], ok: string): Finding[] {
  if (problems.length === 0) return [{ check, where, status: "pass", what: ok }];
  // Each policy message says what is wrong and the fix in one sentence; keep it whole.
  return problems.map((p) => ({ check, where, status: "fail", what: p, fix: "see the message" }));
}

/**
 * The policy's findings on `config`; `recordedCommit` is the llama.cpp commit the stack's builds
 * recorded at the last `up` (absent before it: the tree's git says it).
 */
export function policyFindings(config: StackConfigData, recordedCommit?: string): Finding[] {
  const out: Finding[] = [];
  for (const n of config.nodes) {
    out.push(...judged("host-key-pinned", n.name, checkHostKeyPinned(n), "host key pinned"));
  }
  if (config.build && config.tree) {
    try {
      const flags = stackBuildFlags(config.build, config.tree, recordedCommit);
      out.push(
        ...judged(
          "cuda-arch-pinned",
          "config",
          checkCudaArchPinned({ node: "every node", flags }),
          flags.LLAMA_BACKEND === "cuda"
            ? `one CUDA architecture: ${String(flags.LLAMA_CUDA_ARCH)}`
            : `${flags.LLAMA_BACKEND} build`,
        ),
      );
    } catch (err) {
      out.push({
        check: "build-flags",
        where: "config",
        status: "fail",
        what: (err as Error).message,
        fix: "fix sparkform:build as the message says",
      });
    }
  }
  const w = config.worker;
  if (w) {
    for (const name of w.nodes) {
      const node = config.nodes.find((n) => n.name === name);
      const rails = config.fabric?.rails[name]?.map((r) => addressOf(r.address)) ?? [];
      // Where the stack binds it: in a ring, its end of the cable to the client.
      const own = node?.fabricAddress;
      const bind = (config.fabric && linkAddress(config.fabric, w.client, name, own)) ?? own ?? "";
      const evidence = {
        bind,
        managementAddress: node?.host ?? "",
        fabricAddresses: rails.length ? rails : bind ? [bind] : [],
        client: { target: { name: w.client } },
        rssLimitPercent: w.rssLimitPercent,
      } as Parameters<typeof checkBoundToFabric>[1];
      out.push(
        ...judged("rpc-bound-to-fabric", name, checkBoundToFabric(name, evidence), `binds ${bind}`),
        ...judged(
          "rss-guard-on",
          name,
          checkRssGuard(name, evidence),
          `RSS guard at ${w.rssLimitPercent}% of RAM`,
        ),
      );
    }
  }
  const m = config.model;
  if (m) {
    const files = m.files.map((f) => ({ path: f, sha256: m.sha256?.[f] ?? "" }));
    const pinned = checkModelPinned({
      repo: m.repo,
      ...(m.allowBranch ? {} : { commit: m.revision }),
      files: files.filter((f) => SHA256.test(f.sha256)),
    });
    out.push(...judged("model-pinned", "config", pinned, `${m.repo} @ ${m.revision.slice(0, 12)}`));
    const unknown = files.filter((f) => !SHA256.test(f.sha256));
    if (unknown.length > 0) {
      // The hub's LFS metadata may carry them; the policy judges what `up` resolved.
      out.push({
        check: "model-pinned",
        where: "config",
        status: "warn",
        what: `no SHA-256 configured for ${unknown.map((f) => f.path).join(", ")}: pinned only if the hub's LFS metadata carries it`,
        fix: "give each file's digest in sparkform:model.sha256 (sha256sum of the file, or the hub's LFS oid)",
      });
    }
  }
  return out;
}
