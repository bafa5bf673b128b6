# Compiles through ccache (Debian's) when it is installed: a second build of the same sources in this folder takes the
# objects from the cache. Paths are hashed relative to the source folder and the working directory is not hashed; the
# sloppiness lets files that use precompiled headers be cached (no file uses __DATE__ or __TIME__). A clone in another
# folder does not hit yet (docs/testing.md: the precompiled headers are made anew there). -DKESTREL_CCACHE=OFF: direct.
find_program(KESTREL_CCACHE_PROGRAM ccache)
option(KESTREL_CCACHE "Compile through ccache when it is installed" ON)
if(KESTREL_CCACHE AND KESTREL_CCACHE_PROGRAM)
  set(_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
                "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
                ${KESTREL_CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
  message(STATUS "ccache: ${KESTREL_CCACHE_PROGRAM}")
endif()
