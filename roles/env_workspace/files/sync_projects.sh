#!/bin/sh
# sync_projects.sh SOURCE DEST UID PROJECT...: make DEST/PROJECT hold every file of SOURCE/PROJECT, owned by UID
# (user and group). Only files that are missing or differ are copied (whole projects in one tar pipe), files DEST has
# beyond them (build output) are left alone, and caches a tool left in SOURCE (__pycache__, .ruff_cache, ...) are
# not copied, nor the fetch record of an upstream project (.opsbench-fetch.json). Prints "updated PROJECT: N file(s)"
# for each project it changed. Coreutils, findutils and tar only (what the AWX execution environment has).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 SOURCE DEST UID PROJECT..." >&2; exit 2; }
src=$1 dest=$2 uid=$3
shift 3
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for project in "$@"; do
  [ -d "$src/$project" ] || { echo "no project $project in $src" >&2; exit 2; }
  : > "$list"
  (cd "$src/$project" && find . \( -name __pycache__ -o -name .ruff_cache -o -name .mypy_cache \
      -o -name .pytest_cache -o -name '*.egg-info' -o -name .venv -o -name target -o -name .git \
      -o -name .opsbench-fetch.json \) -prune \
      -o \( -type f -o -type l \) -print) | sed 's|^\./||' | sort | while IFS= read -r f; do
    if [ -L "$src/$project/$f" ]; then
      [ -L "$dest/$project/$f" ] && [ "$(readlink "$src/$project/$f")" = "$(readlink "$dest/$project/$f")" ] \
        || echo "$f" >> "$list"
    elif [ -L "$dest/$project/$f" ] || [ ! -f "$dest/$project/$f" ] \
        || [ "$(sha256sum < "$src/$project/$f")" != "$(sha256sum < "$dest/$project/$f")" ]; then
      echo "$f" >> "$list"
    fi
  done
  [ -s "$list" ] || continue
  # The tree is written by the workspace user; this runs as root on the host. A directory on the way that is a
  # symlink (made inside the container) would lead tar outside the tree: refuse instead (deploy runs before the
  # agent gets the workspace, so nothing changes the tree meanwhile).
  for d in "$dest" "$dest/$project"; do
    if [ -L "$d" ]; then echo "refusing to write through the symlink $d" >&2; exit 3; fi
  done
  while IFS= read -r f; do
    d=$(dirname "$f")
    while [ "$d" != . ]; do
      if [ -L "$dest/$project/$d" ]; then echo "refusing to write through the symlink $dest/$project/$d" >&2; exit 3; fi
      d=$(dirname "$d")
    done
  done < "$list"
  install -d -o "$uid" -g "$uid" -m 0755 "$dest/$project"
  tar -C "$src/$project" --numeric-owner --owner="$uid" --group="$uid" -c -T "$list" \
    | tar -C "$dest/$project" --same-owner --same-permissions -x
  # Directories tar made on the way get the owner too.
  find "$dest/$project" -type d ! -uid "$uid" -exec chown "$uid:$uid" {} +
  echo "updated $project: $(wc -l < "$list") file(s)"
done
