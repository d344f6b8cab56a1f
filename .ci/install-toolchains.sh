#!/usr/bin/env bash
# Install the host toolchains the build matrix uses, from Debian packages:
#   clang (+ lld, compiler-rt for the sanitizers), the MinGW-w64 cross compiler for x86_64,
#   and wine (64-bit) to run the Windows engine. With --hip: hipcc, the HIP runtime and the AMD
#   device libraries instead (ROCm 5.2.3 on Debian 12), for the hip-* matrix entries.
# Idempotent and quiet: packages already present are not fetched again; `apt-get update` runs
# only when something is missing. Prints one line per outcome. Exit status 0 unless apt fails.
#
# Usage: .ci/install-toolchains.sh [--hip] [--dry-run]
set -euo pipefail

DRY_RUN=0
HIP=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --hip) HIP=1 ;;
    *) echo "install-toolchains: unknown option $arg (usage: [--hip] [--dry-run])" >&2; exit 2 ;;
  esac
done

# Debian 12 (bookworm) package names. wine: the "wine" package holds the /usr/bin/wine launcher,
# "wine64" the 64-bit loader; 32-bit support (wine32, i386 multiarch) is not needed.
PACKAGES=(
  clang
  lld
  libclang-rt-14-dev
  gcc-mingw-w64-x86-64
  binutils-mingw-w64-x86-64
  wine
  wine64
)
TOOLS=(clang x86_64-w64-mingw32-gcc wine)
if [[ $HIP -eq 1 ]]; then
  # the HIP compiler (clang 15 underneath), libamdhip64 for the module to link, the gfx bitcode
  PACKAGES=(hipcc libamdhip64-dev rocm-device-libs)
  TOOLS=(hipcc)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-toolchains: all present (${PACKAGES[*]})"
  exit 0
fi

echo "install-toolchains: installing ${missing[*]}"
if [[ $DRY_RUN -eq 1 ]]; then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-toolchains: not root and no sudo; install by hand: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! $SUDO apt-get update -qq >"$log" 2>&1; then
  cat "$log" >&2; exit 1
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  cat "$log" >&2; exit 1
fi

# Report where each tool landed.
for t in "${TOOLS[@]}"; do
  if command -v "$t" >/dev/null 2>&1; then
    echo "install-toolchains: $t -> $(command -v "$t")"
  else
    echo "install-toolchains: $t still missing" >&2
  fi
done
