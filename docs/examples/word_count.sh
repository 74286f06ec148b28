#!/bin/sh
# word_count: the script behind the word_count tool of tools.yaml; put it
# in the workspace as scripts/word_count.sh. The argument arrives in
# TOOL_ARG_PATH (and, with every other argument, as JSON on stdin).
set -eu
path=$TOOL_ARG_PATH
case "$path" in
/* | *..*)
	echo "give a path relative to the workspace, without .." >&2
	exit 2
	;;
esac
if [ ! -f "$path" ]; then
	echo "no file $path in the workspace" >&2
	exit 1
fi
set -- $(wc -l -w -c <"$path")
echo "$path: $1 lines, $2 words, $3 bytes"
