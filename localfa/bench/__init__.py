"""Sweeps, metrics and reports.

`localfa.bench(...)` is also the Python API's sweep function (`localfa.api.bench`). Importing any
module of this package makes Python bind the name `localfa.bench` to the package itself, which
would shadow the function after the first sweep; so the package is callable and forwards a call
to `localfa.api.bench`.
"""

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from localfa.api import bench

        return bench(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
