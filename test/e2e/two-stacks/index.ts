// Test program for test/e2e/two-stacks.test.ts: the Nodes stage and one Router on the first
// node, in front of a stand-in upstream (twostacks:upstream); the router's port is
// twostacks:routerPort, the same in both stacks.
import * as pulumi from "@pulumi/pulumi";
import { Nodes } from "../../../components/node/nodes";
import { Router } from "../../../components/router/router";
import { readStackConfig } from "../../../components/stack-config";

const config = readStackConfig(new pulumi.Config("sparkform"), { projectDir: __dirname });
const t = new pulumi.Config("twostacks");
const node = config.nodes[0]?.name;
if (!node) throw new Error("sparkform:nodes is empty");
const nodes = new Nodes("two", { config: config.nodes, ssh: config, diskPaths: [] });
const router = new Router(
  "two-router",
  {
    target: nodes.target(node),
    node,
    port: t.requireNumber("routerPort"),
    arch: nodes.of(node).facts.apply((f) => f?.arch ?? ""),
    upstreams: [{ node, url: t.require("upstream") }],
    topology: "single",
    unavailable: "the two-stacks e2e upstream is down",
  },
  nodes.childOpts({}, ["target"]),
);
export const url = router.url;
