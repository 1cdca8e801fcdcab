"""Run llama.cpp's own C++ server (``llama-server``, from the ``xllamacpp`` wheel)
on 127.0.0.1 until SIGTERM, for ``tools/record_servers.py``.

Usage (in a virtual environment of its own that holds ``xllamacpp``; never the
project's)::

    python tools/servers/xllamacpp_server.py PORT MODEL.gguf [TEMPLATE.jinja]

The server listens on 127.0.0.1 only, with 4 slots, jinja templates on, the web
UI off and no download (``offline``); TEMPLATE replaces the model's own chat
template (``chatml-tools.jinja`` gives SmolLM2 tool calls).
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import xllamacpp


def main() -> None:
    port, model = int(sys.argv[1]), sys.argv[2]
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 4096
    params.n_parallel = 4
    params.use_jinja = True
    params.ui = False
    params.offline = True
    params.sampling.seed = 42
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    if len(sys.argv) > 3:
        params.chat_template = Path(sys.argv[3]).read_text(encoding="utf-8")
    server = xllamacpp.Server(params)
    sys.stdout.write(f"listening {server.listening_address}\n")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


if __name__ == "__main__":
    main()
