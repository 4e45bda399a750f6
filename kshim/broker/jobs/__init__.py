"""The broker's background jobs, in one place: what each is and how often it runs
(``broker_jobs.py``), the ways a job is scheduled (``schedules.py``), and the runner that
starts them all as tasks and ends them (``runner.py``). Each job's work is its feature's
(``retention.py``, ``log_cleaner.py``, ``groups/``, ``transactions/``, ``full_view/``,
``delay/``, ``alarms/``); this package only says when it runs."""
