# miniLST as a Ramble application, written from the same RESULT line as the JUBE benchmark
# (benchmarks/jube/) and the ReFrame test (benchmarks/reframe/). NOT RUN in miniLST's test suite (no
# Ramble here): a starting point for sites that use Ramble (and Benchpark, which drives it);
# docs/procurement.md says what it reports. Software: the Spack recipe spack/packages/minilst.
from ramble.appkit import *  # noqa: F401,F403


class Minilst(ExecutableApplication):
    """miniLST: the training step of a Llama-style decoder for long sequences (sequence parallelism,
    activation offload, mini-sequences, ZeRO); FOM = tokens/s per rank over the measured steps."""

    name = "minilst"
    tags("llm", "training", "long-context", "mpi", "procurement")

    software_spec("minilst", pkg_spec="minilst")
    required_package("minilst")

    # One run of a shipped deck (installed under share/minilst/inputs) in a layout; the metrics file and
    # its JSON summary land in the experiment's directory.
    executable(
        "run",
        "minilst run {minilst_inputs}/{deck}.yaml --set parallel.ulysses={ulysses} --set parallel.ring={ring} "
        "--set run.tier={tier} --set output.metrics={experiment_run_dir}/metrics.h5",
        use_mpi=True,
    )
    workload("shipped_deck", executables=["run"])
    workload_variable("minilst_inputs", default="{minilst_path}/share/minilst/inputs",
                      description="the installed shipped decks", workloads=["shipped_deck"])
    workload_variable("deck", default="default",
                      description="default, scaling_cpu, step_cpu, offload_cpu, long_context_cpu (RUN_RULES.md)",
                      workloads=["shipped_deck"])
    workload_variable("ulysses", default="1", description="Ulysses degree U", workloads=["shipped_deck"])
    workload_variable("ring", default="{n_ranks}", description="ring degree R (U x R = ranks: D = 1)",
                      workloads=["shipped_deck"])
    workload_variable("tier", default="baseline", description="run.tier: baseline, ported or optimized",
                      workloads=["shipped_deck"])

    result = (r"^RESULT: (?P<verdict>VALID|INVALID|INCOMPLETE)\b.* FOM=(?P<fom>\S+) tokens/s/rank .*"
              r"ranks=(?P<ranks>\d+)")
    figure_of_merit("FOM", fom_regex=result, group_name="fom", units="tokens/s/rank")
    figure_of_merit("verdict", fom_regex=result, group_name="verdict", units="")
    figure_of_merit("tier", fom_regex=r"^RESULT: .* tier=(?P<tier>\S+)", group_name="tier", units="")
    figure_of_merit("reportable", fom_regex=r"^RESULT: .* reportable=(?P<reportable>yes|no)",
                    group_name="reportable", units="")
    success_criteria("valid", mode="string", match=r"^RESULT: VALID", file="{log_file}")
