"""Every exception the project defines derives from ToolfactoryError, is listed in the exception
reference (docs/hooks/exception_reference.py), and crosses a process boundary intact (Ray pickles a
worker's error to send it to the driver): class, message and attributes."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

import flows
import tasks
import toolfactory


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (toolfactory, flows, tasks):
        for module_info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(module_info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                    found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[name] for name in sorted(found)]


def _instance(cls: type[BaseException]) -> BaseException:
    """`cls` built with a distinct value for each required argument."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    args = [f"value-{p.name}" for p in params if p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty]
    kwargs: dict[str, Any] = {p.name: f"value-{p.name}" for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty}
    if not params or params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        args = ["a message"]
    exc = cls(*args, **kwargs)
    exc.__dict__["metrics"] = {"calls": 3}  # what a failed shard carries back (BudgetExhausted, ShardIncomplete)
    return exc


CLASSES = _exception_classes()


def test_the_project_defines_the_exceptions_the_walk_expects() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"LLMFailure", "EndpointRefused", "PreflightFailed", "StorageUnavailable", "SimulatorError", "RenderError"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_an_exception_survives_pickling(cls: type[BaseException], dumps: Any) -> None:
    exc = _instance(cls)
    back = pickle.loads(dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc)
    assert back.args == exc.args
    assert back.__dict__ == exc.__dict__


def test_an_llm_failure_keeps_its_reason_flags_and_the_endpoint_words() -> None:
    from toolfactory.errors import LLMFailure

    exc = LLMFailure("llm_server_error", "500 from the endpoint", transient=True, detail="upstream overloaded")
    back = pickle.loads(cloudpickle.dumps(exc))
    assert (back.reason, back.transient, back.detail) == ("llm_server_error", True, "upstream overloaded")
    assert str(back) == "llm_server_error: 500 from the endpoint"


def test_every_exception_derives_from_toolfactory_error() -> None:
    # One tree (toolfactory/errors.py): a caller can catch every error of the project at once, and
    # every error pickles through ToolfactoryError.__reduce__.
    from toolfactory.errors import ToolfactoryError

    outside = [f"{cls.__module__}.{cls.__qualname__}" for cls in CLASSES if not issubclass(cls, ToolfactoryError)]
    assert outside == []


def test_the_exception_reference_lists_every_exception() -> None:
    # The page (docs/hooks/exception_reference.py) reads the code without importing it; the classes
    # the modules hold once imported are the ones it must list.
    hooks = str(Path(__file__).resolve().parents[1] / "docs" / "hooks")
    if hooks not in sys.path:
        sys.path.insert(0, hooks)
    listed = importlib.import_module("exception_reference").exception_classes()
    assert sorted(listed) == sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in CLASSES)
