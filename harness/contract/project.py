"""Which project the harness works on, found as pytest finds its rootdir: walking up from the
working directory to the first folder that declares one.

A folder is a project when its `pyproject.toml` has a `[tool.kite]` table (whose optional
`config` names the engine configuration, relative to that folder) or, failing that, when it holds
`configs/engine.yaml`. `--root` names the folder instead of the walk; `--config` the file.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError
from harness.contract import inputs

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as the tomli package (a dependency there)
    import tomli as tomllib

DEFAULT_CONFIG = Path("configs") / "engine.yaml"
TOOL_KEYS = ("config", "history")  # history: the history store verify adds to (docs/HISTORY.md)
# Model recipes shipped with the harness (package data); a project's own come first.
BUILTIN_RECIPES = Path(__file__).resolve().parents[1] / "models" / "builtin"


class NoProject(ConfigError):
    """No folder at or above the working directory declares a project."""


@dataclass(frozen=True)
class Project:
    root: Path
    config: Path  # the engine configuration (engine.yaml)


def project_at(folder: Path) -> Project:
    """The project rooted at folder (`--root`): its [tool.kite] config, else configs/engine.yaml."""
    try:
        folder = inputs.resolve(folder)
    except inputs.FileRefused as e:
        raise NoProject(f"--root {e}") from None
    if not folder.is_dir():
        raise NoProject(f"--root {folder}: not a folder" if folder.exists() else f"--root {folder}: no such folder")
    return Project(folder, folder / (_tool_config(folder / "pyproject.toml") or DEFAULT_CONFIG))


def locate(root: Path | None) -> Project:
    """`--root`'s project when given, else the nearest one at or above the working directory."""
    return project_at(root) if root is not None else find_project(Path.cwd())


def find_project(start: Path) -> Project:
    """The nearest project at or above start."""
    try:
        start = inputs.resolve(start)
    except inputs.FileRefused as e:
        raise NoProject(str(e)) from None
    for folder in (start, *start.parents):
        named = _tool_config(folder / "pyproject.toml")
        if named is not None:
            return Project(folder, folder / named)
        if (folder / DEFAULT_CONFIG).is_file():
            return Project(folder, folder / DEFAULT_CONFIG)
    raise NoProject(f"no kite project in {start} or above it (looked for {DEFAULT_CONFIG.as_posix()} and "
                      "a [tool.kite] table in pyproject.toml); run it inside a project or give --root")


def tool_setting(root: Path, key: str) -> str | None:
    """A text setting of the [tool.kite] table in root/pyproject.toml; None when it is not set."""
    value = (_tool_table(root / "pyproject.toml") or {}).get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{root / 'pyproject.toml'}: [tool.kite] {key} must be a path (relative to {root})")
    return value


def _tool_config(pyproject: Path) -> Path | None:
    """[tool.kite]'s config path (default configs/engine.yaml); None without a [tool.kite] table."""
    table = _tool_table(pyproject)
    if table is None:
        return None
    config = table.get("config", DEFAULT_CONFIG.as_posix())
    if not isinstance(config, str) or not config:
        raise ConfigError(f"{pyproject}: [tool.kite] config must be a path (relative to {pyproject.parent})")
    return Path(config)


def _tool_table(pyproject: Path) -> dict | None:
    """The [tool.kite] table, its keys checked; None without one."""
    try:
        text = inputs.read_text(pyproject, inputs.MAX_CONFIG)  # refuses a FIFO without blocking on it
    except FileNotFoundError:
        return None
    except inputs.FileRefused as e:
        raise ConfigError(str(e)) from None
    if "kite" not in text:
        return None  # most pyproject.toml files never mention kite: no need to parse them
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{pyproject}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{pyproject}: not valid TOML: nested too deeply") from None
    table = doc.get("tool", {}).get("kite") if isinstance(doc.get("tool"), dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.kite] must be a table")
    unknown = sorted(set(table) - set(TOOL_KEYS))
    if unknown:
        raise ConfigError(f"{pyproject}: [tool.kite]: unknown key(s) {', '.join(unknown)}; allowed: "
                          f"{', '.join(TOOL_KEYS)}")
    return table


def recipe_folders(search: Sequence[Path] = ()) -> list[Path]:
    """Where a recipe name is looked up, in order: the project's folders, then the built-ins."""
    return [*search, BUILTIN_RECIPES]


def find_recipe(name: str, search: Sequence[Path] = ()) -> Path | None:
    """NAME.yaml in the first folder that holds it; None when none does."""
    return next((f / f"{name}.yaml" for f in recipe_folders(search) if (f / f"{name}.yaml").is_file()), None)
