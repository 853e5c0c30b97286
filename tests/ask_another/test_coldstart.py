"""`quick_import`: models defined inside it are built at first use, and behave the same."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
from pydantic._internal import _config, _mock_val_ser

from ask_another.coldstart import quick_import


class Inner(pydantic.BaseModel):
    text: str


def test_models_defined_inside_are_built_at_first_use_and_validate_as_usual():
    with quick_import():
        class Deferred(pydantic.BaseModel):
            name: str
            count: int = 0
            inner: Inner | None = None

    # Still a placeholder: the pydantic release we pin keeps its defaults where we set them.
    assert isinstance(Deferred.__pydantic_validator__, _mock_val_ser.MockValSer)
    made = Deferred.model_validate({"name": "a", "count": "3", "inner": {"text": "t"}})
    assert made == Deferred(name="a", count=3, inner=Inner(text="t"))
    assert not isinstance(Deferred.__pydantic_validator__, _mock_val_ser.MockValSer)
    with pytest.raises(pydantic.ValidationError, match="count"):
        Deferred.model_validate({"name": "a", "count": "many"})
    assert Deferred.model_json_schema()["required"] == ["name"]


def test_the_default_and_the_collector_are_restored_even_after_an_error():
    with pytest.raises(ImportError), quick_import():
        assert not gc.isenabled()
        raise ImportError("a failing import")
    assert gc.isenabled()
    assert _config.config_defaults["defer_build"] is False

    class Eager(pydantic.BaseModel):
        name: str

    assert not isinstance(Eager.__pydantic_validator__, _mock_val_ser.MockValSer)


def test_type_adapters_made_inside_are_built_at_first_use_and_validate_as_usual():
    with quick_import():
        adapter = pydantic.TypeAdapter(Inner | int)

    assert isinstance(adapter.validator, _mock_val_ser.MockValSer)
    assert adapter.validate_python({"text": "t"}) == Inner(text="t")
    assert adapter.validate_python("7") == 7
    with pytest.raises(pydantic.ValidationError):
        adapter.validate_python([])
    assert not isinstance(adapter.validator, _mock_val_ser.MockValSer)
    assert not isinstance(pydantic.TypeAdapter(Inner | int).validator, _mock_val_ser.MockValSer)


@pytest.mark.slow  # a fresh process, so no other test has built the SDK's models
def test_serve_http_imports_the_sdk_quickly(tmp_path: Path):
    # The stdio server imported the SDK inside quick_import and serve --http did not (0.6 s of
    # CPU more at each start). Refused for want of tokens, it has imported the whole server; an
    # SDK model it never used is still unbuilt.
    code = ("from ask_another.cli import main\n"
            "assert main(['serve', '--http', '--port', '0']) == 1\n"
            "import mcp.types\n"
            "from pydantic._internal import _mock_val_ser\n"
            "print(isinstance(mcp.types.ElicitResult.__pydantic_validator__,"
            " _mock_val_ser.MockValSer))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL,
                          env={**{k: v for k, v in os.environ.items()
                                  if not k.startswith(("MODEL_", "ASK_ANOTHER_"))},
                               "ASK_ANOTHER_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    assert "token add NAME" in done.stderr
    assert done.stdout.split() == ["True"]
