"""Imported first by the analysis scripts: a stop signal (SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT) ends an
analysis as it ends a miniLST command: one line, exit 4, and no half-written output (an output is written under a
temporary name that is removed as the exit unwinds: minilst_metrics' outputs)."""
import os
import signal
import sys


def _stopped(signum, _frame):
    print(f"\n{os.path.basename(sys.argv[0]) or 'analysis'}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    raise SystemExit(4)


for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT):
    signal.signal(_sig, _stopped)
