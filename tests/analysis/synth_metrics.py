"""Synthesized miniLST metrics files for the analysis tests (h5py): the attributes and datasets the readers of
analysis/ use, with the numbers a test chooses."""
import json

import h5py
import numpy as np

TOKENS = 64.0  # tokens of a step, all ranks (run.seq_len 64, one sequence)


def write_run(path, step_s, start=1.7e9, cores_of_rank=([0], [1]), host="node1", node_cores=2, note="",
              deck="tiny", valid=True, seq_len=64, precision="float32", extra=None):
    """One metrics file: step_s[steps] the slowest rank's step seconds (the other ranks take 0.95 of it; the first
    step is the warm-up), ranks placed on cores_of_rank[r] of `host` (a node of node_cores cores), launched at
    `start` (seconds since the epoch), U = ranks Ulysses layout. FOM = TOKENS x measured / their seconds / ranks."""
    step_s = np.asarray(step_s, dtype=float)
    steps, ranks = step_s.size, len(cores_of_rank)
    timings = np.stack([step_s] + [0.95 * step_s] * (ranks - 1), axis=1)
    fom = TOKENS * (steps - 1) / step_s[1:].sum() / ranks
    shared = len({c for cs in cores_of_rank for c in cs}) < sum(len(cs) for cs in cores_of_rank)
    placement = [{"rank": r, "host": host, "cpus": ",".join(map(str, cs)), "cores": list(cs),
                  "shares_core_with": [o for o in range(ranks) if o != r and set(cs) & set(cores_of_rank[o])]}
                 for r, cs in enumerate(cores_of_rank)]
    config = (f"model:\n  hidden: 64\nrun:\n  seq_len: {seq_len}\n  warmup_steps: 1\n"
              f"parallel:\n  ulysses: {ranks}\n  ring: 1\n")
    with h5py.File(path, "w") as f:
        f.attrs.update(dict(
            schema="minilst-metrics", schema_version=1, valid="PASSED" if valid else "FAILED",
            verdict="VALID" if valid else "INVALID", complete="true", stop_reason="", steps_done=steps, fom=fom,
            config=config, warmup_steps=1, deck=f"inputs/{deck}.yaml", seq_len=str(seq_len), precision=precision,
            memory_policy="full", attention="ulysses" if ranks > 1 else "local", ulysses=str(ranks), ring="1",
            data_parallel="1", sequence_parallel=str(ranks), tokens_per_step=TOKENS, hostname=host,
            cpu_model="Test CPU", cpu_cores=str(node_cores), git_commit="0123456789abcdef", git_dirty="false",
            kokkos_threads="1", blas_threads="1", launchdate=str(start), placement=json.dumps(placement),
            cores_shared="yes" if shared else "no", cores_shared_note=note,
            reportable="yes" if valid else "no", reportable_reasons="" if valid else "not VALID",
            tier="baseline", **(extra or {})))
        f["loss"] = np.linspace(8.0, 7.0, steps)
        f["timings/step"] = timings
        f["timings/forward"] = 0.4 * timings
    return fom
