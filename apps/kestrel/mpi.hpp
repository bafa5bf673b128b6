// MPI for `kestrel sweep` (issue #10): an MPI session when the program was started by an MPI launcher
// (mpirun, srun), one process otherwise; built only with KESTREL_MPI (KESTREL_HAVE_MPI defined).
#pragma once
#include <memory>

#include "analysis/sweep.hpp"

namespace kestrel::cli {

// The processes of this run: MPI_COMM_WORLD when launched by mpirun/srun (MPI is initialised by the
// first call and finalised at exit), a group of one otherwise or when built without MPI.
SweepGroup& process_group();

}  // namespace kestrel::cli
