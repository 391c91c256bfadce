"""Scenario files -> points -> results: validation, the point cache, runners and executors.

The package itself is callable: ``gpusim.sweep(kernel, gpu=..., **params_or_lists)`` runs a
sweep from a notebook and returns a pandas DataFrame (see ``frame.sweep``). It is made callable
by giving this module a class with ``__call__``, so ``gpusim.sweep.runner`` & co. stay importable.
"""
import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self, kernel, **kwargs):
        from .frame import sweep

        return sweep(kernel, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
