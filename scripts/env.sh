# Sourced by the scripts: the run-time environment miniLST expects.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}   # one BLAS thread per MPI rank
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [[ $(id -u) -eq 0 ]]; then                             # Open MPI refuses root otherwise
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
