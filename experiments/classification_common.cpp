// The UCI benchmarks of the kernel-classification reproductions and the HDF5 layout of a protocol result.
#include "classification_common.hpp"

#include <cmath>

#include <fmt/format.h>

#include "data/catalog.hpp"

namespace kestrel::experiments {

const std::vector<Benchmark>& classification_benchmarks() {
  static const std::vector<Benchmark> list = {{"abalone", Encoding::OneHot}, {"banknote", Encoding::OneHot},
                                              {"car", Encoding::OneHot},     {"yeast", Encoding::OneHot},
                                              {"cmc", Encoding::OneHot},     {"nursery", Encoding::OneHot},
                                              {"wifi", Encoding::OneHot},    {"chess", Encoding::Ordinal}};
  return list;
}

LabeledSplit load_benchmark(const Options& opt, const Benchmark& b) {
  const std::string dir = opt.regime_options.data_dir.empty() ? default_data_dir() : opt.regime_options.data_dir;
  return split_standardized(load_uci(dir, b.name, b.encoding), opt.seed);
}

std::string write_benchmark_group(H5Writer& h5, const Benchmark& b, const LabeledSplit& s) {
  const std::string g = "/" + b.name;
  h5.group(g);
  h5.attr(g, "n_train", static_cast<std::int64_t>(s.train.n_cols));
  h5.attr(g, "n_validation", static_cast<std::int64_t>(s.validation.n_cols));
  h5.attr(g, "n_test", static_cast<std::int64_t>(s.test.n_cols));
  h5.attr(g, "d", static_cast<std::int64_t>(s.train.n_rows));
  h5.attr(g, "n_classes", static_cast<std::int64_t>(s.n_classes));
  h5.attr(g, "encoding", std::string(b.encoding == Encoding::OneHot ? "onehot" : "ordinal"));
  // The accuracy of always predicting the test part's most frequent class: the floor a classifier without signal
  // reaches (cmc: every method and the exact kernel sit at it).
  const arma::uvec counts = arma::hist(s.test_labels, arma::regspace<arma::uvec>(0, s.n_classes - 1));
  h5.attr(g, "majority_class_test", static_cast<std::int64_t>(counts.index_max()));
  h5.attr(g, "majority_share_test", static_cast<double>(counts.max()) / static_cast<double>(s.test_labels.n_elem));
  return g;
}

void write_nw_result(H5Writer& h5, const std::string& group, const NwResult& r) {
  h5.group(group);
  h5.write(group + "/sigmas", r.sigmas, {"kernel scales sigma tried on the validation split", "sigma"});
  h5.write(group + "/validation_accuracy", r.validation_accuracy,
           {"validation accuracy (share correct) per seed and sigma", "seed,sigma", "1"});
  h5.write(group + "/no_signal", r.no_signal,
           {"share of validation predictions whose scores were all 0, per sigma", "sigma"});
  h5.write(group + "/overflow", r.overflow,
           {"share of validation draws whose features overflowed (accuracy 0), per sigma", "sigma"});
  h5.write(group + "/test_accuracy", r.test_accuracy,
           {"test accuracy (share correct) at the chosen sigma (best_sigma), per seed", "seed", "1"});
  h5.attr(group, "best_sigma", r.sigmas(r.best));
  h5.attr(group, "test_mean", r.test_mean());
  h5.attr(group, "test_std", r.test_std());
  h5.attr(group, "M", static_cast<std::int64_t>(r.M));
  h5.attr(group, "omegas", static_cast<std::int64_t>(r.omegas));
}

std::string sigma_grid_text(const std::vector<double>& sigmas) {
  const std::size_t n = sigmas.size();
  bool log_uniform = n >= 3 && sigmas.front() > 0;
  for (std::size_t i = 2; log_uniform && i < n; ++i)
    log_uniform = std::abs(std::log(sigmas[i] / sigmas[i - 1]) - std::log(sigmas[1] / sigmas[0])) <
                  1e-9 * std::abs(std::log(sigmas[1] / sigmas[0]));
  if (log_uniform) return fmt::format("{} log-uniform values in [{:.4g}, {:.4g}]", n, sigmas.front(), sigmas.back());
  std::string s;
  for (double x : sigmas) s += fmt::format("{}{:.4g}", s.empty() ? "" : ", ", x);
  return "{" + s + "}";
}

}  // namespace kestrel::experiments
