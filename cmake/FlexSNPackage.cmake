# The Debian package: `cpack -G DEB` in the build directory writes
# flexsn_<version>_<arch>.deb from the install rules (docs/Install.md).
# It installs under /usr and depends on Debian's LLVM/MLIR 22 packages, whose
# libMLIR.so the tools load (dpkg-shlibdeps finds them from the tools' run
# path), and on LLVM's OpenMP runtime, which CPU kernels call.
set(CPACK_PACKAGE_NAME flexsn)
set(CPACK_PACKAGE_VENDOR "FlexSN")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "MLIR compiler for spiking-neuron dynamics (GPU and CPU kernels)")
set(CPACK_PACKAGE_DESCRIPTION
    "FlexSN compiles a spiking neuron, written as a per-time-step function in
an MLIR dialect, to trainable kernels: a cubin with a C header for GPUs,
an object with a C header for CPUs. The package holds flexsn-opt,
flexsn-translate, flexsn-run, flexsn-compile and flexsn-lsp-server, the C
runtime of the GPU headers, the shipped neurons and a CMake package.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "FlexSN developers <flexsn@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# What dpkg-shlibdeps cannot see: the CPU kernels' OpenMP runtime, which
# flexsn-run loads and flexsn-compile links by path.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libomp-22-dev")
# GPU kernels need a CUDA toolkit (ptxas, libdevice; FLEXSN_CUDA_TOOLKIT);
# CPU kernel libraries a C compiler; tests of neurons lit and FileCheck.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gcc, llvm-22-tools")
set(CPACK_GENERATOR DEB)
include(CPack)
