"""The gateway's full-data views (``T.full``): built from the upstream cluster's ``T``."""
