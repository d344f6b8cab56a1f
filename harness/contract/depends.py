"""What a criterion depends on beyond its own text, as digests: the model recipe it runs
(the project's configs/models/<recipe>.yaml, else the built-in one; or the fixed model file of
configs/engine.yaml) and the build
entries of configs/engine.yaml it runs (as parsed: source, options, inputs, prebuilt, extras; with
the build type). Registered beside the criterion's
digest (`depends` lines of registry.lock), so a change to either shows as "not as registered"."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.contract import criteria as C
from harness.contract import inputs, yamlsrc
from harness.contract.config import Config
from harness.contract.digest import criterion_digest, file_sha256
from harness.contract.project import find_recipe


def uses_model(c: C.Criterion) -> bool:
    return any("model" in C.placeholders_in(t) for v in c.variants()
               for t in [*v.args, *v.wrapper, *v.env.values(), *v.place.values()])


def _recipe_digest(cfg: Config, recipe: str) -> str:
    p = Path(recipe)
    if p.suffix in (".yaml", ".yml"):
        path = p if p.is_absolute() else cfg.root / p
    else:  # looked up as the model generator looks it up
        path = find_recipe(recipe, [cfg.recipe_dir]) or cfg.recipe_dir / f"{recipe}.yaml"
    try:
        value: Any = yamlsrc.load(inputs.read_text(path, inputs.MAX_CONFIG)).value
    except FileNotFoundError:
        return "absent"
    except (HarnessError, yamlsrc.YamlSyntaxError):
        return "sha256:" + (file_sha256(path) or "")  # unreadable as YAML: its bytes
    return criterion_digest({"recipe": value})


def _set_fields(value: Any) -> Any:
    """The fields that are set: a field added to the configuration later, left at its empty
    default, does not change the digest of an entry that does not use it."""
    if isinstance(value, dict):
        return {k: _set_fields(v) for k, v in value.items() if v not in (None, False, "", (), [], {})}
    if isinstance(value, (list, tuple)):
        return [_set_fields(v) for v in value]
    return value


def dependency_digests(cfg: Config, c: C.Criterion) -> dict[str, str]:
    """name -> digest, e.g. {"build:default": "sha256:...", "recipe:tiny": "sha256:..."}."""
    out: dict[str, str] = {}
    for name in c.builds():
        spec = cfg.builds.get(name)  # the parsed entry: its meaning, not its YAML spelling
        out[f"build:{name}"] = criterion_digest({"build": _set_fields(dataclasses.asdict(spec)) if spec else None,
                                                 "build_type": cfg.build_type})
    if uses_model(c):
        spec = c.model or cfg.default_model
        if spec.get("path"):
            path = Path(str(spec["path"]))
            digest = file_sha256(path if path.is_absolute() else cfg.root / path)
            out[f"model-file:{spec['path']}"] = f"sha256:{digest}" if digest else "absent"
        elif spec.get("recipe"):
            out[f"recipe:{spec['recipe']}"] = _recipe_digest(cfg, str(spec["recipe"]))
    return out
