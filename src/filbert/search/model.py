"""The ranking's weights from a model (search.model): a TOML file of `search.*` settings, the
weights of the ranking's linear model (tools/learning.py learns them; `filbert learn` writes
the file). "builtin" is model.toml beside this module, learned on documentation sites;
"" is none, the hand-set weights of defaults.toml. config.load_settings puts a model's
weights beneath the settings set in filbert.toml or with -D, and checks them as those.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib import resources
from typing import Any

from filbert.config import ConfigError

BUILTIN = "builtin"


def model_weights(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings in the model file that search.model names (a path, or BUILTIN)."""
    name = settings["search.model"]
    if not name:
        return {}
    try:
        if name == BUILTIN:
            text = resources.files("filbert.search").joinpath("model.toml").read_text("utf-8")
        else:
            with open(name, encoding="utf-8") as file:
                text = file.read()
        return tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {name}: {exc}") from None
