# analysis/compare.py on runs and sweeps of two machines (registered below).
