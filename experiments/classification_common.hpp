// Shared by the kernel-classification reproductions (crt-table1, derf-fig3): the eight UCI benchmarks of CRT Table 1
// and DERF Fig. 3, their encodings, and the HDF5 layout of one protocol result (experiments/README.md).
#pragma once
#include <string>
#include <vector>

#include "experiment.hpp"
#include "tasks/classification.hpp"

namespace kestrel::experiments {

struct Benchmark {
  std::string name;
  Encoding encoding;  // categorical attributes: one-hot, except chess's board files a..h (ordinal: they are ordered)
};
const std::vector<Benchmark>& classification_benchmarks();

// The standardised fixed split of a benchmark (split seed = the run's seed).
LabeledSplit load_benchmark(const Options& opt, const Benchmark& b);

// Creates /<name> with the split's attributes n_train, n_validation, n_test, d, n_classes, encoding; returns its path.
std::string write_benchmark_group(H5Writer& h5, const Benchmark& b, const LabeledSplit& s);

// Writes /<group>/{sigmas, validation_accuracy, no_signal, overflow, test_accuracy} and attributes best_sigma,
// test_mean, test_std, M, omegas.
void write_nw_result(H5Writer& h5, const std::string& group, const NwResult& r);

// The sigma grid for people: "10 log-uniform values in [0.01, 100]" for a log-uniform grid, else the values (4
// significant digits).
std::string sigma_grid_text(const std::vector<double>& sigmas);

}  // namespace kestrel::experiments
