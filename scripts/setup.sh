#!/usr/bin/env bash
# Installs the Debian 12 packages miniLST builds, runs and tests with.
# Idempotent and non-interactive: installs only what is missing, and does
# nothing when everything is present. This is the one list of packages.
set -euo pipefail

packages=(
  build-essential cmake git pkg-config
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev   # Kokkos 3.4 + Kokkos Kernels
  libopenblas-dev                                         # BLAS behind KokkosBlas::gemm
  libdnnl-dev                                             # oneDNN: bf16 GEMMs on the CPU's matrix units (AMX, AVX512_BF16)
  libopenmpi-dev openmpi-bin                              # MPI
  libhdf5-dev                                             # metrics and tensor dump files
  libgtest-dev libyaml-cpp-dev libcli11-dev               # tests, deck, command line
  nlohmann-json3-dev                                      # the JSON summary, MLPerf-style log lines
  libglpk-dev                                             # the memory planner's exact solver
  python3-torch python3-h5py python3-numpy python3-yaml   # reference and metrics checks
  python3-matplotlib python3-pandas python3-scipy         # analysis/ (scipy: the procurement report's confidence intervals)
  chromium                                                # tests: the procurement report's HTML rendered headless
  slurmctld slurmd slurm-client munge                     # tests: the Slurm workflow on a private localhost Slurm
  jube                                                    # benchmarks/jube: the JUBE benchmark (and its test on that Slurm)
  patchelf                                                # scripts/gpu/pack.sh: the GPU bundle's relative run paths
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
