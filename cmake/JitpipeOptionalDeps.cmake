# Optional dependencies, detected here once. The core builds without any of them.
#   JITPIPE_HAVE_MPI   Open MPI (find_package(MPI)) -> comm/mpi
#   JITPIPE_HAVE_CUDA  nvcc (check_language(CUDA)) + CUDAToolkit
#   JITPIPE_HAVE_NCCL  nccl.h + libnccl (FindNCCL.cmake; NCCL ships no CMake config)
#   JITPIPE_HAVE_BLAS  OpenBLAS (cblas.h + libopenblas) -> the reference transformer
#                      stage (stages/reference/transformer_*); JITPIPE_OPENBLAS_INCLUDE_DIR
#                      and JITPIPE_OPENBLAS_LIBRARY

set(JITPIPE_HAVE_MPI OFF)
if(JITPIPE_WITH_MPI)
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(JITPIPE_HAVE_MPI ON)
  endif()
endif()

set(JITPIPE_HAVE_CUDA OFF)
set(JITPIPE_HAVE_NCCL OFF)
if(JITPIPE_WITH_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS "$ENV{CUDA_HOME}/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "$ENV{CUDA_HOME}/bin/nvcc")
  elseif(NOT CMAKE_CUDA_COMPILER AND EXISTS "/usr/local/cuda/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "/usr/local/cuda/bin/nvcc")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # CMake 3.25 knows nvcc flags only up to C++17 (reference/ecosystem.md 6.2):
    # CUDA sources and every header they include stay C++17-clean.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(JITPIPE_HAVE_CUDA ON)
      find_package(NCCL QUIET)
      if(NCCL_FOUND)
        set(JITPIPE_HAVE_NCCL ON)
      endif()
    endif()
  endif()
endif()

# OpenBLAS rather than any BLAS: its sgemm is multithreaded and tuned per CPU,
# Debian packages it (libopenblas-dev, tools/install-deps.sh), and it ships
# the cblas interface together with openblas_set_num_threads, which the
# transformer stage needs to run one BLAS thread per rank (ranks are threads).
# Debian keeps its headers in an openblas-* folder of the multiarch include
# directory (the plain cblas.h is an alternative that may be netlib's).
set(JITPIPE_HAVE_BLAS OFF)
if(JITPIPE_WITH_BLAS)
  find_path(JITPIPE_OPENBLAS_INCLUDE_DIR NAMES openblas_config.h
    PATH_SUFFIXES openblas-pthread openblas-openmp openblas openblas64-pthread
      x86_64-linux-gnu/openblas-pthread x86_64-linux-gnu/openblas-openmp
      aarch64-linux-gnu/openblas-pthread aarch64-linux-gnu/openblas-openmp)
  find_library(JITPIPE_OPENBLAS_LIBRARY NAMES openblas)
  if(JITPIPE_OPENBLAS_INCLUDE_DIR AND JITPIPE_OPENBLAS_LIBRARY)
    set(JITPIPE_HAVE_BLAS ON)
  endif()
endif()

message(STATUS "jitpipe: MPI=${JITPIPE_HAVE_MPI} CUDA=${JITPIPE_HAVE_CUDA} NCCL=${JITPIPE_HAVE_NCCL} BLAS=${JITPIPE_HAVE_BLAS}")
