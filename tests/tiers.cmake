# The tiers of the GoogleTest suites: ctest labels by test name (docs/testing.md says what each tier runs and when).
# ctest reads this file after the list of discovered tests (kestrel_tests_TESTS), so every test gets labels here.
# Each row: a regular expression over "Suite.Test", its labels (comma-separated), and the seconds it takes in Release
# on 2 cores (ctest's COST: the longest start first, so that two cores stay busy; 0 = leave ctest's estimate).
# The first row that matches wins; a test no row matches is a library unit test that also runs under the sanitizers.
#   unit       the library's own tests, in process             cli        tests that run the `kestrel` command line
#   reproduce  paper reproductions and advise's own checks     slow       over about 20 s in Release: not in --quick
#   sanitize   also run by the ASan + UBSan build (scripts/test-sanitize.sh)
set(kestrel_tiers
  # advise against its independent simulations at paper settings: Release only (the rest, smaller, also run sanitized).
  "^AdviseReproduction\\.EveryDecision"            "reproduce,slow"                 120
  "^AdviseReproduction\\.ThePaperAnisotropic"      "reproduce,slow"                 30
  "^AdviseReproduction\\."                         "reproduce,sanitize"             0
  # every reproduction at --quick sizes (the reproduce_all_quick fixture) and the protocols: Release only; the sanitize
  # tier runs every reproduction but advise at --quick sizes (Reproduce.EveryReproductionButAdvise...) and the checks
  # that refuse bad names, protocols and rows before any file is written.
  "^Reproduce\\.(AllQuick|ImagePipeline)"          "reproduce,slow"                 0
  "^Reproduce\\.(AttentionQuick|LunaQuick)"         "reproduce"                      0
  "^Reproduce\\.NonDefaultProtocols"               "reproduce,slow"                 66
  # the sanitize tier's longest test (118 s of its 270): started first, so the other core takes the rest meanwhile.
  "^Reproduce\\.EveryReproductionButAdviseQuick"   "reproduce,sanitize"             120
  "^Reproduce\\."                                  "reproduce,sanitize"             0
  # the library's slowest unit tests: sanitized too, but not in the developer's --quick loop.
  "^RowSample\\.SampledRowsEqualTheFullComputations" "unit,sanitize,slow"           25
  "^(CoupledVariance\\.MatchesMonteCarloAtD2D8D64|Orthogonal\\.CrtTheorem41)" "unit,sanitize" 17
  # the command line's bad-input and output tests run under the sanitizers too. Release only: the variance runs on
  # every image regime (80 s sanitized, loading and resizing each image set), whose library paths the Regimes unit
  # tests run sanitized and whose options the Parse and BadInputs tests do.
  "^BadInputs\\.SigintDuringASweep"                "cli"                            0
  "^Cli\\.ImageRegimesRunOnRealData"               "cli"                            0
  "^(BadInputs|Outputs|DumbInputs|Cli|Hdf5|Schema)\\." "cli,sanitize"             0
  "^(Parse|StudyOptions|AdviseOptions|PointsFile)\\." "cli,sanitize"                0
  "^(SweepRanks|SweepShards|AdviseSums)\\."        "cli,sanitize"                   0
)

foreach(test IN LISTS kestrel_tests_TESTS)
  set(labels "unit;sanitize")
  set(cost 0)
  list(LENGTH kestrel_tiers n)
  foreach(i RANGE 0 ${n} 3)
    if(i EQUAL n)
      break()
    endif()
    list(GET kestrel_tiers ${i} pattern)
    if(test MATCHES "${pattern}")
      math(EXPR j "${i} + 1")
      math(EXPR k "${i} + 2")
      list(GET kestrel_tiers ${j} labels)
      list(GET kestrel_tiers ${k} cost)
      string(REPLACE "," ";" labels "${labels}")
      break()
    endif()
  endforeach()
  set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
  if(cost GREATER 0)
    set_tests_properties("${test}" PROPERTIES COST ${cost})
  endif()
endforeach()
