#!/usr/bin/env bash
# Builds pebble (Let's Encrypt's ACME test server) from the pinned module
# into the git-ignored tools cache. It rebuilds only when the pins change.
#
# Usage: tests/tools/pebble/build.sh [cache-dir]   (default: <repo>/.cache/bin)
# Prints the path of the binary on its last line.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-${TUNA_TOOLS_CACHE:-$root/.cache/bin}}
mkdir -p "$out"

stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
if [[ -x $out/pebble && "$(cat "$out/.pebble.stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "$out/pebble"
  exit 0
fi
cd "$here"
echo "tools: building pebble" >&2
go build -trimpath -ldflags "-s -w" -o "$out/pebble.tmp" github.com/letsencrypt/pebble/v2/cmd/pebble
mv "$out/pebble.tmp" "$out/pebble"
echo "$stamp" > "$out/.pebble.stamp"
echo "$out/pebble"
