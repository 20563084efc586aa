// The program TreeSync (and Toolchain) run on a node (native/tree/).
export const TREE_DIGEST_PROGRAM = "tree/tree-digest.py";
