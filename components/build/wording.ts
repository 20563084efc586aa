// Reasons worded once, shared by the build's validation messages and the policy pack. No
// imports: the policy pack loads this file at run time under its own compiler settings.

/** What a fat CUDA build costs, as measured (bench/cuda-proof.md), not estimated. */
export const FAT_BUILD_COST =
  "each ggml-cuda object compiles 2-5x longer, measured with nvcc 13 for seven architectures against one";
