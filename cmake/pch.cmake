# Precompiled headers: the third-party headers that nearly every translation unit parses (Armadillo alone costs about
# 4 s of compile time a file, nlohmann/json 2 s), compiled once per target instead of once per file.
# -DKESTREL_PCH=OFF builds without them (every file still includes what it uses; a build with it OFF checks that).
option(KESTREL_PCH "Precompile the common third-party headers once per target" ON)

# kestrel_precompile(TARGET [HEADER ...]): the common headers, after the target's own (pybind11 must come first).
function(kestrel_precompile target)
  if(KESTREL_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN} <armadillo> <nlohmann/json.hpp> <fmt/format.h> <algorithm>
                              <cmath> <filesystem> <functional> <map> <memory> <optional> <string> <vector>)
  endif()
endfunction()
# kestrel_reuse_precompiled(TARGET): the library's precompiled header, for a library compiled with the library's flags
# (its definitions come through the link; extra warnings or definitions the common headers do not read are harmless):
# one header instead of one per target.
function(kestrel_reuse_precompiled target)
  if(KESTREL_PCH)
    target_precompile_headers(${target} REUSE_FROM kestrel)
  endif()
endfunction()
