// A real toolchain on spark-1 only, for the "copy the toolchain from a peer" path: a compiled
// program plus the shared library it loads through $ORIGIN, in an asdf-like install tree.
import type { SimToolchain } from "./state";

export const toolchain: SimToolchain = {
  node: "spark-1",
  path: "/home/spark/.sparktool",
  bin: "/home/spark/.sparktool/installs/sparktool/1.0.0/bin",
  probe: "sparktool --version",
  expect: "sparktool 1.0.0",
};

/** Built inside the node as `spark` at `sim up`. */
export const toolchainBuildScript = String.raw`set -euo pipefail
P=/home/spark/.sparktool/installs/sparktool/1.0.0
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
mkdir -p "$P/bin" "$P/lib" "$P/share/sparktool"
cat > "$src/lib.c" <<'C'
const char *sparktool_version(void) { return "1.0.0"; }
C
cat > "$src/main.c" <<'C'
#include <stdio.h>
#include <string.h>
const char *sparktool_version(void);
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("sparktool %s\n", sparktool_version());
    return 0;
  }
  fprintf(stderr, "usage: sparktool --version\n");
  return 2;
}
C
gcc -O2 -fPIC -shared -Wl,-soname,libsparktool.so.1 -o "$P/lib/libsparktool.so.1" "$src/lib.c"
ln -sf libsparktool.so.1 "$P/lib/libsparktool.so"
gcc -O2 -o "$P/bin/sparktool" "$src/main.c" -L"$P/lib" -lsparktool -Wl,-rpath,'$ORIGIN/../lib'
echo "sparktool 1.0.0" > "$P/share/sparktool/VERSION"
printf 'sparktool 1.0.0\n' > /home/spark/.sparktool/.tool-versions
PATH="$P/bin:$PATH" sparktool --version
`;
