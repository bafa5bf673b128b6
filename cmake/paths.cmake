# Writes kestrel_paths.hpp (build/generated/): the absolute paths the code names, for the files that include it.
#   KESTREL_DEFAULT_DATA_DIR  datasets/ of this checkout (lib/data/catalog.cpp)
#   KESTREL_SOURCE_DIR        this checkout (the reproductions' plot.py, the tests' scripts)
#   KESTREL_PYTHON_DIR        the Python package the build makes, whose pure-Python parts the command line runs
#   KESTREL_CLI               the `kestrel` command line the tests run
#   KESTREL_GENERIC_CORE      the preloaded library of one CLI test (tests/blas/generic_core.cpp)
string(CONCAT _paths "#pragma once\n"
           "#define KESTREL_DEFAULT_DATA_DIR \"${CMAKE_SOURCE_DIR}/datasets\"\n"
           "#define KESTREL_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\"\n"
           "#define KESTREL_PYTHON_DIR \"${CMAKE_BINARY_DIR}/python\"\n")
if(TARGET kestrel_cli)
  string(APPEND _paths "#define KESTREL_CLI \"$<TARGET_FILE:kestrel_cli>\"\n")
endif()
if(TARGET kestrel_generic_core)
  string(APPEND _paths "#define KESTREL_GENERIC_CORE \"$<TARGET_FILE:kestrel_generic_core>\"\n")
endif()
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/generated/kestrel_paths.hpp CONTENT "${_paths}")
