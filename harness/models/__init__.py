"""Model tools: random-weight qwen35 GGUFs from recipes, and the Hugging Face converter.

``python -m harness models gen|convert|list|info ...`` (see `cli`); the verify job calls
`ensure_model`.
"""

from .gen import GENERATOR_VERSION, ensure_model, generate, model_filename
from .recipes import Qwen35Config, Recipe, RecipeError, list_recipes, load_recipe

__all__ = [
    "GENERATOR_VERSION", "Qwen35Config", "Recipe", "RecipeError", "ensure_model", "generate",
    "list_recipes", "load_recipe", "model_filename",
]
