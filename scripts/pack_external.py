#!/usr/bin/env python3
"""Pack an external source (configs/engine.yaml `external:`) for an offline build host whose
transfers are size-limited: the extracted, SHA-256-checked folder in the cache layout that
KITE_CACHE points at, without the top folders its build never reads.

    python3 scripts/pack_external.py llama.cpp OUT.tar.gz [--omit DIR ...]
    # on the host: mkdir C && tar -C C -xzf OUT.tar.gz && KITE_CACHE=C python3 -m harness build ...

The default omissions are the entry's own `omit:` list plus docs/ and media/ (llama.cpp's pinned
archive is 77 MB, of which models/ and docs/ are 113 of the 176 MB extracted). The packed
SOURCE.json names what was left out, so the packed tree is never taken for the whole archive.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.builder import external  # noqa: E402
from harness.contract.config import load_config  # noqa: E402
from harness.errors import HarnessError  # noqa: E402

DEFAULT_OMIT = ("docs", "media")


def pack(source: Path, out: Path, omit: list[str]) -> dict[str, int]:
    """Write OUT from the cache folder `source` (src/<name>-<hash>/, holding SOURCE.json and the
    subdir). Returns the files kept and left out."""
    marker = json.loads((source / external.MARKER).read_text())
    subdir = PurePosixPath(marker["subdir"])
    top = PurePosixPath("src") / source.name
    kept = left = 0
    with tarfile.open(out, "w:gz") as tar:
        for path in sorted((source / subdir).rglob("*")):
            rel = PurePosixPath(path.relative_to(source / subdir).as_posix())
            if rel.parts[0] in omit or path.is_symlink():
                left += path.is_file()
                continue
            if path.is_file():
                tar.add(path, arcname=str(top / subdir / rel), recursive=False)
                kept += 1
        marker["omitted"] = sorted(omit)
        data = (json.dumps(marker, indent=1) + "\n").encode()
        info = tarfile.TarInfo(str(top / external.MARKER))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return {"kept": kept, "left_out": left}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="an entry of configs/engine.yaml's external:")
    ap.add_argument("out", type=Path, help="the .tar.gz to write")
    ap.add_argument("--omit", nargs="*", default=None,
                    help=f"top folders to leave out (default: the entry's omit: plus {', '.join(DEFAULT_OMIT)})")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(ROOT)
        src = cfg.external.get(args.name)
        if src is None:
            raise HarnessError(f"{args.name}: not an entry of configs/engine.yaml's external: "
                               f"({', '.join(sorted(cfg.external)) or 'none'})")
        folder = external.fetch(src, say=lambda s: print(s, file=sys.stderr)).parents[
            len(PurePosixPath(src.subdir).parts) - 1]
        omit = list(args.omit) if args.omit is not None else sorted({*src.omit, *DEFAULT_OMIT})
        counts = pack(folder, args.out, omit)
    except (HarnessError, OSError) as e:
        print(f"pack_external: {e}", file=sys.stderr)
        return 2
    size = args.out.stat().st_size / 2**20
    print(f"{args.out}: {counts['kept']} files ({size:.1f} MiB), {counts['left_out']} left out "
          f"({', '.join(omit) or 'none'}); unpack into a folder and point KITE_CACHE at it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
