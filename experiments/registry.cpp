// The list of reproductions: adding one is a folder under experiments/ and one line here.
#include "common.hpp"
#include "experiment.hpp"

namespace kestrel::experiments {

void run_crt_fig1(const Options&, H5Writer&, std::vector<Claim>&);
void run_crt_fig2(const Options&, H5Writer&, std::vector<Claim>&);
void run_derf_fig2(const Options&, H5Writer&, std::vector<Claim>&);
void run_orf(const Options&, H5Writer&, std::vector<Claim>&);
void run_dark_aniso(const Options&, H5Writer&, std::vector<Claim>&);
void run_hrf_fig1(const Options&, H5Writer&, std::vector<Claim>&);
void run_hrf_fig2(const Options&, H5Writer&, std::vector<Claim>&);
void run_hrf_table1(const Options&, H5Writer&, std::vector<Claim>&);
void run_hrf_fig6(const Options&, H5Writer&, std::vector<Claim>&);
void run_crt_table1(const Options&, H5Writer&, std::vector<Claim>&);
void run_derf_fig3(const Options&, H5Writer&, std::vector<Claim>&);
void run_attention(const Options&, H5Writer&, std::vector<Claim>&);
void run_luna(const Options&, H5Writer&, std::vector<Claim>&);
void run_attention_variance(const Options&, H5Writer&, std::vector<Claim>&);
std::uint64_t attention_variance_rows(const Options&);
void run_couplings(const Options&, H5Writer&, std::vector<Claim>&);
void run_advise(const Options&, H5Writer&, std::vector<Claim>&);

const std::vector<Experiment>& all_experiments() {
  static const std::vector<Experiment> list = {
      {"crt-fig1", "CRT Fig. 1 right: log(Var OPRF / Var PosRF) vs |x+y|^2", run_crt_fig1},
      {"crt-fig2",
       "CRT Fig. 2: log-variance of the CRT estimators in normal, sphere, heterogen and mnist (a column per mnist "
       "pipeline)",
       run_crt_fig2,
       {{"kestrel", "mnist with raw [0,1], centred and per-pixel standardised pixels, area resize"},
        {kPaperPipeline,
         "mnist pixels bilinear-resized (tf.image.resize default) and standardised per pixel: the "
         "pipeline most consistent with both CRT and DERF (docs/mnist-pipelines.md)"}}},
      {"derf-fig2",
       "DERF Fig. 2: log relative variance of DERF-family estimators in six regimes",
       run_derf_fig2,
       {{"kestrel", "mnist and cifar10 grayscale with raw [0,1] pixels, area resize"},
        {kPaperPipeline,
         "mnist and cifar10 grayscale pixels bilinear-resized (tf.image.resize default) and "
         "standardised per pixel: the pipeline most consistent with both CRT and DERF "
         "(docs/mnist-pipelines.md)"}}},
      {"orf", "CRT Thm 4.1: orthogonal vs iid projections across d", run_orf},
      {"dark-aniso", "DARK Thm 3.2: expected variance of isotropic vs importance-sampled PRFs for anisotropic inputs",
       run_dark_aniso},
      {"hrf-fig1", "HRF Fig. 1 and Thm 3.5: MSE over angle and length; the max-relative-error bound", run_hrf_fig1},
      {"hrf-fig2", "HRF Fig. 2 / Fig. 5: pointwise estimation at r = 1, 1.25, 1.5", run_hrf_fig2},
      {"hrf-table1",
       "HRF Table 1: MSE on wine and Boston pairs against QMC baselines",
       run_hrf_table1,
       {{"minmax-sqrt-d",
         "attributes min-max scaled to [0, 1], divided by sqrt(d): of the readings, the nearest to the paper's "
         "magnitudes (within a factor of 5.1; the others are 10-23,000x too large)"},
        {"std-sqrt-d", "standardised attributes divided by sqrt(d), so E|x|^2 = 1 (kestrel's earlier default)"},
        {"unit-norm", "standardised attributes, every point scaled to norm 1"},
        {"norm-1.25", "standardised attributes, every point scaled to norm 1.25 (HRF Fig. 2/5's r)"},
        {"norm-1.5", "standardised attributes, every point scaled to norm 1.5 (HRF Fig. 2/5's r)"},
        {"readings",
         "every reading above side by side, and the raw attributes (recorded as not computable: "
         "e^(x^T y) overflows)"}}},
      {"hrf-fig6",
       "HRF Fig. 6 / Table 3: clustered HRF against FAVOR+ and TrigRF",
       run_hrf_fig6,
       {{"h3", "appendix H.3's data sets s1-s4 (sign-adjusted cluster means, points scaled to norm 0.6), Table 3's M"},
        {"h3-scan", "the grid scan that chose h3's two open scales (X0's spread, the points' norm) against Table 3"},
        {"radius", "kestrel's earlier reading: cluster centres at radius 1 or 1.5, sigma 0.01 or 0.05, M = 16..256"}}},
      {"crt-table1", "CRT Tables 1 and 3: Nadaraya-Watson classification accuracy on eight UCI sets", run_crt_table1},
      {"derf-fig3", "DERF Fig. 3: kernel classification accuracy vs M for the DERF family", run_derf_fig3},
      {"attention", "CRT eq. 3: softmax attention by random features, errors vs M and time vs L", run_attention},
      {"attention-variance",
       "Exact K-hat V variance and the delta method's attention-row error vs simulation; features for 10% error",
       run_attention_variance,
       {},
       attention_variance_rows},
      {"couplings", "Exact variance of orthogonal and simplex projections against iid over d and input geometry",
       run_couplings},
      {"advise",
       "kestrel advise: each decision for a 10% 95th-percentile error, checked by independent simulation with 95% "
       "power",
       run_advise},
      {"luna", "LUNA 3.2/5.4: learned feature maps (4 variants) vs PosRF, OPRF, SDERF at equal M on UCI", run_luna},
  };
  return list;
}

}  // namespace kestrel::experiments
