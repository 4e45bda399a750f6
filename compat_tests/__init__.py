"""The compatibility suite: the same scenarios against kshim, Tansu and Apache Kafka.

See compat_tests/README.md for how brokers are selected and how results are reported.
"""
