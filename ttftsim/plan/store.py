"""The plan's checkpoint: every finished task's result in an embedded SQLite file, written as it lands,
so an interrupted plan resumes without recomputing (`--resume`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ttftsim.errors import InputError


class Store:
    def __init__(self, path: Path, digest: str, resume: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not resume:
            path.unlink()
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None)  # autocommit: each result durable at once
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT)")
        row = self._db.execute("SELECT value FROM meta WHERE key = 'plan'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('plan', ?)", (digest,))
        elif row[0] != digest:
            raise InputError(str(path), "", "this checkpoint belongs to a different plan (or seed); drop --resume")
        self._cache: dict[str, Any] = {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM results")}
        self.reused = 0

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def get(self, key: str) -> Any:
        self.reused += 1
        return self._cache[key]

    def put(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?)", (key, json.dumps(value)))
        self._cache[key] = value

    def close(self) -> None:
        self._db.close()
