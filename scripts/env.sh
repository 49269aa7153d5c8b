# Sourced by the scripts: the run-time environment miniLST expects.
# Threads per MPI rank: MINILST_THREADS (default 1) sets both Kokkos' (OpenMP
# builds: OMP_NUM_THREADS) and OpenBLAS's (OPENBLAS_NUM_THREADS), unless those are
# set already. The two take turns (BLAS runs between Kokkos kernels), so a rank
# uses MINILST_THREADS cores; OMP_WAIT_POLICY=passive stops idle OpenMP threads
# from spinning while OpenBLAS's threads work. Ranks x threads = cores per node.
source "$(dirname "${BASH_SOURCE[0]}")/lib/blas.sh"
blas_check_coretype  # an OPENBLAS_CORETYPE this CPU cannot run: warned about and dropped (else SIGILL)
# MINILST_THREADS must be a positive integer no larger than this machine's CPUs: it is
# checked as text, never evaluated (a value such as x[$(cmd)] runs nothing).
MINILST_THREADS=${MINILST_THREADS:-1}
_mlst_cpus=$(nproc --all 2> /dev/null || echo 1)
if [[ ! $MINILST_THREADS =~ ^[1-9][0-9]{0,5}$ ]] || ((10#$MINILST_THREADS > _mlst_cpus)); then
  echo "env.sh: MINILST_THREADS='$MINILST_THREADS': threads per rank must be a whole number from 1 to $_mlst_cpus (this machine's CPUs)" >&2
  unset _mlst_cpus
  return 2 2> /dev/null || exit 2
fi
unset _mlst_cpus
export MINILST_THREADS=$((10#$MINILST_THREADS))
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
