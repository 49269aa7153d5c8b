#!/usr/bin/env bash
# A launcher for one rank that is no launcher: runs the program as it is (the
# batch template outside Slurm, in tests).
exec "$@"
