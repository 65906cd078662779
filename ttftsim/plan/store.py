"""The plan's checkpoint: every finished task's result in an embedded SQLite file, written as it lands,
so an interrupted plan resumes without recomputing (`--resume`)."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

from ttftsim.errors import InputError
from ttftsim.result_folder import MARKER


class Store:
    def __init__(self, path: Path, digest: str, resume: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if (path.exists() or path.is_symlink()) and not path.is_file():
            raise InputError(str(path), "", "the checkpoint is not a regular file; remove it")
        if path.exists() and not resume:
            if not (path.parent / MARKER).exists():  # an interrupted run's: its finished tasks go with it
                warnings.warn(
                    f"{path.parent} held the checkpoint of an interrupted run: starting afresh (--resume reuses it)",
                    stacklevel=2,
                )
            path.unlink()
        self.path = path
        try:
            self._db = sqlite3.connect(path, isolation_level=None)  # autocommit: each result durable at once
            self._cache = self._open(digest)
        except sqlite3.DatabaseError as exc:  # not SQLite, truncated, or other tables
            raise InputError(str(path), "", f"not a plan checkpoint ({exc}); drop --resume or remove it") from None
        self.reused = 0

    def _open(self, digest: str) -> dict[str, Any]:
        """Tables made if missing; the plan's digest checked; every stored result a JSON object."""
        tables = {str(row[0]) for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables - {"meta", "results"}:
            other = ", ".join(sorted(tables - {"meta", "results"}))[:80]
            raise InputError(str(self.path), "", f"not a plan checkpoint (tables {other}); drop --resume or remove it")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT)")
        row = self._db.execute("SELECT value FROM meta WHERE key = 'plan'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('plan', ?)", (digest,))
        elif row[0] != digest:
            raise InputError(str(self.path), "", "this checkpoint belongs to a different plan (or seed); drop --resume")
        cache: dict[str, Any] = {}
        for key, value in self._db.execute("SELECT key, value FROM results"):
            try:
                cache[str(key)] = json.loads(value)
            except (TypeError, ValueError, RecursionError):
                cache[str(key)] = None
            if not isinstance(cache[str(key)], dict):
                where = f"results {str(key)[:60]}"
                raise InputError(str(self.path), where, "a stored result that is not a JSON object; drop --resume")
        return cache

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def get(self, key: str) -> Any:
        self.reused += 1
        return self._cache[key]

    def beside(self, key: str) -> Any:
        """What is stored under key beside the results (a task's warnings), or None; not counted as reused."""
        return self._cache.get(key)

    def put(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?)", (key, json.dumps(value)))
        self._cache[key] = value

    def close(self) -> None:
        self._db.close()
