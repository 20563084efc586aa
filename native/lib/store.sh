# store.sh — the entries of one build key in NativeBuild's store (native/build/install.sh,
# delete.sh). Sourced when a program runs from a checkout; inlined in its place when the
# program is sent to a node (components/native-script.ts).

# store_key KEY: refuse a key that is not a plain name (it becomes a path part and a glob prefix).
store_key() {
	case $1 in
	'' | -* | *[!A-Za-z0-9_.-]* | . | ..) echo "store: invalid build key '$1'" >&2; exit 2 ;;
	esac
}

# store_entries STORE KEY: the entries of exactly KEY, one per line: STORE/KEY-<12 hex>-<6
# characters> (install.sh's id and mktemp's suffix). The fixed lengths are what make it exact:
# another key that starts with "KEY-" (a command build's, KEY-<8 hex>) has a longer tail.
store_entries() {
	_h='[0-9a-f]'
	_c='[A-Za-z0-9]'
	for _e in "$1/$2-"$_h$_h$_h$_h$_h$_h$_h$_h$_h$_h$_h$_h-$_c$_c$_c$_c$_c$_c; do
		[ -e "$_e" ] && printf '%s\n' "$_e"
	done
	return 0
}
