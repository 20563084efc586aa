// The sparkform policy pack: `pulumi preview --policy-pack policies`. One module per domain,
// in stage order; each exports its pure check…() functions too (a preflight can reuse them).
import { PolicyPack } from "@pulumi/policy";
import { buildsIdentical, cudaArchPinned } from "./build";
import { fabricHealthy, rdmaTransport } from "./fabric";
import { modelPinned } from "./model";
import { hostKeyPinned } from "./node";
import { routerBind } from "./router";
import { rpcBoundToFabric, rssGuardOn, workerVersionMatch } from "./rpc";
import {
  devicesNamed,
  layerSplitAcrossHosts,
  layerSplitFitsOneNode,
  modelFits,
  servingCheckedAtUp,
} from "./serving";
import { toolchainsIdentical } from "./toolchain";
import { treesIdentical } from "./tree";

new PolicyPack("sparkform", {
  policies: [
    hostKeyPinned,
    fabricHealthy,
    rdmaTransport,
    toolchainsIdentical,
    treesIdentical,
    buildsIdentical,
    cudaArchPinned,
    modelPinned,
    rpcBoundToFabric,
    rssGuardOn,
    workerVersionMatch,
    modelFits,
    devicesNamed,
    layerSplitAcrossHosts,
    servingCheckedAtUp,
    layerSplitFitsOneNode,
    routerBind,
  ],
});
