#!/usr/bin/env bash
# Trunk's post-build hook (Trunk.toml): stamps the built service worker with
# this build's version (a hash of every built file) and the files to cache, so
# each deploy gets a cache of its own and is never served stale.
set -euo pipefail
cd "${TRUNK_STAGING_DIR:?run by trunk build}"
mapfile -t files < <(find . -type f ! -name sw.js -printf '%P\n' | LC_ALL=C sort)
version=$(sha256sum "${files[@]}" | sha256sum | cut -c1-16)
list='"./"'
for f in "${files[@]}"; do
    list+=",\"./$f\""
done
sed -i "s|__BUILD_VERSION__|$version|; s|__BUILD_FILES__|[$list]|" sw.js
echo "service worker: build $version, ${#files[@]} files"
