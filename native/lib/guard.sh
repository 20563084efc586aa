# guard.sh — the last check before a node program deletes or overwrites a directory, and the
# references that keep an entry two stacks share. Sourced by the programs in native/ that run
# `rm -rf` or receive an `rsync --delete` (native/tree/prepare-dir.sh, remove-dir.sh,
# native/build/install.sh, delete.sh, fan-out-install.sh, native/rpc-worker/stop.sh); inlined in
# its place when a program is sent to a node (components/native-script.ts). The references'
# layout (guard_refs) is also what native/rpc-worker/prewarm.py keeps for tensor-cache entries.
# The control node checks paths first (components/config.ts); this checks again where the path
# is used, because config is not the only way to get a bad path (old state, a symlink made on
# the node, a hand-edited stack export).

# guard_refuse WHAT PATH WHY: the one refusal message; exit 97 (components/tree/node-dir.ts).
guard_refuse() {
	echo "sparkform guard: refusing to $1 $2: $3" >&2
	exit 97
}

# guard_path WHAT PATH: set GUARD_PATH to PATH resolved on this node, or refuse (exit 97).
# PATH is absolute, `~/…`, or relative to $HOME (how remote commands start). Refused: the
# root, $HOME or anything containing it, `.`/`..`/empty parts, a `~/…` path that resolves
# outside $HOME, and a path through a symlink (below $HOME, or its last part anywhere): the
# directory deleted must be the one named, not what a link points at.
guard_path() {
	_gw=$1 _gp=$2
	case $HOME in /?*) ;; *) guard_refuse "$_gw" "$_gp" "\$HOME (${HOME:-unset}) is not an absolute directory" ;; esac
	_gh=$(cd -P -- "$HOME" 2>/dev/null && pwd) || guard_refuse "$_gw" "$_gp" "cannot resolve \$HOME ($HOME)"
	[ "$_gh" != / ] || guard_refuse "$_gw" "$_gp" "\$HOME is /"
	case $_gp in
	'~') _ga=$HOME ;;
	'~/'*) _ga=$HOME/${_gp#'~/'} ;;
	/*) _ga=$_gp ;;
	'') guard_refuse "$_gw" "''" "the path is empty" ;;
	*) _ga=$HOME/$_gp ;;
	esac
	while :; do case $_ga in ?*/) _ga=${_ga%/} ;; *) break ;; esac; done
	case "$_ga/" in
	*/./* | */../* | *//*) guard_refuse "$_gw" "$_gp" "it has a '.', '..' or empty part" ;;
	esac
	_gr=$(realpath -m -- "$_ga" 2>/dev/null) || guard_refuse "$_gw" "$_gp" "realpath failed"
	[ "$_gr" != / ] || guard_refuse "$_gw" "$_gp" "it is the root directory"
	case "$_gh/" in "$_gr"/*) guard_refuse "$_gw" "$_gp" "it is \$HOME ($_gh) or contains it" ;; esac
	[ ! -L "$_ga" ] || guard_refuse "$_gw" "$_gp" "it is a symlink (to $(readlink -- "$_ga")); sparkform only writes into directories it can name"
	case $_ga in
	"$HOME"/*)
		# Below $HOME every part must be what it says: $HOME/<rest> resolves to <home>/<rest>.
		[ "$_gr" = "$_gh/${_ga#"$HOME"/}" ] ||
			guard_refuse "$_gw" "$_gp" "it resolves to $_gr through a symlink, not to $_gh/${_ga#"$HOME"/}"
		;;
	*)
		case $_gr in
		"$_gh"/*) ;;
		/*/*) ;;
		*) guard_refuse "$_gw" "$_gp" "it resolves to $_gr, too close to /" ;;
		esac
		;;
	esac
	GUARD_PATH=$_gr
}

# guard_token TOKEN: a reference token is what providers make (letters, digits, '-').
guard_token() {
	case $1 in
	'' | *[!A-Za-z0-9-]*) guard_refuse "use reference" "$1" "a reference token is letters, digits and '-'" ;;
	esac
}

# guard_refs ENTRY: set GUARD_REFS to the reference directory of ENTRY (an absolute, guarded
# path): ~/.cache/sparkform/refs/<sha256 of the path, 16 hex>, holding `path` (for people),
# `created` (when sparkform made the entry) and one empty file per referencing resource.
guard_refs() {
	GUARD_REFS=$HOME/.cache/sparkform/refs/$(printf '%s' "$1" | sha256sum | cut -c1-16)
}

# ref_add ENTRY TOKEN CREATED: record TOKEN's reference to ENTRY (and that sparkform created
# ENTRY when CREATED is 1).
ref_add() {
	guard_token "$2"
	guard_refs "$1"
	mkdir -p -- "$GUARD_REFS"
	printf '%s\n' "$1" >"$GUARD_REFS/path"
	if [ "$3" = 1 ]; then : >"$GUARD_REFS/created"; fi
	: >"$GUARD_REFS/ref-$2"
}

# ref_drop ENTRY TOKEN: drop TOKEN's reference; set REFS_LEFT to how many other resources
# still reference ENTRY and REF_CREATED to 1 when sparkform created it. The directory of
# references goes with the last reference.
ref_drop() {
	guard_token "$2"
	guard_refs "$1"
	rm -f -- "$GUARD_REFS/ref-$2"
	REFS_LEFT=0
	for _r in "$GUARD_REFS"/ref-*; do [ -e "$_r" ] && REFS_LEFT=$((REFS_LEFT + 1)); done
	REF_CREATED=0
	[ -e "$GUARD_REFS/created" ] && REF_CREATED=1
	if [ "$REFS_LEFT" -eq 0 ]; then rm -rf -- "$GUARD_REFS"; fi
}
