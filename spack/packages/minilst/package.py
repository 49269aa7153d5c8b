# Spack recipe for miniLST (docs/install.md):
#   spack repo add <clone>/spack
#   spack install minilst backend=openmp +glpk
#   spack install minilst backend=cuda +cuda cuda_arch=90 +nccl
# Checked without Spack by tests/install/check_spack_recipe.py.
import os
import tempfile

from spack.package import *

try:  # Spack >= 1.0: the build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
except ImportError:  # Spack 0.23: spack.package exports them
    pass

# The git clone this recipe sits in (<clone>/spack/packages/minilst/package.py).
_CLONE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Minilst(CMakePackage, CudaPackage):
    """miniLST: the training step of a Llama-style decoder for long sequences (sequence
    parallelism, activation offload, mini-sequences, ZeRO) on Kokkos, Kokkos Kernels and
    MPI, writing its measurements to HDF5."""

    # Releases: tarballs made by scripts/release.sh (git archive of the tag vX.Y.Z) and
    # published as assets of that tag; each version line carries its tarball's sha256.
    # The branch `main` of the clone this recipe sits in builds unreleased work (committed;
    # for a working tree use `spack develop --path <clone> minilst@main`).
    homepage = "https://github.com/minilst/minilst"
    url = "https://github.com/minilst/minilst/releases/download/v0.1.0/minilst-0.1.0.tar.gz"
    git = "file://" + _CLONE
    version("main", branch="main")
    version("0.1.0", sha256="51f14a9c3d546497ae6dea6c6c890b3283580bc2aff9d762a505d8d049a2e8c5")

    # The execution space miniLST runs in: one of Kokkos' backends. CUDA also needs
    # +cuda (CudaPackage's variant, which brings the toolkit and cuda_arch); Kokkos makes
    # CUDA the default execution space whenever it is enabled, so +cuda goes only with
    # backend=cuda.
    variant(
        "backend",
        default="openmp",
        values=("serial", "openmp", "cuda"),
        multi=False,
        description="Kokkos execution space: serial, openmp (host threads) or cuda (GPU)",
    )
    variant("glpk", default=True, description="The memory planner's exact (MIP) solver, with GLPK")
    variant("onednn", default=True, description="Host GEMMs and attention tiles through oneDNN (AMX, AVX512_BF16)")
    variant("nccl", default=False, description="The NCCL communicator (GPU collectives), with +cuda")
    variant("tests", default=False, description="Build the GoogleTest programs and register ctest's checks")
    # Release as the benchmarks are built (CMakePackage's default is RelWithDebInfo).
    variant(
        "build_type",
        default="Release",
        values=("Release", "RelWithDebInfo", "Debug", "MinSizeRel"),
        description="CMake build type",
    )

    conflicts("~cuda", when="backend=cuda", msg="backend=cuda needs +cuda cuda_arch=<your GPU's>")
    conflicts("+cuda", when="backend=serial", msg="+cuda makes CUDA the execution space: backend=cuda")
    conflicts("+cuda", when="backend=openmp", msg="+cuda makes CUDA the execution space: backend=cuda")
    conflicts("+cuda", when="cuda_arch=none", msg="Kokkos needs the GPU's cuda_arch (one value)")
    conflicts("+nccl", when="~cuda", msg="the NCCL communicator needs +cuda")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.16:", type="build")

    # Kokkos 3.4 to 4.x (Kokkos 5 needs C++20; miniLST is C++17), one backend as asked.
    # Kokkos Kernels' GEMMs go to a BLAS: the host BLAS (any Spack provider; the
    # scripts' OPENBLAS_* tuning applies to OpenBLAS) or cuBLAS.
    depends_on("kokkos@3.4:4")
    depends_on("kokkos-kernels@3.4:4")
    depends_on("kokkos+serial", when="backend=serial")
    depends_on("kokkos+openmp", when="backend=openmp")
    depends_on("kokkos-kernels+blas", when="backend=serial")
    depends_on("kokkos-kernels+blas", when="backend=openmp")
    depends_on("kokkos+cuda+wrapper+cuda_constexpr", when="backend=cuda")
    depends_on("kokkos-kernels+cublas", when="backend=cuda")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")

    # miniLST is an MPI program: no variant turns MPI off. Any MPI provider works
    # (launch with its mpiexec or srun; one rank runs without a launcher). CUDA-aware
    # MPI is detected at build time (Open MPI's MPIX_CUDA_AWARE_SUPPORT): ask for it
    # through the provider, e.g. ^openmpi+cuda.
    depends_on("mpi")
    depends_on("hdf5")  # the serial C API is what miniLST calls; +mpi or ~mpi both do
    depends_on("yaml-cpp")
    depends_on("cli11")
    depends_on("nlohmann-json@3.10.5:")
    depends_on("glpk", when="+glpk")
    depends_on("onednn", when="+onednn")
    depends_on("nccl", when="+nccl")
    depends_on("googletest", when="+tests")

    sanity_check_is_file = [join_path("bin", "minilst"), join_path("share", "minilst", "inputs", "tiny.yaml")]
    sanity_check_is_dir = [join_path("share", "minilst", "scripts")]

    def cmake_args(self):
        spec = self.spec
        args = [
            # Spack's compiler wrappers add the target's flags: no -march=native.
            self.define("MINILST_NATIVE", False),
            self.define_from_variant("MINILST_ENABLE_GLPK", "glpk"),
            self.define_from_variant("MINILST_ENABLE_ONEDNN", "onednn"),
            self.define_from_variant("MINILST_ENABLE_TESTS", "tests"),
            # ~nccl: MPI for every collective even where an NCCL happens to be found.
            self.define_from_variant("MINILST_ENABLE_NCCL", "nccl"),
            # nccl_compile_check is a test program: only with +nccl +tests.
            self.define("MINILST_NCCL_COMPILE_CHECK", spec.satisfies("+nccl +tests")),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].package.kokkos_cxx))
            args.append(self.define("CUDAToolkit_ROOT", spec["cuda"].prefix))
        if spec.satisfies("+nccl"):
            args.append(self.define("NCCL_INCLUDE_DIR", spec["nccl"].prefix.include))
            args.append(self.define("NCCL_LIBRARY", spec["nccl"].libs[0]))
        return args

    def _cmake_package_dir(self):
        """Where the installed CMake package is (lib or lib64, as GNUInstallDirs chose)."""
        for libdir in ("lib", "lib64"):
            path = join_path(self.prefix, libdir, "cmake", "miniLST")
            if os.path.isfile(join_path(path, "miniLSTConfig.cmake")):
                return path
        raise InstallError(f"no lib/cmake/miniLST/miniLSTConfig.cmake under {self.prefix}")

    def _check_tiny_run(self):
        """The installed program runs the installed tiny deck on one rank (MPI singleton:
        no launcher) and writes its metrics file."""
        self._cmake_package_dir()
        minilst = which(join_path(self.prefix.bin, "minilst"), required=True)
        deck = join_path(self.prefix.share, "minilst", "inputs", "tiny.yaml")
        root_ok = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        with tempfile.TemporaryDirectory() as tmp:
            metrics = join_path(tmp, "tiny.h5")
            out = minilst(
                "run", deck, "--set", f"output.metrics={metrics}",
                output=str, error=str, extra_env=root_ok,
            )
            if "RESULT: VALID" not in out:
                raise InstallError(f"minilst run {deck}: no 'RESULT: VALID' line:\n{out}")
            if not os.path.isfile(metrics):
                raise InstallError(f"minilst run {deck} wrote no {metrics}")

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_tiny_run(self):
        """spack install --test=root: the installed program runs the tiny deck."""
        self._check_tiny_run()

    def test_tiny_run(self):
        """the installed minilst runs the tiny deck on one rank"""
        self._check_tiny_run()
