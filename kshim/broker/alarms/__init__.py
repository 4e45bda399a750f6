"""Alarms: conditions an operator must hear of without reading logs (VENUS raises one when a
half message cannot be decided). Each is an ``ALARM:`` log line with its kind, subject,
value and threshold, a metric, and a JSON POST to ``kshim.alarm.webhook`` when set."""
