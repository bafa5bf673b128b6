// MPI for `kestrel sweep` (see mpi.hpp): SweepGroup over MPI_COMM_WORLD, with MPI initialised only
// when an MPI launcher started the process, so the same binary also runs alone without mpirun.
#include "mpi.hpp"

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#ifdef KESTREL_HAVE_MPI
#include <mpi.h>
#endif

#include <fmt/format.h>

#include "core/error.hpp"

namespace kestrel::cli {

#ifdef KESTREL_HAVE_MPI
namespace {

// Variables set by Open MPI's mpirun, by PMIx/PMI launchers (srun --mpi=pmix or pmi2) and by MPICH's.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw IoError(std::string("MPI: ") + what + " failed");
}

class MpiGroup : public SweepGroup {
 public:
  MpiGroup() {
    int provided = 0;
    // Only the main thread calls MPI; TBB's workers never do.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiGroup() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string& msg) override {
    int len = static_cast<int>(msg.size());
    std::vector<int> lens(size_), offsets(size_);
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    std::exclusive_scan(lens.begin(), lens.end(), offsets.begin(), 0);
    std::string all(static_cast<std::size_t>(offsets.back() + lens.back()), '\0');
    check(MPI_Allgatherv(msg.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], lens[r]));
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace
#endif

SweepGroup& process_group() {
#ifdef KESTREL_HAVE_MPI
  if (launched_by_mpi()) {
    static MpiGroup mpi;  // finalised at exit, after every rank's last collective
    return mpi;
  }
#endif
  // `srun -n N` without an MPI plugin would start N independent copies of the whole sweep.
  if (const char* n = std::getenv("SLURM_STEP_NUM_TASKS"); n && std::atoi(n) > 1)
    throw InvalidArgument(
        fmt::format("srun started {} tasks but no MPI launcher is visible to this kestrel (use srun "
                    "--mpi=pmix and a build with KESTREL_MPI); refusing to run {} copies of the sweep",
                    n, n));
  static SweepGroup one;
  return one;
}

}  // namespace kestrel::cli
