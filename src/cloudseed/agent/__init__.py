"""The compute agent: takes the operations queued for its host (``servers/lifecycle/queue.py``),
runs them through the compute driver, and records their outcome; registers its host and reports
heartbeats (``hosts/``). ``worker.Agent`` is the loop; ``steps`` is what each kind of operation
does."""
