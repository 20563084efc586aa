// The sparkform policy pack: `pulumi preview --policy-pack policies`.
import { PolicyPack } from "@pulumi/policy";
import { buildsIdentical, toolchainsIdentical, treesIdentical } from "./consistency";
import { digestPinned } from "./digests";
import { hostKeyPinned } from "./transport";

new PolicyPack("sparkform", {
  policies: [digestPinned, hostKeyPinned, treesIdentical, toolchainsIdentical, buildsIdentical],
});
