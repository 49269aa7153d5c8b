#!/usr/bin/env bash
# Makes a miniLST release tarball and records it in the Spack recipe.
#   scripts/release.sh VERSION [REF]
# VERSION: the project's version (CMakeLists.txt project(... VERSION x.y.z) at REF must say the same);
# REF: what to archive (default: the tag vVERSION; tag first: git tag -a vVERSION -m "miniLST VERSION").
# Writes build-release/minilst-VERSION.tar.gz (git archive of REF, every path under minilst-VERSION/, gzip -n:
# the same bytes for the same REF on every run) and its .sha256 beside it, then adds
# version("VERSION", sha256=...) to spack/packages/minilst/package.py (or updates its checksum).
# Publish the tarball where the recipe's url points (a release asset of tag vVERSION under its
# homepage: <homepage>/releases/download/vVERSION/minilst-VERSION.tar.gz) and commit the recipe.
# The recipe's entry of a release is committed after its tag (a file cannot hold the checksum of
# an archive that contains it); Spack checks the download against it.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 VERSION [REF]" >&2; exit 2; }
version=$1
ref=${2:-v$version}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "$0: VERSION '$version' is not x.y.z" >&2; exit 2; }
git rev-parse --verify -q "$ref^{commit}" > /dev/null \
  || { echo "$0: no commit '$ref' (tag it first: git tag -a v$version -m \"miniLST $version\")" >&2; exit 1; }
declared=$(git show "$ref:CMakeLists.txt" | sed -n 's/^project(miniLST VERSION \([0-9.]*\) .*/\1/p')
[[ $declared == "$version" ]] || { echo "$0: CMakeLists.txt at $ref says version '$declared', not $version" >&2; exit 1; }
recipe=spack/packages/minilst/package.py
grep -q '^    url = ' "$recipe" || { echo "$0: $recipe has no url line" >&2; exit 1; }

mkdir -p build-release   # ignored by git (build-*/)
tarball=build-release/minilst-$version.tar.gz
git archive --format=tar --prefix="minilst-$version/" "$ref" | gzip -n -9 > "$tarball.part"
mv "$tarball.part" "$tarball"
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
echo "$sha  minilst-$version.tar.gz" > "$tarball.sha256"

# The recipe: url names this version's tarball; the version line carries its checksum.
sed -i -E "s|^(    url = \".*/releases/download/)v[0-9.]+/minilst-[0-9.]+\.tar\.gz\"|\1v$version/minilst-$version.tar.gz\"|" "$recipe"
if grep -q "^    version(\"$version\", sha256=" "$recipe"; then
  sed -i -E "s|^    version\(\"$version\", sha256=\"[0-9a-f]*\"\)|    version(\"$version\", sha256=\"$sha\")|" "$recipe"
else  # releases newest first, after the branch
  sed -i "/^    version(\"main\", branch=\"main\")/a\\    version(\"$version\", sha256=\"$sha\")" "$recipe"
fi
grep -q "^    version(\"$version\", sha256=\"$sha\")" "$recipe" || { echo "$0: could not update $recipe" >&2; exit 1; }
echo "$tarball ($(git rev-parse --short "$ref^{commit}")): sha256 $sha"
echo "$recipe: version(\"$version\", sha256=\"$sha\"); publish $tarball at $(sed -n 's/^    url = "\(.*\)"/\1/p' "$recipe")"
