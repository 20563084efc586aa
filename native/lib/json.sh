# json.sh — JSON encoding for the POSIX sh programs in native/ (facts.sh, verify-build.sh).
# Sourced when a script runs from a checkout; inlined in its place when the script is sent
# to a node (components/native-script.ts), since a node has no copy of this folder.

# _json_escape MODE [FILE]: stdin (or FILE) as the body of a JSON string literal, quotes
# included. RFC 8259 escaping; UTF-8 bytes pass through unchanged. MODE "string" joins
# lines with \n (the shell value had no trailing newline); MODE "file" ends each line with \n.
_json_escape() {
	awk -v mode="$1" '
		BEGIN {
			ORS = ""
			for (i = 1; i < 32; i++) esc[sprintf("%c", i)] = sprintf("\\u%04x", i)
			esc["\t"] = "\\t"; esc["\r"] = "\\r"; esc["\""] = "\\\""; esc["\\"] = "\\\\"
			esc[sprintf("%c", 127)] = "\\u007f"
			printf "\""
		}
		{
			if (mode == "string" && NR > 1) printf "\\n"
			n = length($0)
			for (i = 1; i <= n; i++) { c = substr($0, i, 1); printf "%s", ((c in esc) ? esc[c] : c) }
			if (mode == "file") printf "\\n"
		}
		END { printf "\"" }' ${2+"$2"}
}

# js STRING: a JSON string literal. Plain printable ASCII is printed directly (no fork);
# anything with quotes, backslashes, control or non-ASCII bytes goes through awk.
js() {
	case $1 in
	*[\"\\]* | *[![:print:]]*) printf '%s\n' "$1" | _json_escape string ;;
	*) printf '"%s"' "$1" ;;
	esac
}

# jsn STRING-OR-EMPTY: a JSON string, or null when empty.
jsn() {
	if [ -n "$1" ]; then js "$1"; else printf 'null'; fi
}

# jsfile FILE: the file's content as a JSON string (awk reads it; no shell variable holds it).
jsfile() {
	_json_escape file "$1"
}

# num VALUE: a JSON non-negative integer, or null when VALUE is not one.
num() {
	case $1 in
	'' | *[!0-9]*) printf 'null' ;;
	0) printf '0' ;;
	0*) printf 'null' ;; # leading zeros are not JSON, and not a value we recognise
	*) printf '%s' "$1" ;;
	esac
}
