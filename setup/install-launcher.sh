#!/bin/sh
# setup/install-launcher.sh DIR [CHECKOUT]: put a `sparkform` command in DIR (npm run setup passes
# /usr/local/bin as root, else ~/.local/bin). It is a POSIX sh script that runs
# `node <checkout>/bin/sparkform.js "$@"` for the sparkform checkout around the current directory
# (the nearest folder above it whose package.json is named "sparkform"), else for CHECKOUT (this
# script's checkout by default): no npx, so it starts as fast as node does.
#
# A DIR/sparkform that is not ours (no marker line, or a link) is left as it is, with a warning.
# The file is written beside the target and renamed onto it; a run that would write the same
# bytes changes nothing.
set -eu

say() { printf 'setup: %s\n' "$*"; }

if [ $# -lt 1 ] || [ -z "$1" ]; then
  printf 'usage: %s DIR [CHECKOUT]\n' "$0" >&2
  exit 2
fi
dir=$1
checkout=${2:-$(cd "$(dirname "$0")/.." && pwd)}
target="$dir/sparkform"
marker="# sparkform-launcher: written by npm run setup (setup/install-launcher.sh); it may replace this file"

if [ -e "$target" ] || [ -L "$target" ]; then
  if [ -L "$target" ] || ! [ -f "$target" ] || ! grep -qxF "$marker" "$target"; then
    say "warning: $target is not sparkform's launcher; left as it is (\`node bin/sparkform.js\` runs the CLI)"
    exit 0
  fi
fi

# The checkout's path inside single quotes: each ' becomes '\''.
quoted="'$(printf '%s' "$checkout" | sed "s/'/'\\\\''/g")'"

mkdir -p "$dir"
tmp=$(mktemp "$dir/.sparkform.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cat >"$tmp" <<EOF
#!/bin/sh
$marker
# Runs the CLI of the sparkform checkout you are in, else of the one that installed it.
checkout=$quoted
d=\$PWD
while [ -n "\$d" ]; do
  if [ -f "\$d/package.json" ] && grep -q '"name": *"sparkform"' "\$d/package.json"; then
    checkout=\$d
    break
  fi
  d=\${d%/*}
done
exec node "\$checkout/bin/sparkform.js" "\$@"
EOF
chmod 755 "$tmp"

if [ -x "$target" ] && cmp -s "$tmp" "$target"; then
  say "sparkform launcher $target unchanged"
else
  mv -f "$tmp" "$target"
  say "sparkform launcher installed: $target (runs the checkout you are in, else $checkout)"
fi

case ":$PATH:" in
  *":$dir:"*)
    found=$(command -v sparkform 2>/dev/null || true)
    [ -z "$found" ] || [ "$found" = "$target" ] ||
      say "warning: \`sparkform\` runs $found, which comes before $dir on PATH"
    ;;
  *)
    # shellcheck disable=SC2016 # the line to add, printed as it is
    line='export PATH="$HOME/.local/bin:$PATH"'
    [ "$dir" = "$HOME/.local/bin" ] || line="export PATH=\"$dir:\$PATH\""
    say "warning: $dir is not on PATH; add this line to ~/.profile (or your shell's rc file), then open a new shell: $line"
    ;;
esac
