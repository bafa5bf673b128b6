// Helpers shared by the variance-curve reproductions: run a variance study as one HDF5 panel and
// read back a mean at a given sigma.
#pragma once
#include <string>
#include <vector>

#include "analysis/variance_study.hpp"
#include "experiment.hpp"

namespace kestrel::experiments {

// Runs the study and writes it under /<panel>/<estimator>/... with the study's options as attributes.
std::vector<VarianceResult> variance_panel(H5Writer& h5, const std::string& panel, const VarianceStudyOptions& vo,
                                           const Options& opt);

// Mean log Var (or log Var/K with relative = true) of an estimator at sigma.
double mean_log(const std::vector<VarianceResult>& r, const std::string& estimator, double sigma,
                bool relative = false);

// The image pipeline most consistent with both the CRT and the DERF mnist / cifar10 claims
// (docs/mnist-pipelines.md, scripts/mnist_pipelines.py): per-pixel standardisation of bilinear-resized
// pixels (tf.image.resize's default). crt-fig2 and derf-fig2 offer it as the protocol of this name.
inline const std::string kPaperPipeline = "standardize/bilinear";

// base with the image pipeline "preprocess/resize[/pixel scale]" (regimes.hpp: pipeline_name) applied.
RegimeOptions with_pipeline(RegimeOptions base, const std::string& pipeline);

// sigma grid 0.1, 0.2, ..., 1.0 (quick: 0.1, 0.5, 1.0)
std::vector<double> sigma_grid(bool quick);

}  // namespace kestrel::experiments
