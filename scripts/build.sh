#!/bin/sh
# build.sh [BUILDDIR [CONFIGURE ARGS...]]: bootstrap autotools and build
# tracedock out of tree in BUILDDIR (default: build).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
[ $# -gt 0 ] && shift
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
    autoreconf -fi >/dev/null 2>&1 || { autoreconf -fi; exit 1; }
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
	"$top/configure" -q "$@"
fi
make -j"$(nproc)" -s
