"""An embedder plug-in for the readiness tests (MEMORY_LEDGER_EMBEDDER=
gated_embedder:GatedEmbedder): its first embed waits until the file named by
GATED_EMBEDDER_OPEN exists, as a model would take its time to load, so a test decides
when loading ends instead of sleeping. With GATED_EMBEDDER_FAIL set, it fails instead."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from memory_ledger.embedders import HashingEmbedder

OPEN_ENV = "GATED_EMBEDDER_OPEN"
FAIL_ENV = "GATED_EMBEDDER_FAIL"


class GatedEmbedder:
    name = "gated-hashing-64"
    dimension = 64

    def __init__(self) -> None:
        self._inner = HashingEmbedder(self.dimension)
        self._loaded = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if os.environ.get(FAIL_ENV):
            raise RuntimeError("the model file is missing")
        gate = Path(os.environ[OPEN_ENV])
        while not self._loaded.wait(0.01):  # "loading" until the test opens the gate
            if gate.exists():
                self._loaded.set()
        return self._inner.embed(texts)
