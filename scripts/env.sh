# Sourced by the scripts: the run-time environment miniLST expects.
# Threads per MPI rank: MINILST_THREADS (default 1) sets both Kokkos' (OpenMP
# builds: OMP_NUM_THREADS) and OpenBLAS's (OPENBLAS_NUM_THREADS), unless those are
# set already. The two take turns (BLAS runs between Kokkos kernels), so a rank
# uses MINILST_THREADS cores; OMP_WAIT_POLICY=passive stops idle OpenMP threads
# from spinning while OpenBLAS's threads work. Ranks x threads = cores per node.
source "$(dirname "${BASH_SOURCE[0]}")/lib/blas.sh"
blas_check_coretype  # an OPENBLAS_CORETYPE this CPU cannot run: warned about and dropped (else SIGILL)
export MINILST_THREADS=${MINILST_THREADS:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$MINILST_THREADS}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$MINILST_THREADS}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_PROC_BIND=${OMP_PROC_BIND:-false}
# The scripts' default launcher. Open MPI binds each rank to one core when ranks <=
# cores, which would put a rank's threads on that one core: unbound when threaded.
MINILST_LAUNCH="mpiexec --oversubscribe"
if ((MINILST_THREADS > 1)); then MINILST_LAUNCH+=" --bind-to none"; fi
MINILST_LAUNCH+=" -n"
if [[ $(id -u) -eq 0 ]]; then                             # Open MPI refuses root otherwise
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
