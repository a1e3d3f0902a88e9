# Serves a GGUF model with llama.cpp's OpenAI-compatible server (the `xllamacpp` wheel) on
# 127.0.0.1:<port>: `python serve.py MODEL.gguf PORT`. Prints "listening <url>" once it accepts
# requests; stops on SIGTERM. Used by `cargo xtask bench --tasks` and `cargo xtask demo --local-model`.
# TETHER_LLM_CACHE_REUSE=N sets llama.cpp's `n_cache_reuse` (default 0, off; docs/models.md, stop 57).
import os
import signal
import sys
import time

import xllamacpp as xlc

model, port = sys.argv[1], int(sys.argv[2])
params = xlc.CommonParams()
params.model.path = model
params.n_ctx = 8192
params.n_parallel = 1
params.port = port
params.hostnames = ["127.0.0.1"]
params.use_jinja = True
params.cpuparams.n_threads = 2
params.cpuparams_batch.n_threads = 2
params.warmup = True
params.n_cache_reuse = int(os.environ.get("TETHER_LLM_CACHE_REUSE", "0"))
started = time.time()
server = xlc.Server(params)
print("listening", server.listening_address, "load_s", round(time.time() - started, 2), flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
