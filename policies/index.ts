// The sparkform policy pack: `pulumi preview --policy-pack policies`.
import { PolicyPack } from "@pulumi/policy";
import { cudaArchPinned } from "./build";
import { buildsIdentical, toolchainsIdentical, treesIdentical } from "./consistency";
import { digestPinned, modelPinned } from "./digests";
import { hostKeyPinned } from "./transport";

new PolicyPack("sparkform", {
  policies: [
    digestPinned,
    modelPinned,
    hostKeyPinned,
    treesIdentical,
    toolchainsIdentical,
    buildsIdentical,
    cudaArchPinned,
  ],
});
