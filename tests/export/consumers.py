"""The preference formats' consumers, for the tests: a chat tokenizer built here (no model can be
downloaded) for TRL's own template code, and LLaMA-Factory's own dataset parser and converter.

LLaMA-Factory's ``data`` package imports torch in its ``__init__`` (through its collator), and
its ``extras.constants``, ``extras.misc`` and ``extras.logging`` import peft, torch and
transformers' training stack; neither torch nor peft is installed here. So the package and those
three modules are stood in for by the few names ``data/parser.py`` and ``data/converter.py``
use (a config file name, two "use another hub" switches answering no, a logger), and the parser
and the converter themselves are LLaMA-Factory's released code, run as they are.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import Any, Iterable

import pytest

# A ChatML template with Hermes-style tools (written for these tests): the tools as JSON lines
# in the system turn, calls as <tool_call> JSON, tool results as <tool_response>.
CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}You may call functions. Their signatures:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|im_start|>assistant
{{ message.content or '' }}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": {{ call.function.name | tojson }}, "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>tool
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role != 'system' %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def chat_tokenizer(texts: Iterable[str]) -> Any:
    """A word-level tokenizer trained on `texts`, wrapped as a transformers fast tokenizer with
    :data:`CHAT_TEMPLATE` (what TRL calls ``processing_class``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=special))
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>",
                                   bos_token=None, chat_template=CHAT_TEMPLATE)


def _module(name: str, **names: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(names)
    sys.modules[name] = module
    return module


def unavailable(reason: str) -> None:
    """Skip for want of a consumer's package; under CI, where `make test` installs it, fail."""
    from conftest import _ci

    if _ci():
        pytest.fail(reason)
    pytest.skip(reason)


def installed(module: str, reason: str) -> None:
    if importlib.util.find_spec(module) is None:
        unavailable(reason)


def llamafactory_data() -> tuple[Any, Any]:
    """LLaMA-Factory's ``get_dataset_list`` (data/parser.py) and ``SharegptDatasetConverter``
    (data/converter.py); the test is skipped when the package is not installed (failed under CI)."""
    if "llamafactory.data.converter" not in sys.modules:  # (the stand-ins have no spec: found once)
        spec = importlib.util.find_spec("llamafactory")
        if spec is None or spec.origin is None:
            unavailable("llamafactory is not installed (make test installs it: pip install --no-deps llamafactory==0.9.5)")
        root = Path(spec.origin).parent

        def get_logger(name: str | None = None) -> logging.Logger:
            log = logging.getLogger(name)
            for method in ("warning_rank0", "warning_rank0_once", "info_rank0"):
                setattr(log, method, log.warning)
            return log

        for name, path in (("llamafactory", root), ("llamafactory.extras", root / "extras"), ("llamafactory.data", root / "data")):
            _module(name, __path__=[str(path)])
        _module("llamafactory.extras.logging", get_logger=get_logger)
        _module("llamafactory.extras.constants", DATA_CONFIG="dataset_info.json")
        _module("llamafactory.extras.misc", use_modelscope=lambda: False, use_openmind=lambda: False)
    from llamafactory.data.converter import SharegptDatasetConverter  # type: ignore[import-not-found]
    from llamafactory.data.parser import get_dataset_list  # type: ignore[import-not-found]

    return get_dataset_list, SharegptDatasetConverter
