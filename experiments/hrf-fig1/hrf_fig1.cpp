// HRF Fig. 1 and Thm 3.5: MSE of TrigRF, the hyperbolic PosRF (SM++) and the angular hybrid (m = 10,
// n = 1) as functions of the angle theta between x and y and their common length r, from the exact
// formulas (Lemma 2.2, Thm 3.1 / eq. 47-48); and the angular hybrid's maximal relative error against
// the bound of Thm 3.5 as printed (eq. 65) and as corrected (eq. 64 fixed).
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "estimators/hrf/hybrid.hpp"
#include "experiment.hpp"

namespace kestrel::experiments {

void run_hrf_fig1(const Options& opt, H5Writer& h5, std::vector<Claim>& claims) {
  const arma::uword m = 10, n = 1;
  const arma::vec theta = arma::linspace(0.0, M_PI, opt.quick ? 41 : 201);
  const arma::vec r = arma::linspace(0.0, 5.0, opt.quick ? 21 : 101);
  // Relative errors eps = sqrt(MSE)/SM (finite, 0 where exact); MSE = eps^2 SM^2 with SM = exp(r^2 cos theta).
  arma::mat eps_trig(r.n_elem, theta.n_elem), eps_pos(r.n_elem, theta.n_elem), eps_hyb(r.n_elem, theta.n_elem);
  for (arma::uword i = 0; i < r.n_elem; ++i)
    for (arma::uword j = 0; j < theta.n_elem; ++j) {
      arma::vec x = {r(i), 0.0}, y = {r(i) * std::cos(theta(j)), r(i) * std::sin(theta(j))};
      const double log_sm = arma::dot(x, y);
      eps_trig(i, j) = std::exp(0.5 * lemma22_log_mse_trig(x, y, m) - log_sm);
      eps_pos(i, j) = std::exp(0.5 * lemma22_log_mse_pos(x, y, m) - log_sm);
      eps_hyb(i, j) = angular_hybrid_rel_error(theta(j), r(i), m, n);
    }
  for (const arma::mat* e : {&eps_trig, &eps_pos, &eps_hyb})
    if (!e->is_finite()) throw NumericalError("hrf-fig1: non-finite relative error");
  h5.write("/theta", theta, {"angle theta between x and y", "theta", "rad"});
  h5.write("/r", r, {"norm r = |x| = |y|", "r"});
  h5.write("/rel_error_trig", eps_trig, {"relative error sqrt(MSE)/SM of TrigRF (HRF Lemma 2.2), m = 10", "r,theta"});
  h5.write("/rel_error_pos_hyp", eps_pos,
           {"relative error sqrt(MSE)/SM of SM++ (PosRF, hyperbolic form; HRF Lemma 2.2), m = 10", "r,theta"});
  h5.write("/rel_error_hybrid", eps_hyb,
           {"relative error sqrt(MSE)/SM of the angular hybrid (HRF Thm 3.1), m = 10, n = 1", "r,theta"});
  h5.attr("/", "description",
          fmt::format("relative error sqrt(MSE)/SM [r, theta], m = {}, n = {}; MSE = rel_error^2 exp(2 r^2 cos theta)",
                      m, n));

  const arma::uword last = r.n_elem - 1;  // r = 5, the paper's grey slice
  claims.push_back({"HRF Fig. 1", "only the angular hybrid's MSE goes to zero at both theta -> 0 and theta -> pi",
                    "hybrid relative error at theta = 0 plus at theta = pi (r = 5)", "~", 0.0,
                    eps_hyb(last, 0) + eps_hyb(last, theta.n_elem - 1), 1e-12, "m = 10, n = 1, r = 5", ""});
  claims.push_back({"HRF Fig. 1", "TrigRF's MSE does not vanish at theta = pi", "TrigRF relative error at theta = pi",
                    ">", 0.0, eps_trig(last, theta.n_elem - 1), 0, "m = 10, r = 5", ""});
  claims.push_back({"HRF Fig. 1", "SM++'s MSE does not vanish at theta = 0", "SM++ relative error at theta = 0", ">",
                    0.0, eps_pos(last, 0), 0, "m = 10, r = 5", ""});
  // Thm 3.5 on the sphere of radius r >= 1: max over theta of the hybrid's relative error.
  std::vector<double> rs = {1.0, 1.25, 1.5, 2.0, 5.0}, max_eps, printed, corrected;
  const arma::vec fine = arma::linspace(0.0, M_PI, 20001);
  for (double rr : rs) {
    double mx = 0;
    for (double t : fine) mx = std::max(mx, angular_hybrid_rel_error(t, rr, m, n));
    max_eps.push_back(mx);
    printed.push_back(thm35_bound(rr, m, n, true));
    corrected.push_back(thm35_bound(rr, m, n, false));
    claims.push_back(
        {"HRF Thm 3.5", fmt::format("max relative error of the angular hybrid <= eq. (65) at r = {}", rr),
         "log(max_theta eps / printed bound)", "<", 0.0, std::log(mx / printed.back()), 0,
         fmt::format("m = {}, n = {}, 20001 angles", m, n),
         fmt::format("corrected bound (eq. 64 fixed): log ratio {:.4f}", std::log(mx / corrected.back()))});
  }
  h5.write("/thm35/r", rs, {"norm r of the Thm 3.5 check", "r"});
  h5.write("/thm35/max_rel_error", max_eps, {"max over 20001 angles of the angular hybrid's relative error", "r"});
  h5.write("/thm35/bound_printed", printed, {"HRF Thm 3.5's bound as printed (eq. 65)", "r"});
  h5.write("/thm35/bound_corrected", corrected, {"HRF Thm 3.5's bound with eq. 64 corrected", "r"});
}

}  // namespace kestrel::experiments
