"""Finding the project from the working directory, and a project's recipes ahead of the built-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.models.recipes import list_recipes, load_recipe
from harness.contract.project import BUILTIN_RECIPES as BUILTIN_DIR
from harness.contract.project import DEFAULT_CONFIG, find_project, project_at

REPO = Path(__file__).resolve().parent.parent


def _engine_yaml(folder: Path) -> Path:
    p = folder / DEFAULT_CONFIG
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("builds:\n  default: {prebuilt: bin}\n")
    return p


def test_walks_up_to_configs_engine_yaml(tmp_path):
    cfg = _engine_yaml(tmp_path / "proj")
    deep = tmp_path / "proj" / "a" / "b"
    deep.mkdir(parents=True)
    got = find_project(deep)
    assert (got.root, got.config) == ((tmp_path / "proj").resolve(), cfg.resolve())
    assert find_project(tmp_path / "proj") == got


def test_nearest_project_wins(tmp_path):
    _engine_yaml(tmp_path)
    inner = _engine_yaml(tmp_path / "examples" / "inner")
    assert find_project(tmp_path / "examples" / "inner" / "configs").config == inner.resolve()
    assert find_project(tmp_path / "examples").root == tmp_path.resolve()


def test_tool_kite_names_the_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.kite]\nconfig = "harness/engine.yaml"\n')
    (tmp_path / "sub").mkdir()
    got = find_project(tmp_path / "sub")
    assert (got.root, got.config) == (tmp_path.resolve(), tmp_path.resolve() / "harness" / "engine.yaml")
    assert project_at(tmp_path).config == got.config


def test_pyproject_without_tool_kite_is_not_a_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "kite-lookalike"\n')
    cfg = _engine_yaml(tmp_path / "p")
    (tmp_path / "p" / "pyproject.toml").write_text('[tool.ruff]\nline-length = 100\n')
    assert find_project(tmp_path / "p").config == cfg.resolve()


@pytest.mark.parametrize("text, msg", [
    ("[tool.kite]\nconfg = 'x.yaml'\n", r"unknown key\(s\) confg; allowed: config"),
    ("[tool.kite]\nconfig = 3\n", "config must be a path"),
    ("[tool.kite\nconfig = 'x'\n", "not valid TOML"),
])
def test_bad_tool_kite_is_a_clear_error(tmp_path, text, msg):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match=msg):
        find_project(tmp_path)


def test_no_project_says_where_it_looked(tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match=r"no kite project in .* or above it"):
        find_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["verify"]) == 2
    assert "give --root" in capsys.readouterr().err


def test_this_repository_is_found_from_a_subfolder():
    got = find_project(REPO / "tests" / "data")
    assert (got.root, got.config) == (REPO, REPO / "configs" / "engine.yaml")


def test_project_recipe_shadows_the_builtin(tmp_path):
    builtin = (BUILTIN_DIR / "tiny.yaml").read_text()
    assert "seed: 0\n" in builtin
    own = tmp_path / "models"
    own.mkdir()
    (own / "tiny.yaml").write_text(builtin.replace("seed: 0\n", "seed: 17\n"))
    (own / "mine.yaml").write_text(builtin)
    assert load_recipe("tiny").seed == 0 and load_recipe("tiny").path == BUILTIN_DIR / "tiny.yaml"
    assert load_recipe("tiny", [own]).seed == 17 and load_recipe("tiny", [own]).path == own / "tiny.yaml"
    assert load_recipe("mine", [own]).config == load_recipe("tiny").config
    assert {"tiny", "mine", "qwen35-0.8b"} <= set(list_recipes([own]))
    assert "mine" not in list_recipes()


def test_verify_generates_the_projects_own_recipe(tmp_path):
    from harness.contract.config import load_config
    from harness.verify import Session, VerifyOptions

    _engine_yaml(tmp_path)
    (tmp_path / "configs" / "models").mkdir()
    builtin = (BUILTIN_DIR / "tiny.yaml").read_text()
    (tmp_path / "configs" / "models" / "mine.yaml").write_text(builtin.replace("seed: 0\n", "seed: 5\n"))
    session = Session(load_config(tmp_path), VerifyOptions(no_build=True), lambda s: None)
    own = session.model_path({"recipe": "mine"})
    assert own.parent == tmp_path / "models" and own.is_file()
    assert own.read_bytes() != session.model_path({"recipe": "tiny"}).read_bytes()


def test_models_gen_inside_a_project_uses_its_recipes_and_cache(tmp_path, monkeypatch, capsys):
    _engine_yaml(tmp_path)
    (tmp_path / "configs" / "models").mkdir()
    (tmp_path / "configs" / "models" / "mine.yaml").write_text((BUILTIN_DIR / "tiny.yaml").read_text())
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["models", "gen", "mine"]) == 0
    assert Path(capsys.readouterr().out.strip()).parent == tmp_path.resolve() / "models"
    assert main(["models", "list"]) == 0
    assert "mine" in capsys.readouterr().out
