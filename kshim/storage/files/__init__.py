"""The one filesystem seam every file of the store goes through (segments, the write-ahead
log, the delay schedule's bucket files), the simulated and fault-injecting filesystems
tests put behind it (LevelDB's fault-injection test: drop what was not synced), and the
lock that keeps a data directory to one broker."""
