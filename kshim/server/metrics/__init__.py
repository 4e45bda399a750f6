"""Prometheus metrics of a running broker (``kshim.metrics.listen``): request counts and
latencies observed as requests are answered, everything else read from the broker's
state when Prometheus scrapes, on the event loop's thread, so that nothing is kept or
computed for a metric between scrapes."""
