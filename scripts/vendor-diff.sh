#!/usr/bin/env bash
# The vendored crates' changes as reviewable diffs: vendor/<crate>/shoal.patch
# is the diff from the crate as published on crates.io to the copy in
# vendor/ (PATCHED.md says why each change is there).
#   scripts/vendor-diff.sh          write the diffs anew
#   scripts/vendor-diff.sh --check  fail when a diff no longer matches vendor/
set -euo pipefail
cd "$(dirname "$0")/.."
crates="fjall-3.1.13 fuser-0.18.0"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bad=0
for c in $crates; do
  name=${c%-*}; v=vendor/$name
  curl -sfL --retry 3 -o "$tmp/$c.crate" "https://static.crates.io/crates/$name/$c.crate" \
    || { echo "vendor-diff: cannot download $c from crates.io" >&2; exit 1; }
  tar -xzf "$tmp/$c.crate" -C "$tmp"
  # Every file of the vendored copy against the published one (files the
  # copy leaves out, such as examples, are not changes to the code).
  (cd "$v" && find . -type f ! -name PATCHED.md ! -name shoal.patch ! -name .cargo-ok | LC_ALL=C sort) |
    while read -r f; do
      f=${f#./}
      diff -uN --label "a/$f" --label "b/$f" "$tmp/$c/$f" "$v/$f" || true
    done > "$tmp/$name.patch"
  if [ "${1:-}" = --check ]; then
    if ! cmp -s "$tmp/$name.patch" "$v/shoal.patch"; then
      echo "vendor-diff: $v/shoal.patch does not match $v: run scripts/vendor-diff.sh and review" >&2
      bad=1
    fi
  else
    cp "$tmp/$name.patch" "$v/shoal.patch"
    echo "$v/shoal.patch: $(grep -c '^+++ ' "$v/shoal.patch") files changed"
  fi
done
exit $bad
