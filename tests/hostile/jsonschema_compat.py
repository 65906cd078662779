"""hypothesis-jsonschema 0.23.1 (its latest release) draws an object's keys with Hypothesis's private
`many(...).more()`, which newer Hypothesis releases replaced by a context manager: on those it fails with
"'many' object has no attribute 'more'". This gives it the old interface, built on the public-enough
`draw_boolean`, only when the installed Hypothesis lacks it. Shrinking of object sizes is cruder than the
original's, which the fuzz tests do not need (they assert no crash, whatever the document)."""

from __future__ import annotations

from typing import Any

import hypothesis.internal.conjecture.utils as conjecture_utils
import hypothesis_jsonschema._from_schema as from_schema_module


class OldMany:
    """`many(data, min_size, max_size, average_size)` with `more()` and `reject()`, as Hypothesis had it."""

    def __init__(self, data: Any, min_size: int, max_size: float, average_size: float) -> None:
        self.data, self.min_size, self.max_size = data, min_size, max_size
        self.p_continue = conjecture_utils._calc_p_continue(average_size - min_size, max_size - min_size)
        self.count = 0
        self.rejections = 0

    def more(self) -> bool:
        if self.count < self.min_size:
            self.count += 1
            return True
        if self.count >= self.max_size or self.rejections > 2 * self.count + 10:
            return False
        if self.data.draw_boolean(self.p_continue):
            self.count += 1
            return True
        return False

    def reject(self, why: str | None = None) -> None:
        self.count -= 1
        self.rejections += 1


def install() -> None:
    if not hasattr(conjecture_utils.many, "more"):

        class Shim:
            many = OldMany

        from_schema_module.cu = Shim  # type: ignore[assignment]
